package mcp_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/internal/procstat"
	"github.com/toolcas/toolcas/mcp"
	"github.com/toolcas/toolcas/store"
)

// lineSource yields n bytes of numbered lines of about 80 bytes, without
// holding them: line i is "line i " and dots up to 79 bytes, then a break.
type lineSource struct {
	n, off int64
	line   int
	buf    []byte
}

func (s *lineSource) Read(p []byte) (int, error) {
	if s.off == s.n {
		return 0, io.EOF
	}
	k := 0
	for k < len(p) && s.off < s.n {
		if len(s.buf) == 0 {
			s.line++
			l := fmt.Sprintf("line %d ", s.line)
			s.buf = []byte(l + strings.Repeat(".", 79-len(l)) + "\n")
		}
		c := copy(p[k:], s.buf[:min(int64(len(s.buf)), s.n-s.off)])
		s.buf = s.buf[c:]
		k += c
		s.off += int64(c)
	}
	return k, nil
}

// binSource yields n bytes of a PNG: its signature, then bytes that are
// no UTF-8, without holding them.
func binSource(n int64) io.Reader {
	const sig = "\x89PNG\r\n\x1a\n"
	return io.MultiReader(strings.NewReader(sig), io.LimitReader(&byteCycle{}, n-int64(len(sig))))
}

type byteCycle struct{ i int }

func (b *byteCycle) Read(p []byte) (int, error) {
	for k := range p {
		p[k] = byte(b.i % 251)
		b.i++
	}
	return len(p), nil
}

// putPart streams src into the store as one part of tool, whose kind the
// store tells from its bytes.
func putPart(t testing.TB, st *store.Store, tool, mime string, src io.Reader) string {
	t.Helper()
	res, err := st.Put(context.Background(), store.StreamPart{Key: hook.Key{Run: "big", Step: 1, Tool: tool, CallID: "c", Part: -1}, MIME: mime}, src)
	if err != nil {
		t.Fatal(err)
	}
	return res.Key
}

var notePattern = regexp.MustCompile(`\[toolcas: lines 1-(\d+) of the (\d+) lines of (\S+) \((\d+) of (\d+) bytes\); resources/read returns at most (\d+) bytes\. Read on with the tool (\S+) \{"ref": "[^"]+", "offset": (\d+)\}`)

// TestResourceReadBounded: resources/read of a part over the server's
// limit returns at most the limit: a text's first lines and a note saying
// how to read on, which the read tool follows; a single long line cut on
// a character; binary content as a note of its size, no byte of it.
func TestResourceReadBounded(t *testing.T) {
	st := openStore(t)
	const limit = 16 << 10
	textKey := putPart(t, st, "log", "text/plain", &lineSource{n: 1 << 20})
	lineKey := putPart(t, st, "line", "text/plain", strings.NewReader(strings.Repeat("ü", 40<<10)))
	binKey := putPart(t, st, "shot", "image/png", binSource(1<<20))
	smallKey := putPart(t, st, "small", "text/plain", &lineSource{n: limit})
	cs := serveClient(t, st, mcp.WithMaxResourceBytes(limit))
	ctx := context.Background()
	read := func(key string) *sdk.ResourceContents {
		t.Helper()
		rr, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: mcp.ResourceURI(key)})
		if err != nil {
			t.Fatalf("resources/read %s: %v", key, err)
		}
		if len(rr.Contents) != 1 {
			t.Fatalf("resources/read %s: %d contents", key, len(rr.Contents))
		}
		c := rr.Contents[0]
		if n := len(c.Text) + len(c.Blob); n > limit {
			t.Errorf("resources/read %s: %d bytes back, over the %d-byte limit", key, n, limit)
		}
		return c
	}

	// A text within the limit comes back whole.
	whole, _ := io.ReadAll(&lineSource{n: limit})
	if c := read(smallKey); c.Text != string(whole) {
		t.Errorf("resources/read of a text of the limit's size: %d bytes back, want all %d", len(c.Text), limit)
	}

	// A longer text: whole lines, then the note.
	c := read(textKey)
	m := notePattern.FindStringSubmatch(c.Text)
	if m == nil {
		t.Fatalf("resources/read of a 1 MiB text: no note saying how to read on in\n%s", c.Text[max(0, len(c.Text)-600):])
	}
	lines, _ := strconv.Atoi(m[1])
	if m[2] != "13108" || m[3] != textKey || m[5] != strconv.Itoa(1<<20) || m[6] != strconv.Itoa(limit) || m[7] != mcp.ReadToolName || m[8] != m[1] {
		t.Errorf("note %q: want 13108 lines of %s, %d bytes, limit %d, tool %s, offset = lines shown", m[0], textKey, 1<<20, limit, mcp.ReadToolName)
	}
	all, _ := io.ReadAll(&lineSource{n: 1 << 20})
	if page := c.Text[:strings.LastIndex(c.Text, "[toolcas:")]; lines < 100 || page != string(all[:len(page)]) || strings.Count(page, "\n") != lines {
		t.Errorf("page of %d lines (%d bytes) is not the text's first lines", lines, len(page))
	}
	if c.Meta["toolcas/truncated"] != true || c.MIMEType != "text/plain" {
		t.Errorf("page's meta %v, MIME %s: want it marked truncated, text/plain", c.Meta, c.MIMEType)
	}
	// The note's arguments read on from the next line.
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: mcp.ReadToolName, Arguments: map[string]any{"ref": textKey, "offset": lines, "limit": 1}})
	if err != nil || res.IsError {
		t.Fatalf("read on: %v %s", err, jsonOf(t, res))
	}
	if got, want := res.Content[0].(*sdk.TextContent).Text, fmt.Sprintf("\n%d\tline %d ", lines+1, lines+1); !strings.Contains(got, want) {
		t.Errorf("reading on at offset %d gave %q, want line %d", lines, got, lines+1)
	}

	// One line longer than the limit: cut on a character, read on by byte.
	c = read(lineKey)
	page, note, ok := strings.Cut(c.Text, "\n[toolcas: the first ")
	if !ok || page != strings.Repeat("ü", len(page)/2) || !strings.Contains(note, fmt.Sprintf(`"byte_offset": %d}`, len(page))) {
		t.Errorf("resources/read of an 80 KiB line: %d bytes, then %q", len(page), note)
	}

	// Binary content over the limit: a note, no byte of it.
	c = read(binKey)
	if len(c.Blob) != 0 || c.MIMEType != "text/plain" || c.Meta["toolcas/mimeType"] != "image/png" ||
		!strings.Contains(c.Text, fmt.Sprintf("%s is %d bytes of image/png", binKey, 1<<20)) || !strings.Contains(c.Text, "casctl get "+binKey) {
		t.Errorf("resources/read of a 1 MiB image = %s", jsonOf(t, c))
	}

	if _, err := mcp.NewStoreServer(st, mcp.WithMaxResourceBytes(100)); err == nil {
		t.Error("a resource limit of 100 bytes accepted")
	}
}

