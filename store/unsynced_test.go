package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/index"
)

func init() {
	// unsyncedwriter DIR N DURABILITY: write N steps, printing each one's
	// key and digest once it returned, then write one more and stop for
	// good once its row is committed, printing its key and digest: a
	// process that a power cut would leave with that row and maybe without
	// its blob's name.
	lockRoles["unsyncedwriter"] = func(a []string) error {
		ctx := context.Background()
		var n int
		fmt.Sscan(a[1], &n)
		opts, err := DurabilityOptions(a[2])
		if err != nil {
			return err
		}
		var last atomic.Bool
		s, err := Open(ctx, a[0], append(opts, withFaults(func(point string) error {
			if point == "write:committed" && last.Load() {
				fmt.Println("COMMITTED")
				select {} // until killed
			}
			return nil
		}))...)
		if err != nil {
			return err
		}
		for i := range n + 1 {
			last.Store(i == n)
			st, err := s.Write(ctx, []hook.Item{item("w", i, text16K(i))})
			if err != nil {
				return err
			}
			fmt.Printf("RETURNED %s %s\n", st[0].Key, st[0].Digest)
		}
		return nil
	}
}

// TestRecoverDropsRowsWhoseBlobNameWasLost: a writer process is killed
// with its last row committed and its blob's directory sync maybe not
// done; the blob file is then removed, as a power cut that lost the
// rename would leave it. The next Open drops that row, and only it: every
// write the writer saw return resolves and reads back, every row left
// resolves, and no marker is left. The same holds where the row's commit
// is not synced (recent keys may be lost): the row can outlive the name
// there too.
func TestRecoverDropsRowsWhoseBlobNameWasLost(t *testing.T) {
	for _, mode := range []string{"full", DurabilityRecentKeysMayBeLost} {
		t.Run(mode, func(t *testing.T) { testRecoverDropsRows(t, mode) })
	}
}

func testRecoverDropsRows(t *testing.T, mode string) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(ctx, dir, WithCreate())
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	returned := killAtCommit(t, "unsyncedwriter", dir, "5", mode)
	if len(returned) != 5 {
		t.Fatalf("the writer stopped after %d writes, want 5", len(returned))
	}
	markers, _ := os.ReadDir(filepath.Join(dir, UnsyncedDir))
	if len(markers) != 1 {
		t.Fatalf("%d markers left by the killed writer, want 1", len(markers))
	}
	// The lost name: the last write's blob file goes.
	s2, err := Open(ctx, dir, ReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	last, err := s2.Resolve(ctx, "", "w/5_t_c.txt")
	s2.Close()
	if err != nil {
		t.Fatalf("the last row is not committed: %v", err)
	}
	path := filepath.Join(dir, filepath.FromSlash(last.Blob.RelPath()))
	os.Chmod(path, 0o644)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}

	s, err = Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if rec := s.Recovered(); len(rec) != 1 || rec[0].Key != "w/5_t_c.txt" {
		t.Errorf("recovered %v, want the last write's row", partKeys(rec))
	}
	checkRecovered(t, s, returned, 5)
}

// checkRecovered checks a store after its recovery: every write a killed
// writer saw return (as killAtCommit gives them) reads back, rows rows are
// left and each reads, no marker is left, and verify finds it whole.
func checkRecovered(t *testing.T, s *Store, returned []string, rows int) {
	t.Helper()
	ctx := context.Background()
	for _, r := range returned {
		key, digest, _ := strings.Cut(r, " ")
		c, err := s.Read(ctx, "", key)
		if err != nil || c.Digest.String() != digest {
			t.Errorf("returned %s (%s): %v", key, digest, err)
		}
	}
	all, err := s.List(ctx, ListOptions{AllVersions: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != rows {
		t.Errorf("%d rows left, want %d: %v", len(all), rows, partKeys(all))
	}
	for _, p := range all {
		if _, err := s.Read(ctx, "", p.Key); err != nil {
			t.Errorf("row %s: %v", p.Key, err)
		}
	}
	if markers, _ := os.ReadDir(filepath.Join(s.Dir(), UnsyncedDir)); len(markers) != 0 {
		t.Errorf("markers left after recovery: %v", markers)
	}
	if res, err := s.Verify(ctx, VerifyOptions{}); err != nil || !res.OK {
		t.Errorf("verify after recovery: %+v, %v", res, err)
	}
}

// killAtCommit runs a writer child until it says COMMITTED, kills it with
// SIGKILL, and returns the "key digest" of each write it said RETURNED of.
func killAtCommit(t *testing.T, role string, args ...string) []string {
	t.Helper()
	cmd, sc := startTalkingChild(t, role, args...)
	var returned []string
	committed := false
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "RETURNED "); ok {
			returned = append(returned, rest)
		}
		if line == "COMMITTED" {
			committed = true
			break
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if !committed {
		t.Fatalf("the %s stopped after %d writes without committing its last", role, len(returned))
	}
	return returned
}

func partKeys(ps []Part) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Key)
	}
	return out
}

