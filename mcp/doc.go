// Package mcp puts toolcas between an MCP client and the tools it calls.
//
// A Proxy is an MCP server that mirrors one upstream MCP server (its tools,
// prompts and resources), forwards every call to it, and sends each tool
// result through the offload hook: a large result reaches the client as a
// short pointer, and its parts stay readable through the read-back tool and
// as toolcas:// resources. A StoreServer serves a store alone: the read-back
// tool, search, stats and the same resources, for agents that offload
// through the library or a proxy and read back from another process.
//
// Both are built on the official Go SDK (github.com/modelcontextprotocol/go-sdk)
// and return its *mcp.Server, so a Go program can serve them over any of its
// transports.
//
// Start at NewProxy (with an upstream Command or URL and a store from
// store.Open) and Proxy.Run or Proxy.Handler, or at NewStoreServer; casctl
// mcp proxy and casctl mcp serve run them from the command line.
package mcp
