package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/internal/trace"
	"github.com/toolcas/toolcas/policy"
)

type demoOptions struct {
	runs, steps int
	seed        uint64
}

func newDemoCommand(g *globals) *cobra.Command {
	o := demoOptions{runs: 3, steps: 40, seed: 1}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a scripted coding agent through the hook into the store",
		Long: `demo replays a scripted long-running coding agent, with no LLM or network:
several runs of many steps calling read_file, grep, list_dir, run_tests and
screenshot over the Go installation's own source tree, with the repetition
real agents show. Every step's results go through the offload hook, with a
policy per tool, into the store; the demo prints some of the pointers the
agent would see, then what the store holds and saved.`,
		Example: `  casctl demo
  casctl --store bigger_demo demo --runs 5 --steps 100`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemo(cmd.Context(), g, o)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.runs, "runs", o.runs, "agent runs")
	f.IntVar(&o.steps, "steps", o.steps, "steps per run")
	f.Uint64Var(&o.seed, "seed", o.seed, "seed of the scripted agent")
	return cmd
}

// demoStrategies are the per-tool policies of the demo: what a team would
// start from.
func demoStrategies() *policy.Strategies {
	return policy.MustStrategies(
		policy.For("screenshot", policy.Always),
		policy.For("run_tests", policy.OverChars(2000)),
		policy.ForGroup([]string{"read_file", "grep"}, policy.OverChars(1500)),
		policy.For("list_dir", policy.OverChars(4000)),
		policy.Default(policy.OverChars(8000)),
	)
}

