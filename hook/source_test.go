package hook_test

import (
	"bytes"
	"context"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/policy"
)

// textSource is a text part's Source over s.
func textSource(s string) hook.Part {
	return hook.Part{Kind: hook.KindText, Source: &hook.Source{
		Open: func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(s)), nil },
		Size: int64(len(s)), Chars: int64(len([]rune(s))), Head: []byte(s[:min(len(s), hook.HeadLen)]),
	}}
}

// TestSourcePartsLikeHeldOnes: a part whose content comes from a Source is
// offloaded as the same part held in memory would be: the policy sees its
// size without reading it, the pointer says the same (its preview from the
// head, cut on a code point), and the store gets the same bytes. An empty
// Source stays in context.
func TestSourcePartsLikeHeldOnes(t *testing.T) {
	text := strings.Repeat("é", 3) + strings.Repeat("streamed text ", 3000)
	src := textSource(text)
	src.Source.Head = src.Source.Head[:4] // "é" and half of the next "é"
	ms := hook.NewMemStore()
	h := mustHook(t, ms, policy.Default(policy.OverChars(len([]rune(text))-1)))
	held := mustHook(t, hook.NewMemStore(), policy.Default(policy.OverChars(len([]rune(text))-1)))
	got := offload(t, h, step, result("t", "c", src))[0]
	want := offload(t, held, step, result("t", "c", hook.Text(text)))[0]
	if !strings.HasPrefix(pointerText(t, got), "Tool result offloaded to text (") || !strings.Contains(pointerText(t, got), "Preview: éé...") {
		t.Errorf("pointer of a source: %s", pointerText(t, got))
	}
	if n := len([]rune(text)); !strings.Contains(pointerText(t, got), "text ("+strconv.Itoa(n)+" characters)") || !strings.Contains(pointerText(t, want), "text ("+strconv.Itoa(n)+" characters)") {
		t.Errorf("pointers disagree on the size:\n%s\n%s", pointerText(t, got), pointerText(t, want))
	}
	c, err := ms.Read(context.Background(), step.Run, hook.References(got)[0].Key)
	if err != nil || !bytes.Equal(c.Data, []byte(text)) {
		t.Errorf("read back %d bytes (%v), want %d", len(c.Data), err, len(text))
	}
	under := mustHook(t, hook.NewMemStore(), policy.Default(policy.OverChars(len([]rune(text)))))
	if out := offload(t, under, step, result("t", "c", textSource(text)))[0]; hook.IsPointer(out) {
		t.Error("a source at the threshold was offloaded")
	}
	if out := offload(t, h, step, result("t", "c", textSource("")))[0]; hook.IsPointer(out) {
		t.Error("an empty source was offloaded")
	}
}
