// Package gateway is toolgate's composition root and its embedding API. It
// builds the registry, executors and thread pool from a [config.Config],
// runs every tool call through one pipeline (pipeline.go: resolve, record,
// track, validate, thread, middleware added with [Gateway.Use], limit,
// dispatch, map), owns the session → thread mapping and the Prometheus
// registry, and serves all of it as one MCP endpoint through its MCP front
// (package gateway/internal/mcpfront): streamable HTTP and legacy SSE
// through [Gateway.Handler], stdio through [Gateway.ServeStdio].
//
// Programs that embed toolgate call tools with [Gateway.Call], which
// returns toolgate's own [Result], and wrap dispatch with [Middleware];
// neither needs mcp-go.
//
// gateway runs no HTTP calls to tools, spawns no processes, validates no
// schemas and imports no mcp-go package: executors, schemas and the front do
// that.
package gateway
