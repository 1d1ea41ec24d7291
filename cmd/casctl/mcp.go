package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func newMCPCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve toolcas over MCP: an offloading proxy, or the store",
		Long: `mcp proxy sits between an MCP client (Claude Code, Cursor, any agent) and an
MCP server: every tool result goes through the offload hook, and a large one
reaches the agent as a pointer it can read back with the read_tool_result
tool or as a toolcas:// resource.

mcp serve serves the store alone: read_tool_result, search, stats and the
toolcas:// resources, for agents that offload elsewhere and read back here.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newMCPProxyCommand(g), newMCPServeCommand(g))
	return cmd
}

// untilSignal returns a context that ends on SIGTERM, SIGINT or SIGHUP, the
// ways a client or a terminal tells a server to stop.
func untilSignal(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt, syscall.SIGHUP)
}

// stdio adapts the command's streams to an MCP transport's.
type readCloser struct{ io.Reader }

func (readCloser) Close() error { return nil }

type writeCloser struct{ io.Writer }

func (writeCloser) Close() error { return nil }
