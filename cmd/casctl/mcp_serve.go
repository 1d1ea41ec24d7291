package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/toolcas/toolcas/mcp"
)

type mcpServeOptions struct {
	run         string
	listen      string
	maxResource int64
}

func newMCPServeCommand(g *globals) *cobra.Command {
	var o mcpServeOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the store over MCP: read back, search, stats, resources",
		Long: `serve is an MCP server over the store alone, on stdio (or, with --listen,
streamable HTTP). Its tools: read_tool_result (read a part back by key, path
or digest, paging and grepping text), search (what casctl ls lists, a page at
a time) and stats. Every part is the resource toolcas://RUN/KEY: a read of one
larger than --max-resource-bytes returns a text's first lines and how to read
on with read_tool_result, or says what binary content is and how to get it.
Clients can complete a resource's run and key, and subscribe to it. With --run
it sees one run only.`,
		Example: `  casctl mcp serve --store ~/agent/tool_results
  casctl mcp serve --run demo-1 --listen localhost:8932`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runMCPServe(cmd.Context(), g, o)
		},
	}
	cmd.Flags().StringVar(&o.run, "run", "", "serve this run only")
	cmd.Flags().StringVar(&o.listen, "listen", "", "serve streamable HTTP on this address (host:port) instead of stdio")
	cmd.Flags().Int64Var(&o.maxResource, "max-resource-bytes", mcp.DefaultMaxResourceBytes, "resources/read of a part returns at most this many bytes: a longer text its first lines, and how to read on")
	return cmd
}

func runMCPServe(ctx context.Context, g *globals, o mcpServeOptions) error {
	if o.maxResource < 4<<10 {
		return usagef("mcp serve: --max-resource-bytes %d: want at least 4096 bytes", o.maxResource)
	}
	ctx, stop := untilSignal(ctx)
	defer stop()
	// The server only reads: it works on a read-only store, in a sandbox.
	st, err := g.openRead(ctx)
	if err != nil {
		return fail("mcp serve", err)
	}
	defer st.Close()
	opts := []mcp.Option{mcp.WithMaxResourceBytes(o.maxResource)}
	if o.run != "" {
		opts = append(opts, mcp.WithRun(o.run))
	}
	s, err := mcp.NewStoreServer(st, opts...)
	if err != nil {
		return fmt.Errorf("mcp serve: %w", err)
	}
	if o.listen != "" {
		log := slog.New(slog.NewTextHandler(g.stderr, nil))
		return serveHTTP(ctx, g, o.listen, sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.Server() }, nil), log)
	}
	err = s.Server().Run(ctx, &sdk.IOTransport{Reader: readCloser{g.stdin}, Writer: writeCloser{g.stdout}})
	if ctx.Err() != nil {
		return nil
	}
	return err
}
