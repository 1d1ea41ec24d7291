package index

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/catalog"
)

// The same work gives the same answers on SQLite and on PostgreSQL: every
// Resolve, List, Stats, name listing, Prune and gc set is written into a
// transcript on each backend, and the transcripts must be equal. Names mix
// cases, punctuation and non-ASCII text, which PostgreSQL's usual
// collations sort otherwise than SQLite does: the index sorts by bytes on both.
func TestBackendsAgree(t *testing.T) {
	var got [2]string
	for i, b := range []string{"sqlite", "postgres"} {
		t.Run(b, func(t *testing.T) { got[i] = agreeTranscript(t) })
	}
	if got[0] == "" || got[1] == "" {
		return // a backend failed or was skipped; its subtest says why
	}
	a, b := strings.Split(got[0], "\n"), strings.Split(got[1], "\n")
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			t.Fatalf("backends disagree at line %d:\nsqlite:   %s\npostgres: %s", i+1, a[i], b[i])
		}
	}
	if len(a) != len(b) {
		t.Fatalf("transcripts of %d and %d lines", len(a), len(b))
	}
	t.Logf("%d lines agree", len(a))
}

func agreeTranscript(t *testing.T) string {
	ctx := context.Background()
	c := &clock{time.Unix(1_700_000_000, 0)}
	x := MustOpen(t, WithClock(c.now))
	var out strings.Builder
	say := func(format string, args ...any) { fmt.Fprintf(&out, format+"\n", args...) }
	part := func(p Part) string {
		return fmt.Sprintf("%s@%d run=%s step=%d tool=%s call=%s part=%d kind=%s mime=%s file=%s chars=%d bytes=%d blob=%s at=%d",
			p.Key, p.Version, p.Run, p.Step, p.Tool, p.CallID, p.Part, p.Kind, p.MIME, p.Filename, p.Chars, p.Bytes,
			p.Blob, p.CreatedAt.UnixNano())
	}
	parts := func(what string, ps []Part, err error) {
		say("%s: %d, %v", what, len(ps), err)
		for _, p := range ps {
			say("  %s", part(p))
		}
	}
	runs := []string{"alpha", "Beta", "beta", "_zeta", "émile", "Run-9"}
	tools := []string{"read_file", "Grep", "grep", "list_dir"}
	for i := range 60 {
		run := runs[i%len(runs)]
		p := newPart(run, i%7, tools[i%len(tools)], fmt.Sprint("c", i%11), fmt.Sprint("content ", i%13))
		if i%9 == 0 {
			p.Kind, p.MIME, p.Blob.Ext, p.Filename = catalog.KindImage, "image/png", ".png", "shot.png"
			p.Key = strings.TrimSuffix(p.Key, ".txt") + ".png"
		}
		if run == "émile" {
			p.Key = "%C3%A9mile" + strings.TrimPrefix(p.Key, run)
		}
		rec, err := x.Record(ctx, []NewPart{p})
		if err != nil {
			t.Fatal(err)
		}
		say("record %s: key=%s version=%d same-as=%q at=%d", p.Key, rec[0].Key, rec[0].Version, rec[0].SameAs, rec[0].CreatedAt.UnixNano())
		c.t = c.t.Add(time.Duration(i%3) * time.Second)
	}
	// A different call under a taken key gets a suffix.
	clash := newPart("alpha", 0, "read_file", "c0", "clash")
	clash.Part = 2
	rec, err := x.Record(ctx, []NewPart{clash})
	say("clash: %+v %v", rec, err)

	all, err := x.List(ctx, ListOptions{AllVersions: true})
	parts("list all versions", all, err)
	for _, o := range []ListOptions{{}, {Run: "beta"}, {Tool: "grep", Limit: 3}, {Kind: catalog.KindImage}, {Since: c.t.Add(-20 * time.Second)}} {
		ps, err := x.List(ctx, o)
		parts(fmt.Sprintf("list %+v", o), ps, err)
	}
	for _, p := range all[:12] {
		for _, ref := range []string{p.Key, p.Blob.Digest.String(), p.Blob.Digest.Hex()[:8], p.Blob.RelPath()} {
			for _, run := range []string{"", p.Run, "beta"} {
				r, err := ParseRef(ref, "/store")
				if err != nil {
					t.Fatal(err)
				}
				got, err := x.Resolve(ctx, r, run)
				say("resolve %s in %q: %s, %v", ref, run, part(got), err)
			}
		}
		vs, err := x.Versions(ctx, p.Key)
		parts("versions "+p.Key, vs, err)
		sh, err := x.SharingFirst(ctx, p.Blob, 3)
		parts("sharing first "+p.Blob.String(), sh, err)
	}
	for _, prefix := range []string{"", "b", "B", "_", "é", "%"} {
		r, err := x.Runs(ctx, prefix, 0)
		say("runs %q: %q %v", prefix, r, err)
		if prefix == "é" && (len(r) != 1 || r[0] != "émile") {
			t.Errorf("Runs(%q) = %q, want [émile]", prefix, r)
		}
		tl, err := x.Tools(ctx, prefix, 2)
		say("tools %q: %q %v", prefix, tl, err)
		k, err := x.Keys(ctx, prefix, 5)
		say("keys %q: %q %v", prefix, k, err)
	}
	stats := func(what, run string) {
		s, err := x.Stats(ctx, run)
		s.IndexBytes = 0
		say("stats %s: %+v %v", what, s, err)
	}
	stats("all", "")
	stats("beta", "beta")

	// Packs, prune, and gc's sets.
	cands, err := x.PackCandidates(ctx, c.t, time.Time{})
	say("pack candidates: %d %v", len(cands), err)
	slices.SortFunc(cands, func(a, b PackCandidate) int { return strings.Compare(a.Blob.String(), b.Blob.String()) })
	var packed []cas.Blob
	for _, cd := range cands[:5] {
		packed = append(packed, cd.Blob)
		say("  %+v", cd)
	}
	say("record pack: %v", x.RecordPack(ctx, PackRecord{Name: "pack-a.zst", Size: 10, Raw: 50, Blobs: packed}))
	packs, err := x.Packs(ctx)
	say("packs: %d %v", len(packs), err)
	for _, p := range packs {
		p.CreatedAt = time.Time{}
		say("  %+v", p)
	}
	for _, o := range []PruneOptions{{KeepRuns: 4, DryRun: true}, {KeepRuns: 4}, {Run: "Beta"}, {Before: c.t.Add(-30 * time.Second)}} {
		res, err := x.Prune(ctx, o)
		say("prune %+v: %+v %v", o, res, err)
	}
	refs, err := x.ReferencedBlobs(ctx)
	say("referenced: %d %v", len(refs), err)
	sortBlobRows(refs)
	for _, r := range refs {
		say("  %+v", r)
	}
	unrefs, err := x.UnreferencedBlobs(ctx)
	say("unreferenced: %d %v", len(unrefs), err)
	sortBlobRows(unrefs)
	var candidates []cas.Blob
	for _, r := range unrefs {
		say("  %+v", r)
		candidates = append(candidates, r.Blob)
	}
	gone, err := x.DeleteUnreferenced(ctx, candidates, c.t.Add(-40*time.Second))
	say("deleted unreferenced: %v %v", gone, err)
	stats("after gc", "")
	has, err := x.HasRun(ctx, "beta")
	say("has run beta: %v %v", has, err)
	has, err = x.HasTool(ctx, "Grep")
	say("has tool Grep: %v %v", has, err)
	n, err := x.DeleteKey(ctx, all[0].Key, 0)
	say("delete key %s: %d %v", all[0].Key, n, err)
	return out.String()
}

// sortBlobRows orders rows by digest: the sets gc reads have no order.
func sortBlobRows(rows []BlobRow) {
	slices.SortFunc(rows, func(a, b BlobRow) int { return strings.Compare(a.Blob.String(), b.Blob.String()) })
}
