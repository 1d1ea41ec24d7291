package store

import "github.com/toolcas/toolcas/cas"

// Backend returns the blob store as a cas.Backend: the local sharded
// directory.
func (s *Store) Backend() cas.Backend { return s.blobs }
