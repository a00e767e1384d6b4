package mcpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/gateway/internal/continuation"
	"github.com/toolgate/toolgate/gateway/internal/forward"
	"github.com/toolgate/toolgate/gateway/internal/mcpwire"
	"github.com/toolgate/toolgate/gateway/internal/replica"
	"github.com/toolgate/toolgate/gateway/internal/sessionlimit"
	"github.com/toolgate/toolgate/gateway/internal/subscriptions"
	"github.com/toolgate/toolgate/gateway/internal/surface"
	"github.com/toolgate/toolgate/internal/mcppeer"
	"github.com/toolgate/toolgate/internal/principal"
	"github.com/toolgate/toolgate/internal/telemetry"
	"github.com/toolgate/toolgate/registry"
)

// Backend is what the front needs from the gateway behind it. Its methods
// are called concurrently, from any transport's goroutines.
type Backend interface {
	// Resolve says how the tool name of a tools/call that names no tool
	// the front serves resolves: repaired is the registered name it
	// repairs to; otherwise err is a *registry.NotFoundError (wrapping
	// registry.ErrNotFound) whose text and suggestions the client gets.
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
	// Raw are the arguments' JSON bytes as sent (valid JSON), or nil; the
	// pipeline decodes them once.
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
	// call's _meta. A 2026-07-28 client is asked through an input_required
	// result whose requestState seals the question, and the call ends:
	// its retry runs the call again from the start, on any replica, and
	// Elicit then returns the answer (modern.go, sealedElicit). So it is
	// for toolgate's own questions before a call does anything, as the
	// loop guard's.
	Elicit func(ctx context.Context, message string, requestedSchema map[string]any) (action string, content map[string]any, err error)
	// Peer is the client the call came from, to whom an upstream's
	// requests and log messages during the call are relayed (a
	// 2026-07-28 client's requests as input_required results: modern.go);
	// nil when the call came from no MCP client.
	Peer mcppeer.Peer
}

// Options configure a [Front]. Every field is required unless its doc
// says otherwise.
type Options struct {
	// Replica is this toolgate among the replicas of a cluster: its ID
	// starts its session IDs and names it in its requestStates, which its
	// keys seal. Nil for a lone toolgate.
	Replica *replica.Self
	// Peers, when not nil, are the other replicas: a request naming a
	// session or a waiting call another replica owns is forwarded there
	// (cluster.go).
	Peers *forward.Peers
	// HandleOwner, with Peers, returns the replica that minted a thread
	// handle for a principal, after checking it (false for a handle no
	// replica of the cluster minted for it): a call passing one goes there.
	HandleOwner func(principal, handle string) (string, bool)
	// Name, Version and Instructions are reported to clients in the
	// initialize result.
	Name, Version, Instructions string
	// Logger receives toolgate's own transport messages and mcp-go's
	// warnings and errors (mcp-go's info lines carry session IDs). Nil
	// discards.
	Logger *slog.Logger
	// MCPPath is where streamable HTTP is served.
	MCPPath string
	// SSE serves the legacy SSE transport at SSEPath and MessagePath.
	SSE bool
	// SSEPath and MessagePath are where SSE is served. Default /sse and
	// /message.
	SSEPath, MessagePath string
	// Scope, when not nil, gives the identity stdio's one principal has
	// (a virtual server narrows its permissions to its tools).
	Scope func(*principal.Identity) *principal.Identity
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
	// SessionsOf, when not nil, is the front whose session caps this one
	// counts against (MaxSessions and MaxSessionsPerPrincipal are then
	// its): a virtual server's sessions are the gateway's.
	SessionsOf *Front
	// Tracer, when not nil, records a server span per MCP request, under
	// the trace context the request brings (trace.go). Nil traces
	// nothing.
	Tracer *telemetry.Tracer
}

// Front serves MCP for a [Backend]: it owns the streamable HTTP transport
// end to end, and uses mcp-go's MCPServer as the dispatcher of every method
// but tools/call, its type library, and its legacy SSE and stdio servers
// (see the package doc). Build it with [New]; its methods are safe for
// concurrent use; [Front.Close] stops it.
type Front struct {
	b      Backend
	o      Options
	logger *slog.Logger
	mcp    *server.MCPServer

	// tools are the tools served, by name (call.go): replaced whole by
	// SetTools, read without a lock.
	tools   atomic.Pointer[map[string]*frontTool]
	list    atomic.Pointer[toolList] // the same tools sorted by name, for tools/list (list.go)
	toolsMu sync.Mutex               // serialises SetTools

	// root ends with Close; it bounds work no request owns (SSE batches,
	// streams).
	root       context.Context
	rootCancel context.CancelFunc
	// streams ends with root, or before it with EndStreams: the
	// long-lived streams (GET, subscriptions/listen) end with it.
	streams    context.Context
	endStreams context.CancelFunc
	clients    sync.Map // live session ID → *session (session.go)

	limits *sessionlimit.Limits // server.max_sessions and auth.max_sessions (session.go)

	cats   *surface.Set       // the sources' resources, templates and prompts (surface.go)
	levels surface.Levels     // the log levels the sessions set (surface.go)
	subs   *subscriptions.Set // the sessions' resource subscriptions

	mrtr     *continuation.Registry // 2026-07-28 calls waiting for their clients' answers (modern.go)
	requests atomic.Uint64          // numbers 2026-07-28 requests, for their peers (modern.go)
	// completeMembers complete a 2026-07-28 tools/call result (call.go).
	completeMembers json.RawMessage

	mu        sync.Mutex // guards httpParts and closed
	httpParts *httpParts // built by Mount; closed by Close
	closed    bool
}

