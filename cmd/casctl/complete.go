package main

import (
	"context"
	"fmt"
	"io"
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

// bashStandIns defines, in shells without the bash-completion package, the
// two of its functions that cobra's bash script calls, so that completion
// works on a bare bash too. A word is what lies between spaces, as with the
// package's `-n =:`: a digest's colon does not split it.
const bashStandIns = `
# Stand-ins for the functions of the bash-completion package that this
# script calls, defined only where that package is not loaded.
if ! declare -F _get_comp_words_by_ref >/dev/null 2>&1; then
_get_comp_words_by_ref() {
    local line=${COMP_LINE:0:COMP_POINT}
    local -a w
    read -r -a w <<< "$line"
    if [[ ${#w[@]} -eq 0 || $line =~ [[:space:]]$ ]]; then
        w+=("")
    fi
    while [[ $# -gt 0 ]]; do
        case $1 in
        -n) shift ;;
        cur) cur=${w[${#w[@]}-1]} ;;
        prev) prev=""; if [[ ${#w[@]} -gt 1 ]]; then prev=${w[${#w[@]}-2]}; fi ;;
        words) words=("${w[@]}") ;;
        cword) cword=$(( ${#w[@]} - 1 )) ;;
        esac
        shift
    done
}
fi
if ! declare -F _filedir >/dev/null 2>&1; then
_filedir() {
    local IFS=$'\n'
    if [[ ${1-} == -d ]]; then
        COMPREPLY+=( $(compgen -d -- "$cur") )
    else
        COMPREPLY+=( $(compgen -f -- "$cur") )
    fi
}
fi
`

// bashNeedsNoPackage makes `casctl completion bash` print cobra's script
// after bashStandIns.
func bashNeedsNoPackage(sh *cobra.Command) {
	if sh.Name() != "bash" {
		return
	}
	run := sh.RunE
	sh.RunE = func(cmd *cobra.Command, args []string) error {
		if _, err := io.WriteString(cmd.OutOrStdout(), "# bash completion for casctl: works with or without the bash-completion package\n"+bashStandIns); err != nil {
			return err
		}
		return run(cmd, args)
	}
}
