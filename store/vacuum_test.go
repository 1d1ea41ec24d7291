package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolcas/toolcas/hook"
)

// A writer in another store on the same directory goes on while the index
// is vacuumed: each of its writes waits or goes through, none fails, and
// every part written before, during and after reads back; verify is clean
// after. A read-only store refuses to vacuum.
func TestVacuumIndexWithAWriter(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := MustOpenDir(t, dir, WithCreate())
	const n = 6000
	for i := 0; i < n; i += 500 {
		var items []hook.Item
		for j := i; j < i+500; j++ {
			items = append(items, item(fmt.Sprint("r", j%7), j, fmt.Sprintf("result %d\n", j)))
		}
		mustWrite(t, s, items...)
	}
	w := MustOpenDir(t, dir)
	var written atomic.Int64
	stop, ended := make(chan struct{}), make(chan struct{})
	werr := make(chan error, 1)
	go func() {
		defer close(ended)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := w.Write(ctx, []hook.Item{item("w", i, fmt.Sprintf("during %d\n", i))}); err != nil {
				werr <- fmt.Errorf("write %d: %w", i, err)
				return
			}
			written.Add(1)
		}
	}()
	// waitFor polls until the writer has made n writes, or has ended.
	waitFor := func(n int64) {
		for deadline := time.Now().Add(30 * time.Second); written.Load() < n && time.Now().Before(deadline); {
			select {
			case <-ended:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}
	waitFor(5)
	at := written.Load()
	res, err := s.VacuumIndex(ctx)
	if err != nil {
		t.Fatal(err)
	}
	during := written.Load() - at
	waitFor(written.Load() + 5)
	close(stop)
	<-ended
	select {
	case err := <-werr:
		t.Fatalf("a writer beside VacuumIndex: %v", err)
	default:
	}
	t.Logf("vacuum %+v; %d writes before it began, %d while it ran, %d in all", res, at, during, written.Load())
	if res.Before == 0 || res.After == 0 {
		t.Errorf("VacuumIndex = %+v, want the sizes before and after", res)
	}
	for i := range n {
		c, err := s.Read(ctx, fmt.Sprint("r", i%7), fmt.Sprintf("r%d/%d_t_c.txt", i%7, i))
		if err != nil || !bytes.Equal(c.Data, fmt.Appendf(nil, "result %d\n", i)) {
			t.Fatalf("part %d after VacuumIndex: %v", i, err)
		}
	}
	for i := range written.Load() {
		if _, err := s.Read(ctx, "w", fmt.Sprintf("w/%d_t_c.txt", i)); err != nil {
			t.Fatalf("write %d beside VacuumIndex: %v", i, err)
		}
	}
	v, err := s.Verify(ctx, VerifyOptions{})
	if err != nil || !v.OK {
		t.Errorf("verify after VacuumIndex: %+v, %v", v, err)
	}
	ro, err := Open(ctx, dir, ReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, err := ro.VacuumIndex(ctx); !errors.Is(err, ErrReadOnly) {
		t.Errorf("VacuumIndex read-only = %v, want ErrReadOnly", err)
	}
}
