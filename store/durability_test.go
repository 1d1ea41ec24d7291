package store

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/hook"
)

// A store's durability is named in a hook's configuration: the name
// round-trips, the index syncs its commits unless the name gives that up,
// and an unknown name is refused before anything is created.
func TestDurabilityByName(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		synced bool
	}{
		{"full", true},
		{"none", false},
		{DurabilityRecentKeysMayBeLost, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			raw, _ := json.Marshal(params{Dir: dir, Durability: tc.name})
			st, err := loadStore(raw)
			if err != nil {
				t.Fatal(err)
			}
			s := st.(*Store)
			defer s.Close()
			if got := s.Durability(); got != tc.name {
				t.Errorf("Durability() = %q, want %q", got, tc.name)
			}
			if _, p := s.StoreConfig(); p.(params).Durability != tc.name {
				t.Errorf("StoreConfig durability %q, want %q", p.(params).Durability, tc.name)
			}
			synced, err := s.ix.CommitsSynced(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if synced != tc.synced {
				t.Errorf("index commits synced: %v, want %v", synced, tc.synced)
			}
			// Blobs stay durable in every mode but none.
			if full := localOf(s).blobs.Durability().String() == "full"; full != (tc.name != "none") {
				t.Errorf("blob durability %v", localOf(s).blobs.Durability())
			}
			if _, err := s.Write(ctx, []hook.Item{item("r", 1, "some text")}); err != nil {
				t.Fatal(err)
			}
		})
	}
	dir := t.TempDir()
	_, err := loadStore([]byte(`{"dir": "` + dir + `", "durability": "fast"}`))
	if err == nil || !strings.Contains(err.Error(), `unknown durability "fast"`) || !strings.Contains(err.Error(), DurabilityRecentKeysMayBeLost) {
		t.Errorf("unknown durability: %v", err)
	}
	if Exists(dir) {
		t.Error("a refused configuration created a store")
	}
}
