package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolcas/toolcas/hook"
)

// readOnlyView returns dir as this process cannot write it: without write
// permission when that binds (not root), else a read-only bind mount. It
// skips the test where neither can be had.
func readOnlyView(t *testing.T, dir string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil {
				fi, _ := d.Info()
				os.Chmod(p, fi.Mode().Perm()&^0o222)
			}
			return nil
		})
		t.Cleanup(func() {
			filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
				if err == nil {
					fi, _ := d.Info()
					os.Chmod(p, fi.Mode().Perm()|0o200)
				}
				return nil
			})
		})
		return dir
	}
	view := t.TempDir()
	if out, err := exec.Command("mount", "--bind", dir, view).CombinedOutput(); err != nil {
		t.Skipf("root, and no read-only bind mount here (%v: %s); the ReadOnly option is tested with write access", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", view).Run() })
	if out, err := exec.Command("mount", "-o", "remount,bind,ro", view).CombinedOutput(); err != nil {
		t.Skipf("cannot remount read-only (%v: %s)", err, out)
	}
	if err := os.WriteFile(filepath.Join(view, "probe"), nil, 0o644); err == nil {
		t.Fatal("the read-only view is writable")
	}
	return view
}

func init() {
	// crashwriter DIR: write two parts, say WRITTEN and wait to be
	// killed, leaving the rows in index.db-wal.
	lockRoles["crashwriter"] = func(a []string) error {
		ctx := context.Background()
		s, err := Open(ctx, a[0])
		if err != nil {
			return err
		}
		if _, err := s.Write(ctx, []hook.Item{item("late", 1, "written before the crash"), item("late", 2, "and this")}); err != nil {
			return err
		}
		fmt.Println("WRITTEN")
		io.Copy(io.Discard, os.Stdin)
		return nil
	}
}

// TestReadOnlyStore opens a store on a read-only view (a read-only bind
// mount as root, no write permission otherwise), once closed cleanly and
// once after a writer was killed with its rows still in index.db-wal, and
// once more so with index.db-shm gone too (as a copy that skips it leaves
// the store: SQLite cannot read the log read-only without it, so the index
// is read from a private copy, removed on Close): listing, reading (the read tool too), stats, show and verify work; writes,
// prune and gc fail with ErrReadOnly, saying they need write access.
func TestReadOnlyStore(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		crashed, noSHM bool
	}{{false, false}, {true, false}, {true, true}} {
		crashed := tc.crashed
		t.Run(fmt.Sprintf("crashed=%v,noshm=%v", tc.crashed, tc.noSHM), func(t *testing.T) {
			dir := t.TempDir()
			s := MustOpenDir(t, dir, WithCreate())
			st := mustWrite(t, s, item("r", 1, strings.Repeat("read only ", 100)+"\nsecond line"), item("r", 2, "two"))
			s.Close()
			want := 2
			if crashed {
				w := childCmd("crashwriter", dir)
				stdin, _ := w.StdinPipe()
				defer stdin.Close()
				out, _ := w.StdoutPipe()
				w.Stderr = os.Stderr
				if err := w.Start(); err != nil {
					t.Fatal(err)
				}
				waitLine(t, out, "WRITTEN", time.Minute)
				w.Process.Kill()
				w.Wait()
				if _, err := os.Stat(filepath.Join(dir, IndexFile+"-wal")); err != nil {
					t.Fatalf("no -wal after the kill: %v", err)
				}
				want = 4
			}
			if tc.noSHM {
				if err := os.Remove(filepath.Join(dir, IndexFile+"-shm")); err != nil {
					t.Fatal(err)
				}
			}
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			view := readOnlyView(t, dir)
			ro, err := Open(ctx, view, ReadOnly())
			if err != nil {
				t.Fatalf("open read-only: %v", err)
			}
			defer func() {
				ro.Close()
				if left, _ := os.ReadDir(tmp); len(left) > 0 {
					t.Errorf("Close left %s in the temporary directory", left[0].Name())
				}
			}()
			parts, err := ro.List(ctx, ListOptions{})
			if err != nil || len(parts) != want {
				t.Fatalf("list: %d parts, %v; want %d", len(parts), err, want)
			}
			if c, err := ro.Read(ctx, "r", st[1].Key); err != nil || string(c.Data) != "two" {
				t.Errorf("read: %v", err)
			}
			rt, _ := hook.NewReadTool(ro)
			args, _ := json.Marshal(hook.ReadArgs{Ref: st[0].Key, Pattern: "second"})
			if r := rt.Call(ctx, "r", "c", args); r.Error || !strings.Contains(r.Parts[0].Text, "2\tsecond line") {
				t.Errorf("read tool: %+v", r.Parts)
			}
			if stats, err := ro.Stats(ctx, ""); err != nil || stats.Parts != int64(want) {
				t.Errorf("stats: %+v, %v", stats, err)
			}
			if _, err := ro.Show(ctx, st[0].Key); err != nil {
				t.Errorf("show: %v", err)
			}
			res, err := ro.Verify(ctx, VerifyOptions{})
			if err != nil || !res.OK || res.Checked != want {
				t.Errorf("verify: %+v, %v", res, err)
			}
			// A hook configured with a read-only store, as in a sandbox.
			cfg, _ := json.Marshal(map[string]any{"type": hook.TypeHook, "init_parameters": map[string]any{
				"store":              map[string]any{"type": TypeStore, "init_parameters": map[string]any{"dir": view, "read_only": true}},
				"offload_strategies": map[string]any{},
			}})
			if h, err := hook.Load(cfg); err != nil {
				t.Errorf("hook.Load of a read-only store: %v", err)
			} else {
				if b, _ := json.Marshal(h); !strings.Contains(string(b), `"read_only":true`) {
					t.Errorf("saved configuration lost read_only: %s", b)
				}
				h.Close()
			}
			_, werr := ro.Write(ctx, []hook.Item{item("r", 3, "no")})
			_, gerr := ro.GC(ctx, GCOptions{})
			_, perr := ro.Prune(ctx, PruneOptions{Run: "r"})
			for _, err := range []error{werr, gerr, perr} {
				if !errors.Is(err, ErrReadOnly) || !strings.Contains(err.Error(), "needs write access") {
					t.Errorf("a write on a read-only store: %v, want ErrReadOnly saying it needs write access", err)
				}
			}
		})
	}
}

