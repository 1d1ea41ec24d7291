package hook_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/toolcas/toolcas/hook"
)

// storeText offloads one text result and returns a read tool over its
// store and the part's key.
func storeText(t *testing.T, text string, opts ...hook.Option) (*hook.ReadTool, string) {
	t.Helper()
	s := hook.NewMemStore()
	out := offload(t, mustHook(t, s), hook.Step{Run: "r", Number: 1}, result("t", "c", hook.Text(text)))
	rt, err := hook.NewReadTool(s, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return rt, hook.References(out[0])[0].Key
}

var readOn = regexp.MustCompile(`read on with offset=(\d+) byte_offset=(\d+)`)

// TestReadToolByteBudget: limit=1 on a 10 MB single line returns no more
// than the byte budget, cut with a marker that says how to read on; paging
// on with it gives back the whole line, characters whole.
func TestReadToolByteBudget(t *testing.T) {
	// Multi-byte characters, so that cuts land inside them.
	unit := "aé€😀"
	line := strings.Repeat(unit, (10<<20)/len(unit))
	rt, key := storeText(t, line+"\nsecond line\n")
	got := read(t, rt, "r", hook.ReadArgs{Ref: key, Limit: 1})
	if len(got) > hook.DefaultReadBytes {
		t.Fatalf("limit=1 on a 10 MB line returned %d bytes, want at most the %d-byte budget and a header", len(got), hook.DefaultReadBytes)
	}
	head, _, _ := strings.Cut(got, "\n")
	if !strings.Contains(head, "lines 1-1 of 2") || !strings.Contains(head, "bytes of the text follow") || !readOn.MatchString(head) {
		t.Errorf("header %q: want the lines, how much follows, and how to read on", head)
	}
	// Page on through a shorter line with the markers.
	line = strings.Repeat(unit, (300<<10)/len(unit))
	rt, key = storeText(t, line+"\nsecond line\n")
	var b strings.Builder
	a := hook.ReadArgs{Ref: key, Limit: 1}
	for pages := 0; ; pages++ {
		if pages > 400 {
			t.Fatal("paging on never ends")
		}
		got := read(t, rt, "r", a)
		if !utf8.ValidString(got) {
			t.Fatal("a page cut a character in two")
		}
		if len(got) > hook.DefaultReadBytes {
			t.Fatalf("page of %d bytes", len(got))
		}
		lines := strings.SplitN(got, "\n", 2)
		content, ok := strings.CutPrefix(lines[1], "1\t")
		if !ok {
			t.Fatalf("page %d: %q...", pages, clipText(got))
		}
		m := readOn.FindStringSubmatch(lines[0])
		if m == nil {
			b.WriteString(content)
			break
		}
		content, _, _ = strings.Cut(content, "\n[line 1 cut")
		b.WriteString(content)
		off, _ := strconv.ParseInt(m[2], 10, 64)
		if m[1] != "0" || off != int64(b.Len()) {
			t.Fatalf("page %d says read on at offset=%s byte_offset=%d, but %d bytes were shown", pages, m[1], off, b.Len())
		}
		a.ByteOffset = off
	}
	if b.String() != line {
		t.Fatalf("paging on gave back %d bytes, want the line's %d", b.Len(), len(line))
	}
	// The next line follows in the usual way.
	if got := read(t, rt, "r", hook.ReadArgs{Ref: key, Offset: 1}); !strings.HasSuffix(got, "2\tsecond line") {
		t.Errorf("second line: %q", clipText(got))
	}
}

// TestReadToolBudgetEndsPage: many lines that fit the line limit but not
// the byte budget end the page at a whole line, saying where the next one
// starts; a smaller budget can be configured.
func TestReadToolBudgetEndsPage(t *testing.T) {
	var lines []string
	for i := range 100 {
		lines = append(lines, fmt.Sprintf("%03d %s", i, strings.Repeat("x", 100)))
	}
	rt, key := storeText(t, strings.Join(lines, "\n"), hook.WithReadMaxBytes(2048))
	got := read(t, rt, "r", hook.ReadArgs{Ref: key})
	if len(got) > 2048 {
		t.Fatalf("page of %d bytes with a 2048-byte budget", len(got))
	}
	head, _, _ := strings.Cut(got, "\n")
	n := strings.Count(got, "\n")
	want := fmt.Sprintf("lines 1-%d of 100; the 2048-byte page is full", n)
	if !strings.Contains(head, want) || !strings.HasSuffix(head, fmt.Sprintf("more with offset=%d]", n)) {
		t.Errorf("header %q, want it to say %q and where to go on", head, want)
	}
	if _, err := hook.NewReadTool(nil, hook.WithReadMaxBytes(10)); err == nil {
		t.Error("a 10-byte budget was accepted")
	}
}

// TestReadToolPatternCost: a pattern whose program is too large is refused
// with a clear error; a costly search stops at the time limit rather than
// run for minutes; a canceled context stops matching inside a long line.
func TestReadToolPatternCost(t *testing.T) {
	text := strings.Repeat(strings.Repeat("a", 200<<10)+"\n", 40)
	rt, key := storeText(t, text, hook.WithReadTimeout(100*time.Millisecond))
	_, err := rt.Read(context.Background(), "r", hook.ReadArgs{Ref: key, Pattern: "a{1000}b"})
	if !errors.Is(err, hook.ErrPatternTooCostly) || !strings.Contains(err.Error(), "instructions") {
		t.Errorf("pattern a{1000}b: %v, want it refused as too costly", err)
	}
	start := time.Now()
	_, err = rt.Read(context.Background(), "r", hook.ReadArgs{Ref: key, Pattern: "a{400}b"})
	if err == nil || !strings.Contains(err.Error(), "took longer than") {
		t.Errorf("a costly search: %v, want it stopped at the time limit", err)
	}
	t.Logf("a{400}b over 40 lines of 200 KiB stopped after %v", time.Since(start).Round(time.Millisecond))

	re, err := hook.CompilePattern("a{400}b")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := hook.MatchLine(ctx, re, []byte(strings.Repeat("a", 200<<10))); !errors.Is(err, context.Canceled) {
		t.Errorf("MatchLine with a canceled context = %v, want context.Canceled", err)
	}
}

// TestLineReader reads lines of every shape: empty, no final line break,
// longer than the head, and a rest read in pieces.
func TestLineReader(t *testing.T) {
	long := strings.Repeat("z", 1000)
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"", nil},
		{"\n", []string{""}},
		{"a\n\nb", []string{"a", "", "b"}},
		{"a\nb\n", []string{"a", "b"}},
		{long + "\nx\n" + long, []string{long, "x", long}},
	} {
		lr := hook.NewLineReader(context.Background(), strings.NewReader(tc.text), 7)
		var got []string
		for lr.Next() {
			var b strings.Builder
			b.Write(lr.Head())
			if lr.Num()%2 == 0 {
				buf := make([]byte, 3)
				for {
					n, err := lr.Rest().Read(buf)
					b.Write(buf[:n])
					if err != nil {
						break
					}
				}
			} else if !lr.Whole() {
				// Len drops the rest; the test checks the length instead.
				if n := lr.Len(); n != int64(len(long)) {
					t.Errorf("Len = %d", n)
				}
				b.WriteString(long[7:])
			}
			got = append(got, b.String())
		}
		if lr.Err() != nil || strings.Join(got, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) {
			t.Errorf("%.20q: got %d lines %.40q, err %v", tc.text, len(got), got, lr.Err())
		}
	}
}

