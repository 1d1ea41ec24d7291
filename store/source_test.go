package store

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/hook"
)

// source returns a Source of data that counts its opens.
func source(data []byte, chars int64, opens *int) *hook.Source {
	return &hook.Source{
		Open: func() (io.ReadCloser, error) {
			*opens++
			return io.NopCloser(bytes.NewReader(data)), nil
		},
		Size: int64(len(data)), Chars: chars, Head: data[:min(len(data), hook.HeadLen)],
	}
}

// TestWriteStreamsSources: a step whose parts come from Sources is written
// as any other (one part held in memory beside them), each Source read once;
// the parts read back byte for byte, with their sizes. A Source that gives
// fewer bytes than it said fails the whole step, and nothing of it is
// recorded.
func TestWriteStreamsSources(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	text := strings.Repeat("streamed ∑ text\n", 50000)
	bin := bytes.Repeat([]byte{0, 1, 2, 0xff}, 100000)
	opens := 0
	k := func(step, part int, ext string) hook.Key {
		return hook.Key{Run: "r", Step: step, Tool: "t", CallID: "c", Part: part, Ext: ext}
	}
	items := []hook.Item{
		{Key: k(1, 0, ".txt"), Part: hook.Part{Kind: hook.KindText, Source: source([]byte(text), int64(len([]rune(text))), &opens)}},
		{Key: k(1, 1, ".bin"), Part: hook.Part{Kind: hook.KindFile, MIME: "application/octet-stream", Source: source(bin, int64(len(bin)*4/3), &opens)}},
		{Key: k(1, 2, ".txt"), Part: hook.Text("held in memory")},
	}
	st, err := s.Write(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	if opens != 2 {
		t.Errorf("the sources were opened %d times, want once each", opens)
	}
	for i, want := range [][]byte{[]byte(text), bin, []byte("held in memory")} {
		c, err := s.Read(ctx, "r", st[i].Key)
		if err != nil || !bytes.Equal(c.Data, want) {
			t.Errorf("part %d read back %d bytes (%v), want %d", i, len(c.Data), err, len(want))
		}
	}
	p, err := s.Show(ctx, st[0].Key)
	if err != nil || p.Part.Bytes != int64(len(text)) || p.Part.Chars != int64(len([]rune(text))) {
		t.Errorf("show: %+v, %v", p, err)
	}

	short := source([]byte(text), 1, &opens)
	short.Size++ // says one byte more than it gives
	_, err = s.Write(ctx, []hook.Item{
		{Key: k(2, 0, ".txt"), Part: hook.Text("first")},
		{Key: k(2, 1, ".txt"), Part: hook.Part{Kind: hook.KindText, Source: short}},
	})
	if err == nil || !strings.Contains(err.Error(), "said") {
		t.Fatalf("a source short of its size: %v", err)
	}
	broken := &hook.Source{Open: func() (io.ReadCloser, error) { return nil, errors.New("spool gone") }, Size: 3}
	if _, err := s.Write(ctx, []hook.Item{{Key: k(3, -1, ".txt"), Part: hook.Part{Kind: hook.KindText, Source: broken}}}); err == nil || !strings.Contains(err.Error(), "spool gone") {
		t.Errorf("a source that cannot open: %v", err)
	}
	parts, err := s.List(ctx, ListOptions{})
	if err != nil || len(parts) != 3 {
		t.Errorf("after the failed steps: %d parts (%v), want the first step's 3", len(parts), err)
	}
}