// TestReadOnlyCreatesNothing: a store opened read-only where it could
// write creates no file of its own (lock files, reserve, shard
// directories), whatever it reads.
func TestReadOnlyCreatesNothing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := MustOpenDir(t, dir, WithCreate())
	st := mustWrite(t, s, item("r", 1, "one"), item("r", 2, "two"))
	s.Close()
	for _, name := range []string{LockFile, IntentFile, ReserveFile, "blobs/ff"} {
		os.Remove(filepath.Join(dir, name))
	}
	os.Remove(filepath.Join(dir, "blobs", "ff"))
	before := snapshot(t, dir, "")
	ro := MustOpenDir(t, dir, ReadOnly())
	if _, err := ro.List(ctx, ListOptions{}); err != nil {
		t.Fatal(err)
	}
	os.Remove(st[0].Path) // so that verify looks again, under the lock if it can
	if res, err := ro.Verify(ctx, VerifyOptions{}); err != nil || len(res.Missing) != 1 {
		t.Errorf("verify: %+v, %v", res, err)
	}
	ro.Close()
	var created []string
	after := map[string]bool{}
	for _, p := range snapshot(t, dir, "") {
		after[p] = true
	}
	for _, p := range before {
		delete(after, p)
	}
	for p := range after {
		if !strings.HasSuffix(p, "-shm") && !strings.HasSuffix(p, "-wal") {
			created = append(created, p)
		}
	}
	if len(created) > 0 {
		t.Errorf("a read-only store created %v", created)
	}
}
