package mcpfront

import (
	"cmp"
	"context"
	"mime"
	"net/http"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/gateway/internal/idle"
	"github.com/toolgate/toolgate/gateway/internal/origin"
	"github.com/toolgate/toolgate/gateway/internal/reqbody"
)

// httpParts are what [Front.Mount] serves with: mcp-go's legacy SSE
// transport, the body reader, the idle sweeper.
type httpParts struct {
	sse     *server.SSEServer // nil when server.sse is false
	streams sync.Map          // SSE session ID → *sseStream
	bodies  reqbody.Reader    // request bodies, under the cap and the read deadline
	sweeper *idle.Sweeper     // ends idle streamable HTTP sessions (sweepIdle); nil when the TTL is 0
	sseRuns batchRuns         // SSE calls and batches in flight (sse.go)
}

func (p *httpParts) close() {
	p.sweeper.Close()
	if p.sse != nil {
		p.sse.CloseSessions()
	}
	p.sseRuns.wait()
}

// Mount puts the MCP endpoints on mux: streamable HTTP at
// Options.MCPPath and, with Options.SSE, legacy SSE at Options.SSEPath and
// Options.MessagePath.
// Request bodies are capped at Options.MaxBodyBytes and cross-origin
// browser requests are refused unless their origin is in
// Options.AllowedOrigins; pages on those origins get CORS answers
// (origin.Policy.CORS). The Host rule (DNS rebinding) is
// the gateway's, applied before. Mount once.
func (f *Front) Mount(mux Mux) {
	p := &httpParts{bodies: reqbody.Reader{Limit: f.o.MaxBodyBytes, Timeout: f.o.ReadTimeout}}
	ssePath, messagePath := cmp.Or(f.o.SSEPath, "/sse"), cmp.Or(f.o.MessagePath, "/message")
	if f.o.SSE {
		p.sse = server.NewSSEServer(f.mcp, server.WithKeepAlive(true), server.WithUseFullURLForMessageEndpoint(false),
			server.WithSSEEndpoint(ssePath), server.WithMessageEndpoint(messagePath))
	}
	f.mu.Lock()
	if ttl := f.o.SessionIdleTTL; ttl > 0 && !f.closed { // not after Close, which would not stop it
		p.sweeper = idle.Start(ttl, func(ctx context.Context, now time.Time) { f.sweepIdle(ctx, ttl, now) })
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
		mux.Handle(ssePath, c.CORS(authed(f.sseHandler(p))))
		mux.Handle(messagePath, c.CORS(authed(f.messageHandler(p))))
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
		if f.o.Peers != nil && f.forwardSession(w, r, sid) { // a cluster's
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

// readBody reads r's body (package reqbody); the caller releases it. On
// failure it has answered (413 for an oversized body, 408 for one not read
// in time) and returns nil.
func (p *httpParts) readBody(w http.ResponseWriter, r *http.Request) *reqbody.Body {
	b, err := p.bodies.Read(w, r)
	if err != nil {
		p.bodies.Release(b)
		writeJSON(w, err.Status, jsonRPCError(mcp.INVALID_REQUEST, err.Msg))
		return nil
	}
	return b
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
