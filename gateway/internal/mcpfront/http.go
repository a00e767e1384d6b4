package mcpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/internal/principal"
)

// eventsPerSession bounds the event store (see eventStore).
const eventsPerSession = 256

// httpParts are the mcp-go HTTP transports behind [Gateway.Handler].
type httpParts struct {
	streamable *server.StreamableHTTPServer
	sse        *server.SSEServer // nil when server.sse is false
	streams    sync.Map          // SSE session ID → *sseStream
	bodies     sync.Pool         // *body, reused request bodies
	sweeper    *idleSweeper      // ends idle streamable HTTP sessions; nil when the TTL is 0 (sessions.go)
	sseBatches batchRuns         // SSE batches in flight (batch.go)
	fastCalls  atomic.Int64      // session calls served on the fast path (sessioncall.go)
}

// body holds one request body read by toolgate and replays it to mcp-go,
// which copies what it reads; it goes back to the pool once mcp-go's
// handler returns.
type body struct {
	buf bytes.Buffer
	rd  bytes.Reader
}

func (b *body) Read(p []byte) (int, error) { return b.rd.Read(p) }
func (b *body) Close() error               { return nil }

// maxPooledBody is the largest buffer kept for reuse.
const maxPooledBody = 64 << 10

func (p *httpParts) getBody() *body {
	if b, ok := p.bodies.Get().(*body); ok {
		return b
	}
	return &body{}
}

func (p *httpParts) putBody(b *body) {
	if b.buf.Cap() > maxPooledBody {
		return
	}
	b.buf.Reset()
	b.rd.Reset(nil)
	p.bodies.Put(b)
}

func (p *httpParts) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	p.sweeper.close()
	_ = p.streamable.Shutdown(ctx)
	if p.sse != nil {
		p.sse.CloseSessions()
	}
	p.sseBatches.wait()
}

// Mount puts the MCP endpoints on mux: streamable HTTP at
// Options.MCPPath and, with Options.SSE, legacy SSE at /sse and /message.
// Request bodies are capped at Options.MaxBodyBytes and cross-origin
// browser requests are refused unless their origin is in
// Options.AllowedOrigins (net/http's CrossOriginProtection); pages on those
// origins get CORS answers (see cors). Mount once.
func (f *Front) Mount(mux Mux) {
	ttl := f.o.SessionIdleTTL
	heartbeat := min(25*time.Second, ttl/3)
	p := &httpParts{
		streamable: server.NewStreamableHTTPServer(f.mcp,
			// Stateful, with toolgate's session IDs: mcp-go's own manager
			// keeps ended sessions' IDs forever (sessions.go).
			server.WithSessionIdManagerResolver(&f.ids),
			// Every revision, 2026-07-28 included, each request served in
			// its own era (era2026.go; docs/protocol-2026.md). A 2026-07-28
			// client has no session: its threads are carried by thread
			// handles (gateway/handles.go), its list changes by
			// subscriptions/listen.
			server.WithStreamableHTTPProtocolVersions(servedVersions...),
			// toolgate ends idle sessions itself (sessions.go), so that
			// batches count as activity.
			server.WithSessionIdleTTL(0),
			server.WithHeartbeatInterval(heartbeat),
			server.WithEventStore(newEventStore(eventsPerSession)),
			server.WithStreamableHTTPLogger(f.libLogger()),
		),
	}
	if f.o.SSE {
		p.sse = server.NewSSEServer(f.mcp, server.WithKeepAlive(true), server.WithUseFullURLForMessageEndpoint(false),
			server.WithSSEContextFunc(learnSession))
	}
	f.mu.Lock()
	if ttl > 0 && !f.closed { // not after Close, which would not stop it
		p.sweeper = f.startSweeper(p, ttl)
	}
	if !f.closed {
		f.httpParts = p
	}
	f.mu.Unlock()

	c := newCORS(f.o.AllowedOrigins)
	// Authentication inside CORS: preflights carry no credentials, and a
	// 401 to an allowed origin must be readable by its page.
	authed := func(h http.Handler) http.Handler { return h }
	if f.o.Authenticate != nil {
		authed = f.o.Authenticate
	}
	mux.Handle(f.o.MCPPath, c.handler(authed(f.streamableHandler(p))))
	if p.sse != nil {
		mux.Handle("/sse", c.handler(authed(f.sseHandler(p))))
		mux.Handle("/message", c.handler(authed(f.messageHandler(p))))
	}
}

