package mcpfront

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/internal/principal"
	"github.com/toolgate/toolgate/registry"
)

// Backend is what the front needs from the gateway behind it. Its methods
// are called concurrently, from any transport's goroutines.
type Backend interface {
	// Resolve says how the tool name of a tools/call resolves: repaired is
	// "" when name is registered as it is, or the registered name it
	// repairs to; otherwise err is a *registry.NotFoundError (wrapping
	// registry.ErrNotFound) whose text and suggestions the client gets.
	// Resolving a registered name must not allocate: it runs for every
	// call.
	Resolve(name []byte) (repaired string, err error)
	// SessionStarted and SessionEnded are told of every MCP session mcp-go
	// registers and unregisters, on any transport, by its ID.
	SessionStarted(id string)
	SessionEnded(id string)
	// Drain refuses new calls and waits for the calls in flight, at most
	// until ctx is done, then cancels them and waits briefly for their
	// results to go out. stdio calls it when its context ends.
	Drain(ctx context.Context) error
	// SetLogLevel passes level, the most verbose logging/setLevel any
	// session asked for, to the sources of log messages (upstreams), within
	// ctx; the client that set it is answered once it returns.
	SetLogLevel(ctx context.Context, level string)
}

// Tool is a tool as the front serves it: its definition and the function
// that runs a call of it.
type Tool struct {
	Def *registry.Tool
	// Call runs one call that named Def. It never returns nil: a failure
	// is a result with IsError set.
	Call func(ctx context.Context, req *Request) *executors.Result
}

// Request is one tools/call as a transport received it, its tool already
// resolved.
type Request struct {
	// Args are the arguments as decoded from JSON (nil when absent).
	Args any
	// Raw are the arguments' JSON bytes as sent, or nil.
	Raw json.RawMessage
	// Meta is the request's _meta beyond the progress token, or nil.
	Meta map[string]any
	// Session is the ID of the MCP session the call arrived in; "" when
	// there is none (a 2026-07-28 client).
	Session string
	// Identity is who makes the call, as HTTP authentication established
	// it (or the principal "stdio"); nil without authentication.
	Identity *principal.Identity
	// Progress reports progress to the client; nil when the client asked
	// for none (no progressToken).
	Progress func(progress, total float64, message string)
	// Elicit asks the client's user through elicitation/create: message
	// and the requested schema of a form; it returns the user's action
	// (accept, decline or cancel) and, for accept, the form's content. It
	// is nil unless the client declared the elicitation capability: a
	// session in its initialize request, a 2026-07-28 client in the
	// call's _meta (it is then asked through an input_required result:
	// mrtr.go).
	Elicit func(ctx context.Context, message string, requestedSchema map[string]any) (action string, content map[string]any, err error)
	// Peer is the client the call came from, to whom an upstream's
	// requests and log messages during the call are relayed (a
	// 2026-07-28 client's requests as input_required results: mrtr.go);
	// nil when the call came from no MCP client.
	Peer Peer
}

// Options configure a [Front]. Every field is required unless its doc
// says otherwise.
type Options struct {
	// Name, Version and Instructions are reported to clients in the
	// initialize result.
	Name, Version, Instructions string
	// Logger receives toolgate's own transport messages and mcp-go's
	// warnings and errors (mcp-go's info lines carry session IDs). Nil
	// discards.
	Logger *slog.Logger
	// MCPPath is where streamable HTTP is served.
	MCPPath string
	// SSE serves the legacy SSE transport at /sse and /message.
	SSE bool
	// SessionIdleTTL ends streamable HTTP sessions idle that long; 0
	// keeps them until the client ends them.
	SessionIdleTTL time.Duration
	// MaxSessions caps the live sessions, over every transport: past it an
	// initialize over streamable HTTP, or a new SSE stream, gets 503 with
	// Retry-After, and the sessions already live are unaffected. 0 sets no
	// cap.
	MaxSessions int
	// MaxBodyBytes caps a request body and a stdio line.
	MaxBodyBytes int64
	// ReadTimeout bounds reading one HTTP request body (POST to the MCP
	// path or /message); a body not read in time gets 408. It does not
	// apply to GET and SSE streams. 0 sets no deadline.
	ReadTimeout time.Duration
	// AllowedOrigins are the browser origins allowed besides same-origin
	// requests.
	AllowedOrigins []string
	// Authenticate, when not nil, wraps the HTTP endpoints: it refuses
	// unauthenticated requests and puts the identity of the others in
	// their context ([principal.With]). A session belongs to the
	// principal that opened it; tools/list shows each principal only the
	// tools its Policy permits.
	Authenticate func(http.Handler) http.Handler
	// MaxSessionsPerPrincipal caps the sessions one authenticated
	// principal may hold open, as MaxSessions caps everyone's; 0 sets no
	// cap.
	MaxSessionsPerPrincipal int
}

