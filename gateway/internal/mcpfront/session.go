package mcpfront

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/gateway/internal/eventstream"
	"github.com/toolgate/toolgate/gateway/internal/idle"
	"github.com/toolgate/toolgate/gateway/internal/sessionlimit"
	"github.com/toolgate/toolgate/internal/principal"
)

// Sessions: toolgate's own streamable HTTP sessions, and the record it
// keeps of every session of every transport.
//
// A streamable HTTP session is a *session the front makes on initialize
// and registers with mcp-go (RegisterSession), so that mcp-go's dispatcher
// (HandleMessage) and its broadcasts (list_changed, log messages,
// resources/updated) reach it. Its notifications wait in a small queue for
// the session's GET stream; what a request causes goes out on that
// request's own response (package eventstream). The legacy SSE and stdio sessions are
// mcp-go's; the front wraps each in a *session record (inner) when mcp-go
// registers it, for what the front keeps of them: the principal, the calls
// in flight, the requests to the client.

// sessionQueue bounds the notifications a streamable HTTP session holds
// for its GET stream (mcp-go drops a notification its queue has no room
// for): a burst of list changes, say, while the stream is slow or closed.
// Each slot costs 48 bytes of every session, used or not.
const sessionQueue = 64

// maxSessionIDLen bounds the Mcp-Session-Id a request may carry. The IDs
// toolgate's transports issue are far shorter (streamable HTTP:
// "mcp-session-" and 26 characters; SSE: a 36-character UUID; stdio:
// "stdio"); a longer one names no session, and is refused before it is
// looked up or kept anywhere.
const maxSessionIDLen = 128

// sessionIDPrefix starts every streamable HTTP session ID.
const sessionIDPrefix = "mcp-session-"

// session is one client session: a streamable HTTP session of the front's
// own (inner is nil), or the record of an mcp-go session of another
// transport (inner).
type session struct {
	id    string
	inner server.ClientSession // mcp-go's session (SSE, stdio); nil for the front's own
	// ident is the principal that opened the session (nil without
	// authentication); only it may use the session.
	ident *principal.Identity
	// owner is the count of its principal's sessions this one is in,
	// under Options.MaxSessionsPerPrincipal; nil when not counted.
	owner *sessionlimit.Count
	// listen: the session of one subscriptions/listen request
	// (post.go), registered with mcp-go for its broadcasts only.
	listen bool

	// What mcp-go's dispatcher sets and reads of the front's own sessions.
	notes       chan mcp.JSONRPCNotification // for the GET stream
	initialized atomic.Bool
	// elicits: caps declare elicitation, decided when they are set, for
	// every tools/call to read without the lock (call.go elicit). Beside
	// initialized, in its padding: no byte more per session.
	elicits atomic.Bool
	version atomic.Pointer[string] // negotiated by initialize
	level   atomic.Pointer[mcp.LoggingLevel]
	infoMu  sync.Mutex
	info    mcp.Implementation     // guarded by infoMu
	caps    mcp.ClientCapabilities // guarded by infoMu
	filter  atomic.Pointer[mcp.SubscriptionFilter]

	// The idle expiry: requests in flight, when the last ended.
	idle.Activity

	// calls are the front's tools/calls in flight, by request ID, for
	// notifications/cancelled (callKey → *inflight).
	calls sync.Map
	// asks are the front's requests to the client waiting for its answer,
	// by request ID: chan []byte (ask.go); askSeq numbers them per session,
	// so an ID tells a client nothing of other sessions.
	asks   sync.Map
	askSeq atomic.Uint64
	// toGet carries the front's requests to the client that no request's
	// stream can take, to the GET stream.
	toGet chan []byte

	// done is closed when the session ends; the GET stream ends with it.
	done     chan struct{}
	doneOnce sync.Once
	// getMu makes GET streams take turns: a new one replaces the one
	// before (getStop), which ends before the new one reads the queue.
	getMu   sync.Mutex
	getStop context.CancelFunc // guarded by getMu
	getWG   *sync.WaitGroup    // guarded by getMu
}

