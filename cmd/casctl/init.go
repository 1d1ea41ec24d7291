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
		Example: `  casctl init
  casctl --store /var/lib/agent/tool_results init`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runInit(cmd.Context(), g)
		},
	}
}

func runInit(ctx context.Context, g *globals) error {
	s, err := g.open(ctx, true)
	if err != nil {
		return fmt.Errorf("init: %w", err)
	}
	defer s.Close()
	fmt.Fprintln(g.stdout, s.Dir())
	return nil
}
