// Command casctl looks into a toolcas store, cleans it, and shows what
// toolcas does: init, put, get, show, ls, stats, gc, prune, verify, demo.
package main

import (
	"context"
	"os"
	"os/signal"
)

func main() {
	ctx, stop := interruptContext()
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// interruptContext returns a context that Ctrl-C (SIGINT) cancels: every
// command stops at once, says so, and exits 130. A second Ctrl-C kills
// casctl outright, as if it did not catch the signal.
func interruptContext() (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	context.AfterFunc(ctx, stop)
	return ctx, stop
}
