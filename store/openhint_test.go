package store

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenMissingSaysHowToCreate: Open of a directory that holds no store
// fails with ErrNoStore, saying how to make one, unless the caller asked
// for a read-only store (which Open never makes).
func TestOpenMissingSaysHowToCreate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nope")
	_, err := Open(context.Background(), dir)
	if !errors.Is(err, ErrNoStore) || !strings.Contains(err.Error(), "store.WithCreate()") {
		t.Errorf("Open(%s) = %v, want ErrNoStore naming store.WithCreate()", dir, err)
	}
	_, err = Open(context.Background(), dir, ReadOnly())
	if !errors.Is(err, ErrNoStore) || strings.Contains(err.Error(), "WithCreate") {
		t.Errorf("Open(%s, ReadOnly()) = %v, want ErrNoStore without the hint", dir, err)
	}
}
