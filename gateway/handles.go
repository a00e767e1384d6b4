package gateway

import (
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/gateway/internal/handles"
)

// Thread handles (package gateway/internal/handles, docs/protocol-2026.md)
// keep a stateful tool's state across the calls of a client without a
// session: the thread step mints one for a sessionless call of a tool
// that takes them, and a call passing one runs in its thread.

// HandleArg is the argument by which a call of a stateful tool names the
// thread a thread handle stands for.
const HandleArg = handles.Arg

// HandleMetaKey is the _meta key of a result that carries a newly minted
// thread handle.
const HandleMetaKey = handles.MetaKey

// takeHandle removes HandleArg from c's arguments, and from their raw
// bytes, and returns its value, when c's tool takes handles and the call
// passed one.
func (g *Gateway) takeHandle(c *Call) (string, bool) {
	if c.Tool == nil || !g.handleTools.Takes(c.Tool) {
		return "", false
	}
	h, raw, ok := handles.Take(c.Args, c.Raw)
	if ok {
		c.Raw = raw
	}
	return h, ok
}

// mintsHandle reports whether c, about to get a one-call thread, gets a
// thread handle instead: a sessionless MCP call of a tool that takes
// handles, which the caller may call (a refused call gets no handle).
func (g *Gateway) mintsHandle(c *Call) bool {
	return c.sessionless && c.Tool != nil && g.handleTools.Takes(c.Tool) && c.ident.Permits(c.Tool.Name)
}

// addThreadUpstreamTools registers the tools of upstream, whose isolation
// is thread (a process per thread), as addUpstreamTools does, each with
// HandleArg added to its input schema as a stateful tool gets it
// ([handles.Marks.AddUpstream]).
func (g *Gateway) addThreadUpstreamTools(upstream string, tools []executors.Bound) error {
	return g.handleTools.AddUpstream("upstream:"+upstream, tools, func() error { return g.addUpstreamTools(upstream, tools) })
}

// withHandle returns res with handle given to the model
// ([handles.WithHandle]); res is not changed.
func withHandle(res *Result, tool, handle string) *Result {
	return (*Result)(handles.WithHandle((*executors.Result)(res), tool, handle))
}
