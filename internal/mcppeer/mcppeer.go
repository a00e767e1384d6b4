// Package mcppeer is what the two sides of an MCP relay share: the client a
// call came from ([Peer]), as the MCP front provides it and the upstream
// side reaches it, and the JSON-RPC error ([RPCError]) either side answers
// the other with. It has no dependencies, so both import it.
package mcppeer

import (
	"context"
	"encoding/json"
)

// Peer is the client a request came from, as an upstream reaches it during
// that request: the upstream's requests to its client (sampling,
// elicitation, roots) and its log messages are relayed to it.
type Peer interface {
	// Session identifies the client's session: its ID, or for a
	// sessionless (2026-07-28) request an ID of that request alone, so
	// that two sessionless clients are never taken for one.
	Session() string
	// Request sends a request of method with params to the client and
	// returns its result. An *RPCError carries the JSON-RPC code the
	// upstream gets (a client that did not declare the capability:
	// -32601).
	Request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
	// Notify sends a notification to the client; a log message
	// (notifications/message) only at or above the level its session set.
	Notify(method string, params map[string]any)
}

// RPCError is a JSON-RPC error: one a client or an upstream answered with,
// or one toolgate answers with when it cannot relay a request.
type RPCError struct {
	Code    int
	Message string
	Data    any
}

func (e *RPCError) Error() string { return e.Message }

// RPCCode returns the error's JSON-RPC code.
func (e *RPCError) RPCCode() int { return e.Code }
