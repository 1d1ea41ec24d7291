package hook_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/policy"
)

func TestH20HookRoundTrip(t *testing.T) {
	root := t.TempDir()
	s, err := hook.NewDirStore(root, hook.Durable())
	if err != nil {
		t.Fatal(err)
	}
	h, err := hook.New(s, policy.MustStrategies(
		policy.For("web_search", policy.Always),
		policy.ForGroup([]string{"read_file", "list_dir"}, policy.OverChars(4000)),
		policy.Default(policy.OverChars(8000)),
	), hook.WithPreviewChars(120))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var shape struct {
		Type           string `json:"type"`
		InitParameters struct {
			Store struct {
				Type           string         `json:"type"`
				InitParameters map[string]any `json:"init_parameters"`
			} `json:"store"`
			Strategies   map[string]json.RawMessage `json:"offload_strategies"`
			PreviewChars int                        `json:"preview_chars"`
		} `json:"init_parameters"`
	}
	if err := json.Unmarshal(b, &shape); err != nil {
		t.Fatalf("%v in %s", err, b)
	}
	if shape.Type != hook.TypeHook || shape.InitParameters.Store.Type != hook.TypeDirStore ||
		shape.InitParameters.Store.InitParameters["root"] != root || shape.InitParameters.PreviewChars != 120 ||
		shape.InitParameters.Strategies[`["read_file", "list_dir"]`] == nil {
		t.Errorf("saved hook = %s", b)
	}
	back, err := hook.Load(b)
	if err != nil {
		t.Fatal(err)
	}
	b2, err := json.Marshal(back)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != string(b2) {
		t.Errorf("round trip changed the configuration:\n%s\n%s", b, b2)
	}
}

// haystackHook is what Haystack's ToolResultOffloadHook.to_dict writes.
const haystackHook = `{
  "type": "haystack.hooks.tool_result_offloading.hooks.ToolResultOffloadHook",
  "init_parameters": {
    "store": {"type": "haystack.hooks.tool_result_offloading.stores.FileSystemToolResultStore", "init_parameters": {"root": "ROOT"}},
    "offload_strategies": {
      "web_search": {"type": "haystack.hooks.tool_result_offloading.policies.AlwaysOffload", "init_parameters": {}},
      "get_time": {"type": "haystack.hooks.tool_result_offloading.policies.NeverOffload", "init_parameters": {}},
      "[\"read_file\", \"list_dir\"]": {"type": "haystack.hooks.tool_result_offloading.policies.OffloadOverChars", "init_parameters": {"threshold": 4}},
      "*": {"type": "haystack.hooks.tool_result_offloading.policies.OffloadOverChars", "init_parameters": {"threshold": 8000}}
    },
    "preview_chars": 200
  }
}`

func TestH20LoadsHaystackConfig(t *testing.T) {
	root := t.TempDir()
	h, err := hook.Load([]byte(strings.Replace(haystackHook, "ROOT", root, 1)))
	if err != nil {
		t.Fatal(err)
	}
	out := offload(t, h, hook.Step{Run: "r", Number: 1},
		result("web_search", "a", hook.Text("x")),
		result("get_time", "b", hook.Text("12:00 and more text")),
		result("list_dir", "c", hook.Text("a\nb\nc\n")),
	)
	want := []bool{true, false, true}
	for i, r := range out {
		if hook.IsPointer(r) != want[i] {
			t.Errorf("%s offloaded = %v, want %v", r.Tool, hook.IsPointer(r), want[i])
		}
	}
	if p := hook.References(out[0])[0].Path; p != filepath.Join(root, "r", "1_web_search_a.txt") {
		t.Errorf("Haystack's file store wrote %s", p)
	}
}

func TestLoadRefusesBadConfig(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"type": "other.Hook", "init_parameters": {}}`, "unknown hook type"},
		{`{"type": "toolcas.hook.Hook", "init_parameters": {"preview_chars": 5}}`, "no offload_strategies"},
		{`{"type": "toolcas.hook.Hook", "init_parameters": {"offload_strategies": {}, "store": {"type": "x.Store", "init_parameters": {}}}}`, "unknown store type"},
		{`{"type": "toolcas.hook.Hook", "init_parameters": {"offload_strategies": {}, "store": {"type": "toolcas.store.Store", "init_parameters": {"root": "x"}}}}`,
			`import _ "github.com/toolcas/toolcas/store"`},
		{`{"type": "toolcas.hook.Hook", "init_parameters": {"offload_strategies": {}, "preview_chars": -1}}`, "preview"},
		{`{"type": "toolcas.hook.Hook", "init_parameters": {"offload_strategies": {}, "previewchars": 1}}`, "unknown field"},
		{`{"type": "toolcas.hook.Hook", "init_parameters": {"offload_strategies": {}, "store": {"type": "toolcas.hook.DirStore", "init_parameters": {}}}}`, "no root"},
	} {
		if _, err := hook.Load([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Load(%s) = %v, want an error saying %q", tc.in, err, tc.want)
		}
	}
	if _, err := json.Marshal(mustHook(t, failingStore{})); err == nil {
		t.Error("a hook with a store that cannot be saved was saved")
	}
}

// RegisterStore refuses what policy.Register refuses: a name registered
// twice, an empty name, a nil loader.
func TestRegisterStorePanics(t *testing.T) {
	load := func(json.RawMessage) (hook.Store, error) { return hook.NewMemStore(), nil }
	hook.RegisterStore("example.RegisteredOnce", load)
	for _, tc := range []struct {
		name string
		f    func()
	}{
		{"twice", func() { hook.RegisterStore("example.RegisteredOnce", load) }},
		{"a built-in's name", func() { hook.RegisterStore(hook.TypeDirStore, load) }},
		{"an alias taken", func() { hook.RegisterStore("example.Other", load, "example.RegisteredOnce") }},
		{"empty", func() { hook.RegisterStore("", load) }},
		{"nil loader", func() { hook.RegisterStore("example.Nil", nil) }},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("RegisterStore %s did not panic", tc.name)
				}
			}()
			tc.f()
		}()
	}
}

// closingStore counts its Close calls.
type closingStore struct {
	*hook.MemStore
	closed *int
}

func (s closingStore) Close() error { *s.closed++; return nil }

// Close closes the store Load opened, once however often it is called, and
// leaves alone a store handed to New, which its maker closes.
func TestCloseClosesTheStoreLoadOpened(t *testing.T) {
	var closed int
	hook.RegisterStore("example.Closing", func(json.RawMessage) (hook.Store, error) {
		return closingStore{hook.NewMemStore(), &closed}, nil
	})
	h, err := hook.Load([]byte(`{"type": "toolcas.hook.Hook", "init_parameters": {
		"store": {"type": "example.Closing", "init_parameters": {}}, "offload_strategies": {}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if closed != 1 {
		t.Errorf("Close of a loaded hook closed its store %d times, want once", closed)
	}
	mine := mustHook(t, closingStore{hook.NewMemStore(), &closed})
	if err := mine.Close(); err != nil || closed != 1 {
		t.Errorf("Close of a hook made by New closed the store it was given (%v)", err)
	}
}
