// Package storetest is the conformance suite every hook.Store passes: what
// the hook and the read-back tool rely on, run against any implementation.
// A store that is a hook.Searcher passes the search's part of it too.
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) hook.Store { return mystore.New(t.TempDir()) }, storetest.Options{})
//	}
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/toolcas/toolcas/hook"
)

// Options say what a store does differently from the default contract.
type Options struct {
	// Overwrites marks a store that overwrites a key written again, as
	// Haystack's file store does, instead of adding a version; an old path
	// then shows the new content.
	Overwrites bool
	// NoDedupReport marks a store that does not report dedup hits and
	// "same content as".
	NoDedupReport bool
}

// Run runs the suite; newStore returns an empty store for each subtest.
func Run(t *testing.T, newStore func(t *testing.T) hook.Store, o Options) {
	t.Run("RoundTripText", func(t *testing.T) { roundTripText(t, newStore(t)) })
	t.Run("Batch", func(t *testing.T) { batch(t, newStore(t)) })
	t.Run("NotFound", func(t *testing.T) { notFound(t, newStore(t)) })
	t.Run("RunScope", func(t *testing.T) { runScope(t, newStore(t)) })
	t.Run("Rewrite", func(t *testing.T) { rewrite(t, newStore(t), o) })
	t.Run("Dedup", func(t *testing.T) { dedup(t, newStore(t), o) })
	t.Run("Refusals", func(t *testing.T) { refusals(t, newStore(t)) })
	t.Run("Concurrent", func(t *testing.T) { concurrent(t, newStore(t)) })
	t.Run("HaystackKeys", func(t *testing.T) { haystackKeys(t, newStore(t)) })
	t.Run("RunNames", func(t *testing.T) { runNames(t, newStore(t)) })
	t.Run("Searcher", func(t *testing.T) { searcher(t, newStore(t)) })
	if !o.Overwrites {
		t.Run("Collisions", func(t *testing.T) { collisions(t, newStore(t)) })
		t.Run("ConcurrentCollisions", func(t *testing.T) { concurrentCollisions(t, newStore(t)) })
	}
}

func key(run string, step int, tool, call string, ext string) hook.Key {
	return hook.Key{Run: run, Step: step, Tool: tool, CallID: call, Part: -1, Ext: ext}
}

func write(t *testing.T, s hook.Store, items ...hook.Item) []hook.Stored {
	t.Helper()
	st, err := s.Write(context.Background(), items)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	if len(st) != len(items) {
		t.Fatalf("Write returned %d results for %d items", len(st), len(items))
	}
	return st
}

func read(t *testing.T, s hook.Store, run, ref string) *hook.Content {
	t.Helper()
	c, err := s.Read(context.Background(), run, ref)
	if err != nil {
		t.Fatalf("Read(run %q, %q): %v", run, ref, err)
	}
	return c
}

func roundTripText(t *testing.T, s hook.Store) {
	text := "Fusion startups reported… ünïcode\nsecond line\n"
	k := key("run-1", 2, "search", "call-123", ".txt")
	st := write(t, s, hook.Item{Key: k, Part: hook.Text(text)})[0]
	if st.Key != k.String() {
		t.Errorf("Stored.Key = %q, want %q", st.Key, k.String())
	}
	if st.Path == "" || st.Digest.IsZero() {
		t.Errorf("Stored = %+v: no path or digest", st)
	}
	for _, ref := range []string{st.Key, st.Path} {
		c := read(t, s, "run-1", ref)
		if string(c.Data) != text || !c.IsText() {
			t.Errorf("Read(%q) = %q (text %v), want %q", ref, c.Data, c.IsText(), text)
		}
		if c.Key != st.Key || c.Digest != st.Digest {
			t.Errorf("Read(%q) key, digest = %q, %v; want %q, %v", ref, c.Key, c.Digest, st.Key, st.Digest)
		}
		if c.Kind != hook.KindText {
			t.Errorf("Read(%q).Kind = %q, want text", ref, c.Kind)
		}
	}
	// Unscoped reads see it too.
	if c := read(t, s, "", st.Key); string(c.Data) != text {
		t.Errorf("unscoped Read = %q", c.Data)
	}
}

