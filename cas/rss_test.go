package cas

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/internal/procstat"
)

// genReader yields n deterministic pseudo-random bytes without holding them.
type genReader struct {
	left int64
	x    uint64
	word [8]byte
	used int // bytes of word already handed out
}

func newGenReader(n int64, seed uint64) *genReader { return &genReader{left: n, x: seed | 1, used: 8} }

func (g *genReader) Read(p []byte) (int, error) {
	if g.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > g.left {
		p = p[:g.left]
	}
	n := 0
	for n < len(p) {
		if g.used == 8 {
			if len(p)-n >= 8 {
				g.next()
				binary.LittleEndian.PutUint64(p[n:], g.x)
				n += 8
				continue
			}
			g.next()
			binary.LittleEndian.PutUint64(g.word[:], g.x)
			g.used = 0
		}
		c := copy(p[n:], g.word[g.used:])
		g.used += c
		n += c
	}
	g.left -= int64(n)
	return n, nil
}

func (g *genReader) next() {
	g.x ^= g.x << 13
	g.x ^= g.x >> 7
	g.x ^= g.x << 17
}

const rssChildEnv = "TOOLCAS_TEST_RSS_CHILD"

// TestStreamingPutRSS puts a 256 MiB generated stream in a separate process
// and checks that process's peak resident set stays under 64 MiB.
func TestStreamingPutRSS(t *testing.T) {
	if dir := os.Getenv(rssChildEnv); dir != "" {
		rssChild(dir)
		return
	}
	if testing.Short() {
		t.Skip("writes 256 MiB; skipped with -short")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestStreamingPutRSS$", "-test.v")
	cmd.Env = append(os.Environ(), rssChildEnv+"="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var hwm, size int64 = -1, -1
	var match bool
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "HWM_KIB "); ok {
			hwm, _ = strconv.ParseInt(v, 10, 64)
		}
		if v, ok := strings.CutPrefix(line, "SIZE "); ok {
			size, _ = strconv.ParseInt(v, 10, 64)
		}
		if line == "DIGEST_MATCH true" {
			match = true
		}
	}
	if hwm < 0 || size < 0 {
		t.Fatalf("child printed no figures:\n%s", out)
	}
	t.Logf("put %d MiB with peak RSS %d KiB", size>>20, hwm)
	if size != 256<<20 {
		t.Errorf("stored %d bytes, want %d", size, 256<<20)
	}
	if !match {
		t.Error("stored digest does not match the stream's")
	}
	if hwm >= 64<<10 {
		t.Errorf("peak RSS %d KiB, want < 65536 KiB", hwm)
	}
}

func rssChild(dir string) {
	ctx := context.Background()
	const size = 256 << 20
	s, err := Open(ctx, dir, WithCreate())
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	res, err := s.Put(ctx, newGenReader(size, 42), ".bin")
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	h := NewHash()
	io.CopyBuffer(h, newGenReader(size, 42), make([]byte, 64<<10))
	var want Digest
	h.Sum(want[:0])
	fmt.Println("SIZE", res.Size)
	fmt.Println("DIGEST_MATCH", want == res.Blob.Digest)
	fmt.Println("HWM_KIB", procstat.PeakRSSKiB())
}
