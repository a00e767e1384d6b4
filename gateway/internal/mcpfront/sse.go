package mcpfront

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/gateway/internal/eventstream"
	"github.com/toolgate/toolgate/internal/principal"
)

// The legacy SSE transport (2024-11-05): mcp-go's SSE server serves the
// stream and every message but tools/call and batches, which the front
// serves itself (call.go, batch.go) and answers on the stream.

// sseHandler serves the legacy SSE stream through an sseStream, on which
// the front writes its answers between mcp-go's.
func (f *Front) sseHandler(p *httpParts) http.Handler {
	h := p.sse.SSEHandler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, sl, ok := f.reserve(w, r.Context()) // the stream is a session
		if !ok {
			return
		}
		defer sl.Release()
		r = r.WithContext(ctx)
		fl, ok := w.(http.Flusher)
		if !ok {
			http.Error(w, "Streaming unsupported", http.StatusInternalServerError)
			return
		}
		// mcp-go sets Access-Control-Allow-Origin: * on the stream; the
		// stream keeps what toolgate set instead (doc.go).
		s := &sseStream{w: w, f: fl, parts: p, acao: w.Header().Get(headerACAO), ctx: ctx}
		defer s.done()
		h.ServeHTTP(s, r)
	})
}

// messageHandler serves the messages POSTed to /message for an SSE
// stream: tools/call and tools/list requests and batches run on the front's own path and
// are answered on the stream; everything else goes to mcp-go.
func (f *Front) messageHandler(p *httpParts) http.Handler {
	h := p.sse.MessageHandler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			h.ServeHTTP(w, r)
			return
		}
		b := p.readBody(w, r)
		if b == nil {
			return
		}
		defer p.bodies.Release(b)
		msg := b.Bytes()
		sid := r.URL.Query().Get("sessionId")
		s := f.liveClient(sid)
		if s != nil && !s.ownedBy(r) {
			writeUnknownSession(w) // another principal's
			return
		}
		v, live := p.streams.Load(sid)
		if s != nil && s.inner != nil && live {
			st := v.(*sseStream)
			if f.serveSSE(w, r, p, s, st, bytes.Clone(msg)) {
				return
			}
		}
		b.Replay(r, msg)
		h.ServeHTTP(w, r)
	})
}

// serveSSE serves msg, POSTed for SSE session s with stream st, when it is
// the front's to serve (a batch, a tools/call or tools/list request) and reports whether
// it did; it cancels the front's call a notifications/cancelled names and
// leaves that to mcp-go too. As mcp-go does, it answers 202 at once and
// serves the message afterwards, the answer going onto the stream.
func (f *Front) serveSSE(w http.ResponseWriter, r *http.Request, p *httpParts, s *session, st *sseStream, msg []byte) bool {
	x := exchange{ident: s.identity(r.Context()), s: s}
	x.ctx = f.mcp.WithContext(principal.With(st.ctx, x.ident), s.inner)
	var run func()
	if isBatch(msg) {
		elems, reject := splitBatch(msg)
		if reject == nil {
			reject = batchVersionError(s.negotiated())
		}
		if reject != nil {
			writeJSON(w, http.StatusBadRequest, reject)
			return true
		}
		// A client's answer in a batch answers a request of mcp-go's,
		// which only mcp-go's own message handling routes: dropped.
		run = func() {
			if reply := f.serveBatch(x, elems, func(*message) {}); reply != nil {
				st.send(reply)
			}
		}
	} else {
		m, reject := decodeMessage(msg)
		switch {
		case reject != nil:
			return false // mcp-go answers what it cannot read
		case m.method == string(mcp.MethodNotificationCancelled):
			s.cancelCall(m.params)
			return false
		case !frontServes(&m) && !frontChecks(&m):
			return false
		}
		run = func() { st.send(f.traced(&x, &m).body) }
	}
	if !p.sseRuns.start(run) {
		writeJSON(w, http.StatusServiceUnavailable, jsonRPCError(mcp.INTERNAL_ERROR, "toolgate is shutting down"))
		return true
	}
	w.WriteHeader(http.StatusAccepted)
	return true
}

// sseStream wraps the ResponseWriter of one SSE stream. It learns the
// session ID from the endpoint event mcp-go writes first, and serialises
// mcp-go's writes with the front's. mcp-go writes each event in one Write.
// Its response carries the Access-Control-Allow-Origin toolgate set before
// mcp-go ran, if any, not mcp-go's "*".
type sseStream struct {
	parts *httpParts
	acao  string          // Access-Control-Allow-Origin as toolgate set it; "" for none
	ctx   context.Context // the stream's request's: ends when the client goes away

	mu      sync.Mutex // guards w, f, id, closed and started
	w       http.ResponseWriter
	f       http.Flusher
	id      string
	closed  bool
	started bool // the header is written
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

// send writes msg, one JSON-RPC message, as an event of the stream.
func (s *sseStream) send(msg []byte) {
	if msg == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	_, _ = s.w.Write(eventstream.Event(msg))
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
