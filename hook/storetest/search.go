package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/hook"
)

// searchAll returns every hit of a search, as "KEY:LINE:TEXT", ordered by
// key: a Searcher reports the lines of a part together and in order, the
// parts in an order of its own.
func searchAll(t *testing.T, s hook.Searcher, run string, q hook.SearchQuery) []string {
	t.Helper()
	var (
		got  []string
		keys []string
		last = map[string]int64{}
	)
	err := s.Search(context.Background(), run, q, func(h hook.SearchHit) error {
		if len(keys) == 0 || keys[len(keys)-1] != h.Key {
			if slices.Contains(keys, h.Key) {
				t.Errorf("Search(run %q, %+v): the lines of %s are not together", run, q, h.Key)
			}
			keys = append(keys, h.Key)
		}
		if h.Line <= last[h.Key] {
			t.Errorf("Search(run %q, %+v): line %d of %s after line %d", run, q, h.Line, h.Key, last[h.Key])
		}
		last[h.Key] = h.Line
		got = append(got, fmt.Sprintf("%s:%d:%s", h.Key, h.Line, h.Text))
		return nil
	})
	if err != nil {
		t.Fatalf("Search(run %q, %+v): %v", run, q, err)
	}
	slices.SortStableFunc(got, func(a, b string) int {
		return strings.Compare(a[:strings.IndexByte(a, ':')], b[:strings.IndexByte(b, ':')])
	})
	return got
}

// errStop is what the suite's fn returns to stop a search.
var errStop = errors.New("stop")

