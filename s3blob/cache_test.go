package s3blob

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/internal/versitygw"
)

// clock is a settable clock for the cache's order of use.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// TestCacheEvictsLeastRecentlyUsed fills a cache bounded to three blobs:
// the fourth evicts the least recently used one, a read of an evicted blob
// fetches it again, and a read of a cached one fetches nothing.
func TestCacheEvictsLeastRecentlyUsed(t *testing.T) {
	srv := versitygw.Start(t)
	clk := newClock()
	const size = 100 << 10
	be := openOn(t, srv, WithCache(t.TempDir(), 3*size+size/2), WithClock(clk.now))
	var blobs []cas.Blob
	var datas [][]byte
	put := func(i int) {
		t.Helper()
		clk.advance(time.Minute)
		data := randomData(uint64(100+i), size)
		res, err := be.Put(t.Context(), bytes.NewReader(data), ".bin")
		if err != nil {
			t.Fatal(err)
		}
		blobs, datas = append(blobs, res.Blob), append(datas, data)
	}
	read := func(i int) {
		t.Helper()
		clk.advance(time.Minute)
		got, err := cas.ReadBlob(t.Context(), be, blobs[i])
		if err != nil || !bytes.Equal(got, datas[i]) {
			t.Fatalf("read blob %d: %d bytes, %v", i, len(got), err)
		}
	}
	cachedSet := func() []bool {
		var out []bool
		for _, b := range blobs {
			out = append(out, exists(be.Path(b)))
		}
		return out
	}
	put(0)
	put(1)
	put(2)
	fetches := be.fetches.Load()
	read(0) // 0 is now the most recently used
	if got := be.fetches.Load() - fetches; got != 0 {
		t.Errorf("a read of a cached blob fetched %d times, want 0", got)
	}
	put(3) // evicts 1, the least recently used
	if got, want := fmt.Sprint(cachedSet()), "[true false true true]"; got != want {
		t.Errorf("cached after the fourth put = %s, want %s", got, want)
	}
	if total, err := be.cache.Size(); err != nil || total > be.cache.MaxBytes() {
		t.Errorf("cache holds %d bytes, %v; bound %d", total, err, be.cache.MaxBytes())
	}
	fetches = be.fetches.Load()
	read(1) // fetched again, which evicts 2
	if got := be.fetches.Load() - fetches; got != 1 {
		t.Errorf("a read of an evicted blob fetched %d times, want 1", got)
	}
	if got, want := fmt.Sprint(cachedSet()), "[true true false true]"; got != want {
		t.Errorf("cached after reading the evicted blob = %s, want %s", got, want)
	}
	if got, err := os.ReadFile(be.Path(blobs[1])); err != nil || !bytes.Equal(got, datas[1]) {
		t.Errorf("the refetched blob's file holds %d bytes, %v", len(got), err)
	}
}

// TestCacheHealsDamagedFile damages a cached file: the read fetches the
// blob again and hands out the right bytes, and the file is repaired.
func TestCacheHealsDamagedFile(t *testing.T) {
	srv := versitygw.Start(t)
	be := openOn(t, srv)
	data := randomData(9, 50000)
	res, err := be.Put(t.Context(), bytes.NewReader(data), ".txt")
	if err != nil {
		t.Fatal(err)
	}
	p := be.Path(res.Blob)
	os.Chmod(p, 0o644)
	bad := bytes.Clone(data)
	bad[123] ^= 1
	if err := os.WriteFile(p, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	fetches := be.fetches.Load()
	got, err := cas.ReadBlob(t.Context(), be, res.Blob)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read with a damaged cache file = %d bytes, %v; want the blob", len(got), err)
	}
	if be.fetches.Load() != fetches+1 {
		t.Errorf("fetches = %d, want one more than %d", be.fetches.Load(), fetches)
	}
	if onDisk, err := os.ReadFile(p); err != nil || !bytes.Equal(onDisk, data) {
		t.Errorf("cache file after the read: %d bytes, %v; want it repaired", len(onDisk), err)
	}
}

