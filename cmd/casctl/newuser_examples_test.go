package main

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// examplesSkipped are the help examples TestHelpExamples does not run, and
// why: each needs what a test cannot give it.
var examplesSkipped = map[string]string{
	"casctl copy --from tool_results --to /mnt/shared/tool_results --init":                                              "writes outside the test's directory, to /mnt",
	"casctl copy --from tool_results --to shared --init --to-index postgres://toolcas@db:5432/toolcas":                  "needs a PostgreSQL server at db:5432",
	"casctl copy --from tool_results --to s3://team-bucket/agents --init --to-index postgres://toolcas@db:5432/toolcas": "needs S3 and a PostgreSQL server at db:5432",
	"casctl copy --from shared --to tool_results --json":                                                                "needs the store shared, which the example before makes in PostgreSQL",
}

// examplesSkippedCommands are the commands whose examples TestHelpExamples
// does not run: each serves until it is stopped.
var examplesSkippedCommands = map[string]string{
	"mcp proxy": "needs an upstream MCP server (npx, uvx, or one on localhost:3001), and serves until stopped",
	"mcp serve": "serves until its client goes, or with --listen until stopped",
}

// examplesFixtures are the files in the directory where each example runs,
// besides the demo's store: those that put's examples store.
var examplesFixtures = []string{"shot.png", "report.pdf"}

// helpExamples returns the example lines of every command's help, by
// command, with continued lines joined.
func helpExamples() map[string][]string {
	out := map[string][]string{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		name := strings.TrimPrefix(c.CommandPath(), "casctl")
		name = strings.TrimSpace(name)
		var line string
		for _, l := range strings.Split(c.Example, "\n") {
			l = strings.TrimSpace(l)
			if l == "" {
				continue
			}
			if cont, ok := strings.CutSuffix(l, "\\"); ok {
				line += strings.TrimSpace(cont) + " "
				continue
			}
			out[name] = append(out[name], line+l)
			line = ""
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	root := newRootCommand(&globals{})
	root.InitDefaultHelpCmd()
	walk(root)
	return out
}

// TestHelpExamples runs every example of every command's help, as a shell
// runs it, against a store casctl demo made: each must exit 0. An example
// runs in a directory of its own, on a copy of the store, so that one that
// writes changes nothing for the next. The demo's keys are those the
// scripted agent makes over this Go installation's source tree: a Go
// release with other files there may make others.
func TestHelpExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every example")
	}
	sh, err := exec.LookPath("sh")
	if err != nil || runtime.GOOS == "windows" {
		t.Skip("no POSIX shell to run the examples")
	}
	bin, err := exec.LookPath("casctl")
	if err != nil {
		t.Fatal(err)
	}
	demo := t.TempDir()
	cmd := exec.Command(bin, "demo")
	cmd.Dir = demo
	cmd.Env = append(os.Environ(), "CASCTL_STORE=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("casctl demo: %v\n%s", err, out)
	}
	fixtures := map[string][]byte{"report.pdf": []byte("%PDF-1.4\n1 0 obj << >> endobj\ntrailer << >>\n%%EOF\n")}
	var png bytes.Buffer
	cmd = exec.Command(bin, "get", "aad4907b")
	cmd.Dir, cmd.Stdout = demo, &png
	cmd.Env = append(os.Environ(), "CASCTL_STORE=")
	if err := cmd.Run(); err != nil {
		t.Fatalf("casctl get of the demo's screenshot: %v", err)
	}
	fixtures["shot.png"] = png.Bytes()
	if len(fixtures) != len(examplesFixtures) {
		t.Fatalf("fixtures %v, want %v", fixtures, examplesFixtures)
	}

	ran := 0
	seen := map[string]bool{}
	for name, lines := range helpExamples() {
		if why, ok := examplesSkippedCommands[name]; ok {
			t.Logf("casctl %s: examples not run: %s", name, why)
			seen[name] = true
			continue
		}
		for _, line := range lines {
			if why, ok := examplesSkipped[line]; ok {
				t.Logf("%s: not run: %s", line, why)
				seen[line] = true
				continue
			}
			dir := t.TempDir()
			copyTree(t, filepath.Join(demo, "tool_results"), filepath.Join(dir, "tool_results"))
			for f, b := range fixtures {
				if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			os.Mkdir(filepath.Join(dir, "home"), 0o755)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			c := exec.CommandContext(ctx, sh, "-c", line)
			c.Dir = dir
			c.Env = append(os.Environ(), "CASCTL_STORE=", "HOME="+filepath.Join(dir, "home"))
			out, err := c.CombinedOutput()
			cancel()
			if err != nil {
				t.Errorf("casctl %s --help: example %q: %v\n%s", name, line, err, out)
			}
			ran++
		}
	}
	for k := range examplesSkipped {
		if !seen[k] {
			t.Errorf("examplesSkipped names %q, which no help shows any more", k)
		}
	}
	for k := range examplesSkippedCommands {
		if !seen[k] {
			t.Errorf("examplesSkippedCommands names %q, which has no examples any more", k)
		}
	}
	if ran < 20 {
		t.Errorf("ran only %d examples", ran)
	}
}

// copyTree copies the files under src to dst, keeping their modes.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		to := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(to, info.Mode().Perm()|0o700)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
}
