package s3blob

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/internal/procstat"
	"github.com/toolcas/toolcas/internal/versitygw"
)

const rssChildEnv = "TOOLCAS_TEST_S3_RSS_CHILD"

// rssSize is the content the memory test streams up and back: four parts
// of the default size, so that holding the parts in flight in memory
// (four at a time) would cost at least this much. TOOLCAS_S3_RSS_MIB sets
// another size, for a run by hand (1024 for 1 GiB).
var rssSize = int64(4 * DefaultPartSize)

// rssLimitKiB is the peak resident set the memory test allows the whole
// test process: under the content's size, and under twice a part's, so
// that a part held in memory fails it.
const rssLimitKiB = 32 << 10

func init() {
	if v, err := strconv.Atoi(os.Getenv("TOOLCAS_S3_RSS_MIB")); err == nil && v > 0 {
		rssSize = int64(v) << 20
	}
}

// generated is n pseudo-random bytes that no one holds in memory.
type generated struct {
	r    *rand.ChaCha8
	left int64
}

func (g *generated) Read(p []byte) (int, error) {
	if g.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > g.left {
		p = p[:g.left]
	}
	n, _ := g.r.Read(p)
	g.left -= int64(n)
	return n, nil
}

// TestStreamingRSS puts 64 MiB as a multipart upload of default-size parts
// and reads it back from the object store, in a process of its own, and
// checks that process's peak resident set: memory stays bounded by the
// buffers, not by the content.
func TestStreamingRSS(t *testing.T) {
	if os.Getenv(rssChildEnv) != "" {
		rssChild(t)
		return
	}
	if testing.Short() {
		t.Skip("streams 64 MiB up and back; skipped with -short")
	}
	srv := versitygw.Start(t)
	be := openOn(t, srv)
	cmd := exec.Command(os.Args[0], "-test.run=^TestStreamingRSS$", "-test.v")
	cmd.Env = append(os.Environ(),
		rssChildEnv+"=1",
		"CHILD_BUCKET="+be.loc.Bucket,
		"CHILD_ENDPOINT="+srv.Endpoint(),
		"CHILD_ACCESS="+srv.AccessKey,
		"CHILD_SECRET="+srv.SecretKey,
		"CHILD_CACHE="+t.TempDir(),
	)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	figures := map[string]int64{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && strings.HasPrefix(k, "FIGURE_") {
			figures[k], _ = strconv.ParseInt(v, 10, 64)
		}
	}
	start, put, read := figures["FIGURE_START_KIB"], figures["FIGURE_PUT_KIB"], figures["FIGURE_READ_KIB"]
	if put == 0 || read == 0 {
		t.Fatalf("child printed no figures:\n%s", out)
	}
	t.Logf("%d MiB: peak RSS %d KiB at start, %d KiB after the put, %d KiB after the read", rssSize>>20, start, put, read)
	if read > rssLimitKiB {
		t.Errorf("peak RSS %d KiB, want at most %d KiB for %d MiB of content", read, rssLimitKiB, rssSize>>20)
	}
}

func rssChild(t *testing.T) {
	loc := Location{Bucket: os.Getenv("CHILD_BUCKET"), Prefix: "team/store", Endpoint: os.Getenv("CHILD_ENDPOINT")}
	be, err := Open(t.Context(), loc, WithCredentials(os.Getenv("CHILD_ACCESS"), os.Getenv("CHILD_SECRET")),
		WithCache(os.Getenv("CHILD_CACHE"), 1<<30))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("FIGURE_START_KIB=%d\n", procstat.PeakRSSKiB())
	var seed [32]byte
	seed[0] = 64
	h := cas.NewHashingReader(&generated{r: rand.NewChaCha8(seed), left: rssSize})
	res, err := be.Put(t.Context(), h, ".bin")
	if err != nil {
		t.Fatal(err)
	}
	if res.Size != rssSize || res.Blob.Digest != h.Digest() || res.Existed {
		t.Fatalf("Put = %+v, want a new blob of %d bytes", res, rssSize)
	}
	fmt.Printf("FIGURE_PUT_KIB=%d\n", procstat.PeakRSSKiB())
	if err := os.Remove(be.Path(res.Blob)); err != nil {
		t.Fatal(err)
	}
	r, err := be.Open(t.Context(), res.Blob)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, r)
	r.Close()
	if err != nil || n != rssSize {
		t.Fatalf("read back %d bytes, %v", n, err)
	}
	fmt.Printf("FIGURE_READ_KIB=%d\n", procstat.PeakRSSKiB())
}
