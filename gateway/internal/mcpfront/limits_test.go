package mcpfront

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/config"
)

// getStream sends a GET (or another bodiless method) for session sid ("":
// no header) to g's handler and returns its answer once the handler has
// returned. A handler still running after 5 s (a stream mcp-go opened) is
// cancelled and fails the test.
func getStream(t *testing.T, g *harness, method, sid string) *httptest.ResponseRecorder {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req := httptest.NewRequestWithContext(ctx, method, g.cfg.Server.MCPPath, nil)
	req.Header.Set("Accept", "text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.Handler().ServeHTTP(rec, req)
	}()
	select {
	case <-done:
		return rec
	case <-time.After(5 * time.Second):
		cancel()
		<-done
		t.Fatalf("%s with session %.40q did not return: mcp-go opened a stream", method, sid)
		return nil
	}
}

// clientCount is the number of live sessions g knows.
func clientCount(g *harness) int {
	n := 0
	g.clients.Range(func(any, any) bool { n++; return true })
	return n
}

// settleGoroutines waits, yielding, until at most want goroutines run, and
// returns how many do.
func settleGoroutines(want int) int {
	deadline := time.Now().Add(2 * time.Second)
	n := runtime.NumGoroutine()
	for n > want && time.Now().Before(deadline) {
		runtime.Gosched()
		n = runtime.NumGoroutine()
	}
	return n
}

// TestStreamNeedsLiveSession checks that a GET (or DELETE) naming no live
// streamable HTTP session is refused and leaves nothing behind: mcp-go
// would register a session, with a goroutine, for it, which outlived the
// GET until the idle TTL.
func TestStreamNeedsLiveSession(t *testing.T) {
	g, _ := newGateway(t, nil)
	live := newHandlerSession(t, g)
	sse := serveHTTP(t, g)
	c := newSSEClient(t, sse.URL)
	c.initialize(mcp.ProtocolVersion20241105)
	_, sseID, _ := strings.Cut(c.endpoint, "sessionId=")
	for _, tc := range []struct {
		name, method, sid string
		want              int
	}{
		{"GET without a session ID", http.MethodGet, "", http.StatusBadRequest},
		{"GET with an unknown session ID", http.MethodGet, "mcp-session-00000000-0000-4000-8000-000000000000", http.StatusNotFound},
		{"GET with an SSE session's ID", http.MethodGet, sseID, http.StatusNotFound},
		{"DELETE without a session ID", http.MethodDelete, "", http.StatusBadRequest},
		{"DELETE of an SSE session", http.MethodDelete, sseID, http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sessions, goroutines := clientCount(g), runtime.NumGoroutine()
			rec := getStream(t, g, tc.method, tc.sid)
			if rec.Code != tc.want || !strings.Contains(rec.Body.String(), `"jsonrpc"`) {
				t.Errorf("%s = HTTP %d %s, want %d with a JSON-RPC error", tc.method, rec.Code, rec.Body, tc.want)
			}
			if tc.sid == "" && !strings.Contains(rec.Body.String(), "initialize") {
				t.Errorf("answer %s does not say to initialize first", rec.Body)
			}
			if n := clientCount(g); n != sessions {
				t.Errorf("%d sessions after the %s, want %d as before", n, tc.method, sessions)
			}
			if n := settleGoroutines(goroutines); n > goroutines {
				t.Errorf("%d goroutines after the %s returned, want at most %d as before", n, tc.method, goroutines)
			}
		})
	}
	if rec := live.post(`{"jsonrpc":"2.0","id":9,"method":"ping"}`); rec.Code != http.StatusOK {
		t.Errorf("ping in the live session = HTTP %d %s", rec.Code, rec.Body)
	}
	if g.liveClient(sseID) == nil {
		t.Error("the SSE session ended: a DELETE on the MCP path reached it")
	}
}

