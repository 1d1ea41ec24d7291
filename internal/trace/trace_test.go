package trace

import (
	"testing"

	"github.com/toolcas/toolcas/cas"
)

func digests(t *testing.T, cfg Config) (list []cas.Digest, tools map[string]int) {
	t.Helper()
	tr, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tools = map[string]int{}
	for {
		st, ok, err := tr.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return list, tools
		}
		for _, r := range st.Results {
			tools[r.Tool]++
			for _, p := range r.Parts {
				b := p.Data
				if p.Kind == "text" {
					b = []byte(p.Text)
				}
				list = append(list, cas.Sum(b))
			}
		}
	}
}

func TestDeterministic(t *testing.T) {
	cfg := Config{Seed: 7, Runs: 2, Steps: 30}
	a, tools := digests(t, cfg)
	b, _ := digests(t, cfg)
	if len(a) != len(b) {
		t.Fatalf("two traces of one seed: %d and %d parts", len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("part %d differs between two traces of one seed", i)
		}
	}
	for _, tool := range Tools {
		if tools[tool] == 0 {
			t.Errorf("%s never called in %d steps", tool, 60)
		}
	}
	c, _ := digests(t, Config{Seed: 8, Runs: 2, Steps: 30})
	same := 0
	for i := range min(len(a), len(c)) {
		if a[i] == c[i] {
			same++
		}
	}
	if same == min(len(a), len(c)) {
		t.Error("another seed gives the same trace")
	}
}

func TestRepetition(t *testing.T) {
	count := func(noRepeat bool) (parts, unique int) {
		list, _ := digests(t, Config{Seed: 1, Runs: 3, Steps: 40, NoRepeat: noRepeat})
		seen := map[cas.Digest]bool{}
		for _, d := range list {
			seen[d] = true
		}
		return len(list), len(seen)
	}
	parts, unique := count(false)
	if unique*3 > parts*2 {
		t.Errorf("%d unique of %d parts: the agent does not repeat itself", unique, parts)
	}
	parts, unique = count(true)
	// Empty grep results are the only repeats allowed.
	if unique < parts*9/10 {
		t.Errorf("no-repetition trace: %d unique of %d parts", unique, parts)
	}
}

func TestConfigRefused(t *testing.T) {
	for _, cfg := range []Config{{Runs: 0, Steps: 1}, {Runs: 1, Steps: 1, Zipf: 0.5}, {Runs: 1, Steps: 1, Tools: []string{"rm_rf"}}, {Runs: 1, Steps: 1, Root: "/nonexistent"}} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}
