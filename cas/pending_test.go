package cas

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
)

// CommitThenSync names a blob before any sync, and its sync then issues
// the file's sync and its shard directory's sync together and closes the
// file: the blob reads back whole at once, and once synced, a put of the
// same bytes finds it with no sync of its own.
func TestCommitThenSync(t *testing.T) {
	ctx := context.Background()
	var rec *recordingFS
	s := MustOpen(t, WithTempPool(0), withFileSystem(func(inner fileSystem) fileSystem {
		rec = newRecordingFS(inner)
		return rec
	}))
	data := pattern(16<<10, 7)
	rec.mu.Lock()
	rec.log = nil
	rec.mu.Unlock()
	p, err := s.WriteHashed(ctx, Hash(data, ".txt"))
	if err != nil {
		t.Fatal(err)
	}
	b := p.Result().Blob
	syncs := s.Syncs()
	sync, err := p.CommitThenSync()
	if err != nil || sync == nil {
		t.Fatalf("CommitThenSync = %v, %v; want a sync", sync != nil, err)
	}
	if got := strings.Join(shape(rec.events()), "; "); got != "create TMP; write TMP; rename TMP BLOB" {
		t.Errorf("calls before the sync = %s, want the blob written and named, nothing synced", got)
	}
	if err := s.Verify(ctx, b); err != nil {
		t.Errorf("Verify before the sync: %v", err)
	}
	before := len(rec.events())
	if err := sync(); err != nil {
		t.Fatal(err)
	}
	after := shape(rec.events()[before:])
	if len(after) != 3 || after[2] != "close TMP" || !(after[0] == "sync TMP" && after[1] == "syncdir SHARD" ||
		after[0] == "syncdir SHARD" && after[1] == "sync TMP") {
		t.Errorf("the sync's calls = %q, want the file's and the shard's syncs, then the file closed", after)
	}
	if n := s.Syncs() - syncs; n != 2 {
		t.Errorf("the sync counted %d syncs, want 2", n)
	}

	// The hits, on a store of plain files (whose identity a hit checks):
	// before the sync, a hit syncs the blob itself; after it, none.
	plain := MustOpen(t)
	for i, want := range []int64{2, 0} {
		p, err := plain.WriteHashed(ctx, Hash(pattern(16<<10, byte(20+i)), ".txt"))
		if err != nil {
			t.Fatal(err)
		}
		sync, err := p.CommitThenSync()
		if err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			if err := sync(); err != nil {
				t.Fatal(err)
			}
		}
		syncs := plain.Syncs()
		res, err := plain.PutBytes(ctx, pattern(16<<10, byte(20+i)), ".txt")
		if err != nil || !res.Existed {
			t.Fatalf("the same bytes again: %+v, %v; want found", res, err)
		}
		if n := plain.Syncs() - syncs; n != want {
			t.Errorf("synced %v: a hit took %d syncs, want %d", i == 1, n, want)
		}
		if i == 0 {
			if err := sync(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// A durable write whose blob a pack took before the write synced the
// blob's name (the pack removed the loose file and the shard directory
// it emptied) has nothing left to sync: the pack holds the blob, durable,
// and the write succeeds. A blob gone without a pack keeps the error.
func TestNameSyncAfterPackTookBlob(t *testing.T) {
	ctx := t.Context()
	s := MustOpen(t)
	empty := func(b Blob) {
		t.Helper()
		if err := s.Remove(ctx, b); err != nil {
			t.Fatal(err)
		}
		if n, err := s.RemoveEmptyShards(ctx); err != nil || n == 0 {
			t.Fatalf("RemoveEmptyShards = %d, %v; want the blob's shard removed", n, err)
		}
	}
	res, syncName, err := s.PutHashedNameUnsynced(ctx, Hash([]byte("packed before its name was synced\n"), ".txt"))
	if err != nil || syncName == nil {
		t.Fatalf("PutHashedNameUnsynced = %v, sync %v; want a name to sync", err, syncName != nil)
	}
	if _, err := s.WritePack(ctx, []Blob{res.Blob}); err != nil {
		t.Fatal(err)
	}
	empty(res.Blob)
	if err := syncName(); err != nil {
		t.Errorf("name sync after a pack took the blob = %v, want nil", err)
	}
	if got, err := s.ReadAll(ctx, res.Blob); err != nil || string(got) != "packed before its name was synced\n" {
		t.Errorf("the packed blob reads %q, %v", got, err)
	}

	gone, syncGone, err := s.PutHashedNameUnsynced(ctx, Hash([]byte("removed without a pack\n"), ".txt"))
	if err != nil || syncGone == nil {
		t.Fatalf("PutHashedNameUnsynced = %v, sync %v; want a name to sync", err, syncGone != nil)
	}
	empty(gone.Blob)
	if err := syncGone(); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("name sync of a blob gone without a pack = %v, want its shard directory not found", err)
	}
}

// packingFS runs before, once, at the first sync of a shard directory:
// what a pack running beside a write may do meanwhile. It has no
// barrier, so that a batch syncs its shard directories one by one.
type packingFS struct {
	fileSystem
	before func()
}

func (p *packingFS) SyncFS() error { return errSyncFSUnsupported }

func (p *packingFS) SyncDir(name string) error {
	if h := p.before; h != nil && strings.HasPrefix(name, BlobsDir+"/") {
		p.before = nil
		h()
	}
	return p.fileSystem.SyncDir(name)
}

// A batch whose blobs a pack took, with their emptied shard directory,
// before it synced that directory succeeds, as a one-part write does
// (TestNameSyncAfterPackTookBlob); a blob gone any other way fails it.
func TestBatchShardSyncAfterPackTookBlob(t *testing.T) {
	ctx := t.Context()
	var pfs *packingFS
	s := MustOpen(t, withFileSystem(func(inner fileSystem) fileSystem {
		pfs = &packingFS{fileSystem: inner}
		return pfs
	}))
	for _, packed := range []bool{true, false} {
		data := []byte(fmt.Sprintf("a batch's blob, packed %v\n", packed))
		b := Hash(data, ".txt").blob
		pfs.before = func() {
			if packed {
				if _, err := s.WritePack(ctx, []Blob{b}); err != nil {
					t.Error(err)
				}
			}
			if err := s.Remove(ctx, b); err != nil {
				t.Error(err)
			}
			if n, err := s.RemoveEmptyShards(ctx); err != nil || n == 0 {
				t.Errorf("RemoveEmptyShards = %d, %v; want the blob's shard removed", n, err)
			}
		}
		_, err := s.PutBatch(ctx, []Item{{data, ".txt"}})
		if packed {
			if err != nil {
				t.Errorf("batch whose blob a pack took before its shard was synced = %v, want nil", err)
			}
			if got, err := s.ReadAll(ctx, b); err != nil || !bytes.Equal(got, data) {
				t.Errorf("the packed blob reads %q, %v", got, err)
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("batch whose blob was removed without a pack = %v, want its shard directory not found", err)
		}
	}
}
