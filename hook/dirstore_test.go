package hook_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolcas/toolcas/hook"
)

// TestH18DirStoreCreatesRootOnFirstWrite: building or loading a DirStore
// creates nothing, reading one that was never written finds nothing, and
// the first write creates the root, as Haystack's store does.
func TestH18DirStoreCreatesRootOnFirstWrite(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "a", "tool_results")
	s, err := hook.NewDirStore(root, hook.Durable())
	if err != nil {
		t.Fatal(err)
	}
	cfg := `{"type": "toolcas.hook.Hook", "init_parameters": {"offload_strategies": {"*": {"type": "toolcas.policy.Always", "init_parameters": {}}},
		"store": {"type": "haystack.hooks.tool_result_offloading.FileSystemToolResultStore", "init_parameters": {"root": ` + mustQuote(root) + `}}}}`
	if _, err := hook.Load([]byte(cfg)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(root)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("building and loading a DirStore created %s (%v)", filepath.Dir(root), err)
	}
	if _, err := s.Read(ctx, "", "r/1_t_c.txt"); !errors.Is(err, hook.ErrNotFound) {
		t.Errorf("Read before any write = %v, want ErrNotFound", err)
	}
	k := hook.Key{Run: "r", Step: 1, Tool: "t", CallID: "c", Part: -1, Ext: ".txt"}
	st, err := s.Write(ctx, []hook.Item{{Key: k, Part: hook.Text("x")}})
	if err != nil {
		t.Fatal(err)
	}
	if st[0].Path != filepath.Join(root, "r", "1_t_c.txt") {
		t.Errorf("path %s", st[0].Path)
	}
	if c, err := s.Read(ctx, "r", st[0].Key); err != nil || string(c.Data) != "x" {
		t.Errorf("Read after the first write = %v, %v", c, err)
	}
}

// TestH20DirStoreRelativeRoot: a relative root is saved as it was given,
// not as the absolute path it resolved to.
func TestH20DirStoreRelativeRoot(t *testing.T) {
	t.Chdir(t.TempDir())
	s, err := hook.NewDirStore("tool_results")
	if err != nil {
		t.Fatal(err)
	}
	typ, params := s.StoreConfig()
	b, _ := json.Marshal(params)
	if typ != hook.TypeDirStore || string(b) != `{"durable":false,"root":"tool_results"}` {
		t.Errorf("StoreConfig() = %s %s, want the root as given", typ, b)
	}
	if wd, _ := os.Getwd(); s.Root() != filepath.Join(wd, "tool_results") {
		t.Errorf("Root() = %s", s.Root())
	}
	if _, err := os.Stat("tool_results"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("NewDirStore created its root: %v", err)
	}
	if _, err := hook.NewDirStore(""); err == nil {
		t.Error("NewDirStore(\"\") accepted")
	}
}

func mustQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
