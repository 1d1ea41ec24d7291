package index

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// randomHistory fills x with parts of several runs and tools, with
// versions, keys taken by other calls (~2), shared blobs, and deletes and
// prunes that leave gaps in versions and blobs no part uses.
func randomHistory(t *testing.T, x *Index, c *clock, seed uint64, steps int) {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 7))
	runs := []string{"alpha", "beta", "ga/mma"}
	tools := []string{"read_file", "grep"}
	for range steps {
		c.t = c.t.Add(time.Minute)
		switch op := rng.IntN(10); {
		case op < 8:
			var ps []NewPart
			for j := range 1 + rng.IntN(3) {
				run := runs[rng.IntN(len(runs))]
				n := rng.IntN(12)
				p := newPart(run, rng.IntN(6), tools[rng.IntN(len(tools))], fmt.Sprint("c", j), strings.Repeat(fmt.Sprint("x", n), 1+n))
				if run == "ga/mma" {
					p.Key = "ga%2Fmma/" + strings.TrimPrefix(p.Key, "ga/mma/")
				}
				if rng.IntN(5) == 0 {
					// Another call rendered to the same key: recorded as key~2.
					p.CallID += "x"
				}
				ps = append(ps, p)
			}
			mustRecord(t, x, ps...)
		case op == 8:
			ps, err := x.List(ctx, ListOptions{AllVersions: true, Limit: 4})
			if err != nil {
				t.Fatal(err)
			}
			if len(ps) > 0 {
				p := ps[rng.IntN(len(ps))]
				if _, err := x.DeleteKey(ctx, p.Key, p.Version); err != nil {
					t.Fatal(err)
				}
			}
		default:
			// The first version of a key goes: its later versions stay,
			// with a gap before them.
			ps, err := x.List(ctx, ListOptions{Limit: 8})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range ps {
				if p.Version > 1 {
					if _, err := x.DeleteKey(ctx, p.Key, 1); err != nil {
						t.Fatal(err)
					}
					break
				}
			}
		}
	}
}

// allByBlob pages through PartsByBlob, limit at a time.
func allByBlob(t *testing.T, x *Index, limit int) []Part {
	t.Helper()
	var (
		out []Part
		cur Cursor
	)
	for {
		ps, next, err := x.PartsByBlob(context.Background(), cur, limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) == 0 {
			return out
		}
		out = append(out, ps...)
		cur = next
	}
}

func byKeyVersion(ps []Part) map[string]Part {
	m := make(map[string]Part, len(ps))
	for _, p := range ps {
		m[fmt.Sprintf("%s@%d", p.Key, p.Version)] = p
	}
	return m
}

// PartsByBlob lists every version of every part once, a blob's parts one
// after another.
func TestPartsByBlob(t *testing.T) { forEachBackend(t, testPartsByBlob) }

func testPartsByBlob(t *testing.T) {
	c := &clock{time.Unix(1_000_000, 0)}
	x := MustOpen(t, WithClock(c.now))
	randomHistory(t, x, c, 1, 80)
	want, err := x.List(context.Background(), ListOptions{AllVersions: true})
	if err != nil {
		t.Fatal(err)
	}
	got := allByBlob(t, x, 7)
	if len(got) != len(want) {
		t.Fatalf("PartsByBlob listed %d parts, List %d", len(got), len(want))
	}
	w := byKeyVersion(want)
	done := map[string]bool{}
	for i, p := range got {
		k := fmt.Sprintf("%s@%d", p.Key, p.Version)
		if !SamePart(p, w[k]) || p.ID != w[k].ID {
			t.Fatalf("PartsByBlob gave %+v, List %+v", p, w[k])
		}
		b := p.Blob.String()
		if done[b] && got[i-1].Blob != p.Blob {
			t.Fatalf("the parts of blob %s are not one after another", b)
		}
		done[b] = true
	}
	if _, _, err := x.PartsByBlob(context.Background(), Cursor{}, 0); err == nil {
		t.Error("PartsByBlob with limit 0 succeeded")
	}
}

