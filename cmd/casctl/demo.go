package main

import (
	"context"
	"fmt"
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
  casctl --store /tmp/demo demo --runs 5 --steps 100`,
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
	tr, err := trace.New(trace.Config{Seed: o.seed, Runs: o.runs, Steps: o.steps, RunPrefix: "demo",
		Tools: []string{"read_file", "grep", "list_dir", "run_tests", "screenshot"}})
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	s, err := g.open(ctx, true)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer s.Close()
	h, err := hook.New(s, demoStrategies())
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	fmt.Fprintf(g.stdout, "toolcas demo: %d runs of %d steps of a scripted coding agent over %s (%d files)\n",
		o.runs, o.steps, tr.Root(), tr.Files())
	fmt.Fprintf(g.stdout, "store: %s\n\n", s.Dir())
	bar := progress(g.stderr, false, int64(o.runs*o.steps), "demo", false)
	var (
		results, offloaded, shown int
		shownTool                 = map[string]bool{}
		shownSame                 bool
		lastKey                   string
	)
	for {
		step, ok, err := tr.Next()
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		if !ok {
			break
		}
		out, err := h.Offload(ctx, hook.Step{Run: step.Run, Number: step.Number}, step.Results)
		if err != nil {
			return fmt.Errorf("demo: %w", cleanErr(err))
		}
		for _, r := range out {
			results++
			if !hook.IsPointer(r) {
				continue
			}
			offloaded++
			refs := hook.References(r)
			lastKey = refs[0].Key
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
		return fmt.Errorf("demo: %w", cleanErr(err))
	}
	st, err := s.Stats(ctx, "")
	if err != nil {
		return fmt.Errorf("demo: %w", cleanErr(err))
	}
	printStats(g.stdout, st)
	storeFlag := ""
	if g.store != "" {
		storeFlag = " --store " + g.store
	}
	fmt.Fprintf(g.stdout, `
Explore further (go install ./cmd/casctl puts casctl on your PATH; go run ./cmd/casctl works too):
  casctl%[1]s ls --run demo-1 --limit 10
  casctl%[1]s show %[2]s
  casctl%[1]s get %[2]s --limit 20
  casctl%[1]s stats --run demo-2
  casctl%[1]s verify
  casctl%[1]s prune --keep-runs 1 && casctl%[1]s gc --grace 0s
`, storeFlag, lastKey)
	return nil
}

// oneLine shortens a pointer for the terminal: line breaks shown as ⏎, cut
// at max code points.
func oneLine(s string, max int) string {
	s = strings.ReplaceAll(s, "\n", "⏎")
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max]) + "…"
}
