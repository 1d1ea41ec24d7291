package backendtest_test

import (
	"os"
	"testing"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/cas/backendtest"
)

// TestLocalDirectory runs the conformance suite against the local sharded
// directory.
func TestLocalDirectory(t *testing.T) {
	backendtest.Run(t, func(t *testing.T) backendtest.Fixture {
		s, err := cas.Open(t.Context(), t.TempDir(), cas.WithCreate())
		if err != nil {
			t.Fatal(err)
		}
		return backendtest.Fixture{
			Backend: s,
			Corrupt: func(t *testing.T, b cas.Blob, data []byte) {
				p := s.Path(b)
				if err := os.Chmod(p, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, data, 0o644); err != nil {
					t.Fatal(err)
				}
			},
		}
	})
}
