package mcpfront

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/internal/principal"
)

// Sessions as the HTTP paths need them, and the idle expiry of streamable
// HTTP sessions (server.session_idle_ttl).
//
// toolgate expires idle sessions itself rather than through mcp-go's
// sweeper, which counts as activity only what passes through mcp-go's own
// POST and GET handling. JSON-RPC batches do not (batch.go hands their
// messages to HandleMessage, since mcp-go's POST handling drops session
// notifications it cannot stream), so with mcp-go's sweeper a client that
// sends only batches would lose its session. Here a session is idle when no
// request of its is in flight — a POST, a batch, or an open GET stream,
// which mcp-go keeps alive with heartbeats — and none has been for
// session_idle_ttl; it is then ended with a DELETE through mcp-go, exactly
// as a client ends it, so mcp-go's state and toolgate's thread go with it.

// clientSession is a live mcp-go session (any transport).
type clientSession struct {
	session server.ClientSession
	// streamable: mcp-go's streamable HTTP session type, the one the idle
	// expiry applies to.
	streamable bool
	version    atomic.Pointer[string] // negotiated over streamable HTTP; nil before (or for another transport)
	active     atomic.Int32           // requests of the session in flight
	last       atomic.Int64           // when the last request ended (or the session started); Unix ns
	// ident is the principal that opened the session (nil without
	// authentication); only it may use the session.
	ident *principal.Identity
	// owner is the count of its principal's sessions this one is in,
	// under Options.MaxSessionsPerPrincipal; nil when not counted.
	owner *principalCount
	// calls are its tools/calls in flight on the fast path, by request ID
	// (mcp.RequestId.String()): *fastCall (sessioncall.go).
	calls sync.Map
	// streamMu keeps a DELETE of the session out while a GET starts its
	// stream (serveStream).
	streamMu sync.Mutex
	// asks are the front's requests to the client waiting for its
	// answer, by request ID: chan []byte (ask.go); askSeq numbers them
	// per session, so an ID tells a client nothing of other sessions.
	asks   sync.Map
	askSeq atomic.Uint64
}

// identity is who sends a request of session c: the identity the
// request's own authentication put in ctx, else the session's.
func (c *clientSession) identity(ctx context.Context) *principal.Identity {
	if id := principal.From(ctx); id != nil || c == nil {
		return id
	}
	return c.ident
}

// identity is who sends the message handled with ctx: the request's
// authenticated identity, else that of the session in ctx.
func (f *Front) identity(ctx context.Context) *principal.Identity {
	if id := principal.From(ctx); id != nil {
		return id
	}
	if s := server.ClientSessionFromContext(ctx); s != nil {
		return f.liveClient(s.SessionID()).identity(ctx)
	}
	return nil
}

// ownedBy reports whether r may use session c: c is nil (mcp-go answers
// for unknown sessions) or was opened by the principal r authenticated as.
// Any other principal presenting the session's ID gets 404, as if it did
// not exist.
func ownedBy(c *clientSession, r *http.Request) bool {
	return c == nil || principal.NameOf(c.ident) == principal.NameOf(principal.From(r.Context()))
}

// streamableSession is implemented by mcp-go's streamable HTTP sessions
// only (its type is unexported).
type streamableSession interface {
	UpgradeToSSEWhenReceiveNotification()
}

// clientStarted and clientEnded keep f.clients, and the count of live
// sessions server.max_sessions bounds, in step with mcp-go's registered
// sessions (its register and unregister hooks). A session registered
// while serving a request that reserved a slot for it (an initialize, an
// SSE stream) takes that slot; any other (stdio's) counts on its own.
func (f *Front) clientStarted(ctx context.Context, s server.ClientSession) {
	id := s.SessionID()
	if id == "" {
		return
	}
	_, streamable := s.(streamableSession)
	c := &clientSession{session: s, streamable: streamable, ident: principal.From(ctx)}
	c.last.Store(time.Now().UnixNano())
	// mcp-go registers a session it initializes with its version already
	// set, whatever Mcp-Session-Id the initialize carried.
	if v := protocolVersion(s); streamable && v != "" {
		c.version.Store(&v)
	}
	if sl, ok := ctx.Value(slotKey{}).(*slot); !ok || !sl.used.CompareAndSwap(false, true) {
		f.sessions.Add(1)
	} else {
		c.owner = sl.owner // the slot's count is the session's now
	}
	if old, replaced := f.clients.Swap(id, c); replaced {
		f.sessions.Add(-1) // the older session's entry, gone with its count
		f.leave(old.(*clientSession).owner)
	}
}