// New returns a front serving b. It starts nothing: mount it with
// [Front.Mount] or serve stdio with [Front.ServeStdio].
func New(b Backend, o Options) *Front {
	if o.Replica == nil {
		o.Replica = replica.Alone()
	}
	f := &Front{b: b, o: o, logger: o.Logger, mrtr: continuation.New(o.Replica), completeMembers: completeMembers(o.Name, o.Version)}
	if o.SessionsOf != nil {
		f.limits = o.SessionsOf.limits
	} else {
		f.limits = sessionlimit.New(o.MaxSessions, o.MaxSessionsPerPrincipal)
	}
	if f.logger == nil {
		f.logger = slog.New(slog.DiscardHandler)
	}
	f.tools.Store(&map[string]*frontTool{})
	f.list.Store(&toolList{})
	f.cats = surface.New(f.logger)
	f.subs = subscriptions.New(f.passSubscription, unsubscribeTimeout, subscriptions.Limits{PerSession: maxSubscriptionsPerSession, PerPrincipal: maxSubscriptionsPerPrincipal, URILen: maxSubscribeURI})
	f.root, f.rootCancel = context.WithCancel(context.Background())
	f.streams, f.endStreams = context.WithCancel(f.root)
	hooks := &server.Hooks{}
	hooks.AddOnRegisterSession(func(ctx context.Context, cs server.ClientSession) {
		if s, ok := cs.(*session); ok && s.listen {
			return // a subscriptions/listen stream's: no session of the client's
		}
		s := f.clientStarted(ctx, cs)
		b.SessionStarted(s.id)
	})
	hooks.AddOnUnregisterSession(func(_ context.Context, cs server.ClientSession) {
		if s, ok := cs.(*session); ok && s.listen {
			return
		}
		b.SessionEnded(cs.SessionID())
		f.forgetSession(cs.SessionID())
		f.clientEnded(cs)
	})
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
// in between would find no tool. A tool whose x-mcp-header annotations
// are invalid is left out, with a warning: a 2026-07-28 client would
// reject the whole list.
func (f *Front) SetTools(add []Tool, remove []string) {
	f.toolsMu.Lock()
	tools := maps.Clone(*f.tools.Load())
	for _, name := range removedOnly(add, remove) {
		delete(tools, name)
	}
	for _, t := range add {
		w := mcpwire.Tool(t.Def)
		if err := mcp.ValidateParamHeaderAnnotations(&w); err != nil {
			f.logger.Warn("leaving out a tool with invalid x-mcp-header annotations; fix its input schema", "tool", t.Def.Name, "error", err)
			delete(tools, t.Def.Name)
			continue
		}
		ft := &frontTool{Tool: t, listed: encodeListed(&w)}
		if bytes.Contains(w.RawInputSchema, []byte("x-mcp-header")) {
			ft.headerWire = &w
		}
		tools[t.Def.Name] = ft
	}
	list, by := sortedTools(tools), sourceTools(tools)
	f.tools.Store(&tools)
	f.list.Store(&list)
	f.cats.SetTools(by)
	f.toolsMu.Unlock()
	if len(add) > 0 || len(remove) > 0 {
		f.mcp.SendNotificationToAllClients(string(mcp.MethodNotificationToolsListChanged), nil)
	}
}

// SetMaxSessionsPerPrincipal changes [Options.MaxSessionsPerPrincipal]
// while serving (a configuration reload) to n, at least 1: new sessions
// are checked against it, open ones are kept. A front built without the
// cap keeps none.
func (f *Front) SetMaxSessionsPerPrincipal(n int) { f.limits.SetPerPrincipal(n) }

// ToolsChanged tells every client that the list of tools changed
// (notifications/tools/list_changed) when the tools did not, but what a
// principal may see of them did: its permissions were reloaded.
func (f *Front) ToolsChanged() {
	f.mcp.SendNotificationToAllClients(string(mcp.MethodNotificationToolsListChanged), nil)
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

// Mux is where [Front.Mount] puts the MCP endpoints; a chi router or an
// http.ServeMux is one.
type Mux interface {
	Handle(pattern string, h http.Handler)
}

// EndStreams ends the long-lived streams gracefully, now and as they
// open from now on: each session's GET stream ends (its session stays),
// and each subscriptions/listen request is answered, which ends its
// stream. Requests in flight go on. Their clients reconnect, and a
// replica leaving a cluster calls it once its listener has closed, so
// that they reconnect to another. It is safe to call more than once.
func (f *Front) EndStreams() { f.endStreams() }

// Close ends every session and stops the front's background work (the
// idle sweeper, SSE batches). It is safe to call more than once.
func (f *Front) Close() {
	f.mu.Lock()
	p := f.httpParts
	f.httpParts, f.closed = nil, true
	f.mu.Unlock()
	// Sessions that end from now on leave their sources subscribed: the
	// sources are going too.
	f.subs.Close()
	f.mrtr.Close(f.rootCancel) // the calls waiting for their clients first, told why; streams end with f.root
	if p != nil {
		p.close()
	}
}
