// Package backendtest is the conformance suite every cas.Backend passes: the
// local sharded directory, an object store, and any backend written later.
// A backend's tests call Run with a function making a fresh, empty backend.
package backendtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/toolcas/toolcas/cas"
)

// A Fixture is a fresh, empty backend and what the suite needs to harm it.
type Fixture struct {
	// Backend is the backend under test, with room for every blob the
	// suite writes (a cache, if it has one, evicts nothing). Run closes it
	// at the end of the test.
	Backend cas.Backend
	// Corrupt replaces the stored bytes of blob b with data, behind the
	// backend's back, as a failing disk or a careless person would. Nil
	// skips the corruption tests, saying so.
	Corrupt func(t *testing.T, b cas.Blob, data []byte)
	// LargeSize is the size of the large streamed blob; 0 means 24 MiB,
	// enough to exercise a multipart upload of 5 MiB parts.
	LargeSize int64
}

// Run runs the conformance suite, calling newFixture for every subtest.
func Run(t *testing.T, newFixture func(t *testing.T) Fixture) {
	tests := []struct {
		name string
		fn   func(t *testing.T, f Fixture)
	}{
		{"RoundTrip", testRoundTrip},
		{"Empty", testEmpty},
		{"Dedup", testDedup},
		{"ConcurrentSameBlob", testConcurrentSameBlob},
		{"Missing", testMissing},
		{"InvalidExt", testInvalidExt},
		{"Corrupt", testCorrupt},
		{"Truncated", testTruncated},
		{"Walk", testWalk},
		{"Remove", testRemove},
		{"LargeStreamed", testLarge},
		{"CancelledBeforePut", testCancelledBefore},
		{"CancelledMidStream", testCancelledMidStream},
		{"CancelledOpen", testCancelledOpen},
		{"FailingReader", testFailingReader},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			t.Cleanup(func() {
				if err := f.Backend.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			if f.LargeSize == 0 {
				f.LargeSize = 24 << 20
			}
			tc.fn(t, f)
		})
	}
}

func put(t *testing.T, be cas.Backend, data []byte, ext string) cas.PutResult {
	t.Helper()
	res, err := be.Put(t.Context(), bytes.NewReader(data), ext)
	if err != nil {
		t.Fatalf("Put(%d bytes, %q): %v", len(data), ext, err)
	}
	if want := (cas.Blob{Digest: cas.Sum(data), Ext: ext}); res.Blob != want {
		t.Fatalf("Put(%d bytes, %q) = %v, want %v", len(data), ext, res.Blob, want)
	}
	if res.Size != int64(len(data)) {
		t.Fatalf("Put(%d bytes).Size = %d", len(data), res.Size)
	}
	return res
}

func mustRead(t *testing.T, be cas.Backend, b cas.Blob) []byte {
	t.Helper()
	got, err := cas.ReadBlob(t.Context(), be, b)
	if err != nil {
		t.Fatalf("read %v: %v", b, err)
	}
	return got
}

// RandomBytes returns n bytes that depend only on seed, for test content
// that differs from test to test and is the same at every run.
func RandomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func testRoundTrip(t *testing.T, f Fixture) {
	for i, size := range []int{1, 100, 64 << 10, 1<<20 + 1, 3 << 20} {
		data := RandomBytes(uint64(i+1), size)
		res := put(t, f.Backend, data, ".bin")
		if res.Existed {
			t.Errorf("first Put of %d bytes: Existed = true", size)
		}
		if got := mustRead(t, f.Backend, res.Blob); !bytes.Equal(got, data) {
			t.Errorf("read of %d-byte blob gave %d bytes, not the ones put", size, len(got))
		}
		info, err := f.Backend.Stat(t.Context(), res.Blob)
		if err != nil {
			t.Fatalf("Stat: %v", err)
		}
		if info.Size != int64(size) || info.Blob != res.Blob {
			t.Errorf("Stat = %+v, want blob %v of %d bytes", info, res.Blob, size)
		}
		p := f.Backend.Path(res.Blob)
		if !filepath.IsAbs(p) || filepath.ToSlash(p)[len(p)-len(res.Blob.RelPath()):] != res.Blob.RelPath() {
			t.Errorf("Path(%v) = %q, want an absolute path ending in %s", res.Blob, p, res.Blob.RelPath())
		}
		// The pointer's promise: the path names a file holding the bytes.
		if onDisk, err := os.ReadFile(p); err != nil || !bytes.Equal(onDisk, data) {
			t.Errorf("file at Path(%v) after a put: %d bytes, %v; want the blob's bytes", res.Blob, len(onDisk), err)
		}
		if ok, err := cas.Has(t.Context(), f.Backend, res.Blob); !ok || err != nil {
			t.Errorf("Has(%v) = %v, %v, want true", res.Blob, ok, err)
		}
	}
}