// newSession returns a streamable HTTP session of the front's own, with a
// new ID; in a cluster the ID names the replica (sessionOwner).
func newSession(ident *principal.Identity, replicaID string) *session {
	id := sessionIDPrefix + rand.Text()
	if replicaID != "" {
		id = sessionIDPrefix + replicaID + "." + rand.Text()
	}
	return &session{
		id:    id,
		ident: ident,
		notes: make(chan mcp.JSONRPCNotification, sessionQueue),
		toGet: make(chan []byte, 1),
		done:  make(chan struct{}),
	}
}

// requestSession returns the session of one 2026-07-28 request: it has no
// ID and is registered nowhere. It has no notification queue (nil: mcp-go
// drops what is sent on it, as from a full queue) but for
// subscriptions/listen, whose queue feeds the request's stream (post.go).
func requestSession(ident *principal.Identity) *session {
	return &session{ident: ident, done: make(chan struct{})}
}

// mcpSession is the session mcp-go knows: the inner one, or s itself.
func (s *session) mcpSession() server.ClientSession {
	if s.inner != nil {
		return s.inner
	}
	return s
}

// own reports whether s is a streamable HTTP session of the front's own.
func (s *session) own() bool { return s != nil && s.inner == nil && s.id != "" }

// The mcp-go session interfaces, for the front's own sessions.

func (s *session) SessionID() string { return s.id }
func (s *session) NotificationChannel() chan<- mcp.JSONRPCNotification {
	return s.notes
}
func (s *session) Initialize()       { s.initialized.Store(true) }
func (s *session) Initialized() bool { return s.initialized.Load() }

func (s *session) SetLogLevel(level mcp.LoggingLevel) { s.level.Store(&level) }
func (s *session) GetLogLevel() mcp.LoggingLevel {
	if l := s.level.Load(); l != nil {
		return *l
	}
	return mcp.LoggingLevelError
}

func (s *session) GetClientInfo() mcp.Implementation {
	s.infoMu.Lock()
	defer s.infoMu.Unlock()
	return s.info
}

func (s *session) SetClientInfo(info mcp.Implementation) {
	s.infoMu.Lock()
	defer s.infoMu.Unlock()
	s.info = info
}

func (s *session) GetClientCapabilities() mcp.ClientCapabilities {
	s.infoMu.Lock()
	defer s.infoMu.Unlock()
	return s.caps
}

func (s *session) SetClientCapabilities(caps mcp.ClientCapabilities) {
	s.infoMu.Lock()
	defer s.infoMu.Unlock()
	s.caps = caps
	s.elicits.Store(caps.Elicitation != nil)
}

// ProtocolVersion is the version initialize negotiated ("" before).
func (s *session) ProtocolVersion() string {
	if v := s.version.Load(); v != nil {
		return *v
	}
	return ""
}

func (s *session) SetSubscriptionFilter(f mcp.SubscriptionFilter) {
	if f.IsEmpty() {
		s.filter.Store(nil)
		return
	}
	s.filter.Store(&f)
}

func (s *session) SubscriptionFilter() (mcp.SubscriptionFilter, bool) {
	if f := s.filter.Load(); f != nil {
		return *f, true
	}
	return mcp.SubscriptionFilter{}, false
}

// clientCaps are the capabilities the session's client declared.
func (s *session) clientCaps() mcp.ClientCapabilities {
	if ci, ok := s.mcpSession().(server.SessionWithClientInfo); ok {
		return ci.GetClientCapabilities()
	}
	return mcp.ClientCapabilities{}
}

// negotiated is the protocol version of the session, for batches ("" when
// none was negotiated).
func (s *session) negotiated() string {
	if v, ok := s.mcpSession().(server.SessionWithProtocolVersion); ok {
		return v.ProtocolVersion()
	}
	return ""
}

