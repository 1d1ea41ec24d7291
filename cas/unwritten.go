package cas

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

// BarrierUnwrittenMax is how many bytes the machine may hold written and
// not yet on disk for a barrier (Barrier, one syncfs(2) for a whole file
// system) to be worth taking: syncfs waits for all of them, whoever wrote
// them, where a sync of each file waits for that file's own. At a few
// hundred MB/s, 8 MiB is a few tens of milliseconds.
const BarrierUnwrittenMax = 8 << 20

// UnwrittenBytes returns how many bytes the machine holds written and not
// yet on disk, or being written (Linux's Dirty and Writeback in
// /proc/meminfo), for all its file systems together.
func UnwrittenBytes() (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	return parseUnwritten(b)
}

// errNoUnwritten says /proc/meminfo lacked a line UnwrittenBytes reads.
var errNoUnwritten = errors.New("no Dirty and Writeback lines")

// parseUnwritten sums the Dirty and Writeback lines of a /proc/meminfo.
func parseUnwritten(b []byte) (int64, error) {
	var sum int64
	found := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) < 2 || (string(f[0]) != "Dirty:" && string(f[0]) != "Writeback:") {
			continue
		}
		n, err := strconv.ParseInt(string(f[1]), 10, 64)
		if err != nil || n < 0 || (len(f) > 2 && string(f[2]) != "kB") {
			return 0, fmt.Errorf("meminfo: bad line %q", sc.Text())
		}
		sum += n << 10
		found++
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if found != 2 {
		return 0, fmt.Errorf("meminfo: %w", errNoUnwritten)
	}
	return sum, nil
}

// barrierGauge answers whether a barrier is cheap now, looking at the
// machine's unwritten bytes at most once every barrierGaugeAge: a write
// asks it each time, and reading /proc/meminfo costs about as much as a
// small write's other system calls.
type barrierGauge struct {
	// unwritten and now are UnwrittenBytes and time.Now, replaced in tests.
	unwritten func() (int64, error)
	now       func() time.Time

	mu    sync.Mutex
	at    time.Time
	cheap bool
}

// barrierGaugeAge is how long a look at the unwritten bytes stands.
const barrierGaugeAge = 20 * time.Millisecond

// cheapNow reports whether the machine held at most BarrierUnwrittenMax bytes
// unwritten at the last look; a look that fails says no, since a sync of
// each file is always right.
func (g *barrierGauge) cheapNow() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	if !g.at.IsZero() && now.Sub(g.at) < barrierGaugeAge && now.After(g.at) {
		return g.cheap
	}
	n, err := g.unwritten()
	g.at, g.cheap = now, err == nil && n <= BarrierUnwrittenMax
	return g.cheap
}