func clipText(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// TestPointerBounded: a result of 10,000 small parts gets a pointer listing
// the first parts and summing up the rest, far smaller than the content it
// replaces; every part is still stored and readable by key.
func TestPointerBounded(t *testing.T) {
	s := hook.NewMemStore()
	parts := make([]hook.Part, 10_000)
	var content int
	for i := range parts {
		parts[i] = hook.Text(fmt.Sprintf("part %05d: %s", i, strings.Repeat("x", 6)))
		content += len(parts[i].Text)
	}
	out := offload(t, mustHook(t, s), hook.Step{Run: "r", Number: 1}, result("t", "c", parts...))
	ptr := out[0].Parts[0].Text
	t.Logf("pointer of %d bytes for %d parts, %d bytes of content", len(ptr), len(parts), content)
	if len(ptr) >= content || len(ptr) > 16<<10 {
		t.Errorf("pointer of %d bytes for %d bytes of content", len(ptr), content)
	}
	if strings.Count(ptr, "\n") != hook.MaxPointerParts+1 || !strings.Contains(ptr, "21-10000. 9980 more parts (9980 text;") {
		t.Errorf("pointer does not list %d parts then sum up the rest:\n%s", hook.MaxPointerParts, ptr[max(0, len(ptr)-400):])
	}
	refs := hook.References(out[0])
	if len(refs) != len(parts) {
		t.Fatalf("%d references for %d parts", len(refs), len(parts))
	}
	rt, _ := hook.NewReadTool(s)
	if got := read(t, rt, "r", hook.ReadArgs{Ref: refs[9999].Key}); !strings.Contains(got, "part 09999") {
		t.Errorf("last part: %q", got)
	}
}

// TestReadToolTimeLimitPartial: a search that runs out of time after the
// page is found returns the page, saying how far the search went.
func TestReadToolTimeLimitPartial(t *testing.T) {
	text := "b first\n" + strings.Repeat(strings.Repeat("a", 200<<10)+"\n", 60)
	rt, key := storeText(t, text, hook.WithReadTimeout(100*time.Millisecond))
	got := read(t, rt, "r", hook.ReadArgs{Ref: key, Pattern: "^b|a{400}b"})
	head, body, _ := strings.Cut(got, "\n")
	t.Log(head)
	if !strings.Contains(head, "stopped at its 100ms time limit") || body != "1\tb first" {
		t.Errorf("a search out of time after its page: %q", clipText(got))
	}
}

// TestReadToolByteOffsetMidCharacter: a byte_offset inside a character
// starts at the next whole one; one past the line's end is an error.
func TestReadToolByteOffsetMidCharacter(t *testing.T) {
	rt, key := storeText(t, "é€x\nnext\n")
	if got := read(t, rt, "r", hook.ReadArgs{Ref: key, ByteOffset: 1}); !strings.HasSuffix(got, "1\t€x\n2\tnext") {
		t.Errorf("byte_offset 1 in \"é€x\": %q", got)
	}
	if _, err := rt.Read(context.Background(), "r", hook.ReadArgs{Ref: key, ByteOffset: 99}); err == nil || !strings.Contains(err.Error(), "past the end of line 1") {
		t.Errorf("byte_offset past the end: %v", err)
	}
}