func batch(t *testing.T, s hook.Store) {
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR fake image bytes \xff\xfe")
	items := []hook.Item{
		{Key: hook.Key{Run: "r", Step: 1, Tool: "t", CallID: "c", Part: 0, Ext: ".txt"}, Part: hook.Text("first")},
		{Key: hook.Key{Run: "r", Step: 1, Tool: "t", CallID: "c", Part: 1, Ext: ".txt"}, Part: hook.Text("")},
	}
	if s.AcceptsBinary() {
		items = append(items,
			hook.Item{Key: hook.Key{Run: "r", Step: 1, Tool: "t", CallID: "c", Part: 2, Ext: ".png"}, Part: hook.Image("image/png", png)},
			hook.Item{Key: hook.Key{Run: "r", Step: 1, Tool: "t", CallID: "c", Part: 3, Ext: ".pdf"}, Part: hook.File("application/pdf", "q3.pdf", []byte("%PDF-1.4 \x00\x01\x02"))},
		)
	}
	st := write(t, s, items...)
	seen := map[string]bool{}
	for i, it := range items {
		if seen[st[i].Key] {
			t.Errorf("two parts share key %q", st[i].Key)
		}
		seen[st[i].Key] = true
		c := read(t, s, "r", st[i].Path)
		want := []byte(it.Part.Text)
		if it.Part.Kind != hook.KindText {
			want = it.Part.Data
		}
		if !bytes.Equal(c.Data, want) {
			t.Errorf("part %d reads back %q, want %q", i, c.Data, want)
		}
		if it.Part.Kind == hook.KindImage && (c.IsText() || c.Kind != hook.KindImage) {
			t.Errorf("image reads back as text %v, kind %q", c.IsText(), c.Kind)
		}
		if it.Part.Kind == hook.KindImage && !strings.HasPrefix(c.MIME, "image/png") {
			t.Errorf("image reads back with MIME %q", c.MIME)
		}
	}
}

func notFound(t *testing.T, s hook.Store) {
	write(t, s, hook.Item{Key: key("r", 1, "t", "c", ".txt"), Part: hook.Text("x")})
	for _, ref := range []string{"r/9_t_none.txt", "other/1_t_c.txt"} {
		if c, err := s.Read(context.Background(), "", ref); !errors.Is(err, hook.ErrNotFound) {
			t.Errorf("Read(%q) = %v, %v; want ErrNotFound", ref, c, err)
		}
	}
}

func runScope(t *testing.T, s hook.Store) {
	a := write(t, s, hook.Item{Key: key("run-a", 1, "t", "c", ".txt"), Part: hook.Text("secret of a")})[0]
	b := write(t, s, hook.Item{Key: key("run-b", 1, "t", "c", ".txt"), Part: hook.Text("secret of b")})[0]
	if c := read(t, s, "run-a", a.Key); string(c.Data) != "secret of a" {
		t.Errorf("run-a reads %q", c.Data)
	}
	for _, ref := range []string{a.Key, a.Path} {
		c, err := s.Read(context.Background(), "run-b", ref)
		if err == nil {
			t.Errorf("run-b read run-a's %q: %q", ref, c.Data)
		} else if !errors.Is(err, hook.ErrNotFound) && !errors.Is(err, hook.ErrRefused) {
			t.Errorf("run-b reading %q: %v, want ErrNotFound or ErrRefused", ref, err)
		}
	}
	if c := read(t, s, "run-b", b.Path); string(c.Data) != "secret of b" {
		t.Errorf("run-b reads %q", c.Data)
	}
}