// TestProxyResourceReadBounded: the proxy's toolcas:// resources obey its
// limit, and the note names the read-back tool as the session knows it.
func TestProxyResourceReadBounded(t *testing.T) {
	r := newRig(t, newFake(nil), mcp.WithMaxResourceBytes(4<<10))
	ctx := context.Background()
	res := r.call(t, "big", nil)
	uri := offloaded(t, res)[0]["uri"].(string)
	rr, err := r.client.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatal(err)
	}
	c := rr.Contents[0]
	m := notePattern.FindStringSubmatch(c.Text)
	if len(c.Text) > 4<<10 || m == nil || m[5] != strconv.Itoa(len(bigText)) || m[7] != mcp.ReadToolName {
		t.Errorf("resources/read through the proxy with a 4 KiB limit: %d bytes:\n%s", len(c.Text), c.Text[max(0, len(c.Text)-500):])
	}
	if !strings.HasPrefix(bigText, c.Text[:strings.LastIndex(c.Text, "[toolcas:")]) {
		t.Error("the page is not the text's beginning")
	}
}

// TestResourceReadRSS reads, through mcp serve's server, a 100 MiB text
// part and a 100 MiB image part as resources, in a process of its own: its
// peak resident set grows by far less than the parts' size.
func TestResourceReadRSS(t *testing.T) {
	if dir := os.Getenv("TOOLCAS_TEST_RESOURCE_RSS"); dir != "" {
		resourceReadChild(t, dir)
		return
	}
	if runtime.GOOS == "windows" {
		t.Skip("no peak resident set size on windows")
	}
	if testing.Short() {
		t.Skip("stores 200 MiB; skipped with -short")
	}
	dir := t.TempDir()
	st, err := store.Open(context.Background(), dir, store.WithCreate(), store.WithDurability(store.SyncNone))
	if err != nil {
		t.Fatal(err)
	}
	putPart(t, st, "log", "text/plain", &lineSource{n: 100 << 20})
	putPart(t, st, "shot", "image/png", binSource(100<<20))
	st.Close()
	start, peak := childRSS(t, "TestResourceReadRSS", "TOOLCAS_TEST_RESOURCE_RSS="+dir, "READ ")
	t.Logf("peak RSS %d KiB, %d KiB before the reads", peak, start)
	if peak-start >= 64<<10 {
		t.Errorf("reading 100 MiB parts as resources raised the peak RSS by %d KiB, want < 65536 KiB", peak-start)
	}
}

// resourceReadChild is TestResourceReadRSS's process.
func resourceReadChild(t *testing.T, dir string) {
	ctx := context.Background()
	st, err := store.Open(ctx, dir, store.ReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cs := serveClient(t, st)
	runtime.GC()
	fmt.Println("START_KIB", procstat.PeakRSSKiB())
	for _, key := range []string{"big/1_log_c.txt", "big/1_shot_c.png"} {
		rr, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: mcp.ResourceURI(key)})
		if err != nil {
			t.Fatalf("resources/read %s: %v", key, err)
		}
		c := rr.Contents[0]
		fmt.Printf("READ %s: %d bytes of text, %d of blob\n", key, len(c.Text), len(c.Blob))
	}
	fmt.Println("PEAK_KIB", procstat.PeakRSSKiB())
}

// childRSS runs the test named test again in a child process with env set,
// which prints START_KIB and PEAK_KIB lines, and returns them; it logs the
// child's lines that start with logPrefix.
func childRSS(t *testing.T, test, env, logPrefix string) (start, peak int64) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.v")
	cmd.Env = append(os.Environ(), env)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	start, peak = -1, -1
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "START_KIB "); ok {
			start, _ = strconv.ParseInt(v, 10, 64)
		}
		if v, ok := strings.CutPrefix(line, "PEAK_KIB "); ok {
			peak, _ = strconv.ParseInt(v, 10, 64)
		}
		if strings.HasPrefix(line, logPrefix) {
			t.Log(line)
		}
	}
	if start <= 0 || peak <= 0 {
		t.Fatalf("child output:\n%s", out)
	}
	return start, peak
}
