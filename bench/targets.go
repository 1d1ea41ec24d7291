package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/internal/procstat"
	"github.com/toolcas/toolcas/policy"
	"github.com/toolcas/toolcas/store"
)

// target is one of the speed targets of docs/design.md, measured.
type target struct {
	What     string  `json:"what"`
	Target   string  `json:"target"`
	Measured string  `json:"measured"`
	Value    float64 `json:"value"`
	Met      bool    `json:"met"`
}

type targetsConfig struct {
	Dir   string `json:"dir"`
	Quick bool   `json:"quick"`
}

// unique makes size bytes that differ from every other call's.
func unique(buf []byte, i int) []byte {
	binary.LittleEndian.PutUint64(buf, uint64(i))
	binary.LittleEndian.PutUint64(buf[len(buf)-8:], uint64(i)*0x9e3779b97f4a7c15)
	return buf
}

// inTurn runs a then b, or b then a on odd i: on this kind of disk the
// first of two syncing writes in a row is measurably slower, whatever it
// is, and taking turns cancels that out.
func inTurn(i int, a, b func() error) error {
	if i%2 == 1 {
		a, b = b, a
	}
	if err := a(); err != nil {
		return err
	}
	return b()
}

// timeEach returns the mean time of n calls of f, which gets the call's
// number.
func timeEach(n int, f func(i int) error) (time.Duration, error) {
	start := time.Now()
	for i := range n {
		if err := f(i); err != nil {
			return 0, err
		}
	}
	return time.Since(start) / time.Duration(n), nil
}

