package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/spf13/cobra"
)

// TestHelpFits80Columns checks every command's help: no line wider than 80
// columns, and no default that only restates the zero value.
func TestHelpFits80Columns(t *testing.T) {
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		paths = append(paths, path)
		for _, sub := range c.Commands() {
			if !sub.Hidden {
				walk(sub, append(append([]string(nil), path...), sub.Name()))
			}
		}
	}
	root := newRootCommand(&globals{})
	root.InitDefaultHelpCmd()
	walk(root, nil)
	if len(paths) < 15 {
		t.Fatalf("only %d commands found", len(paths))
	}
	for _, p := range paths {
		var out, errb bytes.Buffer
		if code := run(context.Background(), append(p, "--help"), strings.NewReader(""), &out, &errb); code != 0 {
			t.Errorf("%v --help: exit %d: %s", p, code, errb.String())
			continue
		}
		for _, line := range strings.Split(out.String(), "\n") {
			if n := utf8.RuneCountInString(line); n > 80 {
				t.Errorf("casctl %s --help: %d columns: %q", strings.Join(p, " "), n, line)
			}
		}
		for _, noise := range []string{"(default 0s)", "(default 0)", "(default \"\")", "(default false)"} {
			if strings.Contains(out.String(), noise) {
				t.Errorf("casctl %s --help says %s", strings.Join(p, " "), noise)
			}
		}
	}
}