func rewrite(t *testing.T, s hook.Store, o Options) {
	k := key("r", 1, "read_file", "c", ".txt")
	old := write(t, s, hook.Item{Key: k, Part: hook.Text("old content")})[0]
	cur := write(t, s, hook.Item{Key: k, Part: hook.Text("new content")})[0]
	if c := read(t, s, "r", k.String()); string(c.Data) != "new content" {
		t.Errorf("key reads %q after rewrite, want the new content", c.Data)
	}
	c := read(t, s, "r", old.Path)
	if o.Overwrites {
		if string(c.Data) != "new content" {
			t.Errorf("overwriting store: old path reads %q", c.Data)
		}
		return
	}
	if cur.Version != old.Version+1 {
		t.Errorf("versions %d then %d, want consecutive", old.Version, cur.Version)
	}
	if string(c.Data) != "old content" {
		t.Errorf("old pointer's path reads %q after rewrite, want what it showed", c.Data)
	}
}

func dedup(t *testing.T, s hook.Store, o Options) {
	st := write(t, s,
		hook.Item{Key: key("r1", 2, "search", "call-123", ".txt"), Part: hook.Text("same")},
		hook.Item{Key: key("r1", 5, "search", "call-9", ".txt"), Part: hook.Text("same")},
	)
	other := write(t, s, hook.Item{Key: key("r2", 1, "search", "x", ".txt"), Part: hook.Text("same")})[0]
	if st[0].Digest != st[1].Digest || st[0].Digest != other.Digest {
		t.Error("identical content has different digests")
	}
	if other.SameAs != "" && !strings.HasPrefix(other.SameAs, "r2/") {
		t.Errorf("SameAs names another run's key: %q", other.SameAs)
	}
	if o.NoDedupReport {
		return
	}
	if st[0].SameAs != "" {
		t.Errorf("first part SameAs = %q", st[0].SameAs)
	}
	if st[1].SameAs != st[0].Key {
		t.Errorf("SameAs = %q, want %q", st[1].SameAs, st[0].Key)
	}
	if !other.Dedup {
		t.Error("third write of the same bytes not reported as dedup")
	}
}

func refusals(t *testing.T, s hook.Store) {
	ctx := context.Background()
	write(t, s, hook.Item{Key: key("r", 1, "t", "c", ".txt"), Part: hook.Text("x")})
	outside := filepath.Join(os.TempDir(), "toolcas-storetest-outside.txt")
	os.WriteFile(outside, []byte("outside"), 0o644)
	defer os.Remove(outside)
	for _, ref := range []string{"", "/etc/passwd", outside, "../../etc/passwd", "r/../../../etc/passwd", "r/1_t_c.txt\x00"} {
		c, err := s.Read(ctx, "", ref)
		if err == nil {
			t.Errorf("Read(%q) = %q, want an error", ref, c.Data)
		}
	}
	for _, k := range []hook.Key{
		{Run: "a\x00b", Step: 1, Tool: "t", CallID: "c", Part: -1, Ext: ".txt"},
		{Run: "\xff\xfe", Step: 1, Tool: "t", CallID: "c", Part: -1, Ext: ".txt"},
		{Run: strings.Repeat("r", hook.MaxRunLen+1), Step: 1, Tool: "t", CallID: "c", Part: -1, Ext: ".txt"},
		{Run: "r", Step: 1, Tool: "t", CallID: "c", Part: -1, Ext: "/../../x"},
		{Run: "r", Step: -1, Tool: "t", CallID: "c", Part: -1, Ext: ".txt"},
		{Run: "", Step: 1, Tool: "t", CallID: "c", Part: -1, Ext: ".txt"},
	} {
		if _, err := s.Write(ctx, []hook.Item{{Key: k, Part: hook.Text("x")}}); err == nil {
			t.Errorf("Write(%+v) accepted", k)
		} else if !errors.Is(err, hook.ErrInvalidKey) {
			t.Errorf("Write(%+v) = %v, want an error saying the key is invalid", k, err)
		}
	}
}

