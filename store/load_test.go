package store

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/hook"
)

// TestLoadValidatesBeforeCreating: hook.Load refuses a negative threshold,
// an absurd preview_chars and a 10 MB tool name with errors naming them,
// and creates no store for a configuration it refuses.
func TestLoadValidatesBeforeCreating(t *testing.T) {
	config := func(dir, strategies string, preview string) []byte {
		store, _ := json.Marshal(map[string]any{"type": TypeStore, "init_parameters": map[string]any{"dir": dir}})
		return []byte(`{"type": "` + hook.TypeHook + `", "init_parameters": {"store": ` + string(store) +
			`, "offload_strategies": ` + strategies + `, "preview_chars": ` + preview + `}}`)
	}
	overChars := func(n string) string {
		return `{"type": "toolcas.policy.OverChars", "init_parameters": {"threshold": ` + n + `}}`
	}
	huge := strings.Repeat("t", 10<<20)
	for _, tc := range []struct {
		name, strategies, preview, want string
	}{
		{"negative threshold", `{"*": ` + overChars("-5") + `}`, "200", "threshold -5 is negative"},
		{"absurd preview", `{"*": ` + overChars("100") + `}`, "9223372036854775807", "preview of 9223372036854775807 characters"},
		{"10 MB tool name", `{"` + huge + `": ` + overChars("100") + `}`, "200", "tool name of 10485760 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			h, err := hook.Load(config(dir, tc.strategies, tc.preview))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load = %v, %v; want an error saying %q", h, err, tc.want)
			}
			if len(err.Error()) > 1000 {
				t.Errorf("error of %d bytes", len(err.Error()))
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("a refused configuration created %s: %v", dir, err)
			}
		})
	}
	dir := filepath.Join(t.TempDir(), "store")
	if _, err := hook.Load(config(dir, `{"*": `+overChars("100")+`}`, "200")); err != nil {
		t.Fatalf("a valid configuration: %v", err)
	}
	if !Exists(dir) {
		t.Error("a valid configuration did not create its store")
	}
}
