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
// Besides tools, mcpup lists a shared upstream's resources, templates and
// prompts ([Options.OnCatalog]), forwards requests about them
// ([Manager.Forward]), and relays what the upstream sends its client:
// sampling, elicitation and roots requests go to the [mcppeer.Peer] of the call
// they serve, log messages and resource updates to [Options.OnNotify]. It
// relies on these facts of mcp-go v1.2.1's client: Client.Start installs
// the client's own handler of server requests on a transport that can
// carry them (stdio, streamable HTTP; not legacy SSE), and a handler set
// afterwards replaces it; the streamable HTTP transport calls it with the
// context of the request whose response stream carried the server's
// request, stdio with the transport's own (relay.go: the conformance
// scenarios tools-call-sampling and tools-call-elicitation through
// toolgate, tests/conformance_test.go, and TestEverythingSurface).
// Over stdio the transport is mcpup's own (stdio.go: one decoding per
// message, writes batched under load), behind mcp-go's client like
// mcp-go's own transports. Over streamable HTTP, mcp-go's client and
// transport keep the session (initialize, the GET stream, every other
// request, DELETE) and mcpup owns the path of a call (httpcall.go: one
// POST, its answer read once, JSON or an event stream) and the answers to
// the upstream's requests (docs/mcp-go-upstream.md).
//
// mcpup owns the mcp-go client side. It may import executors, registry,
// threadctx, retry, the standard library and mcp-go's client, transport and
// mcp packages; it must not import gateway, config or prometheus (gateway
// converts config into [Upstream] values and turns the [Options] callbacks
// into registry updates and metrics).
package mcpup
