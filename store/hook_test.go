package store

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/policy"
)

// TestConcurrentRunsThroughOneHook offloads for many runs at once through
// one hook into one CAS store; every run reads back exactly its own results
// and sees none of another's, even where their content is identical.
func TestConcurrentRunsThroughOneHook(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	h, err := hook.New(s, policy.MustStrategies(policy.Default(policy.Always)))
	if err != nil {
		t.Fatal(err)
	}
	rt, _ := hook.NewReadTool(s)
	const runs, steps = 8, 12
	refs := make([][]hook.Reference, runs)
	var wg sync.WaitGroup
	for r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run := fmt.Sprint("run-", r)
			for n := range steps {
				results := []hook.Result{
					{Tool: "read_file", CallID: "c", Parts: []hook.Part{hook.Text(fmt.Sprintf("%s step %d", run, n))}},
					{Tool: "run_tests", CallID: "", Parts: []hook.Part{hook.Text("the same log in every run")}},
				}
				out, err := h.Offload(ctx, hook.Step{Run: run, Number: n}, results)
				if err != nil {
					t.Error(err)
					return
				}
				for _, o := range out {
					refs[r] = append(refs[r], hook.References(o)...)
				}
			}
		}()
	}
	wg.Wait()
	for r := range runs {
		run := fmt.Sprint("run-", r)
		for _, ref := range refs[r] {
			if !strings.HasPrefix(ref.Key, run+"/") {
				t.Errorf("%s got key %s", run, ref.Key)
			}
			res, err := rt.Read(ctx, run, hook.ReadArgs{Ref: ref.Key})
			if err != nil {
				t.Errorf("%s reading its own %s: %v", run, ref.Key, err)
				continue
			}
			if strings.Contains(ref.Key, "read_file") && !strings.Contains(res.Parts[0].Text, run+" step") {
				t.Errorf("%s read %q", run, res.Parts[0].Text)
			}
			other := fmt.Sprint("run-", (r+1)%runs)
			for _, by := range []string{ref.Key, ref.Path, ref.Digest} {
				if c, err := s.Read(ctx, other, by); err == nil && c.Run != other {
					t.Errorf("%s read %s's part %s by %q", other, run, c.Key, by)
				}
			}
		}
		ps, err := s.List(ctx, ListOptions{Run: run})
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) != 2*steps {
			t.Errorf("%s has %d parts, want %d", run, len(ps), 2*steps)
		}
	}
	st, _ := s.Stats(ctx, "")
	if st.Blobs != runs*steps+1 {
		t.Errorf("%d blobs, want %d: the shared log stored once", st.Blobs, runs*steps+1)
	}
}

// TestH19VersionsNotOverwrites: Haystack's file store overwrites a key
// written twice, so an old pointer then shows new content; in the CAS store
// the key gets a new version and every old pointer keeps showing what it
// showed.
func TestH19VersionsNotOverwrites(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	h, _ := hook.New(s, policy.MustStrategies(policy.Default(policy.Always)))
	step := hook.Step{Run: "r", Number: 4}
	var refs []hook.Reference
	for _, text := range []string{"first read of the file", "the file, changed"} {
		out, err := h.Offload(ctx, step, []hook.Result{{Tool: "read_file", CallID: "c", Parts: []hook.Part{hook.Text(text)}}})
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, hook.References(out[0])[0])
	}
	if refs[0].Key != refs[1].Key || refs[0].Path == refs[1].Path {
		t.Fatalf("references %+v", refs)
	}
	for i, want := range []string{"first read of the file", "the file, changed"} {
		c, err := s.Read(ctx, "r", refs[i].Path)
		if err != nil || string(c.Data) != want || c.Version != i+1 {
			t.Errorf("old pointer %d reads %q version %d, %v; want %q version %d", i, c.Data, c.Version, err, want, i+1)
		}
	}
	if c, _ := s.Read(ctx, "r", refs[0].Key); string(c.Data) != "the file, changed" {
		t.Errorf("the key reads %q, want the newest version", c.Data)
	}
	ps, _ := s.List(ctx, ListOptions{Run: "r", AllVersions: true})
	if len(ps) != 2 {
		t.Errorf("%d versions listed, want 2", len(ps))
	}
}

// TestReadToolErrorsSayItOnce checks the read-back tool's errors for what
// an agent gets wrong: each names the reference once, with no package
// prefixes between it and the reason.
func TestReadToolErrorsSayItOnce(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	mustWrite(t, s, item("run-7", 1, "hello"))
	rt, err := hook.NewReadTool(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ ref, want string }{
		{"run-7/9_t_c.txt", "read: run-7/9_t_c.txt: not found in run run-7"},
		{"other/1_t_c.txt", "read: other/1_t_c.txt: not found in run run-7"},
		{"nonsense", `read: invalid reference "nonsense": want a key (run/step_tool_call.ext), a blob path, blake3:<hex> or at least 8 hex digits of one`},
	} {
		got := rt.Call(ctx, "run-7", "c", []byte(`{"ref": "`+tc.ref+`"}`))
		if !got.Error || got.Parts[0].Text != tc.want {
			t.Errorf("read %s = %q, want %q", tc.ref, got.Parts[0].Text, tc.want)
		}
	}
}
