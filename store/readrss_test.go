package store

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/internal/procstat"
)

// repeatReader yields n copies of one byte without holding them.
type repeatReader struct {
	b    byte
	left int64
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), r.left))
	for i := range p[:n] {
		p[i] = r.b
	}
	r.left -= int64(n)
	return n, nil
}

func init() {
	// readrss DIR: store 50 MiB of line breaks and a 16 MiB single line,
	// then read each back with the read-back tool, limit 1, and print how
	// big each result was and how long it took.
	lockRoles["readrss"] = func(a []string) error {
		ctx := context.Background()
		s, err := Open(ctx, a[0], WithCreate(), WithDurability(cas.SyncNone))
		if err != nil {
			return err
		}
		defer s.Close()
		for i, src := range []*repeatReader{{'\n', 50 << 20}, {'a', 16 << 20}} {
			if _, err := s.Put(ctx, StreamPart{Key: hook.Key{Run: "rss", Step: i, Tool: "t", CallID: "c", Part: -1}}, src); err != nil {
				return err
			}
		}
		rt, err := hook.NewReadTool(s)
		if err != nil {
			return err
		}
		for i := range 2 {
			args, _ := json.Marshal(hook.ReadArgs{Ref: fmt.Sprintf("rss/%d_t_c.txt", i), Limit: 1})
			start := time.Now()
			r := rt.Call(ctx, "rss", "c", args)
			if r.Error {
				return fmt.Errorf("read %d: %s", i, r.Parts[0].Text)
			}
			head, _, _ := strings.Cut(r.Parts[0].Text, "\n")
			fmt.Printf("READ %d %d %v %s\n", i, len(r.Parts[0].Text), time.Since(start).Round(time.Millisecond), head)
		}
		fmt.Println("HWM_KIB", procstat.PeakRSSKiB())
		return nil
	}
}

// TestReadToolRSS reads back, with limit 1, a 50 MiB text of line breaks and
// a 16 MiB single line in a process of their own: its peak resident set
// stays far below the blobs' sizes, and each result within the byte budget.
func TestReadToolRSS(t *testing.T) {
	if testing.Short() {
		t.Skip("stores 66 MiB; skipped with -short")
	}
	cmd := childCmd("readrss", t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var rss int64 = -1
	reads := 0
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "HWM_KIB "); ok {
			rss, _ = strconv.ParseInt(v, 10, 64)
		}
		f := strings.Fields(line)
		if len(f) < 4 || f[0] != "READ" {
			continue
		}
		reads++
		n, _ := strconv.Atoi(f[2])
		t.Logf("blob %s: %d bytes back in %s: %s", f[1], n, f[3], strings.Join(f[4:], " "))
		if n > hook.DefaultReadBytes {
			t.Errorf("blob %s: result of %d bytes, over the budget", f[1], n)
		}
	}
	if reads != 2 || rss <= 0 {
		t.Fatalf("child output:\n%s", out)
	}
	t.Logf("peak RSS of the reading process: %d KiB", rss)
	if rss >= 64<<10 {
		t.Errorf("peak RSS %d KiB, want < 65536 KiB", rss)
	}
}