// The requests mcp-go's dispatcher may make of a session of the front's
// own (a prompt or resource handler, elicitation through MCPServer): on
// the stream of the request ctx belongs to, else on the GET stream
// (ask.go).

func (s *session) RequestSampling(ctx context.Context, req mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	var res mcp.CreateMessageResult
	return &res, s.request(ctx, string(mcp.MethodSamplingCreateMessage), req.CreateMessageParams, &res)
}

func (s *session) RequestElicitation(ctx context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	var res mcp.ElicitationResult
	return &res, s.request(ctx, string(mcp.MethodElicitationCreate), req.Params, &res)
}

func (s *session) ListRoots(ctx context.Context, _ mcp.ListRootsRequest) (*mcp.ListRootsResult, error) {
	var res mcp.ListRootsResult
	return &res, s.request(ctx, string(mcp.MethodListRoots), nil, &res)
}

// request asks the client method with params and decodes its result into
// out.
func (s *session) request(ctx context.Context, method string, params, out any) error {
	raw, err := s.ask(ctx, eventstream.From(ctx), method, params)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s: reading the client's answer: %w", method, err)
	}
	return nil
}

// identity is who sends a request of session s: the identity the
// request's own authentication put in ctx, else the session's.
func (s *session) identity(ctx context.Context) *principal.Identity {
	if id := principal.From(ctx); id != nil || s == nil {
		return id
	}
	return s.ident
}

// identity is who sends the message handled with ctx (a hook's or a
// handler's of mcp-go): the request's authenticated identity, else that of
// the session in ctx.
func (f *Front) identity(ctx context.Context) *principal.Identity {
	if id := principal.From(ctx); id != nil {
		return id
	}
	if cs := server.ClientSessionFromContext(ctx); cs != nil {
		return f.liveClient(cs.SessionID()).identity(ctx)
	}
	return nil
}

// ownedBy reports whether the principal r authenticated as may use s:
// the one that opened it. Any other principal presenting the session's ID
// gets 404, as if it did not exist.
func (s *session) ownedBy(r *http.Request) bool {
	return principal.NameOf(s.ident) == principal.NameOf(principal.From(r.Context()))
}

// callKey is the key of a request ID in s.calls: the ID as JSON-RPC
// reads it (42 and 42.0 are one ID, "a" and "\u0061" too).
func callKey(id json.RawMessage) string {
	if plainString(id) {
		return string(id)
	}
	var v any
	if json.Unmarshal(id, &v) != nil {
		return string(id)
	}
	switch v := v.(type) {
	case string:
		return strconv.Quote(v)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return string(id)
}

// plainString reports whether b is a JSON string that reads as its bytes
// between the quotes: no escapes, valid UTF-8.
func plainString(b []byte) bool {
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return false
	}
	in := b[1 : len(b)-1]
	return bytes.IndexByte(in, '\\') < 0 && bytes.IndexByte(in, '"') < 0 && utf8.Valid(in)
}

// cancelCall cancels the front's call of s that a notifications/cancelled
// (params) names, if one is in flight; mcp-go cancels the requests it runs
// itself.
func (s *session) cancelCall(params json.RawMessage) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil || p.RequestID == nil {
		return
	}
	if v, ok := s.calls.LoadAndDelete(callKey(p.RequestID)); ok {
		v.(*inflight).cancel()
	}
}

// inflight is a tools/call in flight, as notifications/cancelled finds it.
type inflight struct{ cancel context.CancelFunc }

// end closes s.done once: the session's GET stream ends.
func (s *session) end() { s.doneOnce.Do(func() { close(s.done) }) }

