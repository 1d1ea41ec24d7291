//go:build !linux

package store

import "testing"

// blobFileTold is false here: the blob store tells no file from another.
func blobFileTold(*testing.T, *Store) bool { return false }
