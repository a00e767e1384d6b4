// Package executors runs tool calls. It defines the one-method [Executor]
// interface, the [Call] and [Result] types that flow through the pipeline,
// [Bound] (a tool with the executor of its calls, bound once when the tool
// is registered, so nothing below the front looks a tool up by name), the
// [Dispatcher] that applies the per-call deadline and retries, and the two
// in-process kinds: a [StatelessFunc] (a Go function) and [Stateful] (a
// factory of per-thread instances, pooled by threadctx).
//
// executors must not import mcp-go, chi or prometheus: results are
// toolgate's own types, and gateway maps them to the wire. Of toolgate's
// packages it imports only registry, threadctx and retry.
package executors