func concurrent(t *testing.T, s hook.Store) {
	const runs, steps = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, runs*steps)
	for r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run := fmt.Sprint("run-", r)
			for i := range steps {
				k := key(run, i, "t", "c", ".txt")
				want := fmt.Sprintf("%s step %d", run, i)
				st, err := s.Write(context.Background(), []hook.Item{{Key: k, Part: hook.Text(want)}})
				if err != nil {
					errs <- err
					return
				}
				c, err := s.Read(context.Background(), run, st[0].Key)
				if err != nil {
					errs <- err
					return
				}
				if string(c.Data) != want {
					errs <- fmt.Errorf("%s read %q, want %q", st[0].Key, c.Data, want)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// haystackKeys checks that ordinary call ids read exactly as Haystack writes
// them, with the run in front.
func haystackKeys(t *testing.T, s hook.Store) {
	for _, tc := range []struct {
		k    hook.Key
		want string
	}{
		{hook.Key{Run: "r", Step: 2, Tool: "search", CallID: "call_00_yjs8KtEk", Part: -1, Ext: ".txt"}, "r/2_search_call_00_yjs8KtEk.txt"},
		{hook.Key{Run: "r", Step: 1, Tool: "a", CallID: "1", Part: -1, Ext: ".txt"}, "r/1_a_1.txt"},
		{hook.Key{Run: "r", Step: 3, Tool: "search", CallID: "call7", Part: -1, Ext: ".txt"}, "r/3_search_call7.txt"},
		{hook.Key{Run: "r", Step: 4, Tool: "read_file", CallID: "toolu_01A09q90qw90lq917835lq9", Part: -1, Ext: ".txt"}, "r/4_read_file_toolu_01A09q90qw90lq917835lq9.txt"},
		{hook.Key{Run: "r", Step: 5, Tool: "shot", CallID: "", Index: 2, Part: 1, Ext: ".txt"}, "r/5_shot_call2_1.txt"},
		{hook.Key{Run: "r", Step: 6, Tool: "t", CallID: "a-b.c_d", Part: -1, Ext: ".txt"}, "r/6_t_a-b.c_d.txt"},
	} {
		st := write(t, s, hook.Item{Key: tc.k, Part: hook.Text("content of " + tc.want)})[0]
		if st.Key != tc.want {
			t.Errorf("Write(%+v) stored key %q, want %q", tc.k, st.Key, tc.want)
		}
		if c := read(t, s, "r", tc.want); string(c.Data) != "content of "+tc.want {
			t.Errorf("Read(%q) = %q", tc.want, c.Data)
		}
	}
}

// runNames checks that real run names (thread ids, sessions, paths of
// chats, long benchmark instance names) are stored, escaped in the key,
// read back in their run and invisible to another.
func runNames(t *testing.T, s hook.Store) {
	for i, run := range []string{
		"user:42/chat:7",
		"session-0f8fad5b-d9cb-469f-a165-70867728950e",
		"thread_1f0a2b3c-4d5e-6f70-8192-a3b4c5d6e7f8:checkpoint_ns/subgraph",
		"deepseek_bench1.astropy-astropy-12907__config=swebench_verified.yaml",
		"../x", "..", ".", "run with spaces and ünïcode",
		strings.Repeat("r", hook.MaxRunLen),
		strings.Repeat("/", hook.MaxRunLen),
	} {
		text := fmt.Sprint("run ", i)
		k := key(run, 1, "t", "c", ".txt")
		st := write(t, s, hook.Item{Key: k, Part: hook.Text(text)})[0]
		if !strings.HasPrefix(st.Key, hook.EscapeRun(run)+"/") || strings.Count(st.Key, "/") != 1 {
			t.Errorf("run %q stored under key %q", run, st.Key)
		}
		for _, ref := range []string{st.Key, st.Path} {
			if c := read(t, s, run, ref); string(c.Data) != text {
				t.Errorf("run %q reads %q back as %q", run, ref, c.Data)
			}
			if c, err := s.Read(context.Background(), "other", ref); err == nil {
				t.Errorf("run other read run %q's %q: %q", run, ref, c.Data)
			}
		}
	}
}

// colliding lists pairs of different calls whose keys render alike, the
// cases escaping used to keep apart.
var colliding = [][2]hook.Key{
	// tool a_b, call c against tool a, call b_c
	{{Run: "r", Step: 2, Tool: "a_b", CallID: "c", Part: -1, Ext: ".txt"}, {Run: "r", Step: 2, Tool: "a", CallID: "b_c", Part: -1, Ext: ".txt"}},
	// call id call7 against an empty call id at index 7
	{{Run: "r", Step: 3, Tool: "search", CallID: "", Index: 7, Part: -1, Ext: ".txt"}, {Run: "r", Step: 3, Tool: "search", CallID: "call7", Part: -1, Ext: ".txt"}},
	// part 1 of call c against the one part of call c_1
	{{Run: "r", Step: 4, Tool: "t", CallID: "c", Part: 1, Ext: ".txt"}, {Run: "r", Step: 4, Tool: "t", CallID: "c_1", Part: -1, Ext: ".txt"}},
	// numeric ids: part 0 of call 1 against call 1_0
	{{Run: "r", Step: 5, Tool: "t", CallID: "1", Part: 0, Ext: ".txt"}, {Run: "r", Step: 5, Tool: "t", CallID: "1_0", Part: -1, Ext: ".txt"}},
	// a tool whose name ends like a call id
	{{Run: "r", Step: 6, Tool: "t_1", CallID: "2", Part: -1, Ext: ".txt"}, {Run: "r", Step: 6, Tool: "t", CallID: "1_2", Part: -1, Ext: ".txt"}},
}

// collisions checks that a call whose key renders like another call's gets
// a visible "~2" before the extension instead of becoming a version of the
// other, that writing either call again adds a version of its own key, and
// that a third colliding call gets "~3".
func collisions(t *testing.T, s hook.Store) {
	for _, pair := range colliding {
		base := pair[0].String()
		if pair[1].String() != base {
			t.Fatalf("%+v and %+v render %q and %q: not a collision", pair[0], pair[1], base, pair[1].String())
		}
		first := write(t, s, hook.Item{Key: pair[0], Part: hook.Text("first " + base)})[0]
		second := write(t, s, hook.Item{Key: pair[1], Part: hook.Text("second " + base)})[0]
		if first.Key != base {
			t.Errorf("first call stored under %q, want %q", first.Key, base)
		}
		if want := pair[1].Render(2); second.Key != want || second.Version != 1 {
			t.Errorf("colliding call stored under %q version %d, want %q version 1", second.Key, second.Version, want)
		}
		if !strings.HasSuffix(second.Key, "~2.txt") {
			t.Errorf("suffixed key %q does not end in ~2.txt", second.Key)
		}
		for _, c := range []struct{ ref, want string }{{first.Key, "first " + base}, {second.Key, "second " + base}} {
			if got := read(t, s, "r", c.ref); string(got.Data) != c.want {
				t.Errorf("Read(%q) = %q, want %q", c.ref, got.Data, c.want)
			}
		}
		// Each call written again adds a version of its own key (H19).
		again := write(t, s, hook.Item{Key: pair[1], Part: hook.Text("second again")}, hook.Item{Key: pair[0], Part: hook.Text("first again")})
		if again[0].Key != second.Key || again[0].Version != 2 || again[1].Key != first.Key || again[1].Version != 2 {
			t.Errorf("rewrites stored %q v%d and %q v%d, want %q v2 and %q v2",
				again[0].Key, again[0].Version, again[1].Key, again[1].Version, second.Key, first.Key)
		}
		if got := read(t, s, "r", first.Key); string(got.Data) != "first again" {
			t.Errorf("Read(%q) after rewrite = %q", first.Key, got.Data)
		}
	}
	// Two colliding calls in one batch, then a third colliding with both.
	k := func(tool, call string) hook.Key {
		return hook.Key{Run: "b", Step: 1, Tool: tool, CallID: call, Part: -1, Ext: ".txt"}
	}
	st := write(t, s, hook.Item{Key: k("x", "y_z_w"), Part: hook.Text("1")}, hook.Item{Key: k("x_y", "z_w"), Part: hook.Text("2")})
	third := write(t, s, hook.Item{Key: k("x_y_z", "w"), Part: hook.Text("3")})[0]
	got := []string{st[0].Key, st[1].Key, third.Key}
	want := []string{"b/1_x_y_z_w.txt", "b/1_x_y_z_w~2.txt", "b/1_x_y_z_w~3.txt"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("three colliding calls stored under %q, want %q", got, want)
			break
		}
		if c := read(t, s, "b", want[i]); string(c.Data) != fmt.Sprint(i+1) {
			t.Errorf("Read(%q) = %q, want %d", want[i], c.Data, i+1)
		}
	}
	// A different run's identical key string is no collision.
	other := write(t, s, hook.Item{Key: hook.Key{Run: "c", Step: 1, Tool: "x", CallID: "y_z_w", Part: -1, Ext: ".txt"}, Part: hook.Text("c")})[0]
	if other.Key != "c/1_x_y_z_w.txt" {
		t.Errorf("run c stored under %q, want c/1_x_y_z_w.txt", other.Key)
	}
}

// concurrentCollisions has many writers store colliding calls at once:
// every call ends with a key of its own, each key holds only its call's
// versions, and every call's newest content reads back under its key.
func concurrentCollisions(t *testing.T, s hook.Store) {
	const writers, rounds = 6, 5
	// Writer w is tool "t" + "_x"*w with call "x"*(…): all render 1_t_x_x_x_x_x_x_x.
	k := func(w int) hook.Key {
		tool := "t" + strings.Repeat("_x", w)
		call := strings.TrimPrefix(strings.Repeat("x_", writers-w)+"x", "")
		return hook.Key{Run: "cc", Step: 1, Tool: tool, CallID: call, Part: -1, Ext: ".txt"}
	}
	base := k(0).String()
	for w := 1; w < writers; w++ {
		if k(w).String() != base {
			t.Fatalf("writer %d renders %q, not %q", w, k(w).String(), base)
		}
	}
	var wg sync.WaitGroup
	keys := make([][]string, writers)
	errs := make(chan error, writers)
	start := make(chan struct{})
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for r := range rounds {
				st, err := s.Write(context.Background(), []hook.Item{{Key: k(w), Part: hook.Text(fmt.Sprintf("writer %d round %d", w, r))}})
				if err != nil {
					errs <- err
					return
				}
				keys[w] = append(keys[w], st[0].Key)
				if st[0].Version != r+1 {
					errs <- fmt.Errorf("writer %d round %d: version %d, want %d", w, r, st[0].Version, r+1)
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	owner := map[string]int{}
	for w, ks := range keys {
		for _, key := range ks {
			if key != ks[0] {
				t.Errorf("writer %d stored under %q and %q", w, ks[0], key)
			}
		}
		if len(ks) == 0 {
			continue
		}
		if o, dup := owner[ks[0]]; dup {
			t.Errorf("writers %d and %d share key %q", o, w, ks[0])
		}
		owner[ks[0]] = w
		if c := read(t, s, "cc", ks[0]); string(c.Data) != fmt.Sprintf("writer %d round %d", w, rounds-1) {
			t.Errorf("Read(%q) = %q, want writer %d's last round", ks[0], c.Data, w)
		}
	}
}