// measureTargets runs in a child process and measures the store against
// bare file-system work, alternating them in rounds so that the machine's
// noise falls on both alike.
func measureTargets(ctx context.Context, c targetsConfig) ([]target, error) {
	n, rounds, gcBlobs := 300, 3, 100_000
	if c.Quick {
		n, rounds, gcBlobs = 40, 1, 5_000
	}
	var out []target
	add := func(t target) { out = append(out, t) }
	sub := func(name string) string { return freshDir(c.Dir, name) }
	openCAS := func(name string, d cas.Durability) (*cas.Store, error) {
		return cas.Open(ctx, sub(name), cas.WithCreate(), cas.WithDurability(d))
	}
	puts := func(s *cas.Store, size, offset int) (time.Duration, error) {
		buf := make([]byte, size)
		return timeEach(n, func(i int) error {
			_, err := s.PutBytes(ctx, unique(buf, offset+i), ".txt")
			return err
		})
	}

	// Durable put of 16 KiB against the bare sequence, and sync=none 4 KiB:
	// one put, one bare write, and so on, so that the disk's moods fall on
	// both alike.
	for _, tc := range []struct {
		size int
		d    cas.Durability
	}{{16 << 10, cas.SyncFull}, {4 << 10, cas.SyncNone}} {
		s, err := openCAS(fmt.Sprint("put-", tc.d), tc.d)
		if err != nil {
			return nil, err
		}
		// The bare writes go into the store's own shard directories: on
		// ext4 two directory trees made alike differ by up to a quarter in
		// fsync time, which would swamp what is measured here.
		dir := filepath.Join(s.Dir(), cas.BlobsDir)
		// Both write where thousands of files were made before, as in a
		// store in use (see warmDirs).
		if err := warmStore(s.Dir(), 10*n); err != nil {
			s.Close()
			return nil, err
		}
		pbuf, bbuf := make([]byte, tc.size), make([]byte, tc.size)
		var putT, bareT time.Duration
		for i := range n * rounds {
			put := func() error {
				t0 := time.Now()
				_, err := s.PutBytes(ctx, unique(pbuf, i), ".txt")
				putT += time.Since(t0)
				return err
			}
			bareOne := func() error {
				t0 := time.Now()
				shard := filepath.Join(dir, fmt.Sprintf("%02x", i%256))
				err := bareWrite(shard, filepath.Join(shard, fmt.Sprint("bare-", i, ".txt")), unique(bbuf, i), tc.d == cas.SyncFull)
				bareT += time.Since(t0)
				return err
			}
			if err := inTurn(i, put, bareOne); err != nil {
				return nil, err
			}
		}
		s.Close()
		ops := time.Duration(n * rounds)
		ratio := float64(putT) / float64(bareT)
		if tc.d == cas.SyncFull {
			add(target{"durable put, 16 KiB", "≤ 1.3 × bare temp+write+fsync+rename+dir fsync",
				fmt.Sprintf("%.2f × (%v against %v)", ratio, (putT / ops).Round(time.Microsecond), (bareT / ops).Round(time.Microsecond)), ratio, ratio <= 1.3})
		} else {
			rate := float64(time.Second) / float64(putT/ops)
			bareRate := float64(time.Second) / float64(bareT/ops)
			add(target{"put with sync=none, 4 KiB: rate", "≥ 5,000/s in one process",
				fmt.Sprintf("%.0f/s (the bare write+rename: %.0f/s here, in directories where %d files had been made)", rate, bareRate, 10*n), rate, rate >= 5000})
			add(target{"put with sync=none, 4 KiB: against bare", "≤ 2 × a bare write+rename",
				fmt.Sprintf("%.2f × (%v against %v)", ratio, (putT / ops).Round(time.Microsecond), (bareT / ops).Round(time.Microsecond)), ratio, ratio <= 2})
		}
	}

	// The same on a tmpfs, where no disk sets the pace: what the store's
	// own code costs.
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		shm, err := os.MkdirTemp("/dev/shm", "toolcas-bench-")
		if err == nil {
			s, err := cas.Open(ctx, shm, cas.WithCreate(), cas.WithDurability(cas.SyncNone))
			if err == nil {
				buf := make([]byte, 4<<10)
				per, err := timeEach(n*rounds*4, func(i int) error {
					_, err := s.PutBytes(ctx, unique(buf, i), ".txt")
					return err
				})
				s.Close()
				if err == nil {
					rate := float64(time.Second) / float64(per)
					add(target{"put with sync=none, 4 KiB, on tmpfs (/dev/shm)", "≥ 5,000/s in one process", fmt.Sprintf("%.0f/s", rate), rate, rate >= 5000})
				}
			}
			os.RemoveAll(shm)
		}
	}

	// Dedup hit against miss, 64 KiB, durable.
	{
		s, err := openCAS("hit", cas.SyncFull)
		if err != nil {
			return nil, err
		}
		miss, err := puts(s, 64<<10, 0)
		if err != nil {
			return nil, err
		}
		same := unique(make([]byte, 64<<10), 1<<30)
		if _, err := s.PutBytes(ctx, same, ".txt"); err != nil {
			return nil, err
		}
		hit, err := timeEach(n, func(int) error {
			r, err := s.PutBytes(ctx, same, ".txt")
			if err == nil && !r.Existed {
				err = fmt.Errorf("not a dedup hit")
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		s.Close()
		ratio := float64(miss) / float64(hit)
		add(target{"dedup hit against miss, 64 KiB, durable", "hit ≥ 5 × faster",
			fmt.Sprintf("%.1f × faster (%v against %v)", ratio, hit.Round(time.Microsecond), miss.Round(time.Microsecond)), ratio, ratio >= 5})
	}

	// Batch of 1,000 × 4 KiB, durable.
	{
		s, err := openCAS("batch", cas.SyncFull)
		if err != nil {
			return nil, err
		}
		// Into directories where thousands of files were made before, as
		// in a store in use (see warmDirs): on ext4 a fresh directory's
		// files can cost ten times as much to make.
		warm := 10 * n
		if err := warmStore(s.Dir(), warm); err != nil {
			s.Close()
			return nil, err
		}
		items := make([]cas.Item, 1000)
		var total time.Duration
		for r := range rounds {
			for i := range items {
				items[i] = cas.Item{Data: unique(make([]byte, 4<<10), r*1000+i), Ext: ".txt"}
			}
			t0 := time.Now()
			if _, err := s.PutBatch(ctx, items); err != nil {
				return nil, err
			}
			total += time.Since(t0)
		}
		s.Close()
		rate := float64(rounds*1000) / total.Seconds()
		add(target{"batch put, 1,000 × 4 KiB, durable", "≥ 2,000 parts/s",
			fmt.Sprintf("%.0f parts/s (in directories where %d files had been made)", rate, warm), rate, rate >= 2000})
	}

	// The hook's cost over a direct put: one 16 KiB text through the hook
	// into the CAS store (blob, row, pointer), durable.
	{
		s, err := store.Open(ctx, sub("hook"), store.WithCreate())
		if err != nil {
			return nil, err
		}
		h, _ := hook.New(s, policy.MustStrategies(policy.Default(policy.Always)))
		buf := []byte(strings.Repeat("0123456789abcdef", 1024))
		var hookT, putT time.Duration
		c2, err := cas.Open(ctx, s.Dir()) // the same directories, as above
		if err != nil {
			return nil, err
		}
		defer c2.Close()
		pbuf := make([]byte, 16<<10)
		for i := range n * rounds {
			offload := func() error {
				t0 := time.Now()
				_, err := h.Offload(ctx, hook.Step{Run: "r", Number: i},
					[]hook.Result{{Tool: "read_file", CallID: "c", Parts: []hook.Part{hook.Text(string(unique(buf, i)))}}})
				hookT += time.Since(t0)
				return err
			}
			put := func() error {
				t0 := time.Now()
				_, err := c2.PutBytes(ctx, unique(pbuf, i), ".txt")
				putT += time.Since(t0)
				return err
			}
			if err := inTurn(i, offload, put); err != nil {
				return nil, err
			}
		}
		rounds := n * rounds
		s.Close()
		over := float64(hookT)/float64(putT) - 1
		add(target{"hook overhead, 16 KiB text, durable", "≤ 15 % over a direct cas put",
			fmt.Sprintf("+%.0f %% (%v against %v)", over*100, (hookT / time.Duration(rounds)).Round(time.Microsecond), (putT / time.Duration(rounds)).Round(time.Microsecond)), over, over <= 0.15})
	}

	// verify against BLAKE3 over the same files, read the same way: both
	// twice, taking turns, so that neither is the one to warm the cache.
	{
		count, size := 256, 512<<10
		if c.Quick {
			count = 32
		}
		st, err := store.Open(ctx, sub("verify"), store.WithCreate(), store.WithDurability(cas.SyncNone))
		if err != nil {
			return nil, err
		}
		buf := make([]byte, size)
		for start := 0; start < count; start += 16 {
			var items []hook.Item
			for i := start; i < min(start+16, count); i++ {
				items = append(items, hook.Item{Key: hook.Key{Run: "v", Step: i, Tool: "t", CallID: "c", Part: -1, Ext: ".bin"},
					Part: hook.File("application/octet-stream", "", append([]byte(nil), unique(buf, i)...))})
			}
			if _, err := st.Write(ctx, items); err != nil {
				return nil, err
			}
		}
		var verifyT, hashT time.Duration
		var bytes int64
		verify := func() error {
			t0 := time.Now()
			r, err := st.Verify(ctx, store.VerifyOptions{})
			verifyT += time.Since(t0)
			if err == nil && !r.OK {
				err = fmt.Errorf("verify found problems")
			}
			bytes = r.CheckedBytes
			return err
		}
		hash := func() error {
			t0 := time.Now()
			_, err := hashFiles(ctx, st)
			hashT += time.Since(t0)
			return err
		}
		for i := range 2 {
			if err := inTurn(i, verify, hash); err != nil {
				return nil, err
			}
		}
		st.Close()
		vr, hr := 2*float64(bytes)/1e6/verifyT.Seconds(), 2*float64(bytes)/1e6/hashT.Seconds()
		add(target{fmt.Sprintf("verify, %d blobs of %d KiB", count, size>>10), "≥ 80 % of BLAKE3's speed on the same bytes",
			fmt.Sprintf("%.0f %% (%.0f MB/s against %.0f MB/s)", 100*vr/hr, vr, hr), vr / hr, vr/hr >= 0.8})
	}

	// gc of a store with many blobs, 10 % of them garbage.
	{
		s, err := store.Open(ctx, sub("gc"), store.WithCreate(), store.WithDurability(cas.SyncNone))
		if err != nil {
			return nil, err
		}
		runs := 10
		per := gcBlobs / runs
		buf := make([]byte, 512)
		for r := range runs {
			for start := 0; start < per; start += 1000 {
				var items []hook.Item
				for i := start; i < min(start+1000, per); i++ {
					k := hook.Key{Run: fmt.Sprint("run", r), Step: i, Tool: "t", CallID: "c", Part: -1, Ext: ".txt"}
					items = append(items, hook.Item{Key: k, Part: hook.Text(string(unique(buf, r*per+i)))})
				}
				if _, err := s.Write(ctx, items); err != nil {
					return nil, err
				}
			}
		}
		s.Checkpoint(ctx)
		st, _ := s.Stats(ctx, "")
		perPart := float64(st.IndexBytes) / float64(st.Parts)
		add(target{fmt.Sprintf("index size, %d parts", st.Parts), "≤ 512 B per part", fmt.Sprintf("%.0f B per part", perPart), perPart, perPart <= 512})
		if _, err := s.Prune(ctx, store.PruneOptions{Run: "run0"}); err != nil {
			return nil, err
		}
		t0 := time.Now()
		g, err := s.GC(ctx, store.GCOptions{Grace: 0})
		if err != nil {
			return nil, err
		}
		d := time.Since(t0)
		s.Close()
		limit := 10 * time.Second * time.Duration(gcBlobs) / 100_000
		add(target{fmt.Sprintf("gc, %d blobs, 10 %% garbage", gcBlobs), fmt.Sprintf("< %v", limit),
			fmt.Sprintf("%v (%d removed)", d.Round(time.Millisecond), g.RemovedBlobs), d.Seconds(), d < limit && g.RemovedBlobs == per})
	}
	wp, err := writePathTargets(ctx, sub("write-path"), c.Quick)
	if err != nil {
		return nil, fmt.Errorf("write path: %w", err)
	}
	return append(out, wp...), nil
}

// streamRSS runs in a child process: a streaming put of size bytes, and the
// process's peak resident set afterwards.
func streamRSS(ctx context.Context, dir string, size int64) (int64, error) {
	s, err := store.Open(ctx, dir, store.WithCreate())
	if err != nil {
		return 0, err
	}
	defer s.Close()
	_, err = s.Put(ctx, store.StreamPart{Key: hook.Key{Run: "r", Tool: "stream", CallID: "c", Part: -1}, MIME: "application/octet-stream"},
		io.LimitReader(zeros{}, size))
	if err != nil {
		return 0, err
	}
	return procstat.PeakRSSKiB(), nil
}

// zeros is an endless stream of a repeating pattern.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(i)
	}
	return len(p), nil
}

// hashFiles reads every blob file of a store and hashes it with BLAKE3, as
// plainly as it can be done: the yardstick for verify.
func hashFiles(ctx context.Context, s *store.Store) (int64, error) {
	var n int64
	c, err := cas.Open(ctx, s.Dir())
	if err != nil {
		return 0, err
	}
	defer c.Close()
	err = c.Walk(ctx, func(e cas.Entry) error {
		if e.Kind != cas.EntryBlob {
			return nil
		}
		f, err := os.Open(s.Path(e.Blob))
		if err != nil {
			return err
		}
		defer f.Close()
		h := cas.NewHash()
		k, err := io.Copy(h, f)
		n += k
		return err
	})
	return n, err
}
