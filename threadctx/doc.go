// Package threadctx owns toolgate's notion of a thread: the per-thread
// instance pool for stateful tools and thread-isolated upstreams ([Pool]).
// The thread ID itself travels in one place, the executors.Call of each
// call, never in a context; a context only marks a thread made up for one
// call as provisional ([WithProvisional]), which bounds what the pool
// keeps for threads nobody comes back to.
//
// A thread is the isolation unit for stateful tools. By default it is one
// MCP session; a call may name one explicitly. Each stateful tool has at most
// one instance per thread: [Pool.Acquire] creates it lazily on first use,
// reuses it within the thread and never shows it to another thread. The
// pool closes instances that stay idle longer than a TTL, evicts the least
// recently used idle instance when it reaches its cap, and closes every
// instance of a thread when the thread ends ([Pool.CloseThread]).
//
// threadctx must not import anything beyond the standard library.
package threadctx

// MetaKey is the _meta key by which a call names its thread explicitly
// (gateway.ThreadMetaKey). Calls naming the same thread share stateful
// instances, across sessions.
const MetaKey = "toolgate/thread"
