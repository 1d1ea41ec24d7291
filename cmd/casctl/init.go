package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
)

func newInitCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "init",
		Short: "Create the store (idempotent) and print its absolute path",
		Long: `init creates the store in a directory that does not exist or is empty, and
prints its absolute path; on a store it only prints the path. A directory
that holds other files is refused.`,
		Example: `  casctl init
  casctl --store ~/agent/tool_results init`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runInit(cmd.Context(), g)
		},
	}
}

func runInit(ctx context.Context, g *globals) error {
	s, _, err := g.create(ctx)
	if err != nil {
		return fail("init", err)
	}
	defer s.Close()
	fmt.Fprintln(g.stdout, s.Location())
	return nil
}