// Import copies every part of one index into another as it is there, page
// by page, with the counters exact after each page; an import done again
// records nothing; the destination's own runs stay, and a new write of an
// imported call continues its versions.
func TestImport(t *testing.T) { forEachBackend(t, testImport) }

func testImport(t *testing.T) {
	ctx := context.Background()
	c := &clock{time.Unix(1_000_000, 0)}
	src := MustOpen(t, WithClock(c.now))
	randomHistory(t, src, c, 2, 120)
	dst := MustOpen(t, WithClock(c.now))
	own := mustRecord(t, dst, newPart("own", 1, "bash", "c0", "the destination's own part"))[0]
	all := allByBlob(t, src, 11)
	var versions, suffixed, gaps int
	for _, p := range all {
		if p.Version > 1 {
			versions++
			if _, err := src.PartAt(ctx, p.Run, p.Key, 1); errors.Is(err, ErrNotFound) {
				gaps++
			}
		}
		if strings.Contains(p.Key, "~2") {
			suffixed++
		}
	}
	if len(all) < 20 || versions == 0 || suffixed == 0 || gaps == 0 {
		t.Fatalf("%d parts to import, %d later versions, %d with gaps, %d keys with ~2: the history shows too little",
			len(all), versions, gaps, suffixed)
	}
	for pass := range 2 {
		total := 0
		for i := 0; i < len(all); i += 11 {
			page := all[i:min(i+11, len(all))]
			present, err := dst.CheckImport(ctx, page)
			if err != nil {
				t.Fatal(err)
			}
			for j, ok := range present {
				if ok != (pass == 1) {
					t.Fatalf("pass %d: CheckImport(%s@%d) = %v", pass, page[j].Key, page[j].Version, ok)
				}
			}
			n, err := dst.Import(ctx, page)
			if err != nil {
				t.Fatal(err)
			}
			total += n
			checkCounts(t, dst, fmt.Sprintf("pass %d, after part %d", pass, i))
		}
		if want := len(all) * (1 - pass); total != want {
			t.Errorf("pass %d: Import recorded %d parts, want %d", pass, total, want)
		}
	}
	got, err := dst.List(ctx, ListOptions{AllVersions: true})
	if err != nil {
		t.Fatal(err)
	}
	g := byKeyVersion(got)
	for _, p := range all {
		if q := g[fmt.Sprintf("%s@%d", p.Key, p.Version)]; !SamePart(p, q) {
			t.Errorf("imported %+v, want %+v", q, p)
		}
	}
	if len(got) != len(all)+1 {
		t.Errorf("destination holds %d parts, want %d", len(got), len(all)+1)
	}
	if p, err := dst.PartAt(ctx, "own", own.Key, 1); err != nil || p.Run != "own" {
		t.Errorf("PartAt(%s) = %+v, %v", own.Key, p, err)
	}
	if _, err := dst.PartAt(ctx, "own", own.Key, 2); !errors.Is(err, ErrNotFound) {
		t.Errorf("PartAt(%s@2) = %v, want ErrNotFound", own.Key, err)
	}
	// Stats: the same parts and runs as the source.
	ss, err := src.Stats(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	ds, err := dst.Stats(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if ds.Parts != ss.Parts+1 || ds.Runs != ss.Runs+1 || ds.LogicalBytes != ss.LogicalBytes+int64(len("the destination's own part")) {
		t.Errorf("destination stats %d parts %d runs %d bytes, source %d %d %d",
			ds.Parts, ds.Runs, ds.LogicalBytes, ss.Parts, ss.Runs, ss.LogicalBytes)
	}
	// A new write of an imported call gets the next version.
	last := all[0]
	for _, p := range all {
		if p.Key == last.Key && p.Version > last.Version {
			last = p
		}
	}
	np := NewPart{Key: last.Key, Run: last.Run, Step: last.Step, Tool: last.Tool, CallID: last.CallID, Part: last.Part,
		Kind: last.Kind, MIME: last.MIME, Filename: last.Filename, Chars: last.Chars, Bytes: last.Bytes, Blob: last.Blob}
	if r := mustRecord(t, dst, np)[0]; r.Key != last.Key || r.Version != last.Version+1 {
		t.Errorf("a write after the import recorded %s@%d, want %s@%d", r.Key, r.Version, last.Key, last.Version+1)
	}
	checkCounts(t, dst, "after a write")
}

// Import refuses a part whose key and version hold something else, or
// whose key another call owns: nothing of the call is recorded.
func TestImportConflict(t *testing.T) { forEachBackend(t, testImportConflict) }

func testImportConflict(t *testing.T) {
	ctx := context.Background()
	c := &clock{time.Unix(1_000_000, 0)}
	src := MustOpen(t, WithClock(c.now))
	mustRecord(t, src, newPart("r", 1, "t", "c", "source one"))
	mustRecord(t, src, newPart("r", 2, "t", "c", "source two"))
	c.t = c.t.Add(time.Hour)
	mustRecord(t, src, newPart("r", 2, "t", "c", "source two, again"))
	all := allByBlob(t, src, 10)

	for _, tc := range []struct {
		name string
		held NewPart
		key  string
	}{
		{"other content", newPart("r", 1, "t", "c", "destination one"), "r/1_t_c.txt"},
		{"other call", func() NewPart {
			p := newPart("r", 2, "t", "c", "source two")
			p.CallID = "someone-else"
			return p
		}(), "r/2_t_c.txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := MustOpen(t, WithClock(c.now))
			mustRecord(t, dst, tc.held)
			before, err := dst.List(ctx, ListOptions{AllVersions: true})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := dst.CheckImport(ctx, all); !errors.Is(err, ErrImportConflict) || !strings.Contains(err.Error(), tc.key) {
				t.Errorf("CheckImport = %v, want ErrImportConflict naming %s", err, tc.key)
			}
			n, err := dst.Import(ctx, all)
			if !errors.Is(err, ErrImportConflict) || !strings.Contains(err.Error(), tc.key) || n != 0 {
				t.Errorf("Import = %d, %v; want ErrImportConflict naming %s", n, err, tc.key)
			}
			after, err := dst.List(ctx, ListOptions{AllVersions: true})
			if err != nil {
				t.Fatal(err)
			}
			if len(after) != len(before) || !SamePart(after[0], before[0]) {
				t.Errorf("after a refused import the destination holds %+v, before %+v", after, before)
			}
			checkCounts(t, dst, "after a refused import")
		})
	}
	// A part that is not one: refused before anything is read.
	dst := MustOpen(t)
	bad := all[0]
	bad.Version = 0
	if _, err := dst.Import(ctx, []Part{bad}); !errors.Is(err, ErrInvalidPart) {
		t.Errorf("Import of version 0 = %v, want ErrInvalidPart", err)
	}
}

// A page of PartsByBlob reads its rows from the index of parts by blob, in
// its order: no sort and no scan of the parts before the page, however far
// along it is; PartAt looks a version up by the key's index.
func TestImportQueryPlans(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	var ps []NewPart
	for i := range 200 {
		ps = append(ps, newPart(fmt.Sprint("r", i%7), i, "t", fmt.Sprint("c", i), fmt.Sprint("content ", i%50)))
	}
	mustRecord(t, x, ps...)
	if _, err := x.db.ExecContext(ctx, "ANALYZE"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, q, want string
		args          []any
	}{
		{"parts by blob", partsByBlobSQL, "SEARCH p USING INDEX parts_blob", []any{10, 2, 40, 50}},
		{"part at", partAtSQL, "SEARCH p USING INDEX sqlite_autoindex_parts_1", []any{"r1", "r1/", "1_t_c1.txt", 1}},
	} {
		plan := explain(t, x, tc.q, tc.args...)
		t.Logf("%s:\n%s", tc.name, plan)
		if !strings.Contains(plan, tc.want) || strings.Contains(plan, "TEMP B-TREE") || strings.Contains(plan, "SCAN ") {
			t.Errorf("%s: plan\n%s\nwant %s, no sort, no scan", tc.name, plan, tc.want)
		}
	}
}
