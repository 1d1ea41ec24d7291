package store

import (
	"context"
	"testing"

	"github.com/toolcas/toolcas/hook"
)

// ShowPartFirst lists the first few parts sharing a blob, oldest first, and
// counts them all; ShowPart lists them all.
func TestShowPartFirst(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	var items []hook.Item
	for i := range 15 {
		items = append(items, item("shared", i, "the same content"))
	}
	mustWrite(t, s, items...)
	ps, err := s.List(ctx, ListOptions{})
	if err != nil || len(ps) != 15 {
		t.Fatalf("list: %d parts, %v", len(ps), err)
	}
	p := ps[len(ps)-1] // the oldest: the first of the page is another
	for _, tc := range []struct {
		most, listed int
	}{{0, 14}, {10, 10}, {14, 14}, {20, 14}, {1, 1}} {
		d, err := s.ShowPartFirst(ctx, p, tc.most)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Sharing) != tc.listed || d.SharingTotal != 14 {
			t.Errorf("ShowPartFirst(%d): %d listed, %d in all; want %d and 14", tc.most, len(d.Sharing), d.SharingTotal, tc.listed)
		}
		for i, o := range d.Sharing {
			if o.ID == p.ID {
				t.Errorf("ShowPartFirst(%d) lists the part itself", tc.most)
			}
			if i > 0 && o.ID < d.Sharing[i-1].ID {
				t.Errorf("ShowPartFirst(%d) is not oldest first", tc.most)
			}
		}
	}
}