func testEmpty(t *testing.T, f Fixture) {
	res := put(t, f.Backend, nil, ".txt")
	got := mustRead(t, f.Backend, res.Blob)
	if len(got) != 0 {
		t.Errorf("empty blob read back %d bytes", len(got))
	}
}

func testDedup(t *testing.T, f Fixture) {
	data := RandomBytes(7, 200<<10)
	first := put(t, f.Backend, data, ".txt")
	second := put(t, f.Backend, data, ".txt")
	if first.Existed || !second.Existed {
		t.Errorf("Existed = %v then %v, want false then true", first.Existed, second.Existed)
	}
	other := put(t, f.Backend, data, ".md")
	if other.Existed || other.Blob == first.Blob {
		t.Errorf("same bytes with another extension: %+v, want a new blob", other)
	}
	n := 0
	err := f.Backend.Walk(t.Context(), func(e cas.Entry) error {
		if e.Kind == cas.EntryBlob && e.Blob.Digest == first.Blob.Digest {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Walk: %v", err)
	}
	if n != 2 {
		t.Errorf("Walk lists %d blobs of that digest, want 2 (.txt and .md)", n)
	}
}

func testConcurrentSameBlob(t *testing.T, f Fixture) {
	for _, size := range []int{10 << 10, 3 << 20} {
		data := RandomBytes(uint64(size), size)
		const writers = 8
		var wg sync.WaitGroup
		errs := make([]error, writers)
		existed := make([]bool, writers)
		start := make(chan struct{})
		for i := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				res, err := f.Backend.Put(t.Context(), bytes.NewReader(data), ".log")
				errs[i], existed[i] = err, res.Existed
			}()
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("%d bytes, writer %d: %v", size, i, err)
			}
		}
		b := cas.Blob{Digest: cas.Sum(data), Ext: ".log"}
		if got := mustRead(t, f.Backend, b); !bytes.Equal(got, data) {
			t.Errorf("%d bytes: after %d concurrent writers the blob reads back wrong", size, writers)
		}
		n := 0
		if err := f.Backend.Walk(t.Context(), func(e cas.Entry) error {
			if e.Blob == b {
				n++
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("%d bytes: Walk lists the blob %d times, want once", size, n)
		}
	}
}

func missingBlob() cas.Blob {
	return cas.Blob{Digest: cas.Sum([]byte("never stored " + time.Now().String())), Ext: ".txt"}
}

func testMissing(t *testing.T, f Fixture) {
	b := missingBlob()
	if _, err := f.Backend.Open(t.Context(), b); !errors.Is(err, cas.ErrNotFound) {
		t.Errorf("Open(missing) = %v, want ErrNotFound", err)
	}
	if _, err := f.Backend.Stat(t.Context(), b); !errors.Is(err, cas.ErrNotFound) {
		t.Errorf("Stat(missing) = %v, want ErrNotFound", err)
	}
	if err := f.Backend.Remove(t.Context(), b); !errors.Is(err, cas.ErrNotFound) {
		t.Errorf("Remove(missing) = %v, want ErrNotFound", err)
	}
	if ok, err := cas.Has(t.Context(), f.Backend, b); ok || err != nil {
		t.Errorf("Has(missing) = %v, %v, want false, nil", ok, err)
	}
}

func testInvalidExt(t *testing.T, f Fixture) {
	for _, ext := range []string{"", "txt", ".a/b", "./..", ".toolongextension1"} {
		if _, err := f.Backend.Put(t.Context(), bytes.NewReader([]byte("x")), ext); !errors.Is(err, cas.ErrInvalidExt) {
			t.Errorf("Put(ext %q) = %v, want ErrInvalidExt", ext, err)
		}
	}
	n := 0
	if err := f.Backend.Walk(t.Context(), func(cas.Entry) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("after refused puts Walk lists %d names, want 0", n)
	}
}

// readErr opens and reads b to its end and returns the error and the bytes
// read before it.
func readErr(t *testing.T, be cas.Backend, b cas.Blob) ([]byte, error) {
	r, err := be.Open(t.Context(), b)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

func testCorrupt(t *testing.T, f Fixture) {
	if f.Corrupt == nil {
		t.Skip("the fixture cannot corrupt this backend's storage")
	}
	for _, size := range []int{100, 2 << 20} {
		data := RandomBytes(uint64(size)+3, size)
		res := put(t, f.Backend, data, ".bin")
		bad := bytes.Clone(data)
		bad[len(bad)/2] ^= 0x40
		f.Corrupt(t, res.Blob, bad)
		if got, err := cas.ReadBlob(t.Context(), f.Backend, res.Blob); !errors.Is(err, cas.ErrCorrupt) || got != nil {
			t.Errorf("%d bytes, one flipped: ReadBlob = %d bytes, %v; want no bytes and ErrCorrupt", size, len(got), err)
		}
		if _, err := readErr(t, f.Backend, res.Blob); !errors.Is(err, cas.ErrCorrupt) {
			t.Errorf("%d bytes, one flipped: reading to the end gave %v, want ErrCorrupt", size, err)
		}
	}
}

func testTruncated(t *testing.T, f Fixture) {
	if f.Corrupt == nil {
		t.Skip("the fixture cannot corrupt this backend's storage")
	}
	data := RandomBytes(11, 300<<10)
	res := put(t, f.Backend, data, ".bin")
	f.Corrupt(t, res.Blob, data[:len(data)-1])
	if got, err := cas.ReadBlob(t.Context(), f.Backend, res.Blob); !errors.Is(err, cas.ErrCorrupt) || got != nil {
		t.Errorf("truncated: ReadBlob = %d bytes, %v; want no bytes and ErrCorrupt", len(got), err)
	}
}

func testWalk(t *testing.T, f Fixture) {
	start := time.Now()
	want := map[cas.Blob]int64{}
	for i := range 20 {
		data := RandomBytes(uint64(100+i), 1000+i*37)
		ext := ".txt"
		if i%3 == 0 {
			ext = ".json"
		}
		res := put(t, f.Backend, data, ext)
		want[res.Blob] = int64(len(data))
	}
	got := map[cas.Blob]int64{}
	err := f.Backend.Walk(t.Context(), func(e cas.Entry) error {
		if e.Kind != cas.EntryBlob {
			return fmt.Errorf("unexpected %v entry %s: %s", e.Kind, e.RelPath, e.Problem)
		}
		if e.RelPath != e.Blob.RelPath() {
			t.Errorf("entry %v has RelPath %q, want %q", e.Blob, e.RelPath, e.Blob.RelPath())
		}
		// Object stores keep modification times to the second.
		if e.ModTime.Before(start.Truncate(time.Second).Add(-time.Second)) || e.ModTime.After(time.Now().Add(time.Minute)) {
			t.Errorf("entry %v ModTime %v, want between %v and now", e.Blob, e.ModTime, start)
		}
		got[e.Blob] = e.Size
		return nil
	})
	if err != nil {
		t.Fatalf("Walk: %v", err)
	}
	if len(got) != len(want) {
		t.Errorf("Walk listed %d blobs, want %d", len(got), len(want))
	}
	for b, size := range want {
		if got[b] != size {
			t.Errorf("Walk: %v has size %d, want %d", b, got[b], size)
		}
	}
	// An error from fn stops the walk and comes back as is.
	stop := errors.New("stop here")
	calls := 0
	if err := f.Backend.Walk(t.Context(), func(cas.Entry) error { calls++; return stop }); err != stop || calls != 1 {
		t.Errorf("Walk with a failing fn = %v after %d calls, want the fn's error after 1", err, calls)
	}
}

func testRemove(t *testing.T, f Fixture) {
	data := RandomBytes(21, 5000)
	res := put(t, f.Backend, data, ".txt")
	keep := put(t, f.Backend, RandomBytes(22, 5000), ".txt")
	if err := f.Backend.Remove(t.Context(), res.Blob); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if _, err := f.Backend.Stat(t.Context(), res.Blob); !errors.Is(err, cas.ErrNotFound) {
		t.Errorf("Stat after Remove = %v, want ErrNotFound", err)
	}
	if _, err := f.Backend.Open(t.Context(), res.Blob); !errors.Is(err, cas.ErrNotFound) {
		t.Errorf("Open after Remove = %v, want ErrNotFound", err)
	}
	if err := f.Backend.Walk(t.Context(), func(e cas.Entry) error {
		if e.Blob == res.Blob {
			t.Errorf("Walk lists the removed blob")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	mustRead(t, f.Backend, keep.Blob)
	again := put(t, f.Backend, data, ".txt")
	if again.Existed {
		t.Errorf("Put after Remove: Existed = true")
	}
	if got := mustRead(t, f.Backend, res.Blob); !bytes.Equal(got, data) {
		t.Errorf("blob stored again after Remove reads back wrong")
	}
}

// newPattern returns a deterministic stream of n bytes that no one holds
// in memory.
func newPattern(seed byte, n int64) io.Reader {
	var s [32]byte
	s[0] = seed
	return io.LimitReader(rand.NewChaCha8(s), n)
}

func testLarge(t *testing.T, f Fixture) {
	h := cas.NewHashingReader(newPattern(1, f.LargeSize))
	res, err := f.Backend.Put(t.Context(), h, ".bin")
	if err != nil {
		t.Fatalf("Put(%d streamed bytes): %v", f.LargeSize, err)
	}
	if res.Size != f.LargeSize || res.Blob.Digest != h.Digest() {
		t.Fatalf("Put = %+v, want %d bytes of digest %v", res, f.LargeSize, h.Digest())
	}
	r, err := f.Backend.Open(t.Context(), res.Blob)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	check := cas.NewHashingReader(r)
	if _, err := io.Copy(io.Discard, check); err != nil {
		t.Fatalf("reading the large blob back: %v", err)
	}
	if check.Size() != f.LargeSize || check.Digest() != res.Blob.Digest {
		t.Errorf("read back %d bytes of digest %v, want %d of %v", check.Size(), check.Digest(), f.LargeSize, res.Blob.Digest)
	}
	again, err := f.Backend.Put(t.Context(), newPattern(1, f.LargeSize), ".bin")
	if err != nil || !again.Existed {
		t.Errorf("second Put of the large content = %+v, %v; want Existed", again, err)
	}
}

func testCancelledBefore(t *testing.T, f Fixture) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	data := RandomBytes(31, 1000)
	if _, err := f.Backend.Put(ctx, bytes.NewReader(data), ".txt"); !errors.Is(err, context.Canceled) {
		t.Errorf("Put with a cancelled context = %v, want context.Canceled", err)
	}
	if _, err := f.Backend.Stat(t.Context(), cas.Blob{Digest: cas.Sum(data), Ext: ".txt"}); !errors.Is(err, cas.ErrNotFound) {
		t.Errorf("after a cancelled Put, Stat = %v, want ErrNotFound", err)
	}
}

// cancelAfter passes on a stream and cancels a context once n bytes have
// gone by, as a caller giving up halfway through a long write.
type cancelAfter struct {
	r      io.Reader
	n      int64
	cancel context.CancelFunc
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n -= int64(k)
	if c.n <= 0 {
		c.cancel()
	}
	return k, err
}

func testCancelledMidStream(t *testing.T, f Fixture) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	const size = 8 << 20
	full := cas.NewHashingReader(newPattern(2, size))
	if _, err := io.Copy(io.Discard, full); err != nil {
		t.Fatal(err)
	}
	_, err := f.Backend.Put(ctx, &cancelAfter{r: newPattern(2, size), n: 2 << 20, cancel: cancel}, ".bin")
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Put cancelled halfway = %v, want context.Canceled", err)
	}
	b := cas.Blob{Digest: full.Digest(), Ext: ".bin"}
	if _, err := f.Backend.Stat(t.Context(), b); !errors.Is(err, cas.ErrNotFound) {
		t.Errorf("after a Put cancelled halfway, Stat = %v, want ErrNotFound", err)
	}
	if err := f.Backend.Walk(t.Context(), func(e cas.Entry) error {
		if e.Kind == cas.EntryBlob {
			t.Errorf("after a Put cancelled halfway, Walk lists %v", e.Blob)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func testCancelledOpen(t *testing.T, f Fixture) {
	res := put(t, f.Backend, RandomBytes(41, 1000), ".txt")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if r, err := f.Backend.Open(ctx, res.Blob); !errors.Is(err, context.Canceled) {
		if err == nil {
			r.Close()
		}
		t.Errorf("Open with a cancelled context = %v, want context.Canceled", err)
	}
	if err := f.Backend.Walk(ctx, func(cas.Entry) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("Walk with a cancelled context = %v, want context.Canceled", err)
	}
}

// testFailingReader puts content whose reader fails partway, small and
// large: Put returns the reader's error, and no blob of the whole content
// or of the part read is stored.
func testFailingReader(t *testing.T, f Fixture) {
	errRead := errors.New("the content's source failed")
	for _, tc := range []struct {
		size, failAt int64
	}{
		{1000, 100},
		{8 << 20, 6 << 20},
	} {
		full := RandomBytes(uint64(tc.size), int(tc.size))
		_, err := f.Backend.Put(t.Context(), io.MultiReader(bytes.NewReader(full[:tc.failAt]), iotest.ErrReader(errRead)), ".bin")
		if !errors.Is(err, errRead) {
			t.Errorf("%d bytes failing at %d: Put = %v, want the reader's error", tc.size, tc.failAt, err)
		}
		for _, d := range [][]byte{full, full[:tc.failAt]} {
			b := cas.Blob{Digest: cas.Sum(d), Ext: ".bin"}
			if _, err := f.Backend.Stat(t.Context(), b); !errors.Is(err, cas.ErrNotFound) {
				t.Errorf("%d bytes failing at %d: Stat of %d bytes = %v, want ErrNotFound", tc.size, tc.failAt, len(d), err)
			}
		}
	}
	if err := f.Backend.Walk(t.Context(), func(e cas.Entry) error {
		if e.Kind == cas.EntryBlob {
			t.Errorf("after failed Puts, Walk lists %v", e.Blob)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