// The marker's life in one process: made durable by the first write with
// one barrier, left alone by another store opened meanwhile (whose
// recovery drops nothing even of a blob gone missing, since the marker's
// store is open), removed by Close. A marker no store holds is recovered:
// a row whose blob is missing goes, one whose blob repair quarantined
// stays.
func TestMarkerLife(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := MustOpenDir(t, dir, WithCreate())
	mustWrite(t, s, item("r", 1, text16K(1)), item("r", 2, text16K(2))) // two parts: no marker
	if des, _ := os.ReadDir(filepath.Join(dir, UnsyncedDir)); len(des) != 0 {
		t.Fatalf("a write of two parts made a marker: %v", des)
	}
	st := mustWrite(t, s, item("r", 3, text16K(3)))
	des, _ := os.ReadDir(filepath.Join(dir, UnsyncedDir))
	if len(des) != 1 {
		t.Fatalf("%d markers after a one-part write, want 1", len(des))
	}
	os.Chmod(st[0].Path, 0o644)
	os.Remove(st[0].Path) // lost, but its writer is still open
	other, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(other.Recovered()) != 0 {
		t.Errorf("a live store's marker was recovered: %v", partKeys(other.Recovered()))
	}
	other.Close()
	s.Close()
	if des, _ := os.ReadDir(filepath.Join(dir, UnsyncedDir)); len(des) != 0 {
		t.Fatalf("Close left %v", des)
	}

	// A stale marker covering every blob (it does not read whole).
	q := mustWrite(t, MustOpenDir(t, dir), item("r", 4, text16K(4)))
	if err := os.MkdirAll(filepath.Join(dir, QuarantineDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(q[0].Path, filepath.Join(dir, QuarantineDir, filepath.Base(q[0].Path))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, UnsyncedDir, "1-stale"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err = Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := partKeys(s.Recovered()); len(got) != 1 || got[0] != "r/3_t_c.txt" {
		t.Errorf("recovered %v, want r/3_t_c.txt alone", got)
	}
	for _, k := range []string{"r/1_t_c.txt", "r/2_t_c.txt", "r/4_t_c.txt"} {
		if _, err := s.Resolve(ctx, "", k); err != nil {
			t.Errorf("%s: %v", k, err)
		}
	}
}

// A blob whose name cannot be made durable fails its write, and the row
// committed meanwhile goes: nothing resolves to a blob the caller was told
// failed.
func TestNameSyncFailureTakesTheRowBack(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("directory sync failed")
	s := MustOpen(t, withFaults(func(point string) error {
		if point == "write:name" {
			return boom
		}
		return nil
	}))
	_, err := s.Write(ctx, []hook.Item{item("r", 1, text16K(1))})
	if !errors.Is(err, boom) {
		t.Fatalf("write: %v, want %v", err, boom)
	}
	if _, err := s.Resolve(ctx, "", "r/1_t_c.txt"); !errors.Is(err, index.ErrNotFound) {
		t.Errorf("the row stayed: %v", err)
	}
}

// A store recovering at the moment a writer makes its marker may lock and
// remove the marker's temp file before its maker locks it: the maker then
// makes another, and the write succeeds.
func TestMarkerTakenByRecoveryWhileMade(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	taken := 0
	markerRace = func(tmp string) {
		if taken > 0 {
			return
		}
		taken++
		// What recoverUnsynced does with a temp marker it can lock.
		f, err := os.Open(tmp)
		if err != nil {
			t.Error(err)
			return
		}
		if err := flockNB(f, lockEX); err != nil {
			t.Error(err)
		}
		t.Cleanup(func() { f.Close() })
		os.Remove(tmp)
	}
	t.Cleanup(func() { markerRace = nil })
	if _, err := s.Write(ctx, []hook.Item{item("r", 1, text16K(7))}); err != nil {
		t.Fatalf("write while recovery took the marker: %v", err)
	}
	if taken != 1 {
		t.Fatalf("the race ran %d times, want 1", taken)
	}
}

func init() {
	// groupwriter DIR N: write N one-part steps, printing each one's key
	// and digest once it returned, then four at once, in one group, and
	// stop for good once their rows are committed, before the barrier that
	// makes their blobs durable: a process that a power cut would leave
	// with those rows and maybe without their blobs' bytes or names.
	lockRoles["groupwriter"] = func(a []string) error {
		ctx := context.Background()
		var n int
		fmt.Sscan(a[1], &n)
		var (
			last    atomic.Bool
			mu      sync.Mutex
			arrived int
			met     = make(chan struct{})
			s       *Store
		)
		s, err := Open(ctx, a[0], barrierAlwaysCheap, withFaults(func(point string) error {
			if !last.Load() {
				return nil
			}
			switch point {
			case "write:blob":
				// The four meet here, each with its statements handed
				// over, so that they share one transaction.
				mu.Lock()
				if arrived++; arrived == groupWriters {
					for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
						handed := total(s, "commit:handed")
						if handed == n+groupWriters {
							break
						}
					}
					close(met)
				}
				mu.Unlock()
				<-met
			case "write:barrier":
				fmt.Println("COMMITTED")
				select {} // until killed
			}
			return nil
		}))
		if err != nil {
			return err
		}
		if !localOf(s).groupable(1) {
			return errors.New("no one-call barrier here")
		}
		for i := range n {
			st, err := s.Write(ctx, []hook.Item{item("w", i, text16K(i))})
			if err != nil {
				return err
			}
			fmt.Printf("RETURNED %s %s\n", st[0].Key, st[0].Digest)
		}
		last.Store(true)
		var wg sync.WaitGroup
		for i := range groupWriters {
			wg.Go(func() {
				if _, err := s.Write(ctx, []hook.Item{item(fmt.Sprint("g", i), 1, text16K(100+i))}); err != nil {
					fmt.Println("ERROR", err)
				}
			})
		}
		wg.Wait()
		return errors.New("the group's writes returned")
	}
}

// TestRecoverDropsGroupedRowsWhoseBytesWereLost: a writer process is
// killed with the rows of four writes in one group committed and the
// barrier that makes their blobs durable not taken. A power cut then may
// have kept each blob whole, kept its name and lost its bytes (an empty
// file, or one of zeros), or lost its name: the files are made so by hand.
// The next Open drops the rows of the blobs that are not whole, and only
// those: every write the writer saw return resolves and reads back, and so
// do the group's rows that are left.
func TestRecoverDropsGroupedRowsWhoseBytesWereLost(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("no one-call barrier here (not Linux)")
	}
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(ctx, dir, WithCreate())
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	returned := killAtCommit(t, "groupwriter", dir, "3")
	if len(returned) != 3 {
		t.Fatalf("the writer stopped after %d writes, want 3", len(returned))
	}

	// What the power cut left of each of the group's blobs.
	ro, err := Open(ctx, dir, ReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	damage := []func(path string) error{
		func(string) error { return nil }, // whole
		func(path string) error { return os.Truncate(path, 0) },
		func(path string) error {
			fi, err := os.Stat(path)
			if err != nil {
				return err
			}
			return os.WriteFile(path, make([]byte, fi.Size()), 0o644)
		},
		os.Remove,
	}
	for i, hurt := range damage {
		key := fmt.Sprintf("g%d/1_t_c.txt", i)
		p, err := ro.Resolve(ctx, "", key)
		if err != nil {
			t.Fatalf("the group's row %s is not committed: %v", key, err)
		}
		path := filepath.Join(dir, filepath.FromSlash(p.Blob.RelPath()))
		os.Chmod(path, 0o644)
		if err := hurt(path); err != nil {
			t.Fatal(err)
		}
	}
	ro.Close()

	s, err = Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := partKeys(s.Recovered())
	sort.Strings(got)
	if want := []string{"g1/1_t_c.txt", "g2/1_t_c.txt", "g3/1_t_c.txt"}; !slices.Equal(got, want) {
		t.Errorf("recovered %v, want %v", got, want)
	}
	// The damaged files went with their rows.
	checkRecovered(t, s, returned, 4)
	// The group's content is written again whole.
	for i := range groupWriters {
		st := mustWrite(t, s, item(fmt.Sprint("g", i), 2, text16K(100+i)))
		if c, err := s.Read(ctx, "", st[0].Key); err != nil || string(c.Data) != text16K(100+i) {
			t.Errorf("the group's content %d written again: %v", i, err)
		}
	}
}

// The marker moves up to the present once it is a minute old and no write
// it covers is in flight, so that the check after an unclean shutdown
// covers the last minutes of writes, not every write since Open: a blob
// written long before the move is not looked at, one written after it is.
func TestMarkerMovesUp(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var (
		mu  sync.Mutex
		now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	s := MustOpenDir(t, dir, WithCreate(), WithClock(clock))
	content := func() (maxID, at int64) {
		t.Helper()
		des, err := os.ReadDir(filepath.Join(dir, UnsyncedDir))
		if err != nil || len(des) != 1 {
			t.Fatalf("markers %v, %v; want one", des, err)
		}
		b, err := os.ReadFile(filepath.Join(dir, UnsyncedDir, des[0].Name()))
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(b))
		if len(f) != 2 {
			t.Fatalf("marker %q", b)
		}
		maxID, _ = strconv.ParseInt(f[0], 10, 64)
		at, _ = strconv.ParseInt(f[1], 10, 64)
		return maxID, at
	}
	first := mustWrite(t, s, item("r", 1, text16K(1)))
	made := clock().UnixNano()
	if id, at := content(); id != 0 || at != made {
		t.Fatalf("marker (%d, %d), want (0, %d)", id, at, made)
	}

	// Twenty minutes on, a write with another in flight leaves it alone.
	advance(20 * time.Minute)
	localOf(s).marker.writes.RLock()
	mustWrite(t, s, item("r", 2, text16K(2)))
	localOf(s).marker.writes.RUnlock()
	if id, at := content(); id != 0 || at != made {
		t.Errorf("with a write in flight the marker became (%d, %d), want (0, %d)", id, at, made)
	}
	// The next write alone moves it up past every blob so far.
	mustWrite(t, s, item("r", 3, text16K(3)))
	maxID, err := s.ix.MaxBlobID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if id, at := content(); id != maxID || at != clock().UnixNano() {
		t.Errorf("marker (%d, %d), want (%d, %d)", id, at, maxID, clock().UnixNano())
	}
	// Within the minute it stays.
	advance(time.Second)
	last := mustWrite(t, s, item("r", 4, text16K(4)))
	if id, _ := content(); id != maxID {
		t.Errorf("a second later the marker covers ids past %d, want past %d", id, maxID)
	}

	// An unclean shutdown, and a power cut that lost the first write's
	// blob and the last's: only the last is the marker's to drop.
	des, _ := os.ReadDir(filepath.Join(dir, UnsyncedDir))
	path := filepath.Join(dir, UnsyncedDir, des[0].Name())
	kept, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := os.WriteFile(path, kept, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, st := range []hook.Stored{first[0], last[0]} {
		os.Chmod(st.Path, 0o644)
		if err := os.Remove(st.Path); err != nil {
			t.Fatal(err)
		}
	}
	s2, err := Open(ctx, dir, WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if got := partKeys(s2.Recovered()); !slices.Equal(got, []string{last[0].Key}) {
		t.Errorf("recovered %v, want [%s]", got, last[0].Key)
	}
}