// TestCacheBlobLargerThanBound reads a blob larger than the whole cache:
// it is read, and the cache keeps nothing else.
func TestCacheBlobLargerThanBound(t *testing.T) {
	srv := versitygw.Start(t)
	be := openOn(t, srv, WithCache(t.TempDir(), 64<<10))
	small := randomData(1, 10<<10)
	if _, err := be.Put(t.Context(), bytes.NewReader(small), ".bin"); err != nil {
		t.Fatal(err)
	}
	big := randomData(2, 200<<10)
	res, err := be.Put(t.Context(), bytes.NewReader(big), ".bin")
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(be.Path(res.Blob))
	if got, err := cas.ReadBlob(t.Context(), be, res.Blob); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("read of a blob larger than the cache: %d bytes, %v", len(got), err)
	}
	if exists(be.Path(cas.Blob{Digest: cas.Sum(small), Ext: ".bin"})) {
		t.Errorf("the small blob stayed in a cache the big one overfills")
	}
}

// TestCacheRemovesStaleTemp checks that a temp file a dead process left in
// the cache goes at the next scan once it is an hour old, and a fresh one
// stays.
func TestCacheRemovesStaleTemp(t *testing.T) {
	clk := newClock()
	dir := t.TempDir()
	c, err := NewCache(dir, 1<<20, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	stale, fresh := filepath.Join(dir, "tmp", ".tmp-stale"), filepath.Join(dir, "tmp", ".tmp-fresh")
	os.WriteFile(stale, []byte("x"), 0o644)
	os.WriteFile(fresh, []byte("x"), 0o644)
	old := clk.now().Add(-2 * time.Hour)
	os.Chtimes(stale, old, old)
	now := clk.now()
	os.Chtimes(fresh, now, now)
	c.mu.Lock()
	err = c.scanLocked(nil)
	c.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if exists(stale) || !exists(fresh) {
		t.Errorf("after a scan: stale temp present %v, fresh present %v; want false, true", exists(stale), exists(fresh))
	}
}

const sharedChildEnv = "TOOLCAS_TEST_SHARED_CACHE_CHILD"

// TestCacheSharedByProcesses runs three processes on one small cache
// directory and one store, each putting and reading blobs, some of them the
// others' too, with the cache evicting all the time: every read gives the
// right bytes, the cache ends within its bound (plus what the others added
// since a process's last scan) and holds only checked files.
func TestCacheSharedByProcesses(t *testing.T) {
	if os.Getenv(sharedChildEnv) != "" {
		sharedCacheChild(t)
		return
	}
	srv := versitygw.Start(t)
	be := openOn(t, srv)
	cacheDir := t.TempDir()
	const bound = 400 << 10
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for i := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCacheSharedByProcesses$", "-test.v")
		cmd.Env = append(os.Environ(),
			sharedChildEnv+"=1",
			"CHILD_ID="+strconv.Itoa(i),
			"CHILD_BUCKET="+be.loc.Bucket,
			"CHILD_ENDPOINT="+srv.Endpoint(),
			"CHILD_ACCESS="+srv.AccessKey,
			"CHILD_SECRET="+srv.SecretKey,
			"CHILD_CACHE="+cacheDir,
			"CHILD_BOUND="+strconv.Itoa(bound),
		)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, &out)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("process %d: %v\n%s", i, err, outs[i])
		}
	}
	c, err := NewCache(cacheDir, bound, nil)
	if err != nil {
		t.Fatal(err)
	}
	total, err := c.Size()
	if err != nil {
		t.Fatal(err)
	}
	// Each process may exceed the bound by a quarter of it that others
	// added since its last scan.
	if limit := int64(bound + 3*bound/4 + 64<<10); total > limit {
		t.Errorf("shared cache holds %d bytes, want at most %d (bound %d)", total, limit, bound)
	}
	err = filepath.Walk(filepath.Join(cacheDir, "blobs"), func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		b, err := cas.ParseBlobName(fi.Name())
		if err != nil {
			return fmt.Errorf("%s in the cache: %v", p, err)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if cas.Sum(data) != b.Digest {
			t.Errorf("cache file %s does not hash to its name", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tmps, _ := os.ReadDir(filepath.Join(cacheDir, "tmp"))
	if len(tmps) != 0 {
		t.Errorf("%d temp files left in the cache", len(tmps))
	}
}

func sharedCacheChild(t *testing.T) {
	id, _ := strconv.Atoi(os.Getenv("CHILD_ID"))
	bound, _ := strconv.Atoi(os.Getenv("CHILD_BOUND"))
	loc := Location{Bucket: os.Getenv("CHILD_BUCKET"), Prefix: "team/store", Endpoint: os.Getenv("CHILD_ENDPOINT")}
	be, err := Open(t.Context(), loc, WithCredentials(os.Getenv("CHILD_ACCESS"), os.Getenv("CHILD_SECRET")),
		WithCache(os.Getenv("CHILD_CACHE"), int64(bound)))
	if err != nil {
		t.Fatal(err)
	}
	// 30 blobs of 20 to 60 KiB; seeds 0-9 are common to every process.
	var blobs []cas.Blob
	var datas [][]byte
	for i := range 30 {
		seed := uint64(i)
		if i >= 10 {
			seed = uint64(1000*(id+1) + i)
		}
		data := randomData(seed, 20<<10+int(seed%5)*10<<10)
		res, err := be.Put(t.Context(), bytes.NewReader(data), ".bin")
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
		blobs, datas = append(blobs, res.Blob), append(datas, data)
	}
	for round := range 4 {
		for i := range blobs {
			j := (i*7 + round*3 + id) % len(blobs)
			got, err := cas.ReadBlob(t.Context(), be, blobs[j])
			if err != nil || !bytes.Equal(got, datas[j]) {
				t.Fatalf("round %d, read %d: %d bytes, %v", round, j, len(got), err)
			}
		}
	}
	if be.fetches.Load() == 0 {
		t.Fatal("no read fetched its blob again: the cache never evicted")
	}
}

const machineChildEnv = "TOOLCAS_TEST_MACHINE_CHILD"

// TestWritersOnThreeMachines runs three processes, each with a cache of
// its own as on three machines, writing the same blobs (small ones and
// multipart ones) and blobs of their own into one store at once, then
// reading them all back: every put succeeds, every read gives the right
// bytes, each blob is one object that hashes to its name.
func TestWritersOnThreeMachines(t *testing.T) {
	if os.Getenv(machineChildEnv) != "" {
		machineChild(t)
		return
	}
	if testing.Short() {
		t.Skip("uploads about 120 MiB; skipped with -short")
	}
	srv := versitygw.Start(t)
	be := openOn(t, srv)
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for i := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestWritersOnThreeMachines$", "-test.v")
		cmd.Env = append(os.Environ(),
			machineChildEnv+"=1",
			"CHILD_ID="+strconv.Itoa(i),
			"CHILD_BUCKET="+be.loc.Bucket,
			"CHILD_ENDPOINT="+srv.Endpoint(),
			"CHILD_ACCESS="+srv.AccessKey,
			"CHILD_SECRET="+srv.SecretKey,
			"CHILD_CACHE="+t.TempDir(),
		)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, &out)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("machine %d: %v\n%s", i, err, outs[i])
		}
	}
	// 10 shared small, 2 shared large, 10 of each machine's own.
	objects := 0
	err := be.Walk(t.Context(), func(e cas.Entry) error {
		if e.Kind != cas.EntryBlob {
			return fmt.Errorf("%v %s: %s", e.Kind, e.RelPath, e.Problem)
		}
		objects++
		r, err := be.OpenRemote(t.Context(), e.Blob)
		if err != nil {
			return err
		}
		defer r.Close()
		if _, err := io.Copy(io.Discard, r); err != nil {
			t.Errorf("object %s: %v", e.RelPath, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := 10 + 2 + 3*10; objects != want {
		t.Errorf("%d objects in the store, want %d", objects, want)
	}
}

func machineData(id, i int) []byte {
	switch {
	case i < 10:
		return randomData(uint64(i), 20<<10)
	case i < 12:
		return randomData(uint64(i), 12<<20)
	}
	return randomData(uint64(1000*(id+1)+i), 30<<10)
}

func machineChild(t *testing.T) {
	id, _ := strconv.Atoi(os.Getenv("CHILD_ID"))
	loc := Location{Bucket: os.Getenv("CHILD_BUCKET"), Prefix: "team/store", Endpoint: os.Getenv("CHILD_ENDPOINT")}
	be, err := Open(t.Context(), loc, WithCredentials(os.Getenv("CHILD_ACCESS"), os.Getenv("CHILD_SECRET")),
		WithCache(os.Getenv("CHILD_CACHE"), 1<<30), WithPartSize(MinPartSize))
	if err != nil {
		t.Fatal(err)
	}
	var blobs []cas.Blob
	for i := range 22 {
		res, err := be.Put(t.Context(), bytes.NewReader(machineData(id, i)), ".bin")
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
		blobs = append(blobs, res.Blob)
	}
	for i, b := range blobs {
		os.Remove(be.Path(b))
		got, err := cas.ReadBlob(t.Context(), be, b)
		if err != nil || !bytes.Equal(got, machineData(id, i)) {
			t.Fatalf("read %d: %d bytes, %v", i, len(got), err)
		}
	}
}