// Front serves MCP for a [Backend]: it owns the mcp-go server, its HTTP,
// SSE and stdio transports and everything that works around how mcp-go
// v1.2.1 is built (see the package doc). Build it with [New]; its methods
// are safe for concurrent use; [Front.Close] stops it.
type Front struct {
	b      Backend
	o      Options
	logger *slog.Logger
	mcp    *server.MCPServer

	// root ends with Close; it bounds work no request owns (SSE batches).
	root       context.Context
	rootCancel context.CancelFunc
	clients    sync.Map // live mcp-go session ID → *clientSession (sessions.go)

	sessions   atomic.Int64 // live sessions plus slots reserved for new ones (sessions.go)
	principals sync.Map     // principal name → *principalCount, of principals with sessions (sessions.go)
	ids        sessionIDs   // streamable HTTP session IDs issued (sessions.go)

	cats catalogs // the sources' resources, prompts, subscriptions and log levels (surface.go)

	mrtr *mrtr // 2026-07-28 calls waiting for their clients' answers (mrtr.go)

	mu        sync.Mutex // guards httpParts and closed
	httpParts *httpParts // built by Mount; closed by Close
	closed    bool
}

// New returns a front serving b. It starts nothing: mount it with
// [Front.Mount] or serve stdio with [Front.ServeStdio].
func New(b Backend, o Options) *Front {
	f := &Front{b: b, o: o, logger: o.Logger, mrtr: newMRTR()}
	if f.logger == nil {
		f.logger = slog.New(slog.DiscardHandler)
	}
	f.root, f.rootCancel = context.WithCancel(context.Background())
	hooks := &server.Hooks{}
	hooks.AddOnRegisterSession(func(ctx context.Context, s server.ClientSession) {
		f.clientStarted(ctx, s)
		if id := s.SessionID(); id != "" {
			b.SessionStarted(id)
		}
	})
	hooks.AddOnUnregisterSession(func(_ context.Context, s server.ClientSession) {
		if id := s.SessionID(); id != "" {
			b.SessionEnded(id)
			f.forgetSession(id)
		}
		f.clientEnded(s)
	})
	if o.Authenticate != nil {
		// Not WithToolFilter: mcp-go answers a call of a filtered tool
		// "not found", where the pipeline's permit step gives the
		// permission result the caller should see (doc.go fact 16).
		hooks.AddAfterListTools(func(ctx context.Context, _ any, _ *mcp.ListToolsRequest, res *mcp.ListToolsResult) {
			if res != nil {
				res.Tools = f.visibleTools(ctx, res.Tools)
			}
		})
	}
	f.mcp = server.NewMCPServer(o.Name, o.Version,
		server.WithToolCapabilities(true),
		server.WithHooks(hooks),
		server.WithInstructions(o.Instructions),
	)
	// Resources, prompts, completion and logging (surface.go), set up once
	// the server exists: its options are functions of it.
	f.surfaceHooks(hooks)
	for _, opt := range f.surfaceOptions() {
		opt(f.mcp)
	}
	return f
}

// SetTools adds (or replaces in place) the tools add and removes the tools
// named in remove, and tells connected clients (notifications/tools/
// list_changed). A name in both is replaced, never removed first: a call
// in between would get mcp-go's "tool not found".
func (f *Front) SetTools(add []Tool, remove []string) {
	if gone := removedOnly(add, remove); len(gone) > 0 {
		f.mcp.DeleteTools(gone...)
	}
	if len(add) == 0 {
		return
	}
	st := make([]server.ServerTool, 0, len(add))
	for _, t := range add {
		st = append(st, server.ServerTool{Tool: wireTool(t.Def), Handler: f.handler(t.Call)})
	}
	f.mcp.AddTools(st...)
}

// removedOnly returns the names in remove that add does not add again.
func removedOnly(add []Tool, remove []string) []string {
	if len(add) == 0 {
		return remove
	}
	added := make(map[string]bool, len(add))
	for _, t := range add {
		added[t.Def.Name] = true
	}
	var gone []string
	for _, name := range remove {
		if !added[name] {
			gone = append(gone, name)
		}
	}
	return gone
}

