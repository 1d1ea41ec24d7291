package s3blob

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/internal/versitygw"

	"github.com/toolcas/toolcas/internal/testclock"
)

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// TestCacheEvictsLeastRecentlyUsed fills a cache bounded to three blobs:
// the fourth evicts the least recently used one, a read of an evicted blob
// fetches it again, and a read of a cached one fetches nothing.
func TestCacheEvictsLeastRecentlyUsed(t *testing.T) {
	srv := versitygw.Start(t)
	clk := testclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	const size = 100 << 10
	be := openOn(t, srv, WithCache(t.TempDir(), 3*size+size/2), WithClock(clk.Now))
	var blobs []cas.Blob
	var datas [][]byte
	put := func(i int) {
		t.Helper()
		clk.Add(time.Minute)
		data := randomData(uint64(100+i), size)
		res, err := be.Put(t.Context(), bytes.NewReader(data), ".bin")
		if err != nil {
			t.Fatal(err)
		}
		blobs, datas = append(blobs, res.Blob), append(datas, data)
	}
	read := func(i int) {
		t.Helper()
		clk.Add(time.Minute)
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

// TestCacheRemovesDeadTemp checks that a scan removes a temp file no
// writer holds, however fresh, and leaves one a live writer holds locked,
// however old.
func TestCacheRemovesDeadTemp(t *testing.T) {
	if !cas.TempLocking {
		t.Skip("temp files are not locked on this system")
	}
	clk := testclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	dir := t.TempDir()
	c, err := NewCache(dir, 1<<20, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	dead := filepath.Join(dir, "tmp", ".tmp-dead")
	os.WriteFile(dead, []byte("x"), 0o644)
	now := clk.Now()
	os.Chtimes(dead, now, now)
	live, err := c.createTemp()
	if err != nil {
		t.Fatal(err)
	}
	defer c.discard(live)
	old := clk.Now().Add(-2 * time.Hour)
	os.Chtimes(live.Name(), old, old)
	c.mu.Lock()
	err = c.scanLocked(nil)
	c.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if exists(dead) || !exists(live.Name()) {
		t.Errorf("after a scan: dead temp present %v, live temp present %v; want false, true", exists(dead), exists(live.Name()))
	}
}

// gatedReader hands out its data in two halves: after the first it closes
// reached and waits for release.
type gatedReader struct {
	data    []byte
	off     int
	reached chan struct{}
	release chan struct{}
}

func (g *gatedReader) Read(p []byte) (int, error) {
	if g.off == len(g.data)/2 && g.reached != nil {
		close(g.reached)
		g.reached = nil
		<-g.release
	}
	end := len(g.data)
	if g.off < len(g.data)/2 {
		end = len(g.data) / 2
	}
	if g.off == len(g.data) {
		return 0, io.EOF
	}
	n := copy(p, g.data[g.off:end])
	g.off += n
	return n, nil
}

// TestCacheScanSparesSlowPut runs a scan of the cache directory, as another
// process sharing it would, with a clock two hours ahead while a put is
// still reading its content: the put's temp file survives and the put
// succeeds with the blob in the cache.
func TestCacheScanSparesSlowPut(t *testing.T) {
	srv := versitygw.Start(t)
	dir := t.TempDir()
	be := openOn(t, srv, WithCache(dir, 1<<30))
	data := randomData(31, 300<<10)
	reached := make(chan struct{})
	g := &gatedReader{data: data, reached: reached, release: make(chan struct{})}
	type result struct {
		res cas.PutResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := be.Put(t.Context(), g, ".bin")
		done <- result{res, err}
	}()
	<-reached
	clk := testclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	clk.Set(time.Now().Add(2 * time.Hour))
	other, err := NewCache(dir, 1<<30, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	other.mu.Lock()
	err = other.scanLocked(nil)
	other.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	close(g.release)
	r := <-done
	if r.err != nil {
		t.Fatalf("Put while another process scanned the cache: %v", r.err)
	}
	if got, err := os.ReadFile(be.Path(r.res.Blob)); err != nil || !bytes.Equal(got, data) {
		t.Errorf("cache file after the put: %d bytes, %v; want the blob", len(got), err)
	}
	assertNoTemps(t, be.cache)
}

// TestPutSucceedsWhenCacheFails makes the blob's cache file impossible to
// install (a directory holds its name): the object is stored, so the put
// succeeds, and its temp file is gone.
func TestPutSucceedsWhenCacheFails(t *testing.T) {
	srv := versitygw.Start(t)
	be := openOn(t, srv)
	data := randomData(32, 10<<10)
	b := cas.Blob{Digest: cas.Sum(data), Ext: ".bin"}
	if err := os.MkdirAll(filepath.Join(be.Path(b), "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	res, err := be.Put(t.Context(), bytes.NewReader(data), ".bin")
	if err != nil || res.Blob != b {
		t.Fatalf("Put with an uncachable blob = %+v, %v; want it stored", res, err)
	}
	assertNoTemps(t, be.cache)
	r, err := be.OpenRemote(t.Context(), b)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, data) {
		t.Errorf("the stored object reads %d bytes, %v", len(got), err)
	}
}

// assertNoTemps fails the test if the cache's tmp/ holds any file.
func assertNoTemps(t *testing.T, c *Cache) {
	t.Helper()
	tmps, err := os.ReadDir(filepath.Join(c.Dir(), "tmp"))
	if err != nil {
		t.Fatal(err)
	}
	if len(tmps) != 0 {
		t.Errorf("%d temp files left in the cache's tmp/", len(tmps))
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

// fill puts data into the cache as a fetch or a put does.
func fill(t *testing.T, c *Cache, data []byte) cas.Blob {
	t.Helper()
	tmp, err := c.createTemp()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tmp.Write(data); err != nil {
		t.Fatal(err)
	}
	b := cas.Blob{Digest: cas.Sum(data), Ext: ".bin"}
	f, _, err := c.install(tmp, b, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	return b
}

// TestCacheScansInSteadyState fills a full cache again and again: it walks
// its directory about once per tenth of its bound filled, not at every
// fill, and opening it walks nothing.
func TestCacheScansInSteadyState(t *testing.T) {
	dir := t.TempDir()
	const size, max = 1000, 100 * 1000
	clk := testclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c, err := NewCache(dir, max, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 150 {
		clk.Add(time.Second)
		fill(t, c, randomData(uint64(i), size))
	}
	c2, err := NewCache(dir, max, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	if c2.scans != 0 {
		t.Errorf("opening a cache scanned it %d times, want 0", c2.scans)
	}
	const n = 200
	before := c.scans
	for i := range n {
		clk.Add(time.Second)
		fill(t, c, randomData(uint64(1000+i), size))
	}
	scans := c.scans - before
	t.Logf("%d scans over %d fills of a full cache", scans, n)
	if scans > n/5 {
		t.Errorf("%d scans over %d fills of a full cache, want at most %d", scans, n, n/5)
	}
	if total, err := c.Size(); err != nil || total > max {
		t.Errorf("cache holds %d bytes, %v; bound %d", total, err, max)
	}
}

// TestCacheRefillCountsOnce installs the same blob twice: the cache's
// total counts its bytes once.
func TestCacheRefillCountsOnce(t *testing.T) {
	c, err := NewCache(t.TempDir(), 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	data := randomData(7, 5000)
	fill(t, c, data)
	fill(t, c, data)
	c.mu.Lock()
	total := c.total
	c.mu.Unlock()
	if total != int64(len(data)) {
		t.Errorf("total after installing one blob twice = %d, want %d", total, len(data))
	}
}

// failingReader gives n bytes of data, then fails.
type failingReader struct{ n int }

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n == 0 {
		return 0, errors.New("source failed")
	}
	k := min(len(p), f.n)
	clear(p[:k])
	f.n -= k
	return k, nil
}

// TestFailedPutLeavesNoTemp puts content whose reader fails partway: the
// put fails and the cache's tmp/ is empty.
func TestFailedPutLeavesNoTemp(t *testing.T) {
	srv := versitygw.Start(t)
	be := openOn(t, srv)
	if _, err := be.Put(t.Context(), &failingReader{n: 300 << 10}, ".bin"); err == nil {
		t.Fatal("Put from a failing reader succeeded")
	}
	assertNoTemps(t, be.cache)
}
