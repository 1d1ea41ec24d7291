package cancel

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestSleepEndsWithItsContext(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	stop()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep(cancelled, 1h) = %v, want context.Canceled", err)
	}
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep(1ms) = %v, want nil", err)
	}
}

func TestReaderCountsAndStops(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	r := NewReader(ctx, strings.NewReader("abcdef"))
	p := make([]byte, 4)
	if n, err := r.Read(p); n != 4 || err != nil {
		t.Fatalf("Read = %d, %v, want 4, nil", n, err)
	}
	stop()
	if n, err := r.Read(p); n != 0 || !errors.Is(err, context.Canceled) {
		t.Fatalf("Read after cancel = %d, %v, want 0, context.Canceled", n, err)
	}
	if r.Count() != 4 {
		t.Fatalf("Count = %d, want 4", r.Count())
	}
	r = NewReader(context.Background(), strings.NewReader("abcdef"))
	b, err := io.ReadAll(r)
	if string(b) != "abcdef" || err != nil || r.Count() != 6 {
		t.Fatalf("ReadAll = %q, %v, Count %d; want abcdef, nil, 6", b, err, r.Count())
	}
}
