package index

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// indexMaps counts the memory maps of the file at path in this process.
func indexMaps(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasSuffix(sc.Text(), " "+path) {
			n++
		}
	}
	return n
}

// On an index read through a memory map, the reads of searches go through
// one connection, however many run at once: the file is mapped once more
// for them, not once a connection of the pool. They read what the pool
// reads, and Close gives the connection back.
func TestSearchReadsShareOneConnection(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("counts memory maps in /proc/self/maps")
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "index.db")
	w, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// Under -short, fewer blobs and rounds: the race detector took half a
	// minute over 40 searches of 3,000.
	blobs, rounds := 3000, 5
	if testing.Short() {
		blobs, rounds = 1000, 2
	}
	lag := newBlobs(t, w, blobs)
	var ids []int64
	for _, ub := range lag {
		ids = append(ids, ub.ID)
	}
	want, err := w.SearchBlobs(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	var wantParts []SearchPart
	if err := w.SearchParts(ctx, SearchPartsOptions{}, want, func(sp SearchPart) error {
		wantParts = append(wantParts, sp)
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	x, err := Open(ctx, path, WithMappedReads(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	before := indexMaps(t, path)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for range rounds {
				got, err := x.SearchBlobs(ctx, ids)
				if err == nil && !reflect.DeepEqual(got, want) {
					t.Errorf("SearchBlobs through the map = %d blobs, want %d as the pool reads them", len(got), len(want))
				}
				var parts []SearchPart
				if err == nil {
					err = x.SearchParts(ctx, SearchPartsOptions{}, got, func(sp SearchPart) error {
						parts = append(parts, sp)
						return nil
					})
				}
				if err != nil {
					errs <- err
					return
				}
				if !reflect.DeepEqual(parts, wantParts) {
					t.Errorf("SearchParts through the map = %d parts, want %d as the pool reads them", len(parts), len(wantParts))
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := indexMaps(t, path); got > before+1 {
		t.Errorf("%d maps of the index after 8 searches at once, %d before: want at most one more", got, before)
	}
	if x.search.conn == nil {
		t.Errorf("no search connection after searches through the map")
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if x.search.conn != nil {
		t.Errorf("Close kept the search connection")
	}
}