// handler is the mcp-go handler of one tool. It returns a nil error for
// every result: mcp-go turns a handler's error into a JSON-RPC internal
// error, and tool failures must reach the model as results.
func (f *Front) handler(call func(context.Context, *Request) *executors.Result) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (res *mcp.CallToolResult, err error) {
		// Every path runs a tool through here (mcp-go's and both fast
		// paths): a panic is logged and answered as mcp-go's WithRecovery
		// would, -32603. The executors' own panics are the dispatcher's.
		defer func() {
			if p := recover(); p != nil {
				f.logger.Error("tool handler panicked", "tool", req.Params.Name, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				res, err = nil, fmt.Errorf("panic recovered in %s tool handler: %v", req.Params.Name, p)
			}
		}()
		r := Request{Args: req.Params.Arguments, Raw: req.Params.RawArguments, Progress: f.progress(ctx, req.Params.Meta)}
		if m := req.Params.Meta; m != nil {
			r.Meta = m.AdditionalFields
		}
		r.Identity = f.identity(ctx)
		if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.Modern {
			// No session: asking the client takes input_required results.
			return f.modernCall(ctx, info, req, &r, call)
		}
		if s := server.ClientSessionFromContext(ctx); s != nil {
			r.Session = s.SessionID()
			r.Elicit = f.elicit(s)
			r.Peer = peer{f: f, s: s, ctx: ctx}
		}
		// The fast path's slot for the result's JSON is this handler's
		// alone: a tool call made within the call, with its context, would
		// find it too.
		raw, _ := ctx.Value(rawReplyKey{}).(*rawReply)
		if raw != nil && !raw.claimed.CompareAndSwap(false, true) {
			raw = nil
		}
		out := call(ctx, &r)
		if raw != nil && raw.take(out) {
			return rawTaken, nil
		}
		return wireResult(out), nil
	}
}

// visibleTools is the tools/list filter with authentication: the tools
// the requesting principal's policy permits.
func (f *Front) visibleTools(ctx context.Context, tools []mcp.Tool) []mcp.Tool {
	id := f.identity(ctx)
	if id == nil || id.Policy == nil {
		return tools
	}
	out := make([]mcp.Tool, 0, len(tools))
	for _, t := range tools {
		if id.Policy.Permits(t.Name) {
			out = append(out, t)
		}
	}
	return out
}

// elicit returns the function that asks s's user through
// elicitation/create, or nil when s did not declare the elicitation
// capability (mcp-go keeps a session's declared capabilities on it: fact
// 13 of the package doc).
func (f *Front) elicit(s server.ClientSession) func(context.Context, string, map[string]any) (string, map[string]any, error) {
	ci, ok := s.(server.SessionWithClientInfo)
	if !ok || ci.GetClientCapabilities().Elicitation == nil {
		return nil
	}
	return func(ctx context.Context, message string, schema map[string]any) (string, map[string]any, error) {
		params := mcp.ElicitationParams{Message: message, RequestedSchema: schema}
		if err := params.Validate(); err != nil {
			return "", nil, err
		}
		if raw, ok, err := f.ask(ctx, ctx, s, string(mcp.MethodElicitationCreate), params); ok {
			if err != nil {
				return "", nil, err
			}
			return elicitationAnswer(raw)
		}
		res, err := f.mcp.RequestElicitation(ctx, mcp.ElicitationRequest{Params: params})
		if err != nil {
			return "", nil, err
		}
		content, _ := res.Content.(map[string]any)
		return string(res.Action), content, nil
	}
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

// progress returns the function that reports a call's progress to its
// client, or nil when the client asked for none (no progressToken).
func (f *Front) progress(ctx context.Context, meta *mcp.Meta) func(progress, total float64, message string) {
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
		if cs := callStreamOf(ctx); cs != nil {
			cs.notify("notifications/progress", params) // on the call's own stream (callstream.go)
			return
		}
		// Best effort: mcp-go drops a notification when the session's queue
		// is full, and reports it through OnError hooks.
		_ = f.mcp.SendNotificationToClient(ctx, "notifications/progress", params)
	}
}

// Mux is where [Front.Mount] puts the MCP endpoints; a chi router or an
// http.ServeMux is one.
type Mux interface {
	Handle(pattern string, h http.Handler)
}

// Close ends every session and stops the front's background work (the
// idle sweeper, SSE batches). It is safe to call more than once.
func (f *Front) Close() {
	f.mu.Lock()
	p := f.httpParts
	f.httpParts, f.closed = nil, true
	f.mu.Unlock()
	f.mrtr.close(f.rootCancel) // the calls waiting for their clients first, told why
	if p != nil {
		p.close()
	}
	// The drainer ends with f.root, which mrtr.close has cancelled; one
	// that forgetSession starts, it starts under subMu with f.root alive.
	f.cats.subMu.Lock()
	f.cats.subMu.Unlock() //nolint:staticcheck // SA2001: an empty section, a barrier
	f.cats.drainer.Wait()
}

// libLogger is the logger handed to mcp-go.
func (f *Front) libLogger() *slog.Logger {
	return slog.New(quietHandler{f.logger.Handler(), slog.LevelWarn})
}

// quietHandler passes on only records at or above min. mcp-go logs every
// request at info with its session ID (a bearer credential for the session),
// and toolgate logs calls itself, so mcp-go gets a logger that keeps only
// its warnings and errors.
type quietHandler struct {
	slog.Handler
	min slog.Level
}

func (h quietHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h quietHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return quietHandler{h.Handler.WithAttrs(as), h.min}
}

func (h quietHandler) WithGroup(name string) slog.Handler {
	return quietHandler{h.Handler.WithGroup(name), h.min}
}
