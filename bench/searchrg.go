package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/toolcas/toolcas/search"
)

// ripgrep is what users search a directory store with: rg, when it is
// installed.

// rgArgs are rg's arguments for p over root: every file (no ignore files,
// hidden ones too), no configuration, line numbers, the path ended by a
// NUL so that any path parses.
func rgArgs(p search.Pattern, root string) []string {
	args := []string{"--no-config", "--no-heading", "-n", "--null", "--no-ignore", "--hidden", "--color", "never"}
	if p.Fixed {
		args = append(args, "-F")
	}
	if p.IgnoreCase {
		args = append(args, "-i")
	}
	return append(args, "-e", p.Expr, root)
}

// rgHits runs rg for p over the directory store and returns its hits,
// keyed as the toolcas store keys the same results.
func rgHits(ctx context.Context, rg string, ss *searchStores, p search.Pattern) (map[string]bool, error) {
	root := ss.dirRoot
	cmd := exec.CommandContext(ctx, rg, rgArgs(p, root)...)
	out, err := cmd.Output()
	if ee, ok := errors.AsType[*exec.ExitError](err); ok && ee.ExitCode() == 1 {
		err = nil // no match
	}
	if err != nil {
		return nil, fmt.Errorf("rg: %w", err)
	}
	hits := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		path, rest, ok := bytes.Cut(line, []byte{0})
		num, text, ok2 := bytes.Cut(rest, []byte{':'})
		n, err := strconv.ParseInt(string(num), 10, 64)
		if !ok || !ok2 || err != nil {
			return nil, fmt.Errorf("rg: unexpected output line %q", line)
		}
		rel, err := filepath.Rel(root, string(path))
		if err != nil {
			return nil, err
		}
		key, ok := ss.keyOf[filepath.ToSlash(rel)]
		if !ok {
			return nil, fmt.Errorf("rg: a hit in %s, which no result was written to", path)
		}
		hits[hitKey(key, n, string(text))] = true
	}
	return hits, sc.Err()
}

// runCounted runs a command, reads all it prints and returns how many
// bytes; exit status 1 (nothing found, for rg and grep) is no error.
func runCounted(ctx context.Context, name string, args ...string) (int64, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	n, _ := io.Copy(io.Discard, out)
	err = cmd.Wait()
	if ee, ok := errors.AsType[*exec.ExitError](err); ok && ee.ExitCode() == 1 {
		err = nil
	}
	if err != nil {
		return n, fmt.Errorf("%s: %w: %s", name, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return n, nil
}
