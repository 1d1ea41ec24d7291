package store

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolcas/toolcas/hook"
)

func init() {
	// walwriter DIR: write 50 parts, say WRITTEN, and wait to be killed,
	// so that the index's -wal file still holds the rows.
	lockRoles["walwriter"] = func(a []string) error {
		ctx := context.Background()
		s, err := Open(ctx, a[0])
		if err != nil {
			return err
		}
		for i := range 50 {
			if _, err := s.Write(ctx, []hook.Item{item("acked", i, fmt.Sprintf("acknowledged part %d", i))}); err != nil {
				return err
			}
		}
		fmt.Println("WRITTEN")
		io.Copy(io.Discard, os.Stdin)
		return nil
	}
}

// TestVerifyWarnsRecentOrphans: a writer is killed (SIGKILL) after 50
// acknowledged writes, and its index.db-wal deleted, which loses their
// rows. verify then finds 50 orphans, and says they are younger than gc's
// grace period rather than calling them gc's to remove.
func TestVerifyWarnsRecentOrphans(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	MustOpenDir(t, dir, WithCreate()).Close()
	w := childCmd("walwriter", dir)
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
	wal := filepath.Join(dir, IndexFile+"-wal")
	if fi, err := os.Stat(wal); err != nil || fi.Size() == 0 {
		t.Fatalf("no -wal file after the kill (%v): the rows are already in the database, the attack does not apply", err)
	}
	os.Remove(wal)
	os.Remove(filepath.Join(dir, IndexFile+"-shm"))
	s := MustOpenDir(t, dir)
	res, err := s.Verify(ctx, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Orphans) != 50 || res.RecentOrphans != 50 {
		t.Errorf("verify after the -wal was deleted: %d orphans, %d recent; want 50 and 50", len(res.Orphans), res.RecentOrphans)
	}
	// Past the grace period they are ordinary orphans.
	later := MustOpenDir(t, dir, WithClock(func() time.Time { return time.Now().Add(2 * DefaultGrace) }))
	if res, _ := later.Verify(ctx, VerifyOptions{}); res.RecentOrphans != 0 {
		t.Errorf("%d recent orphans two grace periods later", res.RecentOrphans)
	}
}
