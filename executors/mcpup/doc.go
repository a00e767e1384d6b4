// Package mcpup runs tools of upstream MCP servers: it connects to each
// configured [Upstream] (a stdio subprocess it owns, an SSE server or a
// streamable-HTTP server), imports its tools losslessly under the names
// <upstream>__<tool>, forwards calls with their arguments, progress and
// cancellation, passes results through unchanged, and supervises the
// connections: a dead process or a dropped connection is detected and
// replaced with capped exponential backoff, and calls made meanwhile fail
// fast with class unavailable. Upstreams with isolation "thread" get one
// connection (one process) per thread, kept in a [threadctx.Pool].
//
// The [Manager] is the package's one entry point. Each tool it lists
// reaches [Options.OnTools] as an [executors.Bound]: the [registry.MCP]
// tool with the executor that runs its calls, bound to its upstream and
// its original name, so no call is routed by name.
//
// mcpup owns the mcp-go client side. It may import executors, registry,
// threadctx, retry, the standard library and mcp-go's client, transport and
// mcp packages; it must not import gateway, config or prometheus (gateway
// converts config into [Upstream] values and turns the [Options] callbacks
// into registry updates and metrics).
package mcpup