// The CORS answer to an allowed origin: what a page may send to the MCP
// endpoints, and which response headers its script may read.
const (
	corsAllowMethods  = "GET, POST, DELETE"
	corsAllowHeaders  = "Content-Type, Mcp-Session-Id, Mcp-Protocol-Version, Authorization, Last-Event-ID, Mcp-Method, Mcp-Name"
	corsExposeHeaders = "Mcp-Session-Id, Mcp-Protocol-Version, WWW-Authenticate"
	corsMaxAge        = "600" // seconds a browser may reuse a preflight's answer
)

// cors lets pages on Options.AllowedOrigins use the MCP endpoints from a
// browser: it answers their preflights and marks responses to them
// readable. Every other cross-origin browser request is refused by
// net/http's CrossOriginProtection, and every other origin's preflight
// with 403; both name server.allowed_origins.
type cors struct {
	allowed map[string]bool
	cop     *http.CrossOriginProtection
}

func newCORS(origins []string) *cors {
	c := &cors{allowed: make(map[string]bool, len(origins)), cop: http.NewCrossOriginProtection()}
	for _, o := range origins {
		// Validated by config; an error here cannot happen.
		_ = c.cop.AddTrustedOrigin(o)
		c.allowed[o] = true
	}
	c.cop.SetDenyHandler(http.HandlerFunc(writeOriginRefused))
	return c
}

func (c *cors) handler(h http.Handler) http.Handler {
	protected := c.cop.Handler(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		hdr := w.Header()
		if len(c.allowed) > 0 {
			hdr.Add("Vary", "Origin") // the answer depends on it
		}
		if r.Method == http.MethodOptions && origin != "" && r.Header.Get("Access-Control-Request-Method") != "" {
			if !c.allowed[origin] {
				writeOriginRefused(w, r)
				return
			}
			hdr.Set("Access-Control-Allow-Origin", origin)
			hdr.Set("Access-Control-Allow-Methods", corsAllowMethods)
			hdr.Set("Access-Control-Allow-Headers", corsAllowHeaders+paramHeaders(r.Header.Get("Access-Control-Request-Headers")))
			hdr.Set("Access-Control-Expose-Headers", corsExposeHeaders)
			hdr.Set("Access-Control-Max-Age", corsMaxAge)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if c.allowed[origin] {
			// sseStream keeps this over mcp-go's "*" (doc.go fact 15).
			hdr.Set("Access-Control-Allow-Origin", origin)
			hdr.Set("Access-Control-Expose-Headers", corsExposeHeaders)
		}
		protected.ServeHTTP(w, r)
	})
}

// paramHeaders returns, as ", A, B", the Mcp-Param-* headers a preflight
// asks for: a 2026-07-28 client sends a tool's x-mcp-header parameters in
// headers of that prefix, which no fixed list can name.
func paramHeaders(requested string) string {
	var out strings.Builder
	for h := range strings.SplitSeq(requested, ",") {
		h = strings.TrimSpace(h)
		if len(h) > len(mcp.HeaderParamPrefix) && strings.EqualFold(h[:len(mcp.HeaderParamPrefix)], mcp.HeaderParamPrefix) {
			out.WriteString(", ")
			out.WriteString(h)
		}
	}
	return out.String()
}

// writeOriginRefused answers a cross-origin browser request, or preflight,
// from an origin not in server.allowed_origins.
func writeOriginRefused(w http.ResponseWriter, r *http.Request) {
	msg := "cross-origin browser request refused: list its origin in server.allowed_origins"
	if o := r.Header.Get("Origin"); o != "" {
		msg = fmt.Sprintf("cross-origin browser request from %q refused: list the origin in server.allowed_origins", o)
	}
	writeJSON(w, http.StatusForbidden, jsonRPCError(mcp.INVALID_REQUEST, msg))
}

// bodyChunk bounds what readBody reserves before bytes arrive: a body
// announcing a large Content-Length and then stalling holds at most this
// much, and the buffer grows only as the body is read.
const bodyChunk = 32 << 10

