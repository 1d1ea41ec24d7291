package store

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/toolcas/toolcas/cas"
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

// A part's code points, as the writer counted them or not, are recorded
// right in either durability; a count its bytes cannot have is recounted.
// The text's bytes reach the blob unchanged, and the text is left as it
// was (the store writes them from the string's own memory).
func TestWriteRecordsChars(t *testing.T) {
	ctx := context.Background()
	text := strings.Repeat("é", 40) + strings.Repeat("a", 20) // 100 bytes, 60 code points
	for _, mode := range []struct {
		name string
		opts []Option
	}{{"durable", nil}, {"sync=none", []Option{WithDurability(cas.SyncNone)}}} {
		t.Run(mode.name, func(t *testing.T) {
			s := newStore(t, false, mode.opts...)
			for i, chars := range []int{0, 60, 101, 10} {
				k := hook.Key{Run: "r", Step: i, Tool: "t", CallID: "c", Part: -1, Ext: ".txt"}
				st, err := s.Write(ctx, []hook.Item{{Key: k, Part: hook.Text(text), Chars: chars}})
				if err != nil {
					t.Fatal(err)
				}
				p, err := s.Resolve(ctx, "r", st[0].Key)
				if err != nil {
					t.Fatal(err)
				}
				if p.Chars != 60 || p.Bytes != 100 {
					t.Errorf("Chars %d given: recorded %d code points and %d bytes, want 60 and 100", chars, p.Chars, p.Bytes)
				}
				c, err := s.Read(ctx, "r", st[0].Key)
				if err != nil {
					t.Fatal(err)
				}
				if string(c.Data) != text {
					t.Errorf("read back %q, want %q", c.Data, text)
				}
			}
			if text != strings.Repeat("é", 40)+strings.Repeat("a", 20) {
				t.Errorf("the written text changed: %q", text)
			}
		})
	}
}
