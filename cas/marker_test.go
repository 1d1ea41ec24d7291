package cas

import (
	"errors"
	"strings"
	"testing"
)

// TestCheckMarker checks the layout marker every backend reads: its own
// content passes, a newer format says to upgrade, damage and other layouts
// are named.
func TestCheckMarker(t *testing.T) {
	for _, tc := range []struct {
		name  string
		data  string
		isErr error
		says  string
	}{
		{"written by this build", string(MarkerContent()), nil, ""},
		{"newer format", `{"format":9,"hash":"blake3","shard_width":2}`, ErrNewerFormat, "upgrade toolcas"},
		{"damaged", `{"format":`, nil, "M is damaged"},
		{"other hash", `{"format":1,"hash":"sha256","shard_width":2}`, nil, `names hash "sha256"`},
		{"other width", `{"format":1,"hash":"blake3","shard_width":3}`, nil, "shard width 3"},
		{"no format", `{"hash":"blake3","shard_width":2}`, nil, "format 0"},
	} {
		err := CheckMarker([]byte(tc.data), "M", "S")
		if tc.says == "" {
			if err != nil {
				t.Errorf("%s: CheckMarker = %v, want nil", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.says) || (tc.isErr != nil && !errors.Is(err, tc.isErr)) {
			t.Errorf("%s: CheckMarker = %v, want an error saying %q", tc.name, err, tc.says)
		}
	}
}
