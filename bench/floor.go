package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/hook"
)

// floorStore is the floor under every store: each part written to a temp
// file, fsynced (when durable), renamed to a flat name. No index, no dedup,
// no directories, no reads: what any store must at least pay.
type floorStore struct {
	dir     string
	durable bool
	n       atomic.Int64
}

var _ hook.Store = (*floorStore)(nil)

func newFloorStore(dir string, durable bool) (*floorStore, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &floorStore{dir: dir, durable: durable}, nil
}

func (f *floorStore) AcceptsBinary() bool { return true }

func (f *floorStore) Write(_ context.Context, items []hook.Item) ([]hook.Stored, error) {
	out := make([]hook.Stored, len(items))
	for i, it := range items {
		data := []byte(it.Part.Text)
		if it.Part.Kind != hook.KindText {
			data = it.Part.Data
		}
		name := filepath.Join(f.dir, fmt.Sprintf("%d%s", f.n.Add(1), it.Key.Ext))
		if err := bareWrite(f.dir, name, data, f.durable); err != nil {
			return nil, err
		}
		out[i] = hook.Stored{Key: it.Key.String(), Path: name, Digest: cas.Sum(data), Version: 1}
	}
	return out, nil
}

func (f *floorStore) Read(context.Context, string, string) (*hook.Content, error) {
	return nil, fmt.Errorf("the floor store does not read: %w", hook.ErrNotFound)
}

// bareWrite is temp file, write, fsync, close, rename; and the directory
// fsync when durable.
func bareWrite(dir, name string, data []byte, durable bool) error {
	return bareWriteBeside(dir, name, data, durable, nil)
}

// bareWriteBeside is bareWrite with beside, when set and durable, run
// while the directory syncs: what a store that also syncs a log of its own
// adds to the bare write at the least.
func bareWriteBeside(dir, name string, data []byte, durable bool, beside func() error) error {
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if durable {
		if err := f.Sync(); err != nil {
			f.Close()
			os.Remove(f.Name())
			return err
		}
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), name); err != nil {
		os.Remove(f.Name())
		return err
	}
	if durable {
		d, err := os.Open(dir)
		if err != nil {
			return err
		}
		defer d.Close()
		if beside == nil {
			return d.Sync()
		}
		done := make(chan error, 1)
		go func() { done <- beside() }()
		return errors.Join(d.Sync(), <-done)
	}
	return nil
}
