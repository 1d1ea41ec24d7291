package store

import (
	"context"
	"testing"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/hook/storetest"
)

// MustOpen opens a new store in a temp directory, closed when the test ends.
// Under a subtest named postgres (see onPostgres) its index is a new
// PostgreSQL database.
func MustOpen(tb testing.TB, opts ...Option) *Store {
	tb.Helper()
	s, err := Open(context.Background(), tb.TempDir(), append(backendOptions(tb, WithCreate(), barrierAlwaysCheap), opts...)...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// barrierAlwaysCheap makes a test's writes share barriers whatever the
// machine holds unwritten (other tests' builds, say): the tests that look
// at the group see it every time. TestGroupOffWhileBarrierDear looks at
// the other case.
var barrierAlwaysCheap = withBarrierCheap(func() bool { return true })

func TestConformance(t *testing.T) {
	for _, d := range []cas.Durability{cas.SyncFull, cas.SyncNone} {
		t.Run(d.String(), func(t *testing.T) {
			if testing.Short() && d != cas.SyncFull {
				t.Skip("the suite with no syncs behaves as with them: run without -short")
			}
			storetest.Run(t, func(t *testing.T) hook.Store { return MustOpen(t, WithDurability(d)) }, storetest.Options{})
		})
	}
	// The same suite on a store whose index is in PostgreSQL.
	t.Run("postgres", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) hook.Store { return MustOpen(t) }, storetest.Options{})
	})
}
