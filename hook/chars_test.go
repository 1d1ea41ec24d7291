package hook_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/policy"
)

func TestCharsOf(t *testing.T) {
	text := strings.Repeat("é", 10) + "abc" // 23 bytes, 13 code points
	for _, c := range []struct {
		name  string
		chars int
		want  int
	}{
		{"not counted", 0, 13},
		{"counted", 13, 13},
		{"more than the bytes", 24, 13},
		{"fewer than four bytes each allow", 5, 13},
		{"negative", -1, 13},
		{"within the bytes' range is trusted", 20, 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := hook.CharsOf(hook.Item{Part: hook.Text(text), Chars: c.chars}); got != c.want {
				t.Errorf("CharsOf with Chars %d = %d, want %d", c.chars, got, c.want)
			}
		})
	}
	if got := hook.CharsOf(hook.Item{Part: hook.Text(""), Chars: 3}); got != 0 {
		t.Errorf("CharsOf of empty text = %d, want 0", got)
	}
}

// itemsStore keeps the items written through it.
type itemsStore struct {
	hook.Store
	mu    sync.Mutex
	items []hook.Item
}

func (s *itemsStore) Write(ctx context.Context, items []hook.Item) ([]hook.Stored, error) {
	s.mu.Lock()
	s.items = append(s.items, items...)
	s.mu.Unlock()
	return s.Store.Write(ctx, items)
}

// The hook hands the store the code points its policy counted, so that
// neither the store nor the pointer counts them again; a result picked
// without a policy is counted where it is needed.
func TestHookPassesCountedChars(t *testing.T) {
	is := &itemsStore{Store: hook.NewMemStore()}
	h := mustHook(t, is, policy.Default(policy.OverChars(100)))
	text := strings.Repeat("é", 300) // 600 bytes
	out := offload(t, h, step, result("t", "c", hook.Text(text), hook.Image("image/png", []byte("png"))))
	if len(is.items) != 2 || is.items[0].Chars != 300 || is.items[1].Chars != 0 {
		t.Fatalf("items written: %+v, want the text's 300 code points and 0 for the image", is.items)
	}
	if p := pointerText(t, out[0]); !strings.Contains(p, "text (300 characters)") {
		t.Errorf("pointer %q does not give the text's 300 characters", p)
	}

	is.items = nil
	out, err := h.OffloadPicked(context.Background(), hook.Step{Run: "run-7", Number: 3}, []hook.Result{result("t", "c", hook.Text(text))}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(is.items) != 1 || is.items[0].Chars != 0 {
		t.Fatalf("items written by OffloadPicked: %+v, want Chars 0", is.items)
	}
	if p := pointerText(t, out[0]); !strings.Contains(p, "text (300 characters)") {
		t.Errorf("pointer %q does not give the text's 300 characters", p)
	}
}