func runDemo(ctx context.Context, g *globals, o demoOptions) error {
	if o.runs < 1 || o.steps < 1 || o.runs > 1000 || o.steps > 100000 {
		return usagef("demo: --runs %d --steps %d: want 1..1000 runs of 1..100000 steps", o.runs, o.steps)
	}
	start := time.Now()
	s, created, err := g.create(ctx)
	if err != nil {
		return fail("demo", err)
	}
	defer s.Close()
	if created {
		fmt.Fprintf(g.stderr, "created store at %s\n", s.Dir())
	}
	before, err := s.Stats(ctx, "")
	if err != nil {
		return fail("demo", err)
	}
	// A store that holds data keeps it: the demo's runs get names of
	// their own.
	prefix := "demo"
	for n := 2; ; n++ {
		taken, err := s.Runs(ctx, prefix+"-", 1)
		if err != nil {
			return fail("demo", err)
		}
		if len(taken) == 0 {
			break
		}
		prefix = fmt.Sprintf("demo%d", n)
	}
	tr, err := trace.New(trace.Config{Seed: o.seed, Runs: o.runs, Steps: o.steps, RunPrefix: prefix,
		Tools: []string{"read_file", "grep", "list_dir", "run_tests", "screenshot"}})
	if err != nil {
		return fail("demo", err)
	}
	h, err := hook.New(s, demoStrategies())
	if err != nil {
		return fail("demo", err)
	}
	fmt.Fprintf(g.stdout, "toolcas demo: %d runs of %d steps of a scripted coding agent over %s (%d files)\n",
		o.runs, o.steps, tr.Root(), tr.Files())
	fmt.Fprintf(g.stdout, "store: %s\n", s.Dir())
	if before.Parts > 0 {
		fmt.Fprintf(g.stdout, "it already holds %d parts of %d runs; this demo adds runs %s-1 to %s-%d\n",
			before.Parts, before.Runs, prefix, prefix, o.runs)
	}
	fmt.Fprintln(g.stdout)
	bar := progress(g.stderr, false, int64(o.runs*o.steps), "demo", false)
	var (
		results, offloaded, shown int
		shownTool                 = map[string]bool{}
		shownSame                 bool
		textKey, imageKey         string
		runs                      []string
	)
	for {
		step, ok, err := tr.Next()
		if err != nil {
			return fail("demo", err)
		}
		if !ok {
			break
		}
		if len(runs) == 0 || runs[len(runs)-1] != step.Run {
			runs = append(runs, step.Run)
		}
		out, err := h.Offload(ctx, hook.Step{Run: step.Run, Number: step.Number}, step.Results)
		if err != nil {
			return fail("demo", err)
		}
		for i, r := range out {
			results++
			if !hook.IsPointer(r) {
				continue
			}
			offloaded++
			refs := hook.References(r)
			if len(refs) > 0 && len(step.Results[i].Parts) > 0 {
				switch {
				case step.Results[i].Parts[0].Kind == hook.KindImage && imageKey == "":
					imageKey = refs[0].Key
				case step.Results[i].Parts[0].Kind == hook.KindText && (textKey == "" || r.Tool == "read_file" && !strings.Contains(textKey, "_read_file_")):
					textKey = refs[0].Key
				}
			}
			text := r.Parts[0].Text
			same := strings.Contains(text, "same content as")
			if (!shownTool[r.Tool] || (same && !shownSame)) && shown < 8 {
				shownTool[r.Tool] = true
				shownSame = shownSame || same
				shown++
				if bar != nil {
					bar.Clear()
				}
				fmt.Fprintf(g.stdout, "%s step %d, %s:\n  %s\n\n", step.Run, step.Number, r.Tool, oneLine(text, 400))
			}
		}
		if bar != nil {
			bar.Add(1)
		}
	}
	if bar != nil {
		bar.Finish()
	}
	fmt.Fprintf(g.stdout, "%d tool results, %d offloaded, in %.1fs\n\n", results, offloaded, time.Since(start).Seconds())
	if err := s.Checkpoint(ctx); err != nil {
		return fail("demo", err)
	}
	after, err := s.Stats(ctx, "")
	if err != nil {
		return fail("demo", err)
	}
	if before.Parts > 0 {
		logical := after.LogicalBytes - before.LogicalBytes
		stored := after.StoredBytes - before.StoredBytes
		fmt.Fprintf(g.stdout, "this demo: %d parts, %s of results, %s of them new to the store (%d new blobs)\n\n",
			after.Parts-before.Parts, size(logical), size(max(stored, 0)), max(after.Blobs-before.Blobs, 0))
		fmt.Fprintln(g.stdout, "the whole store:")
	}
	printStats(g.stdout, after)
	c := "casctl"
	if g.store != "" {
		c += " --store " + shellQuote(g.store)
	}
	if inCheckout() {
		fmt.Fprintln(g.stdout, "\nExplore further (go install ./cmd/casctl puts casctl in $(go env GOPATH)/bin, or use go run ./cmd/casctl):")
	} else {
		fmt.Fprintln(g.stdout, "\nExplore further:")
	}
	fmt.Fprintf(g.stdout, "  %s ls --run %s --limit 10\n", c, runs[0])
	if textKey != "" {
		fmt.Fprintf(g.stdout, "  %s show %s\n", c, textKey)
		fmt.Fprintf(g.stdout, "  %s get %s --limit 20\n", c, textKey)
	}
	if imageKey != "" {
		fmt.Fprintf(g.stdout, "  %s get %s --output shot.png\n", c, imageKey)
	}
	fmt.Fprintf(g.stdout, "  %s stats --run %s\n", c, runs[len(runs)-1])
	fmt.Fprintf(g.stdout, "  %s verify\n", c)
	fmt.Fprintf(g.stdout, "  %s prune --run %s && %s gc --grace 0s\n", c, runs[0], c)
	return nil
}

// inCheckout reports whether the working directory is the root of a
// checkout of toolcas, where the demo's readers build casctl themselves.
func inCheckout() bool {
	mod, err := os.ReadFile("go.mod")
	if err != nil {
		return false
	}
	first, _, _ := strings.Cut(string(mod), "\n")
	_, err = os.Stat(filepath.Join("cmd", "casctl"))
	return strings.TrimSpace(first) == "module github.com/toolcas/toolcas" && err == nil
}

// oneLine shortens a pointer for the terminal: line breaks shown as ⏎, cut
// at max code points unless max is 0.
func oneLine(s string, max int) string {
	s = strings.ReplaceAll(s, "\n", "⏎")
	if max <= 0 || utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max]) + "…"
}
