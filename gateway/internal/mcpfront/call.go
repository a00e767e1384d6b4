package mcpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/gateway/internal/eventstream"
	"github.com/toolgate/toolgate/gateway/internal/mcpwire"
	"github.com/toolgate/toolgate/gateway/internal/reqmeta"
	"github.com/toolgate/toolgate/internal/mcppeer"
	"github.com/toolgate/toolgate/internal/principal"
	"github.com/toolgate/toolgate/registry"
)

// tools/call, on every transport: the front reads the call, looks its
// tool up, runs it and writes its result itself. mcp-go's dispatcher
// never sees a tools/call.

// exchange is one message being served and what it came with.
type exchange struct {
	// ctx is the request's: the principal, mcp-go's session
	// (server.WithContext), the stream and, for a 2026-07-28 request, its
	// protocol information.
	ctx context.Context
	// s is the session the message arrived in; nil for a 2026-07-28
	// request, which has none.
	s *session
	// ident is who sent it (nil without authentication).
	ident *principal.Identity
	// stream is the request's own response; nil when it has none (a
	// message of a batch, and the SSE and stdio transports).
	stream *eventstream.Reply
	// info is a 2026-07-28 request's protocol information; nil for a
	// legacy one.
	info *server.RequestProtocolInfo
	// header is the HTTP request's; nil on stdio.
	header http.Header
}

// frontTool is a tool as the front holds it: the gateway's, and its
// definition in MCP's terms.
type frontTool struct {
	Tool
	// headerWire is the definition in MCP's terms when its input schema
	// has x-mcp-header parameters, which a 2026-07-28 request also sends
	// in headers; nil when it has none (most tools: 384 bytes each saved).
	headerWire *mcp.Tool
	// listed is wire encoded, as tools/list sends it (list.go).
	listed listedTool
}

// callParams are the params of a tools/call, its arguments left raw.
type callParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Meta      *reqmeta.Meta   `json:"_meta"`
	mcp.MultiRoundTripParams
}

// handle serves one message of x that is not a response: a tools/call
// request here, anything else through mcp-go's dispatcher in x's session.
// It returns the answer (none for a notification).
func (f *Front) handle(x *exchange, m *message) answer {
	if frontServes(m) {
		if m.method == string(mcp.MethodToolsList) {
			return f.listTools(x, m)
		}
		return f.callTool(x, m)
	}
	if m.method == string(mcp.MethodNotificationCancelled) && x.s != nil {
		x.s.cancelCall(m.params)
	}
	if m.method == string(mcp.MethodResourcesSubscribe) && m.id != nil && x.s != nil {
		if refused := f.admitSubscribe(x, m); refused != nil {
			return *refused
		}
	}
	if m.method == string(mcp.MethodResourcesRead) && m.id != nil {
		if refused := f.admitRead(x, m); refused != nil {
			return *refused
		}
	}
	resp := f.mcp.HandleMessage(x.ctx, m.raw)
	if resp == nil || m.id == nil {
		return answer{}
	}
	code := 0
	if e, ok := resp.(mcp.JSONRPCError); ok {
		code = e.Error.Code
	}
	b, err := json.Marshal(resp)
	if err != nil {
		return errorAnswer(m.id, mcp.INTERNAL_ERROR, "encoding the response failed: "+err.Error(), nil)
	}
	return answer{body: b, code: code}
}

// callTool serves a tools/call request.
func (f *Front) callTool(x *exchange, m *message) answer {
	p := m.call
	if p == nil {
		return errorAnswer(m.id, mcp.INVALID_PARAMS, `tools/call needs params with the tool's name and its arguments: send {"name": "...", "arguments": {...}}`, nil)
	}
	t, refused := f.resolve(x.ident, p.Name, m.id)
	if t == nil {
		return refused
	}
	if x.info != nil && t.headerWire != nil {
		if err := mcp.ValidateParamHeadersLookup(headerLookup(x.header), t.headerWire, m.params); err != nil {
			return errorAnswer(m.id, mcp.HEADER_MISMATCH, err.Error(), nil)
		}
	}
	req := &Request{Raw: p.Arguments, Identity: x.ident, Progress: f.progress(x, p.Meta), Meta: p.Meta.Fields(x.info != nil)}
	ctx, cancel := context.WithCancel(x.ctx)
	defer cancel()
	if x.s != nil {
		// notifications/cancelled of this request cancels ctx.
		key, call := callKey(m.id), &inflight{cancel}
		x.s.calls.Store(key, call) // a second call of the same ID takes the entry
		defer x.s.calls.CompareAndDelete(key, call)
	}
	if x.info != nil {
		out, res, err := f.modernCall(ctx, x, p, req, t.Call)
		switch {
		case err != nil:
			return errorAnswer(m.id, rpcCode(err), err.Error(), nil)
		case res != nil:
			decorate(res, f.o.Name, f.o.Version)
			return resultAnswer(m.id, res)
		}
		return f.callResult(m.id, out, true)
	}
	req.Session = x.s.id
	req.Elicit = f.elicit(x)
	req.Peer = peer{f: f, s: x.s, ctx: ctx}
	out, err := f.run(ctx, t.Call, req, p.Name)
	if err != nil {
		return errorAnswer(m.id, mcp.INTERNAL_ERROR, err.Error(), nil)
	}
	return f.callResult(m.id, out, false)
}

