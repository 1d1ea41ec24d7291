package hook_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/internal/procstat"
)

// patternReader yields n bytes of a repeating pattern without holding them.
type patternReader struct{ off, n int64 }

func (r *patternReader) Read(p []byte) (int, error) {
	if r.off == r.n {
		return 0, io.EOF
	}
	k := int(min(int64(len(p)), r.n-r.off))
	for i := range p[:k] {
		p[i] = byte((r.off + int64(i)) % 251)
	}
	r.off += int64(k)
	return k, nil
}

// generatedStore is a StreamStore of one image part whose bytes are made
// as they are read: whatever memory a read takes is the read tool's.
type generatedStore struct {
	size int64
	// reads counts the bytes handed out.
	reads int64
}

func (s *generatedStore) content() *hook.Content {
	return &hook.Content{Key: "run/1_shot_c.png", Run: "run", Kind: hook.KindImage, MIME: "image/png", Size: s.size}
}

func (s *generatedStore) Write(context.Context, []hook.Item) ([]hook.Stored, error) {
	return nil, hook.ErrRefused
}
func (s *generatedStore) AcceptsBinary() bool { return true }

func (s *generatedStore) Read(_ context.Context, _, ref string) (*hook.Content, error) {
	if ref != s.content().Key {
		return nil, fmt.Errorf("%s: %w", ref, hook.ErrNotFound)
	}
	c := s.content()
	c.Data, _ = io.ReadAll(&patternReader{n: s.size})
	s.reads += s.size
	return c, nil
}

func (s *generatedStore) OpenRead(_ context.Context, _, ref string) (*hook.Content, io.ReadCloser, error) {
	if ref != s.content().Key {
		return nil, nil, fmt.Errorf("%s: %w", ref, hook.ErrNotFound)
	}
	return s.content(), io.NopCloser(&countingReader{r: &patternReader{n: s.size}, n: &s.reads}), nil
}

type countingReader struct {
	r io.Reader
	n *int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	*c.n += int64(k)
	return k, err
}

var _ hook.StreamStore = (*generatedStore)(nil)

// TestReadToolBinaryLimit: an image within MaxReadBinary comes back whole,
// read once from its stream; one over it is refused with its size and how
// to get it, and none of its bytes is read.
func TestReadToolBinaryLimit(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		size      int64
		wantErr   bool
		wantReads int64
	}{
		{3 << 20, false, 3 << 20},
		{hook.MaxReadBinary, false, hook.MaxReadBinary},
		{hook.MaxReadBinary + 1, true, 0},
		{60 << 20, true, 0},
	} {
		st := &generatedStore{size: tc.size}
		rt, err := hook.NewReadTool(st)
		if err != nil {
			t.Fatal(err)
		}
		r, err := rt.Read(ctx, "run", hook.ReadArgs{Ref: "run/1_shot_c.png"})
		if tc.wantErr {
			want := fmt.Sprintf("is %d bytes of image/png", tc.size)
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "casctl get run/1_shot_c.png") {
				t.Errorf("read of a %d-byte image: %v, want an error saying %q and how to get it", tc.size, err, want)
			}
		} else {
			if err != nil {
				t.Fatalf("read of a %d-byte image: %v", tc.size, err)
			}
			got := r.Parts[1].Data
			want, _ := io.ReadAll(&patternReader{n: tc.size})
			if !bytes.Equal(got, want) || r.Parts[1].Kind != hook.KindImage {
				t.Errorf("read of a %d-byte image: %d bytes of %s back", tc.size, len(got), r.Parts[1].Kind)
			}
		}
		if st.reads != tc.wantReads {
			t.Errorf("read of a %d-byte image read %d bytes of it, want %d", tc.size, st.reads, tc.wantReads)
		}
	}
}

// TestReadToolBinaryRSS reads a 60 MiB image part and a 4 MiB one with
// the read tool in a process of its own: its peak resident set stays far
// below the large part's size.
func TestReadToolBinaryRSS(t *testing.T) {
	if os.Getenv("TOOLCAS_TEST_READTOOL_RSS") == "1" {
		readToolBinaryChild()
		return
	}
	if runtime.GOOS == "windows" {
		t.Skip("no peak resident set size on windows")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestReadToolBinaryRSS$")
	cmd.Env = append(os.Environ(), "TOOLCAS_TEST_READTOOL_RSS=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var start, peak int64 = -1, -1
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "START_KIB "); ok {
			start, _ = strconv.ParseInt(v, 10, 64)
		}
		if v, ok := strings.CutPrefix(line, "PEAK_KIB "); ok {
			peak, _ = strconv.ParseInt(v, 10, 64)
		}
		if strings.HasPrefix(line, "READ ") {
			t.Log(line)
		}
	}
	if start <= 0 || peak <= 0 {
		t.Fatalf("child output:\n%s", out)
	}
	t.Logf("peak RSS %d KiB, %d KiB before the reads", peak, start)
	if peak-start >= 32<<10 {
		t.Errorf("reading a 60 MiB image part raised the peak RSS by %d KiB, want < 32768 KiB", peak-start)
	}
}

// readToolBinaryChild is TestReadToolBinaryRSS's process.
func readToolBinaryChild() {
	ctx := context.Background()
	fmt.Println("START_KIB", procstat.PeakRSSKiB())
	for _, size := range []int64{60 << 20, hook.MaxReadBinary} {
		rt, _ := hook.NewReadTool(&generatedStore{size: size})
		r, err := rt.Read(ctx, "run", hook.ReadArgs{Ref: "run/1_shot_c.png"})
		if err != nil {
			fmt.Printf("READ %d: %v\n", size, err)
			continue
		}
		fmt.Printf("READ %d: %d bytes back\n", size, len(r.Parts[1].Data))
	}
	fmt.Println("PEAK_KIB", procstat.PeakRSSKiB())
}
