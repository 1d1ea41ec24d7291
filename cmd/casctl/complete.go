package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/toolcas/toolcas/store"
)

// completionLimit bounds what a completion offers: a shell shows no more.
const completionLimit = 200

// withStore runs f on the store for a completion, if there is one; a
// completion never creates a store and never prints an error.
func withStore(cmd *cobra.Command, g *globals, f func(ctx context.Context, s *store.Store) []string) ([]string, cobra.ShellCompDirective) {
	if !store.IsRemoteLocation(g.storeDir()) && !store.Exists(g.storeDir()) {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	s, err := g.open(ctx)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	defer s.Close()
	return f(ctx, s), cobra.ShellCompDirectiveNoFileComp
}

// completeRefs completes a REF argument with the store's keys: first the
// run names (ending in /, so the shell goes on), then the keys of the run
// typed so far.
func completeRefs(g *globals) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		out, dir := withStore(cmd, g, func(ctx context.Context, s *store.Store) []string {
			if !strings.Contains(toComplete, "/") {
				runs, _ := s.Runs(ctx, toComplete, completionLimit)
				out := make([]string, len(runs))
				for i, r := range runs {
					out[i] = r + "/"
				}
				return out
			}
			keys, _ := s.Keys(ctx, toComplete, completionLimit)
			return keys
		})
		if len(out) > 0 && strings.HasSuffix(out[0], "/") {
			dir |= cobra.ShellCompDirectiveNoSpace
		}
		return out, dir
	}
}

// completeRunsAndTools completes --run and --tool, where cmd has them,
// with the names in the store.
func completeRunsAndTools(g *globals, cmd *cobra.Command) {
	for name, list := range map[string]func(*store.Store, context.Context, string, int) ([]string, error){
		"run":  (*store.Store).Runs,
		"tool": (*store.Store).Tools,
	} {
		if cmd.Flags().Lookup(name) == nil {
			continue
		}
		cmd.RegisterFlagCompletionFunc(name, func(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			return withStore(cmd, g, func(ctx context.Context, s *store.Store) []string {
				names, _ := list(s, ctx, toComplete, completionLimit)
				return names
			})
		})
	}
}

// checkNames says when a run or tool a command was given has no part in
// the store, which would otherwise look like an empty answer.
func checkNames(ctx context.Context, s *store.Store, run, tool string) error {
	if run != "" {
		ok, err := s.HasRun(ctx, run)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("no run %q in %s%s", run, s.Location(), known(ctx, (*store.Store).Runs, s, "runs"))
		}
	}
	if tool != "" {
		ok, err := s.HasTool(ctx, tool)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("no tool %q in %s%s", tool, s.Location(), known(ctx, (*store.Store).Tools, s, "tools"))
		}
	}
	return nil
}

// known lists the first few names the store does have, for a message.
func known(ctx context.Context, list func(*store.Store, context.Context, string, int) ([]string, error), s *store.Store, what string) string {
	names, err := list(s, ctx, "", listMost+1)
	if err != nil || len(names) == 0 {
		return " (it holds no parts)"
	}
	if len(names) > listMost {
		return fmt.Sprintf(" (its %s include %s …)", what, strings.Join(names[:listMost], ", "))
	}
	return fmt.Sprintf(" (its %s: %s)", what, strings.Join(names, ", "))
}