// searcher checks what the read-back tool's search relies on: a search sees
// the run's text parts alone, the newest version of each key, their lines
// in order and numbered from 1, narrowed by tool, cut to the width; it
// stops when fn says so, and a bad pattern is ErrBadPattern.
func searcher(t *testing.T, st hook.Store) {
	s, ok := st.(hook.Searcher)
	if !ok {
		t.Skip("the store is not a hook.Searcher")
	}
	ctx := context.Background()
	log := "start\nneedle one\nmiddle\nNEEDLE two\nend\nneedle three"
	a := write(t, s,
		hook.Item{Key: key("run-a", 1, "fetch", "c1", ".txt"), Part: hook.Text(log)},
		hook.Item{Key: key("run-a", 2, "grep", "c2", ".txt"), Part: hook.Text("old needle")},
		hook.Item{Key: key("run-a", 3, "fetch", "c3", ".txt"), Part: hook.Text("a.b and axb\n" + strings.Repeat("x", 1000) + "needle" + strings.Repeat("y", 1000))},
	)
	// The newest version of a key is searched, never an older one.
	a2 := write(t, s, hook.Item{Key: key("run-a", 2, "grep", "c2", ".txt"), Part: hook.Text("new needle")})[0]
	b := write(t, s,
		hook.Item{Key: key("run-b", 1, "fetch", "c1", ".txt"), Part: hook.Text("needle of run-b\nrun-a needle in b")},
		hook.Item{Key: key("run-b", 2, "fetch", "c9", ".txt"), Part: hook.Text(a[0].Key + " needle")},
	)
	if a2.Key != a[1].Key {
		t.Fatalf("rewrite stored under %q, want %q", a2.Key, a[1].Key)
	}
	if s.AcceptsBinary() {
		write(t, s, hook.Item{Key: key("run-a", 4, "shot", "c4", ".png"), Part: hook.Image("image/png", []byte("\x89PNG\r\n\x1a\nneedle\x00"))})
	}

	k1, k2, k3 := a[0].Key, a[1].Key, a[2].Key
	for _, tc := range []struct {
		name string
		run  string
		q    hook.SearchQuery
		want []string
	}{
		{"lines in order", "run-a", hook.SearchQuery{Pattern: "needle", Tool: "fetch"},
			[]string{k1 + ":2:needle one", k1 + ":6:needle three", k3 + ":2:" + strings.Repeat("x", 1000) + "needle" + strings.Repeat("y", 1000)}},
		{"newest version", "run-a", hook.SearchQuery{Pattern: "needle", Tool: "grep"}, []string{k2 + ":1:new needle"}},
		{"old version", "run-a", hook.SearchQuery{Pattern: "old"}, nil},
		{"ignore case", "run-a", hook.SearchQuery{Pattern: "needle t", IgnoreCase: true}, []string{k1 + ":4:NEEDLE two", k1 + ":6:needle three"}},
		{"regexp", "run-a", hook.SearchQuery{Pattern: `^needle (one|three)$`}, []string{k1 + ":2:needle one", k1 + ":6:needle three"}},
		{"fixed", "run-a", hook.SearchQuery{Pattern: "a.b", Fixed: true}, []string{k3 + ":1:a.b and axb"}},
		{"not fixed", "run-a", hook.SearchQuery{Pattern: "a.b and a.b"}, []string{k3 + ":1:a.b and axb"}},
		{"fixed needs the dot", "run-a", hook.SearchQuery{Pattern: "axb and", Fixed: true}, nil},
		{"other run", "run-b", hook.SearchQuery{Pattern: "needle"},
			[]string{b[0].Key + ":1:needle of run-b", b[0].Key + ":2:run-a needle in b", b[1].Key + ":1:" + k1 + " needle"}},
		// A pattern naming run-a finds only what run-b's own text says.
		{"the other run's key", "run-b", hook.SearchQuery{Pattern: k1, Fixed: true}, []string{b[1].Key + ":1:" + k1 + " needle"}},
		{"the other run's name", "run-a", hook.SearchQuery{Pattern: "run-b"}, nil},
		{"no run of that name", "run-c", hook.SearchQuery{Pattern: "needle"}, nil},
		{"no tool of that name", "run-a", hook.SearchQuery{Pattern: "needle", Tool: "nothing"}, nil},
	} {
		got := searchAll(t, s, tc.run, tc.q)
		if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("%s: Search(run %s, %+v) =\n%s\nwant\n%s", tc.name, tc.run, tc.q, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
		}
		for _, h := range got {
			if !strings.HasPrefix(h, hook.EscapeRun(tc.run)+"/") {
				t.Errorf("%s: run %s's search found %q, of another run", tc.name, tc.run, h)
			}
		}
	}

	// Every text part of the run, binary content never.
	if got := searchAll(t, s, "run-a", hook.SearchQuery{Pattern: "needle"}); len(got) != 4 {
		t.Errorf("Search(run-a, needle) = %d hits, want 4:\n%s", len(got), strings.Join(got, "\n"))
	}

	// Width cuts a long line around its match, and marks the cut.
	got := searchAll(t, s, "run-a", hook.SearchQuery{Pattern: "needle", Tool: "fetch", Width: 100})
	if len(got) != 3 {
		t.Fatalf("cut search = %q, want 3 hits", got)
	}
	text := strings.TrimPrefix(got[2], k3+":2:")
	if !strings.Contains(text, "needle") || len(text) > 160 || !strings.Contains(text, "bytes]") {
		t.Errorf("line cut to width 100 = %q (%d bytes), want the match and a marked cut within 160 bytes", text, len(text))
	}
	if got[0] != k1+":2:needle one" {
		t.Errorf("short line with a width = %q, want it whole", got[0])
	}

	// fn's error stops the search and is returned.
	calls := 0
	err := s.Search(ctx, "run-a", hook.SearchQuery{Pattern: "needle"}, func(hook.SearchHit) error {
		calls++
		return errStop
	})
	if !errors.Is(err, errStop) || calls != 1 {
		t.Errorf("Search stopped by fn = %v after %d calls, want errStop after 1", err, calls)
	}

	// A pattern that cannot be used is ErrBadPattern.
	for _, p := range []string{"(", "a[", "", strings.Repeat("a", 5000), "a\nb", "\xff"} {
		err := s.Search(ctx, "run-a", hook.SearchQuery{Pattern: p}, func(hook.SearchHit) error { return nil })
		if !errors.Is(err, hook.ErrBadPattern) {
			t.Errorf("Search(pattern %.20q) = %v, want ErrBadPattern", p, err)
		}
	}

	// A canceled search fails.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Search(cctx, "run-a", hook.SearchQuery{Pattern: "needle"}, func(hook.SearchHit) error { return nil }); err == nil {
		t.Error("Search with a canceled context succeeded")
	}
}