// readBody reads a request body, up to server.max_body_bytes and within
// server.read_timeout, into b. On failure it has written the response (413
// for an oversized body, 408 for one not read in time) and returns false.
//
// The read deadline is set on the connection for this body only: it is
// cleared once the body is read (as net/http's HTTP/1 server also does when
// it starts watching the connection), so that an answer streamed afterwards
// (an SSE response to a POST) is not cut; GET streams read no body and
// never get one. After a failure it stays, so that net/http's draining of
// the rest of the body cannot wait on a stalled client either.
func (f *Front) readBody(w http.ResponseWriter, r *http.Request, b *body) bool {
	limit := f.o.MaxBodyBytes
	var rc *http.ResponseController
	if t := f.o.ReadTimeout; t > 0 {
		rc = http.NewResponseController(w)
		// ErrNotSupported leaves the body without a deadline; the
		// connection's own timeouts still apply.
		if rc.SetReadDeadline(time.Now().Add(t)) != nil {
			rc = nil
		}
	}
	var err error
	if r.ContentLength > limit {
		err = &http.MaxBytesError{Limit: limit}
	} else {
		// Reserve what the body announces only up to bodyChunk: the
		// announcement costs the client nothing.
		b.buf.Grow(int(min(max(r.ContentLength, 0), bodyChunk)))
		_, err = b.buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	}
	if err == nil {
		if rc != nil {
			_ = rc.SetReadDeadline(time.Time{})
		}
		return true
	}
	code, msg := http.StatusBadRequest, "reading the request body failed"
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		code = http.StatusRequestEntityTooLarge
		msg = fmt.Sprintf("request body exceeds %d bytes (server.max_body_bytes); send a smaller request or raise the limit", limit)
	} else if isTimeout(err) {
		code = http.StatusRequestTimeout
		msg = fmt.Sprintf("request body not received within %s (server.read_timeout); send the whole body at once or raise the limit", f.o.ReadTimeout)
		// The connection is mid-body: it cannot carry another request.
		w.Header().Set("Connection", "close")
	}
	writeJSON(w, code, jsonRPCError(mcp.INVALID_REQUEST, msg))
	return false
}

// isTimeout reports whether err is a read deadline passing.
func isTimeout(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	ne, ok := errors.AsType[net.Error](err)
	return ok && ne.Timeout()
}

// replay hands msg to the next handler as the request body.
func replay(r *http.Request, b *body, msg []byte) {
	b.rd.Reset(msg)
	r.Body = b
	r.ContentLength = int64(len(msg))
}

func writeJSON(w http.ResponseWriter, code int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// streamableHandler caps POST bodies, refuses protocol versions toolgate
// does not serve, routes 2026-07-28 requests by their era (era2026.go) and
// runs preflight on requests of established sessions; legacy requests
// without a live session go to mcp-go untouched so that it answers them
// as the transport spec says.
func (f *Front) streamableHandler(p *httpParts) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sid := r.Header.Get(server.HeaderKeySessionID)
		if len(sid) > maxSessionIDLen {
			writeLongSessionID(w)
			return
		}
		if r.Method != http.MethodPost {
			if versionRefused(w, r, nil) {
				return
			}
			if mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion)) && r.Method != http.MethodHead {
				writeModernStream(w, r.Method) // no session to stream or end
				return
			}
			f.serveStream(w, r, p, sid)
			return
		}
		b := p.getBody()
		defer p.putBody(b)
		if !f.readBody(w, r, b) {
			return
		}
		msg := b.buf.Bytes()
		if isBatch(msg) {
			if !versionRefused(w, r, nil) {
				f.serveHTTPBatch(w, r, p, msg)
			}
			return
		}
		method, idMember := readHead(msg)
		if versionRefused(w, r, readID(msg)) {
			return
		}
		if isModern(r, msg) {
			// 2026-07-28: no session, whatever Mcp-Session-Id says (era2026.go).
			f.serveModern(w, r, p, b, msg, method, readID(msg))
			return
		}
		if string(method) == string(mcp.MethodInitialize) {
			// mcp-go makes a new session, whatever Mcp-Session-Id the
			// initialize carries; its register hook records it (sessions.go).
			replay(r, b, msg)
			f.serveInitialize(w, r, p)
			return
		}
		if sid == "" {
			// Every single legacy message needs a session but initialize,
			// and server/discover, which mcp-go answers for a legacy
			// request with "method not found" (the answer a client probing
			// for 2026-07-28 without its _meta should get). Garbage is left
			// to mcp-go; batches never get here (batch.go).
			if len(method) > 0 && string(method) != string(mcp.MethodServerDiscover) {
				writeMissingSession(w)
				return
			}
			replay(r, b, msg) // the discovery probe, or garbage: mcp-go answers
			p.streamable.ServeHTTP(w, r)
			return
		}
		c := f.liveClient(sid)
		if !ownedBy(c, r) {
			writeUnknownSession(w) // another principal's
			return
		}
		if !c.begin() {
			writeUnknownSession(w) // expired just now
			return
		}
		defer c.end()
		if len(method) == 0 && idMember {
			// The client's answer to a request a call of the front's
			// asked (ask.go): the call takes it, mcp-go never sees it.
			if id := readID(msg); isAskID(id) {
				switch {
				case p.postRefused(w, r, "a response"):
				case c == nil: // as mcp-go answers a response in no session
					writeUnknownSession(w)
				case c.answer(id, msg):
					w.WriteHeader(http.StatusAccepted)
				default: // as mcp-go answers a response nothing waits for
					writeJSON(w, http.StatusBadRequest, jsonRPCError(mcp.INVALID_REQUEST,
						"no request of this session waits for an answer with id "+string(id)+": it was answered already, or the call that asked has ended"))
				}
				return
			}
		}
		if c != nil {
			var reply []byte
			if reply, msg = f.preflight(msg, c.identity(r.Context())); reply != nil {
				writeJSON(w, http.StatusOK, reply)
				return
			}
			if c.streamableVersion() != "" && len(method) > 0 && !idMember {
				f.serveNotification(w, r, p, c, msg)
				return
			}
			if string(method) == string(mcp.MethodToolsCall) && c.streamable && c.streamableVersion() != "" {
				if id := readID(msg); isRequestID(id) && f.serveSessionCall(w, r, p, c, msg, id) {
					return // sessioncall.go
				}
			}
		}
		replay(r, b, msg)
		serveRequest(p.streamable, w, r, method, idMember)
	})
}

