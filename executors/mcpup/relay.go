package mcpup

import (
	"context"
	"encoding/json"
	"maps"
	"strconv"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// Peer is the client a call came from, as the upstream side reaches it:
// the upstream's requests to its client during the call (sampling,
// elicitation, roots) and its log messages are relayed to it. The MCP
// front provides one per call; [WithPeer] puts it in the call's context.
type Peer interface {
	// Session is the ID of the client's session; "" when it has none.
	Session() string
	// Request sends a request of method with params to the client and
	// returns its result. An error with an RPCCode() int method carries
	// the JSON-RPC code the upstream gets (a client that did not declare
	// the capability: -32601).
	Request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
	// Notify sends a notification to the client; a log message
	// (notifications/message) only at or above the level its session set.
	Notify(method string, params map[string]any)
}

type peerKey struct{}

// WithPeer returns ctx carrying p: requests the upstreams make while a
// call or request made with ctx runs go to p.
func WithPeer(ctx context.Context, p Peer) context.Context {
	return context.WithValue(ctx, peerKey{}, p)
}

// PeerFrom returns the [Peer] in ctx, or nil.
func PeerFrom(ctx context.Context) Peer {
	p, _ := ctx.Value(peerKey{}).(Peer)
	return p
}

// inflight is a request to the upstream made for a peer.
type inflight struct {
	ctx  context.Context
	peer Peer
}

// trackPeer records that a request with ID id is in flight for ctx's peer,
// if ctx has one; the returned function forgets it.
func (c *conn) trackPeer(ctx context.Context, id string) func() {
	p := PeerFrom(ctx)
	if p == nil {
		return func() {}
	}
	c.peersMu.Lock()
	c.peers[id] = inflight{ctx: ctx, peer: p}
	c.peersMu.Unlock()
	return func() {
		c.peersMu.Lock()
		delete(c.peers, id)
		c.peersMu.Unlock()
	}
}

// soloPeer returns the one peer the connection has requests in flight for
// (the latest of them if one session has several): an upstream's message
// that names no request (stdio and SSE cannot tell) belongs to it. ok is
// false when requests of more than one session are in flight: the message
// cannot be attributed, and must not reach another client. p is nil when
// none is in flight.
func (c *conn) soloPeer() (f inflight, ok bool) {
	c.peersMu.Lock()
	defer c.peersMu.Unlock()
	for _, in := range c.peers {
		if f.peer != nil && f.peer.Session() != in.peer.Session() {
			return inflight{}, false
		}
		f = in
	}
	return f, true
}

// onRequest answers a request the upstream sends its client (toolgate):
// ping at once; sampling/createMessage, elicitation/create and roots/list
// relayed to the client whose call the upstream is serving, with the
// answer relayed back. The transport runs it on a goroutine of its own.
func (c *conn) onRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	switch req.Method {
	case string(mcp.MethodPing):
		return transport.NewJSONRPCResultResponse(req.ID, json.RawMessage("{}")), nil
	case string(mcp.MethodSamplingCreateMessage), string(mcp.MethodElicitationCreate), string(mcp.MethodListRoots):
	default:
		return transport.NewJSONRPCErrorResponse(req.ID, mcp.METHOD_NOT_FOUND, "toolgate does not serve "+strconv.Quote(req.Method)+" to upstreams", nil), nil
	}
	target := inflight{ctx: ctx, peer: PeerFrom(ctx)} // streamable HTTP: the call's own request
	if target.peer == nil {
		var ok bool
		if target, ok = c.soloPeer(); !ok {
			return transport.NewJSONRPCErrorResponse(req.ID, mcp.INTERNAL_ERROR,
				req.Method+": calls of several clients are in flight on this connection and the request names none of them; toolgate relays it only when it can tell whose call it serves", nil), nil
		}
	}
	if target.peer == nil {
		return transport.NewJSONRPCErrorResponse(req.ID, mcp.METHOD_NOT_FOUND,
			req.Method+": no MCP client of toolgate is waiting on this upstream (no call is in flight, or the call came from no MCP session, like toolgate call's); toolgate relays it only to the client whose call the upstream is serving", nil), nil
	}
	params, err := json.Marshal(req.Params)
	if err != nil || req.Params == nil {
		params = json.RawMessage("{}")
	}
	res, err := target.peer.Request(target.ctx, req.Method, params)
	if err != nil {
		code := mcp.INTERNAL_ERROR
		if e, ok := err.(interface{ RPCCode() int }); ok {
			code = e.RPCCode()
		}
		return transport.NewJSONRPCErrorResponse(req.ID, code, c.u.redact(err.Error()), nil), nil
	}
	return transport.NewJSONRPCResultResponse(req.ID, res), nil
}

// forwardLog relays an upstream's log message to the client whose call
// caused it, or to every client when no call is in flight (an unsolicited
// message); when calls of several clients are in flight it cannot be
// attributed and goes to none. The logger names the upstream:
// "<upstream>" or "<upstream>/<its logger>".
func (c *conn) forwardLog(f map[string]any) {
	if c.u.m.onNotify == nil {
		return
	}
	params := maps.Clone(f)
	name := c.u.cfg.Name
	if l, _ := params["logger"].(string); l != "" {
		name += "/" + l
	}
	params["logger"] = name
	target, ok := c.soloPeer()
	if !ok {
		return
	}
	c.u.m.onNotify(c.u.cfg.Name, string(mcp.MethodNotificationMessage), params, target.peer)
}