// callResult is the answer to tools/call id with out (of a 2026-07-28
// request when modern): written from out's JSON where it can be
// (rawResponse), else through mcp-go's type, which decorate completes
// for a 2026-07-28 request.
func (f *Front) callResult(id json.RawMessage, out *executors.Result, modern bool) answer {
	if b := f.rawResponse(id, out, modern); b != nil {
		return answer{body: b}
	}
	res := mcpwire.Result(out)
	if modern {
		decorate(res, f.o.Name, f.o.Version)
	}
	return resultAnswer(id, res)
}

// rawResponse is the response to tools/call id with out's result as JSON
// (mcpwire.JSON: an upstream's result as it came, a text result encoded
// directly); for a 2026-07-28 request (modern), with the members decorate
// would add (completeMembers) when the result has neither resultType nor
// _meta (the usual result): one that has gets them merged by decorate. It
// is nil when the result cannot be written this way.
func (f *Front) rawResponse(id json.RawMessage, out *executors.Result, modern bool) []byte {
	if modern && len(out.Meta) > 0 {
		return nil // toolgate's own _meta for the result
	}
	raw, err := mcpwire.JSON(out)
	if err != nil {
		return nil
	}
	if !modern {
		return response(id, raw, nil)
	}
	if bytes.Contains(raw, []byte(`"resultType"`)) || bytes.Contains(raw, []byte(`"_meta"`)) {
		return nil
	}
	return response(id, raw, f.completeMembers)
}

// completeMembers are the members decorate gives a result of a server
// named name at version that has neither resultType nor _meta, as JSON to
// add to the result's object (response).
func completeMembers(name, version string) json.RawMessage {
	return fmt.Appendf(nil, `,"resultType":%s,"_meta":{%s:%s}`, mustJSON(mcp.ResultTypeComplete),
		mustJSON(mcp.MetaKeyServerInfo), mustJSON(mcp.Implementation{Name: name, Version: version}))
}

// resolve looks the tool of a tools/call up: one lookup of the name as
// sent; only a name the front does not serve goes to the gateway, for a
// repair or the suggestions of the -32602 answer. A name that repairs to
// a tool who may not see is as unknown as any, and suggestions name only
// tools who may see.
func (f *Front) resolve(who *principal.Identity, name string, id json.RawMessage) (*frontTool, answer) {
	tools := *f.tools.Load()
	if t := tools[name]; t != nil {
		return t, answer{}
	}
	repaired, err := f.b.Resolve([]byte(name))
	if err == nil && repaired != "" && !who.Permits(repaired) {
		err = &registry.NotFoundError{Name: name, Available: -1}
	}
	if err == nil {
		if t := tools[repaired]; t != nil && repaired != "" {
			f.logger.Debug("tool name repaired", "tool", repaired)
			return t, answer{}
		}
		// Registered, and not yet served (SetTools is on its way).
		err = &registry.NotFoundError{Name: name, Available: -1}
	}
	err = visibleOnly(err, who)
	suggestions := []string{}
	if nf, ok := errors.AsType[*registry.NotFoundError](err); ok && nf.Suggestions != nil {
		suggestions = nf.Suggestions
	}
	return nil, errorAnswer(id, mcp.INVALID_PARAMS, err.Error(), map[string]any{"suggestions": suggestions})
}

// visibleOnly returns err, a name resolution's error, as id may see it:
// a NotFoundError suggests only tools id may see, and counts none.
func visibleOnly(err error, id *principal.Identity) error {
	nf, ok := errors.AsType[*registry.NotFoundError](err)
	if !ok || id == nil || id.Policy == nil {
		return err
	}
	return nf.Visible(id.Permits)
}