// clientStarted and clientEnded keep f.clients, and the count of live
// sessions server.max_sessions bounds, in step with mcp-go's registered
// sessions (its register and unregister hooks, for every transport). A
// session registered while serving a request that reserved a slot for it
// (an initialize, an SSE stream) takes that slot; any other (stdio's)
// counts on its own.
func (f *Front) clientStarted(ctx context.Context, cs server.ClientSession) *session {
	s, own := cs.(*session)
	if !own {
		s = &session{id: cs.SessionID(), inner: cs, ident: principal.From(ctx), done: make(chan struct{})}
	}
	s.Touch()
	sl, ok := ctx.Value(slotKey{}).(*sessionlimit.Slot)
	if ok {
		s.owner, ok = sl.Take() // the slot's count is the session's now
	}
	if !ok {
		f.limits.Add()
	}
	if old, replaced := f.clients.Swap(s.id, s); replaced {
		f.limits.Ended(old.(*session).owner) // the older session's entry, gone with its count
	}
	return s
}

func (f *Front) clientEnded(cs server.ClientSession) {
	// Only cs's entry: a session registered under the same ID since
	// replaced it.
	v, ok := f.clients.Load(cs.SessionID())
	if !ok || v.(*session).mcpSession() != cs || !f.clients.CompareAndDelete(cs.SessionID(), v) {
		return
	}
	s := v.(*session)
	f.limits.Ended(s.owner)
	s.end()
}

// liveClient returns live session id, or nil when there is none by that
// ID (never was, or it ended).
func (f *Front) liveClient(id string) *session {
	if v, ok := f.clients.Load(id); ok {
		return v.(*session)
	}
	return nil
}

// endSession ends the front's session s, as a DELETE does: mcp-go
// unregisters it, which ends its thread (Backend.SessionEnded).
func (f *Front) endSession(ctx context.Context, s *session) {
	f.mcp.UnregisterSession(ctx, s.id)
}

type slotKey struct{}

// reserve takes room for a session (server.max_sessions, and the
// principal's auth.max_sessions) for a request that may create one, and
// returns ctx carrying it, for the session registered while serving the
// request to take (clientStarted finds it in the register hook's ctx: the
// initialize's own, or, for SSE, one mcp-go derives from the request's);
// false when a cap is reached, after answering 503. The caller must
// release the slot once the request is served.
func (f *Front) reserve(w http.ResponseWriter, ctx context.Context) (context.Context, *sessionlimit.Slot, bool) {
	id := principal.From(ctx)
	sl, err := f.limits.Reserve(principal.NameOf(id))
	if err == nil {
		return context.WithValue(ctx, slotKey{}, sl), sl, true
	}
	msg := fmt.Sprintf("the gateway has %d sessions open (server.max_sessions): retry later, or end sessions no longer in use with DELETE", f.o.MaxSessions)
	if errors.Is(err, sessionlimit.ErrPrincipalFull) {
		msg = fmt.Sprintf("principal %q has %d sessions open (auth.max_sessions): end sessions no longer in use with DELETE, or retry later", id.Name, f.limits.PerPrincipal())
	}
	w.Header().Set("Retry-After", strconv.Itoa(sessionsRetryAfter))
	writeJSON(w, http.StatusServiceUnavailable, jsonRPCError(mcp.INTERNAL_ERROR, msg))
	return ctx, nil, false
}

// sessionsRetryAfter is the Retry-After, in seconds, of a request refused
// under server.max_sessions.
const sessionsRetryAfter = 5

// sweepIdle ends every streamable HTTP session idle for ttl at now (no
// request in flight, a POST, a batch or an open GET stream, and none for
// ttl), as a DELETE ends it.
func (f *Front) sweepIdle(ctx context.Context, ttl time.Duration, now time.Time) {
	f.clients.Range(func(_, v any) bool {
		if s := v.(*session); s.own() && s.Claim(now, ttl) {
			idle := now.Sub(s.Last())
			f.endSession(ctx, s)
			f.logger.Info("session ended after being idle", "idle", idle.Round(time.Second).String(),
				"limit", "server.session_idle_ttl")
		}
		return ctx.Err() == nil
	})
}