func (f *Front) clientEnded(s server.ClientSession) {
	// Only s's entry: a session registered under the same ID since
	// replaced it.
	v, ok := f.clients.Load(s.SessionID())
	if !ok || v.(*clientSession).session != s || !f.clients.CompareAndDelete(s.SessionID(), v) {
		return
	}
	f.sessions.Add(-1)
	c := v.(*clientSession)
	f.leave(c.owner)
	if c.streamable {
		f.ids.forget(s.SessionID())
	}
}

// liveClient returns live session id, or nil when mcp-go has none by that
// ID (never had, or unregistered it).
func (f *Front) liveClient(id string) *clientSession {
	if v, ok := f.clients.Load(id); ok {
		return v.(*clientSession)
	}
	return nil
}

// streamableVersion is the protocol version of a session initialized over
// streamable HTTP; "" for nil or a session of another transport.
func (c *clientSession) streamableVersion() string {
	if c == nil {
		return ""
	}
	if v := c.version.Load(); v != nil {
		return *v
	}
	return ""
}

// expiring is the active count of a session the sweeper has claimed.
const expiring = math.MinInt32

// begin and end bracket a request of the session. begin reports false,
// and the request must not run in the session, when the sweeper is ending
// it; nil begins (and ends) nothing.
func (c *clientSession) begin() bool {
	if c == nil {
		return true
	}
	for {
		n := c.active.Load()
		if n < 0 {
			return false
		}
		if c.active.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (c *clientSession) end() {
	if c != nil {
		c.last.Store(time.Now().UnixNano())
		c.active.Add(-1)
	}
}

// claimIdle reports whether the session has been idle for ttl at now and,
// if so, claims it for the sweeper: from then on begin refuses.
func (c *clientSession) claimIdle(now time.Time, ttl time.Duration) bool {
	last := c.last.Load()
	if now.Sub(time.Unix(0, last)) < ttl || !c.active.CompareAndSwap(0, expiring) {
		return false
	}
	if c.last.Load() != last { // a request began and ended meanwhile
		c.active.Store(0)
		return false
	}
	return true
}

// serveStream serves a request other than a POST (a GET stream, a
// DELETE) for session sid ("" for none), counting it as activity of the
// session. A GET or DELETE must name a live session initialized over
// streamable HTTP: for any other mcp-go would register a new session, with
// a goroutine, that outlives the GET (fact 9 of the package doc), or end a
// session of another transport.
func (f *Front) serveStream(w http.ResponseWriter, r *http.Request, p *httpParts, sid string) {
	c := f.liveClient(sid)
	if !ownedBy(c, r) {
		writeUnknownSession(w)
		return
	}
	if r.Method == http.MethodGet || r.Method == http.MethodDelete {
		if sid == "" {
			writeMissingSession(w)
			return
		}
		if c.streamableVersion() == "" {
			writeUnknownSession(w)
			return
		}
	}
	if !c.begin() {
		writeUnknownSession(w)
		return
	}
	defer c.end()
	if c != nil && (r.Method == http.MethodGet || r.Method == http.MethodDelete) {
		// mcp-go starts a GET's listening stream in steps a concurrent
		// DELETE can run between: the stream's pump then outlived the
		// session, and its GET stayed open, or the GET made the deleted
		// session anew. A DELETE waits until a GET has its stream (mcp-go
		// sends the stream's header once it has), and a GET that waited
		// for a DELETE finds its session gone.
		c.streamMu.Lock()
		unlock := sync.OnceFunc(c.streamMu.Unlock)
		defer unlock()
		if f.liveClient(sid) != c {
			writeUnknownSession(w)
			return
		}
		if r.Method == http.MethodGet {
			w = &headerHook{ResponseWriter: w, hook: unlock}
		}
	}
	p.streamable.ServeHTTP(w, r)
}

// headerHook calls hook, once, before the response's header goes out.
type headerHook struct {
	http.ResponseWriter
	hook func()
}

func (h *headerHook) WriteHeader(code int) {
	h.hook()
	h.ResponseWriter.WriteHeader(code)
}

func (h *headerHook) Write(b []byte) (int, error) {
	h.hook()
	return h.ResponseWriter.Write(b)
}

func (h *headerHook) Flush() {
	h.hook()
	if f, ok := h.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (h *headerHook) Unwrap() http.ResponseWriter { return h.ResponseWriter }

// maxSessionIDLen bounds the Mcp-Session-Id a request may carry. The IDs
// toolgate's transports issue are far shorter (streamable HTTP:
// "mcp-session-" and 26 characters, sessionIDs.Generate; SSE: a 36-character
// UUID; stdio: "stdio"); a longer one names no session, and is refused
// before it is looked up or kept anywhere.
const maxSessionIDLen = 128

// writeLongSessionID answers a request whose Mcp-Session-Id is longer than
// any session's.
func writeLongSessionID(w http.ResponseWriter) {
	writeJSON(w, http.StatusBadRequest, jsonRPCError(mcp.INVALID_REQUEST,
		fmt.Sprintf("Mcp-Session-Id longer than %d bytes: repeat the session ID initialize returned", maxSessionIDLen)))
}

// A slot is the room for one session under server.max_sessions, reserved
// by a request that may create a session (an initialize, an SSE stream)
// and taken by the session mcp-go registers while serving it (clientStarted
// finds it in the hook's ctx, which mcp-go derives from the request's).
type slot struct {
	used atomic.Bool
	id   string // the streamable HTTP session ID generated for it, if any (sessionIDs)
	// owner is the count of the requesting principal's sessions the slot
	// reserved room in; nil when principals are not capped.
	owner *principalCount
}

// principalCount is the number of one principal's sessions (and slots
// reserved for new ones) under Options.MaxSessionsPerPrincipal. A count
// that drops to zero is dead and leaves Front.principals, so the map holds
// only principals with sessions, however many have come and gone; a
// request that finds a dead count takes a new one.
type principalCount struct {
	name string
	mu   sync.Mutex
	n    int  // guarded by mu
	dead bool // guarded by mu
}

// join adds one to name's count of sessions unless it has limit, and
// returns the count, or nil when the principal is at its limit.
func (f *Front) join(name string, limit int) *principalCount {
	for {
		v, _ := f.principals.LoadOrStore(name, &principalCount{name: name})
		pc := v.(*principalCount)
		pc.mu.Lock()
		switch {
		case pc.dead: // left the map just now: take a new one
			pc.mu.Unlock()
			continue
		case pc.n >= limit:
			pc.mu.Unlock()
			return nil
		}
		pc.n++
		pc.mu.Unlock()
		return pc
	}
}

// leave takes one off pc (nil: not counted), forgetting the principal at
// zero.
func (f *Front) leave(pc *principalCount) {
	if pc == nil {
		return
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.n--; pc.n == 0 {
		pc.dead = true
		f.principals.CompareAndDelete(pc.name, pc)
	}
}

type slotKey struct{}

// reserve takes a slot for a request that may create a session, and
// returns r carrying it; false when server.max_sessions sessions are live,
// after answering 503. The caller must call release once mcp-go has served
// the request.
func (f *Front) reserve(w http.ResponseWriter, r *http.Request) (*http.Request, *slot, bool) {
	var owner *principalCount
	if id := principal.From(r.Context()); id != nil && f.o.MaxSessionsPerPrincipal > 0 {
		if owner = f.join(id.Name, f.o.MaxSessionsPerPrincipal); owner == nil {
			w.Header().Set("Retry-After", strconv.Itoa(sessionsRetryAfter))
			writeJSON(w, http.StatusServiceUnavailable, jsonRPCError(mcp.INTERNAL_ERROR,
				fmt.Sprintf("principal %q has %d sessions open (auth.max_sessions): end sessions no longer in use with DELETE, or retry later", id.Name, f.o.MaxSessionsPerPrincipal)))
			return r, nil, false
		}
	}
	if !tryAdd(&f.sessions, int64(f.o.MaxSessions)) {
		f.leave(owner)
		w.Header().Set("Retry-After", strconv.Itoa(sessionsRetryAfter))
		writeJSON(w, http.StatusServiceUnavailable, jsonRPCError(mcp.INTERNAL_ERROR,
			fmt.Sprintf("the gateway has %d sessions open (server.max_sessions): retry later, or end sessions no longer in use with DELETE", f.o.MaxSessions)))
		return r, nil, false
	}
	sl := &slot{owner: owner}
	return r.WithContext(context.WithValue(r.Context(), slotKey{}, sl)), sl, true
}

// tryAdd adds one to n unless that would take it past limit (0: no
// limit), and reports whether it did.
func tryAdd(n *atomic.Int64, limit int64) bool {
	for {
		v := n.Load()
		if limit > 0 && v >= limit {
			return false
		}
		if n.CompareAndSwap(v, v+1) {
			return true
		}
	}
}

// sessionsRetryAfter is the Retry-After, in seconds, of a request refused
// under server.max_sessions.
const sessionsRetryAfter = 5

// release gives back sl if no session took it, and forgets the session ID
// generated for it.
func (f *Front) release(sl *slot) {
	if sl.used.CompareAndSwap(false, true) {
		f.sessions.Add(-1)
		f.leave(sl.owner)
		if sl.id != "" {
			f.ids.forget(sl.id)
		}
	}
}

// serveInitialize hands an initialize to mcp-go within a slot: it creates
// a session.
func (f *Front) serveInitialize(w http.ResponseWriter, r *http.Request, p *httpParts) {
	r, sl, ok := f.reserve(w, r)
	if !ok {
		return
	}
	defer f.release(sl)
	p.streamable.ServeHTTP(w, r)
}

// sessionIDs issues and checks the streamable HTTP session IDs in place of
// mcp-go's InsecureStatefulSessionIdManager, which keeps the ID of every
// session ever ended, forever (fact 14 of the package doc). It knows the
// IDs issued to live sessions (and to initializes in flight) only: an
// ended session's ID is forgotten, and mcp-go answers it 404 as it would a
// terminated one.
type sessionIDs struct {
	live sync.Map // issued ID → struct{}
}

// sessionIDPrefix starts every streamable HTTP session ID, as mcp-go's
// own do.
const sessionIDPrefix = "mcp-session-"

// ResolveSessionIdManager returns the manager for r: one that records the
// ID it generates in r's slot, when r has one.
func (ids *sessionIDs) ResolveSessionIdManager(r *http.Request) server.SessionIdManager {
	if r != nil {
		if sl, ok := r.Context().Value(slotKey{}).(*slot); ok {
			return slotIDs{ids, sl}
		}
	}
	return ids
}

func (ids *sessionIDs) Generate() string {
	id := sessionIDPrefix + rand.Text()
	ids.live.Store(id, struct{}{})
	return id
}

func (ids *sessionIDs) Validate(id string) (isTerminated bool, err error) {
	if _, ok := ids.live.Load(id); !ok {
		return false, errors.New("unknown session ID")
	}
	return false, nil
}

func (ids *sessionIDs) Terminate(id string) (isNotAllowed bool, err error) {
	ids.forget(id)
	return false, nil
}

func (ids *sessionIDs) forget(id string) { ids.live.Delete(id) }

// slotIDs is the session ID manager of a request holding a slot.
type slotIDs struct {
	*sessionIDs
	sl *slot
}

func (s slotIDs) Generate() string {
	id := s.sessionIDs.Generate()
	s.sl.id = id // the request's own goroutine; release reads it after
	return id
}

// sweepInterval is how often idle sessions are looked for, for ttl: a
// session lives at most a quarter of ttl past it.
func sweepInterval(ttl time.Duration) time.Duration {
	return max(ttl/4, time.Second)
}

// idleSweeper ends the streamable HTTP sessions idle for ttl, every
// sweepInterval(ttl), until stop.
type idleSweeper struct {
	stop context.CancelFunc
	wg   sync.WaitGroup
}

func (f *Front) startSweeper(p *httpParts, ttl time.Duration) *idleSweeper {
	ctx, stop := context.WithCancel(context.Background())
	sw := &idleSweeper{stop: stop}
	sw.wg.Go(func() {
		t := time.NewTicker(sweepInterval(ttl))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				f.sweepIdle(ctx, p, ttl, now)
			}
		}
	})
	return sw
}

func (sw *idleSweeper) close() {
	if sw != nil {
		sw.stop()
		sw.wg.Wait()
	}
}

// sweepIdle ends every streamable HTTP session idle for ttl at now.
func (f *Front) sweepIdle(ctx context.Context, p *httpParts, ttl time.Duration, now time.Time) {
	f.clients.Range(func(k, v any) bool {
		if c := v.(*clientSession); c.streamable && c.claimIdle(now, ttl) {
			f.expire(ctx, p, k.(string), c, now)
		}
		return ctx.Err() == nil
	})
}

// expire ends session id as its client would, with a DELETE through
// mcp-go: mcp-go forgets the session and unregisters it, which ends its
// thread.
func (f *Front) expire(ctx context.Context, p *httpParts, id string, c *clientSession, now time.Time) {
	idle := now.Sub(time.Unix(0, c.last.Load()))
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, f.o.MCPPath, http.NoBody)
	if err != nil {
		return // unreachable: the method and path are valid
	}
	req.Header.Set(server.HeaderKeySessionID, id)
	rec := &elementRecorder{header: http.Header{}}
	p.streamable.ServeHTTP(rec, req)
	if rec.code != 0 && rec.code != http.StatusOK {
		// The status only: mcp-go's message may name the session.
		f.logger.Warn("ending an idle session failed", "status", rec.code)
		c.active.Store(0) // unclaimed: it serves on, and the next sweep tries again
		return
	}
	f.logger.Info("session ended after being idle", "idle", idle.Round(time.Second).String(),
		"limit", "server.session_idle_ttl")
}
