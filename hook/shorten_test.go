package hook_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/policy"
)

// streamingMem is a MemStore that streams its reads without knowing a text
// part's length in code points, so that Shorten counts them as it reads.
type streamingMem struct{ *hook.MemStore }

func (s streamingMem) OpenRead(ctx context.Context, run, ref string) (*hook.Content, io.ReadCloser, error) {
	c, err := s.Read(ctx, run, ref)
	if err != nil {
		return nil, nil, err
	}
	data := c.Data
	c.Data, c.Size = nil, int64(len(data))
	return c, io.NopCloser(bytes.NewReader(data)), nil
}

// indexedMem is a MemStore that streams its reads and knows a text part's
// length in code points, as an index does: Shorten need not read the bytes,
// and the reader it hands out fails if it does.
type indexedMem struct{ *hook.MemStore }

func (s indexedMem) OpenRead(ctx context.Context, run, ref string) (*hook.Content, io.ReadCloser, error) {
	c, err := s.Read(ctx, run, ref)
	if err != nil {
		return nil, nil, err
	}
	if c.Kind == hook.KindText {
		c.Chars = int64(utf8.RuneCount(c.Data))
	}
	c.Data, c.Size = nil, int64(len(c.Data))
	return c, io.NopCloser(errReader{}), nil
}

// brokenStream is a store whose parts cannot be read to the end.
type brokenStream struct{ *hook.MemStore }

func (s brokenStream) OpenRead(ctx context.Context, run, ref string) (*hook.Content, io.ReadCloser, error) {
	c, err := s.Read(ctx, run, ref)
	if err != nil {
		return nil, nil, err
	}
	c.Size, c.Data = int64(len(c.Data)), nil
	return c, io.NopCloser(errReader{}), nil
}

var errRead = errors.New("disk gone")

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errRead }

// TestShorten: a pointer the hook left with a path and a preview becomes
// the short form a WithShortPointers hook writes, sizes counted in code
// points, whatever the store; its metadata and references stay, and every
// reference still reads back. Pointers it cannot vouch for stay as they are.
func TestShorten(t *testing.T) {
	text := strings.Repeat("héllo wörld ", 300) // 3,600 code points, 4,200 bytes
	results := []hook.Result{
		{Tool: "bash", CallID: "c1", Parts: []hook.Part{hook.Text(text)}, Meta: map[string]any{"origin": "test"}},
		{Tool: "shot", CallID: "c2", Parts: []hook.Part{hook.Text("caption"), hook.Image("image/png", []byte("png bytes"))}},
	}
	want := []string{
		"Tool result offloaded (3600 characters, key 'r/3_bash_c1.txt').",
		"Tool result offloaded (7 characters, key 'r/3_shot_c2_0.txt'; image/png, 9 bytes, key 'r/3_shot_c2_1.png').",
	}
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) hook.Store
	}{
		{"MemStore", func(*testing.T) hook.Store { return hook.NewMemStore() }},
		{"streaming", func(*testing.T) hook.Store { return streamingMem{hook.NewMemStore()} }},
		{"knows its code points", func(*testing.T) hook.Store { return indexedMem{hook.NewMemStore()} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := tc.store(t)
			full, err := hook.New(s, policy.MustStrategies(policy.Default(policy.Always)))
			if err != nil {
				t.Fatal(err)
			}
			short, err := hook.New(s, policy.MustStrategies(policy.Default(policy.Never)), hook.WithShortPointers())
			if err != nil {
				t.Fatal(err)
			}
			ptrs, err := full.Offload(ctx, hook.Step{Run: "r", Number: 3}, results)
			if err != nil {
				t.Fatal(err)
			}
			for i, p := range ptrs {
				got, ok, err := short.Shorten(ctx, "r", p)
				if err != nil || !ok {
					t.Fatalf("Shorten(pointer %d) = %v, %v", i, ok, err)
				}
				if len(got.Parts) != 1 || got.Parts[0].Text != want[i] {
					t.Errorf("Shorten(pointer %d) = %+v, want %q", i, got.Parts, want[i])
				}
				if !reflect.DeepEqual(got.Meta, p.Meta) || got.Tool != p.Tool || got.CallID != p.CallID || !hook.IsPointer(got) {
					t.Errorf("Shorten(pointer %d) changed more than the text: %+v, was %+v", i, got, p)
				}
				for k, ref := range hook.References(got) {
					c, err := s.Read(ctx, "r", ref.Key)
					if err != nil {
						t.Fatalf("read back %s: %v", ref.Key, err)
					}
					if want := results[i].Parts[k]; string(c.Data) != want.Text+string(want.Data) {
						t.Errorf("read back %s: %d bytes differ", ref.Key, len(c.Data))
					}
				}
				// Short already: nothing to do.
				if _, ok, err := short.Shorten(ctx, "r", got); ok || err != nil {
					t.Errorf("Shorten(short pointer %d) = %v, %v, want false", i, ok, err)
				}
				// Another run's store view holds none of it.
				if again, ok, err := short.Shorten(ctx, "other", p); ok || err != nil || !reflect.DeepEqual(again, p) {
					t.Errorf("Shorten in another run = %v, %v, want the pointer unchanged", ok, err)
				}
				// A hook with full pointers has nothing shorter.
				if _, ok, err := full.Shorten(ctx, "r", p); ok || err != nil {
					t.Errorf("full hook's Shorten = %v, %v, want false", ok, err)
				}
			}
			// Not a pointer, or a pointer without references.
			if _, ok, err := short.Shorten(ctx, "r", results[0]); ok || err != nil {
				t.Errorf("Shorten(a result) = %v, %v", ok, err)
			}
			// A pointer whose metadata records paths alone, as Haystack's
			// does: the short form names the store's key.
			byPath := ptrs[0]
			byPath.Meta = map[string]any{hook.MetaKey: []any{hook.References(ptrs[0])[0].Path}}
			if got, ok, err := short.Shorten(ctx, "r", byPath); !ok || err != nil || got.Parts[0].Text != want[0] {
				t.Errorf("Shorten(a pointer recorded by path) = %+v, %v, %v, want %q", got.Parts, ok, err, want[0])
			}
			bare := hook.Result{Tool: "bash", Parts: []hook.Part{hook.Text("offloaded elsewhere")}, Meta: map[string]any{hook.MetaKey: nil}}
			if _, ok, err := short.Shorten(ctx, "r", bare); ok || err != nil {
				t.Errorf("Shorten(a pointer without references) = %v, %v", ok, err)
			}
		})
	}
}

// TestShortenReadError: a part that fails to read is an error naming it, and
// the pointer is returned unchanged.
func TestShortenReadError(t *testing.T) {
	ctx := context.Background()
	s := brokenStream{hook.NewMemStore()}
	full, _ := hook.New(s, policy.MustStrategies(policy.Default(policy.Always)))
	short, _ := hook.New(s, policy.MustStrategies(policy.Default(policy.Never)), hook.WithShortPointers())
	ptrs, err := full.Offload(ctx, hook.Step{Run: "r", Number: 1}, []hook.Result{textResult("bash", "c1", 5000)})
	if err != nil {
		t.Fatal(err)
	}
	got, ok, err := short.Shorten(ctx, "r", ptrs[0])
	if err == nil || ok || !strings.Contains(err.Error(), "r/1_bash_c1.txt") || !errors.Is(err, errRead) {
		t.Errorf("Shorten of an unreadable part = %v, %v, want an error naming it", ok, err)
	}
	if !reflect.DeepEqual(got, ptrs[0]) {
		t.Errorf("Shorten changed the pointer on error: %+v", got)
	}
}