// TestLongSessionIDRefused checks that a request whose Mcp-Session-Id is
// longer than any session's is refused before it is looked up, copied or
// kept: mcp-go formats it into errors and keys sessions with it (a 900 KB
// ID cost 2.6 MB per request).
func TestLongSessionIDRefused(t *testing.T) {
	g, _ := newGateway(t, nil)
	h := g.Handler()
	long := "mcp-session-" + strings.Repeat("a", 900<<10)
	const n = 10
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range n {
		method, body := http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"ping"}`
		if i%2 == 1 {
			method, body = http.MethodGet, ""
		}
		req := httptest.NewRequest(method, g.cfg.Server.MCPPath, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", long)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req) // a GET mcp-go served would not return: no test-level timeout needed for POSTs
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), fmt.Sprint(maxSessionIDLen)) {
			t.Fatalf("%s with a %d-byte session ID = HTTP %d %.200s, want 400 naming the limit", method, len(long), rec.Code, rec.Body)
		}
	}
	runtime.ReadMemStats(&after)
	if perReq := (after.TotalAlloc - before.TotalAlloc) / n; perReq > 64<<10 {
		t.Errorf("a request with a %d-byte session ID allocated %d bytes, want under 64 KiB: the ID was copied", len(long), perReq)
	}
	if clientCount(g) != 0 {
		t.Errorf("%d sessions after refusing long IDs, want 0", clientCount(g))
	}
	// The IDs toolgate issues fit.
	if s := newHandlerSession(t, g); len(s.id) > maxSessionIDLen {
		t.Errorf("issued session ID %q is longer than maxSessionIDLen %d", s.id, maxSessionIDLen)
	}
}

// TestMaxSessions checks server.max_sessions: initializes past it get 503
// with Retry-After and a JSON-RPC error naming the key, the sessions
// already open keep working, and ending one makes room.
func TestMaxSessions(t *testing.T) {
	g, _ := newGateway(t, func(c *config.Config) { c.Server.MaxSessions = 3 })
	var open []*handlerSession
	for range 3 {
		open = append(open, newHandlerSession(t, g))
	}
	fourth := &handlerSession{h: g.Handler(), g: g}
	rec := fourth.post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" ||
		!strings.Contains(rec.Body.String(), "server.max_sessions") || !strings.Contains(rec.Body.String(), `"jsonrpc"`) {
		t.Fatalf("4th initialize with max_sessions 3 = HTTP %d (Retry-After %q) %s, want 503 with Retry-After naming server.max_sessions",
			rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	if id := rec.Header().Get("Mcp-Session-Id"); id != "" {
		t.Errorf("refused initialize got session %q", id)
	}
	// An initialize carrying a live session's ID makes a new session too.
	if rec := open[0].post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`); rec.Code != http.StatusServiceUnavailable {
		t.Errorf("re-initialize in a live session past max_sessions = HTTP %d %s, want 503", rec.Code, rec.Body)
	}
	sse := serveHTTP(t, g)
	resp, err := http.Get(sse.URL + "/sse")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("new SSE stream past max_sessions = HTTP %d, want 503", resp.StatusCode)
	}
	for i, s := range open {
		if rec := s.post(`{"jsonrpc":"2.0","id":9,"method":"ping"}`); rec.Code != http.StatusOK {
			t.Errorf("ping in open session %d = HTTP %d %s, want 200", i+1, rec.Code, rec.Body)
		}
	}
	if rec := getStream(t, g, http.MethodDelete, open[0].id); rec.Code != http.StatusOK {
		t.Fatalf("DELETE of session 1 = HTTP %d %s", rec.Code, rec.Body)
	}
	s := newHandlerSession(t, g)
	if rec := s.post(`{"jsonrpc":"2.0","id":9,"method":"ping"}`); rec.Code != http.StatusOK {
		t.Errorf("ping in the session made after a DELETE = HTTP %d %s", rec.Code, rec.Body)
	}
	if n := g.limits.Live(); n != 3 {
		t.Errorf("session count %d, want 3", n)
	}
}

// Concurrent initializes never open more than server.max_sessions
// sessions, and failed ones give their slot and their ID back.
func TestMaxSessionsConcurrent(t *testing.T) {
	const limit, tries = 5, 40
	g, _ := newGateway(t, func(c *config.Config) { c.Server.MaxSessions = limit })
	h := &handlerSession{h: g.Handler(), g: g}
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for range tries {
		wg.Go(func() {
			rec := h.post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
			mu.Lock()
			codes[rec.Code]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if codes[http.StatusOK] != limit || codes[http.StatusServiceUnavailable] != tries-limit {
		t.Errorf("%d concurrent initializes with max_sessions %d got %v, want %d × 200 and the rest 503", tries, limit, codes, limit)
	}
	if n := clientCount(g); n != limit {
		t.Errorf("%d sessions, want %d", n, limit)
	}
	// An initialize mcp-go registers no session for (one sent as a
	// notification: mcp-go issues an ID, then has no answer to send)
	// keeps neither a slot nor its ID.
	g2, _ := newGateway(t, func(c *config.Config) { c.Server.MaxSessions = 1 })
	bad := &handlerSession{h: g2.Handler(), g: g2}
	for range 3 {
		if rec := bad.post(`{"jsonrpc":"2.0","method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`); rec.Code == http.StatusServiceUnavailable {
			t.Fatalf("a failed initialize kept its slot: HTTP %d %s", rec.Code, rec.Body)
		}
	}
	if n := g2.limits.Live(); n != 0 {
		t.Errorf("session count %d after failed initializes, want 0", n)
	}
	g2.clients.Range(func(k, _ any) bool { t.Errorf("session %v kept after a failed initialize", k); return true })
}

// Ended sessions' IDs are forgotten (mcp-go's own manager keeps them
// forever), and a forgotten ID gets 404 as a terminated one did.
func TestEndedSessionIDsForgotten(t *testing.T) {
	g, _ := newGateway(t, nil)
	for range 3 {
		s := newHandlerSession(t, g)
		if rec := getStream(t, g, http.MethodDelete, s.id); rec.Code != http.StatusOK {
			t.Fatalf("DELETE = HTTP %d %s", rec.Code, rec.Body)
		}
		if rec := s.post(`{"jsonrpc":"2.0","id":9,"method":"ping"}`); rec.Code != http.StatusNotFound {
			t.Errorf("ping in an ended session = HTTP %d %s, want 404", rec.Code, rec.Body)
		}
	}
	g.clients.Range(func(k, _ any) bool { t.Errorf("session %v kept after it ended", k); return true })
	if n := g.limits.Live(); n != 0 {
		t.Errorf("session count %d after every session ended, want 0", n)
	}
}
