package index

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const writerChildEnv = "TOOLCAS_TEST_INDEX_WRITER"

// TestManyProcessesWrite runs writer processes that record into one index at
// once, with batches of several parts, keys that every process writes (so
// versions race) and blobs every process shares. No error may reach a
// writer, and every row must be there afterwards.
func TestManyProcessesWrite(t *testing.T) {
	if spec := os.Getenv(writerChildEnv); spec != "" {
		writerChild(spec)
		return
	}
	forEachBackend(t, testManyProcessesWrite)
}

func testManyProcessesWrite(t *testing.T) {
	procs, dur := 4, 3*time.Second
	if testing.Short() {
		procs, dur = 3, time.Second
	}
	// A PostgreSQL database starts empty: the writers also race to create
	// the index's tables.
	path := newIndexPath(t)
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		counts = map[int]int{}
	)
	for p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(os.Args[0], "-test.run=^TestManyProcessesWrite$")
			cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s|%d|%d", writerChildEnv, path, p, dur.Milliseconds()))
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("writer %d: %v\n%s", p, err, out)
				return
			}
			for _, line := range strings.Split(string(out), "\n") {
				if v, ok := strings.CutPrefix(line, "BATCHES "); ok {
					n, _ := strconv.Atoi(v)
					mu.Lock()
					counts[p] = n
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	ctx := context.Background()
	x, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	total := 0
	for p := range procs {
		n := counts[p]
		if n == 0 {
			t.Errorf("writer %d recorded nothing", p)
		}
		total += n
		// Every batch's own part is there.
		ps, err := x.List(ctx, ListOptions{Run: fmt.Sprint("w", p)})
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) != n {
			t.Errorf("writer %d: %d own parts in the index, want %d", p, len(ps), n)
		}
	}
	// The shared key got one version per batch, numbered 1..total with no
	// gap and no duplicate.
	vs, err := x.Versions(ctx, "shared/0_t_same.txt")
	if err != nil {
		t.Fatal(err)
	}
	var nums []int
	for _, v := range vs {
		nums = append(nums, v.Version)
	}
	sort.Ints(nums)
	for i, n := range nums {
		if n != i+1 {
			t.Fatalf("versions of the shared key = %v, want 1..%d", nums, total)
		}
	}
	if len(nums) != total {
		t.Errorf("%d versions of the shared key, want %d", len(nums), total)
	}
	checkOneRowPerBlob(t, x)
	t.Logf("%d processes recorded %d batches (%d parts) in %v", procs, total, 3*total, dur)
}

func writerChild(spec string) {
	f := strings.Split(spec, "|")
	path := f[0]
	p, _ := strconv.Atoi(f[1])
	ms, _ := strconv.Atoi(f[2])
	ctx := context.Background()
	x, err := Open(ctx, path)
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	defer x.Close()
	deadline := time.Now().Add(time.Duration(ms) * time.Millisecond)
	n := 0
	for time.Now().Before(deadline) {
		run := fmt.Sprint("w", p)
		batch := []NewPart{
			newPart(run, n, "t", fmt.Sprint("c", n), fmt.Sprintf("own %d %d", p, n)),
			newPart("shared", 0, "t", "same", fmt.Sprint("shared content ", n%5)),
			newPart("common", n, "t", fmt.Sprint("p", p), "the same bytes everywhere"),
		}
		if _, err := x.Record(ctx, batch); err != nil {
			fmt.Println("record:", err)
			os.Exit(1)
		}
		n++
	}
	fmt.Println("BATCHES", n)
}

const openerChildEnv = "TOOLCAS_TEST_INDEX_OPENER"

// TestManyProcessesCreate starts processes that open one new index file at
// the same moment, round after round: whichever creates the file, the
// others must wait for it, never fail with "database is locked".
func TestManyProcessesCreate(t *testing.T) {
	if path := os.Getenv(openerChildEnv); path != "" {
		openerChild(path)
		return
	}
	procs, rounds := 6, 8
	if testing.Short() {
		rounds = 3
	}
	for r := range rounds {
		path := filepath.Join(t.TempDir(), "index.db")
		var cmds []*exec.Cmd
		var outs []*strings.Builder
		for range procs {
			cmd := exec.Command(os.Args[0], "-test.run=^TestManyProcessesCreate$")
			cmd.Env = append(os.Environ(), openerChildEnv+"="+path)
			out := new(strings.Builder)
			cmd.Stdout, cmd.Stderr = out, out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			cmds, outs = append(cmds, cmd), append(outs, out)
		}
		for i, cmd := range cmds {
			if err := cmd.Wait(); err != nil {
				t.Errorf("round %d, opener %d: %v\n%s", r, i, err, outs[i])
			}
		}
		if t.Failed() {
			return
		}
		x, err := Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		ps, err := x.List(context.Background(), ListOptions{Run: "created"})
		x.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) != procs {
			t.Fatalf("round %d: %d parts recorded, want %d", r, len(ps), procs)
		}
	}
}

// openerChild opens the index, which its siblings open at the same time,
// and records one part.
func openerChild(path string) {
	ctx := context.Background()
	x, err := Open(ctx, path)
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	defer x.Close()
	p := newPart("created", os.Getpid(), "t", "c", fmt.Sprint("opener ", os.Getpid()))
	if _, err := x.Record(ctx, []NewPart{p}); err != nil {
		fmt.Println("record:", err)
		os.Exit(1)
	}
}
