// Command casctl looks into a toolcas store, cleans it, and shows what
// toolcas does: init, put, get, show, ls, stats, gc, prune, verify, demo.
package main

import (
	"context"
	"os"
	"os/signal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
