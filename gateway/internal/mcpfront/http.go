package mcpfront

import (
	"bytes"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/gateway/internal/origin"
)

// httpParts are what [Front.Mount] serves with: mcp-go's legacy SSE
// transport, the request bodies reused, the idle sweeper.
type httpParts struct {
	sse     *server.SSEServer // nil when server.sse is false
	streams sync.Map          // SSE session ID → *sseStream
	bodies  sync.Pool         // *body, reused request bodies
	sweeper *idleSweeper      // ends idle streamable HTTP sessions; nil when the TTL is 0 (session.go)
	sseRuns batchRuns         // SSE calls and batches in flight (sse.go)
}

// body holds one request body.
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
	p.sweeper.close()
	if p.sse != nil {
		p.sse.CloseSessions()
	}
	p.sseRuns.wait()
}

// Mount puts the MCP endpoints on mux: streamable HTTP at
// Options.MCPPath and, with Options.SSE, legacy SSE at /sse and /message.
// Request bodies are capped at Options.MaxBodyBytes and cross-origin
// browser requests are refused unless their origin is in
// Options.AllowedOrigins; pages on those origins get CORS answers
// (origin.Policy.CORS). The Host rule (DNS rebinding) is
// the gateway's, applied before. Mount once.
func (f *Front) Mount(mux Mux) {
	p := &httpParts{}
	if f.o.SSE {
		p.sse = server.NewSSEServer(f.mcp, server.WithKeepAlive(true), server.WithUseFullURLForMessageEndpoint(false))
	}
	f.mu.Lock()
	if ttl := f.o.SessionIdleTTL; ttl > 0 && !f.closed { // not after Close, which would not stop it
		p.sweeper = f.startSweeper(ttl)
	}
	if !f.closed {
		f.httpParts = p
	}
	f.mu.Unlock()

	c := origin.New(f.o.AllowedOrigins)
	// Authentication inside CORS: preflights carry no credentials, and a
	// 401 to an allowed origin must be readable by its page.
	authed := func(h http.Handler) http.Handler { return h }
	if f.o.Authenticate != nil {
		authed = f.o.Authenticate
	}
	mux.Handle(f.o.MCPPath, c.CORS(authed(f.mcpHandler(p))))
	if p.sse != nil {
		mux.Handle("/sse", c.CORS(authed(f.sseHandler(p))))
		mux.Handle("/message", c.CORS(authed(f.messageHandler(p))))
	}
}

// mcpHandler is the streamable HTTP endpoint: POST (post.go), and a
// session's GET stream and DELETE (get.go).
func (f *Front) mcpHandler(p *httpParts) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sid := r.Header.Get(server.HeaderKeySessionID)
		if len(sid) > maxSessionIDLen {
			writeLongSessionID(w)
			return
		}
		switch r.Method {
		case http.MethodPost:
			f.servePost(w, r, p, sid)
		case http.MethodGet, http.MethodDelete:
			switch {
			case versionRefused(w, r, nil):
			case mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion)):
				writeModernStream(w, r.Method) // no session to stream or end
			default:
				f.serveSessionStream(w, r, sid)
			}
		case http.MethodHead:
			w.WriteHeader(http.StatusOK)
		default:
			w.Header().Set("Allow", "GET, POST, DELETE")
			writeJSON(w, http.StatusMethodNotAllowed, jsonRPCError(mcp.INVALID_REQUEST,
				r.Method+" is not served at the MCP endpoint: POST messages, GET the session's stream, DELETE to end it"))
		}
	})
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

func writeJSON(w http.ResponseWriter, code int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// isJSONContent reports whether r's Content-Type is application/json.
func isJSONContent(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	if ct == "application/json" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}
