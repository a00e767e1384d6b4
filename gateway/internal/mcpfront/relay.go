package mcpfront

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/gateway/internal/eventstream"
	"github.com/toolgate/toolgate/internal/mcppeer"
)

// peer is a client session as a [mcppeer.Peer], during one request of it (ctx).
type peer struct {
	f   *Front
	s   *session // nil for a 2026-07-28 request (modernPeer)
	ctx context.Context
}

// peerOf returns the [mcppeer.Peer] of the request ctx is the context of (a
// resource, prompt or completion handler's), or nil when it has no
// session.
func (f *Front) peerOf(ctx context.Context) mcppeer.Peer {
	cs := server.ClientSessionFromContext(ctx)
	if cs == nil {
		return nil
	}
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.Modern {
		// A 2026-07-28 request other than tools/call and prompts/get
		// (resources/read, completion/complete): its client is asked
		// nothing (modern.go).
		return modernPeer{peer: peer{f: f, ctx: ctx}, caps: info.ClientCapabilities, call: f.requests.Add(1)}
	}
	s := f.liveClient(cs.SessionID())
	if s == nil {
		return nil
	}
	return peer{f: f, s: s, ctx: ctx}
}

func (p peer) Session() string { return p.s.id }

func (p peer) Request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	caps := p.s.clientCaps()
	if err := undeclared(&caps, method); err != nil {
		return nil, err
	}
	if p.s.own() {
		// On the request's own stream, else the session's GET stream.
		return p.s.ask(ctx, eventstream.From(p.ctx), method, rawParams(params))
	}
	// An SSE or stdio session: mcp-go's session asks on its one stream.
	badParams := func(err error) error {
		return &mcppeer.RPCError{Code: mcp.INVALID_PARAMS, Message: fmt.Sprintf("%s: reading the params: %v", method, err)}
	}
	var (
		res any
		err error
	)
	switch method {
	case string(mcp.MethodSamplingCreateMessage):
		s, ok := p.s.inner.(server.SessionWithSampling)
		if !ok {
			return nil, undeclared(nil, method)
		}
		req := mcp.CreateMessageRequest{Request: mcp.Request{Method: method}}
		if err := json.Unmarshal(params, &req.CreateMessageParams); err != nil {
			return nil, badParams(err)
		}
		res, err = s.RequestSampling(ctx, req)
	case string(mcp.MethodElicitationCreate):
		s, ok := p.s.inner.(server.SessionWithElicitation)
		if !ok {
			return nil, undeclared(nil, method)
		}
		req := mcp.ElicitationRequest{Request: mcp.Request{Method: method}}
		if err := json.Unmarshal(params, &req.Params); err != nil {
			return nil, badParams(err)
		}
		res, err = s.RequestElicitation(ctx, req)
	default: // roots/list: undeclared refused every other method
		s, ok := p.s.inner.(server.SessionWithRoots)
		if !ok {
			return nil, undeclared(nil, method)
		}
		res, err = s.ListRoots(ctx, mcp.ListRootsRequest{Request: mcp.Request{Method: method}})
	}
	if err != nil {
		return nil, fmt.Errorf("%s: the client answered: %w", method, err)
	}
	return json.Marshal(res)
}

func (p peer) Notify(method string, params map[string]any) {
	if st := eventstream.From(p.ctx); st != nil {
		// On the request's own stream, a log message only at or above
		// the level the session set or, for a 2026-07-28 request, the
		// request asked for.
		if method != string(mcp.MethodNotificationMessage) || logWanted(p.ctx, p.s, params) {
			st.Notify(method, params)
		}
		return
	}
	if p.s == nil {
		return // a 2026-07-28 request without a stream: nowhere to send it
	}
	// Best effort: a notification the session's queue has no room for is
	// dropped.
	if method == string(mcp.MethodNotificationMessage) {
		_ = p.f.mcp.SendLogMessageToSpecificClient(p.s.id, logNotification(params))
		return
	}
	_ = p.f.mcp.SendNotificationToSpecificClient(p.s.id, method, params)
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
// no log messages.
func logWanted(ctx context.Context, s *session, params map[string]any) bool {
	level, _ := params["level"].(string)
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.Modern {
		return info.LogLevel != "" && mcp.LoggingLevel(level).ShouldSendTo(info.LogLevel)
	}
	if s == nil {
		return false
	}
	sl, ok := s.mcpSession().(server.SessionWithLogging)
	return ok && mcp.LoggingLevel(level).ShouldSendTo(sl.GetLogLevel())
}
