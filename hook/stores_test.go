package hook_test

import (
	"testing"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/hook/storetest"
)

func TestMemStoreConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) hook.Store { return hook.NewMemStore() }, storetest.Options{})
}

func TestTextOnlyMemStoreConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) hook.Store { return hook.NewMemStore(hook.TextOnly()) }, storetest.Options{})
}

func TestDirStoreConformance(t *testing.T) {
	for _, durable := range []bool{false, true} {
		name := "plain"
		if durable {
			name = "durable"
		}
		t.Run(name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) hook.Store {
				var opts []hook.DirOption
				if durable {
					opts = append(opts, hook.Durable())
				}
				s, err := hook.NewDirStore(t.TempDir(), opts...)
				if err != nil {
					t.Fatal(err)
				}
				return s
			}, storetest.Options{Overwrites: true, NoDedupReport: true})
		})
	}
}
