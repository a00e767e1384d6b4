package mcpfront

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Peer is the client a request came from, as an upstream reaches it
// during that request (the executors' side of the relay: mcpup.Peer has
// the same methods).
type Peer interface {
	// Session is the ID of the client's session; for a 2026-07-28
	// client, which has none, an ID of the one request, so that no two
	// such requests pass for one client.
	Session() string
	// Request sends sampling/createMessage, elicitation/create or
	// roots/list with params to the client and returns its result. A
	// client that did not declare the capability gets nothing: the error
	// is an *RPCError with code -32601.
	Request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
	// Notify sends a notification to the client; a log message
	// (notifications/message) only at or above the level the session set.
	Notify(method string, params map[string]any)
}

// RPCError is a JSON-RPC error for the upstream whose request the front
// could not relay.
type RPCError struct {
	Code int
	Msg  string
}

func (e *RPCError) Error() string { return e.Msg }

// RPCCode returns the JSON-RPC code.
func (e *RPCError) RPCCode() int { return e.Code }

// peer is a client session as a [Peer], during one request of it (ctx).
type peer struct {
	f   *Front
	s   server.ClientSession
	ctx context.Context
}

// peerOf returns the [Peer] of ctx's session, or nil when there is none.
func (f *Front) peerOf(ctx context.Context) Peer {
	s := server.ClientSessionFromContext(ctx)
	if s == nil {
		return nil
	}
	return peer{f: f, s: s, ctx: ctx}
}

func (p peer) Session() string { return p.s.SessionID() }

func (p peer) Request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	if p.ctx != nil {
		if info := server.RequestProtocolInfoFromContext(p.ctx); info != nil && info.Modern {
			// A 2026-07-28 request other than tools/call and prompts/get
			// (resources/read, completion/complete): its client is asked
			// nothing (mrtr.go).
			if err := undeclared(info.ClientCapabilities, method); err != nil {
				return nil, err
			}
			return nil, &RPCError{Code: mcp.METHOD_NOT_FOUND, Msg: method + ": the client speaks protocol 2026-07-28, which toolgate asks only during a tools/call or prompts/get (as an input_required result)"}
		}
	}
	var caps mcp.ClientCapabilities
	if ci, ok := p.s.(server.SessionWithClientInfo); ok {
		caps = ci.GetClientCapabilities()
	}
	undeclared := func(capability string) error {
		return &RPCError{Code: mcp.METHOD_NOT_FOUND, Msg: fmt.Sprintf("%s: the client that made this call did not declare the %s capability", method, capability)}
	}
	badParams := func(err error) error {
		return &RPCError{Code: mcp.INVALID_PARAMS, Msg: fmt.Sprintf("%s: reading the params: %v", method, err)}
	}
	var (
		res any
		err error
	)
	switch method {
	case string(mcp.MethodSamplingCreateMessage):
		s, ok := p.s.(server.SessionWithSampling)
		if caps.Sampling == nil || !ok {
			return nil, undeclared("sampling")
		}
		var req mcp.CreateMessageRequest
		if err := json.Unmarshal(params, &req.CreateMessageParams); err != nil {
			return nil, badParams(err)
		}
		if raw, ok, err := p.f.ask(ctx, p.ctx, p.s, method, params); ok {
			return raw, err
		}
		req.Method = method
		res, err = s.RequestSampling(ctx, req)
	case string(mcp.MethodElicitationCreate):
		s, ok := p.s.(server.SessionWithElicitation)
		if caps.Elicitation == nil || !ok {
			return nil, undeclared("elicitation")
		}
		var req mcp.ElicitationRequest
		if err := json.Unmarshal(params, &req.Params); err != nil {
			return nil, badParams(err)
		}
		if raw, ok, err := p.f.ask(ctx, p.ctx, p.s, method, params); ok {
			return raw, err
		}
		req.Method = method
		res, err = s.RequestElicitation(ctx, req)
	case string(mcp.MethodListRoots):
		s, ok := p.s.(server.SessionWithRoots)
		if caps.Roots == nil || !ok {
			return nil, undeclared("roots")
		}
		if raw, ok, err := p.f.ask(ctx, p.ctx, p.s, method, rawParams(params)); ok {
			return raw, err
		}
		res, err = s.ListRoots(ctx, mcp.ListRootsRequest{Request: mcp.Request{Method: method}})
	default:
		return nil, &RPCError{Code: mcp.METHOD_NOT_FOUND, Msg: fmt.Sprintf("%s is not relayed to clients", method)}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: the client answered: %w", method, err)
	}
	return json.Marshal(res)
}

func (p peer) Notify(method string, params map[string]any) {
	if cs := callStreamOf(p.ctx); cs != nil {
		// On the request's own stream (callstream.go), a log message only
		// at or above the level the session set or, for a 2026-07-28
		// request, the request asked for.
		if method != string(mcp.MethodNotificationMessage) || logWanted(p.ctx, p.s, params) {
			cs.notify(method, params)
		}
		return
	}
	// Best effort: mcp-go drops a notification when the session's queue is
	// full, and reports it through OnError hooks.
	if method == string(mcp.MethodNotificationMessage) {
		_ = p.f.mcp.SendLogMessageToSpecificClient(p.s.SessionID(), logNotification(params))
		return
	}
	_ = p.f.mcp.SendNotificationToSpecificClient(p.s.SessionID(), method, params)
}

// logNotification is the notifications/message of params.
func logNotification(params map[string]any) mcp.LoggingMessageNotification {
	level, _ := params["level"].(string)
	logger, _ := params["logger"].(string)
	return mcp.NewLoggingMessageNotification(mcp.LoggingLevel(level), logger, params["data"])
}

// logWanted reports whether the log message params is at or above the
// level s set (logging/setLevel) or, for a 2026-07-28 request, the level
// the request's _meta asked for; such a request that asked for none gets
// no log messages (mcp-go's SendLogMessageToClient decides alike).
func logWanted(ctx context.Context, s server.ClientSession, params map[string]any) bool {
	level, _ := params["level"].(string)
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.Modern {
		return info.LogLevel != "" && mcp.LoggingLevel(level).ShouldSendTo(info.LogLevel)
	}
	sl, ok := s.(server.SessionWithLogging)
	return ok && mcp.LoggingLevel(level).ShouldSendTo(sl.GetLogLevel())
}