// serveRequest hands a POSTed message to mcp-go. A request that can cause
// notifications or requests of its own (tools/call, prompts/get,
// resources/read, completion/complete: progress, an upstream's log
// messages, an upstream's sampling) gets them on its own response stream
// (callstream.go, ask.go).
func serveRequest(h http.Handler, w http.ResponseWriter, r *http.Request, method []byte, request bool) {
	switch string(method) {
	case string(mcp.MethodToolsCall), string(mcp.MethodPromptsGet), string(mcp.MethodResourcesRead), string(mcp.MethodCompletionComplete):
		if request {
			cs, cw, ctx := withCallStream(r.Context(), w)
			if cs != nil {
				defer cs.end()
				r = r.WithContext(ctx)
			}
			h.ServeHTTP(cw, r)
			return
		}
	}
	h.ServeHTTP(w, r)
}

// serveNotification handles a notification POSTed in streamable session
// c: in the session through HandleMessage, as batch messages are, and
// answers 202 with no body, as the transport spec says. mcp-go's own POST
// handling would start a forwarder that takes the session's queued
// notifications (meant for the GET stream) and streams them in the reply
// with 200, or drops them (TestNotificationPostAccepted). The checks
// mcp-go makes on a POST are made here too (postRefused). A message
// mcp-go refuses (not valid JSON, say: the scanner is lenient) gets its
// JSON-RPC error with 400, as the transport spec asks for input the server
// cannot accept.
func (f *Front) serveNotification(w http.ResponseWriter, r *http.Request, p *httpParts, c *clientSession, msg []byte) {
	if p.postRefused(w, r, "a message") {
		return
	}
	c.cancelCall(msg)
	if reply := f.mcp.HandleMessage(f.mcp.WithContext(r.Context(), c.session), msg); reply != nil {
		b, err := json.Marshal(reply)
		if err != nil {
			b = jsonRPCError(mcp.INVALID_REQUEST, "the notification was refused")
		}
		writeJSON(w, http.StatusBadRequest, b)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// writeMissingSession answers a message sent without a session that needs
// one. mcp-go answers 404 here, which tells a client its session expired;
// the transport spec asks for 400 when the header is missing altogether.
func writeMissingSession(w http.ResponseWriter) {
	writeJSON(w, http.StatusBadRequest, jsonRPCError(mcp.INVALID_REQUEST,
		"missing Mcp-Session-Id header: send initialize first and repeat the session ID it returns on every request"))
}

// readHead reads what the front end routes a single POSTed message by:
// its method (nil for none or garbage) and whether it has an id member,
// null included (a message without one is a notification). scanCall reads
// it without allocating; a message it cannot read (an escape in a key or
// the method, say) is decoded.
func readHead(msg []byte) (method []byte, idMember bool) {
	if m, _, id, ok := scanCall(msg); ok {
		return m, id != nil
	}
	var h struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(msg, &h) != nil {
		return nil, false
	}
	return []byte(h.Method), h.ID != nil
}

// readID is the raw id member of a single message (nil for none or
// garbage), for the errors toolgate answers it with.
func readID(msg []byte) json.RawMessage {
	if _, _, id, ok := scanCall(msg); ok {
		return id
	}
	var h struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(msg, &h) != nil {
		return nil
	}
	return h.ID
}

// sseHandler serves the legacy SSE stream through an sseStream, which lets
// preflight send its replies on the stream as mcp-go would.
func (f *Front) sseHandler(p *httpParts) http.Handler {
	h := p.sse.SSEHandler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, sl, ok := f.reserve(w, r) // the stream is a session
		if !ok {
			return
		}
		defer f.release(sl)
		fl, ok := w.(http.Flusher)
		if !ok {
			// As mcp-go answers, without its Access-Control-Allow-Origin.
			http.Error(w, "Streaming unsupported", http.StatusInternalServerError)
			return
		}
		// mcp-go sets Access-Control-Allow-Origin: * on the stream; the
		// stream keeps what toolgate set instead (doc.go fact 15).
		s := &sseStream{w: w, f: fl, parts: p, acao: w.Header().Get(headerACAO)}
		defer s.done()
		h.ServeHTTP(s, r)
	})
}

