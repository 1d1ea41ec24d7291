package cas

import (
	"sync"
	"time"
)

// fileID names one file for as long as it lives: its device and inode, and
// its birth time, which tells it from a file made later at the same inode.
type fileID struct {
	dev, ino uint64
	born     time.Time
}

// syncedBlobs remembers the blob files this Store made durable itself, the
// bytes synced and then the name, so that a put finding one of them again
// (see syncPresent) need not sync it once more. Only young files are kept:
// past settleTime, syncPresent takes any blob as on disk.
type syncedBlobs struct {
	mu    sync.Mutex
	files map[Blob]syncedFile
}

type syncedFile struct {
	id fileID
	at time.Time // by the store's clock, when it was synced
}

// maxSyncedBlobs bounds what syncedBlobs keeps.
const maxSyncedBlobs = 4096

// add remembers that the file id, at b's name, is durable as of now.
func (c *syncedBlobs) add(b Blob, id fileID, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.files == nil {
		c.files = map[Blob]syncedFile{}
	}
	if len(c.files) >= maxSyncedBlobs {
		for k, f := range c.files {
			if now.Sub(f.at) > settleTime {
				delete(c.files, k)
			}
		}
		if len(c.files) >= maxSyncedBlobs {
			clear(c.files)
		}
	}
	c.files[b] = syncedFile{id: id, at: now}
}

// has reports whether the file id at b's name is one this Store made
// durable.
func (c *syncedBlobs) has(b Blob, id fileID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.files[b]
	return ok && f.id.dev == id.dev && f.id.ino == id.ino && f.id.born.Equal(id.born)
}