// run runs one call of a tool, recovering a panic of its own goroutine
// (the executors' panics are the dispatcher's) as an internal error.
func (f *Front) run(ctx context.Context, call func(context.Context, *Request) *executors.Result, req *Request, name string) (out *executors.Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			f.logger.Error("tool call panicked", "tool", name, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			out, err = nil, fmt.Errorf("the call of tool %q failed: internal error", name)
		}
	}()
	return call(ctx, req), nil
}

// resultAnswer is the JSON-RPC response of id with res.
func resultAnswer(id json.RawMessage, res *mcp.CallToolResult) answer {
	b, err := json.Marshal(struct {
		JSONRPC string              `json:"jsonrpc"`
		ID      json.RawMessage     `json:"id"`
		Result  *mcp.CallToolResult `json:"result"`
	}{mcp.JSONRPC_VERSION, id, res})
	if err != nil {
		return errorAnswer(id, mcp.INTERNAL_ERROR, "encoding the result failed: "+err.Error(), nil)
	}
	return answer{body: b}
}

// decorate gives a 2026-07-28 result what the revision requires of every
// result: its resultType ("complete" unless set) and the server's identity
// in _meta.
func decorate(res mcp.ResultMetadata, name, version string) {
	if res.GetResultType() == "" {
		res.SetResultType(mcp.ResultTypeComplete)
	}
	if meta := res.EnsureResultMeta(); meta.ServerInfo() == nil {
		meta.SetServerInfo(mcp.Implementation{Name: name, Version: version})
	}
}

// rpcCode is the JSON-RPC code of err: an *RPCError's, else -32603.
func rpcCode(err error) int {
	if e, ok := errors.AsType[*mcppeer.RPCError](err); ok {
		return e.Code
	}
	return mcp.INTERNAL_ERROR
}

// headerLookup reports the first value of a header and whether it was sent
// at all, so that a header sent empty is not taken for a missing one.
func headerLookup(h http.Header) func(string) (string, bool) {
	return func(name string) (string, bool) {
		vs := h.Values(name)
		if len(vs) == 0 {
			return "", false
		}
		return vs[0], true
	}
}

// progress returns the function that reports a call's progress to its
// client, or nil when the client asked for none (no progressToken).
func (f *Front) progress(x *exchange, meta *reqmeta.Meta) func(progress, total float64, message string) {
	if meta == nil || meta.ProgressToken == nil {
		return nil
	}
	token := meta.ProgressToken
	return func(progress, total float64, message string) {
		params := map[string]any{"progressToken": token, "progress": progress}
		if total > 0 {
			params["total"] = total
		}
		if message != "" {
			params["message"] = message
		}
		if x.stream != nil {
			x.stream.Notify(string(mcp.MethodNotificationProgress), params)
			return
		}
		// Best effort: a notification the session's queue has no room for
		// is dropped.
		_ = f.mcp.SendNotificationToClient(x.ctx, string(mcp.MethodNotificationProgress), params)
	}
}

// elicit returns the function that asks the user of x's session through
// elicitation/create, or nil when its client did not declare the
// elicitation capability: for a session of the front's own as decided when
// its capabilities were set (elicits), for mcp-go's (inner) as it has them.
func (f *Front) elicit(x *exchange) func(context.Context, string, map[string]any) (string, map[string]any, error) {
	if !x.s.elicits.Load() && (x.s.inner == nil || x.s.clientCaps().Elicitation == nil) {
		return nil
	}
	return func(ctx context.Context, message string, schema map[string]any) (string, map[string]any, error) {
		params := mcp.ElicitationParams{Message: message, RequestedSchema: schema}
		if err := params.Validate(); err != nil {
			return "", nil, err
		}
		raw, err := peer{f: f, s: x.s, ctx: x.ctx}.Request(ctx, string(mcp.MethodElicitationCreate), mustJSON(params))
		if err != nil {
			return "", nil, err
		}
		return elicitationAnswer(raw)
	}
}

// mustJSON is v encoded; v is a value of the front's own whose encoding
// cannot fail.
func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// elicitationAnswer reads a client's elicitation/create result: the
// user's action and, for accept, the form's content.
func elicitationAnswer(raw json.RawMessage) (action string, content map[string]any, err error) {
	var res mcp.ElicitationResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return "", nil, fmt.Errorf("reading the elicitation answer: %w", err)
	}
	content, _ = res.Content.(map[string]any)
	return string(res.Action), content, nil
}