func (f *Front) messageHandler(p *httpParts) http.Handler {
	h := p.sse.MessageHandler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			h.ServeHTTP(w, r)
			return
		}
		b := p.getBody()
		defer p.putBody(b)
		if !f.readBody(w, r, b) {
			return
		}
		msg := b.buf.Bytes()
		sid := r.URL.Query().Get("sessionId")
		if !ownedBy(f.liveClient(sid), r) {
			writeUnknownSession(w) // another principal's
			return
		}
		if v, live := p.streams.Load(sid); live {
			s := v.(*sseStream)
			if isBatch(msg) {
				f.serveSSEBatch(w, p, s, msg)
				return
			}
			r = s.watch(r)
			var reply []byte
			if reply, msg = f.preflight(msg, principal.From(r.Context())); reply != nil {
				w.WriteHeader(http.StatusAccepted)
				s.send(reply)
				return
			}
		}
		replay(r, b, msg)
		h.ServeHTTP(w, r)
	})
}

// sseStream wraps the ResponseWriter of one SSE stream. It learns the
// session ID from the endpoint event mcp-go writes first, and serialises
// mcp-go's writes with preflight's. mcp-go writes each event in one Write.
// Its response carries the Access-Control-Allow-Origin toolgate set before
// mcp-go ran, if any, not mcp-go's "*".
type sseStream struct {
	parts *httpParts
	acao  string // Access-Control-Allow-Origin as toolgate set it; "" for none

	mu      sync.Mutex // guards w, f, id, closed and started
	w       http.ResponseWriter
	f       http.Flusher
	id      string
	closed  bool
	started bool // the header is written

	session sessionSlot // the stream's mcp-go session, learned from its first message (batch.go)
}

// headerACAO is the CORS response header naming the origin allowed to read.
const headerACAO = "Access-Control-Allow-Origin"

func (s *sseStream) Header() http.Header         { return s.w.Header() }
func (s *sseStream) Unwrap() http.ResponseWriter { return s.w }

func (s *sseStream) WriteHeader(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.start()
	s.w.WriteHeader(code)
}

// start puts back toolgate's Access-Control-Allow-Origin before the header
// goes out. s.mu is held.
func (s *sseStream) start() {
	if s.started {
		return
	}
	s.started = true
	if s.acao == "" {
		s.w.Header().Del(headerACAO)
	} else {
		s.w.Header().Set(headerACAO, s.acao)
	}
}

func (s *sseStream) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.start()
	if s.id == "" {
		if id := endpointSessionID(b); id != "" {
			s.id = id
			s.parts.streams.Store(id, s)
		}
	}
	return s.w.Write(b)
}

func (s *sseStream) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.start()
	s.f.Flush()
}

func (s *sseStream) send(msg []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	_, _ = fmt.Fprintf(s.w, "event: message\ndata: %s\n\n", msg)
	s.f.Flush()
}

func (s *sseStream) done() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.id != "" {
		s.parts.streams.Delete(s.id)
	}
}

// endpointSessionID extracts the session ID from mcp-go's first SSE event,
// "event: endpoint\ndata: /message?sessionId=ID\r\n\r\n".
func endpointSessionID(b []byte) string {
	const key = "sessionId="
	s := string(b)
	if !strings.HasPrefix(s, "event: endpoint") {
		return ""
	}
	i := strings.Index(s, key)
	if i < 0 {
		return ""
	}
	s = s[i+len(key):]
	if j := strings.IndexAny(s, "&\r\n"); j >= 0 {
		s = s[:j]
	}
	return s
}
