package mcpfront

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/gateway/internal/idle"
	"github.com/toolgate/toolgate/registry"
)

// TestBatchRefusesOtherSessions checks that a streamable HTTP batch runs
// only in a session initialized over streamable HTTP: mcp-go keeps the
// sessions of every transport in one table, but it refuses a single
// message in such a session, and so must a batch — every time, not only
// the first.
func TestBatchRefusesOtherSessions(t *testing.T) {
	g, _ := newGateway(t, nil)
	srv := serveHTTP(t, g)
	const batch = `[{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}]`
	refused := func(t *testing.T, sid string) {
		t.Helper()
		s := &versionedSession{t: t, url: srv.URL + "/mcp", id: sid}
		for i := range 3 {
			if status, body, _ := s.post(t.Context(), batch); status != http.StatusNotFound {
				t.Errorf("batch %d in session %q = HTTP %d %s, want 404", i+1, sid, status, body)
			}
		}
	}
	t.Run("SSE session", func(t *testing.T) {
		c := newSSEClient(t, srv.URL)
		c.initialize(mcp.ProtocolVersion20241105)
		_, sid, ok := strings.Cut(c.endpoint, "sessionId=")
		if !ok || g.liveClient(sid) == nil {
			t.Fatalf("no live SSE session in endpoint %q", c.endpoint)
		}
		refused(t, sid)
	})
	t.Run("stdio session", func(t *testing.T) {
		c := newStdioClient(t, g)
		defer c.close()
		c.initialize(mcp.ProtocolVersion20241105)
		if g.liveClient("stdio") == nil {
			t.Fatal("no live stdio session")
		}
		refused(t, "stdio")
	})
	t.Run("ID invented by the client", func(t *testing.T) {
		if rec := getStream(t, g, http.MethodGet, "invented-by-client"); rec.Code != http.StatusNotFound {
			t.Errorf("GET with an invented session ID = HTTP %d %s, want 404", rec.Code, rec.Body)
		}
		if g.liveClient("invented-by-client") != nil {
			t.Fatal("a GET registered the session ID it invented")
		}
		refused(t, "invented-by-client")
	})
}

// TestIdleExpiry checks toolgate's expiry of idle streamable HTTP sessions
// (sessions.go) in fake time: a session without requests ends after
// server.session_idle_ttl, with its thread; an open GET stream or a call
// in flight keeps it alive.
func TestIdleExpiry(t *testing.T) {
	const ttl = 8 * time.Second // swept every ttl/4
	idle := ttl + idle.Interval(ttl) + time.Second
	setup := func(t *testing.T) (*harness, *handlerSession) {
		g, _ := newGateway(t, func(c *config.Config) { c.Server.SessionIdleTTL = config.Duration(ttl) })
		return g, newHandlerSession(t, g)
	}
	alive := func(t *testing.T, s *handlerSession) bool {
		t.Helper()
		switch rec := s.post(`{"jsonrpc":"2.0","id":9,"method":"ping"}`); rec.Code {
		case http.StatusOK:
			return true
		case http.StatusNotFound:
			return false
		default:
			t.Fatalf("ping = HTTP %d %s", rec.Code, rec.Body)
			return false
		}
	}

	t.Run("idle session ends with its thread", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			g, s := setup(t)
			time.Sleep(ttl / 2)
			if !alive(t, s) {
				t.Fatal("session ended before its TTL")
			}
			time.Sleep(idle)
			synctest.Wait()
			if g.liveSession(s.id) || g.liveClient(s.id) != nil {
				t.Fatalf("session still registered after %v idle", idle)
			}
			if alive(t, s) {
				t.Errorf("session answers after %v idle, want 404", idle)
			}
		})
	})

	t.Run("an open GET stream keeps it", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			g, s := setup(t)
			closeStream := openStream(t, g, s.id)
			time.Sleep(4 * ttl)
			synctest.Wait()
			if g.liveClient(s.id) == nil {
				t.Fatalf("session with an open GET stream ended after %v", 4*ttl)
			}
			closeStream()
			time.Sleep(idle)
			synctest.Wait()
			if g.liveClient(s.id) != nil {
				t.Errorf("session still registered %v after its stream closed", idle)
			}
		})
	})

	t.Run("a call in flight keeps it", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			g, s := setup(t)
			err := g.RegisterStateless(registry.Tool{Name: "slow"}, func(ctx context.Context, _ map[string]any) (executors.Result, error) {
				time.Sleep(3 * ttl)
				return executors.Text("done"), nil
			})
			if err != nil {
				t.Fatal(err)
			}
			rec := s.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{}}}`)
			if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"done"`) {
				t.Fatalf("a call of %v = HTTP %d %s, want its result", 3*ttl, rec.Code, rec.Body)
			}
			if !alive(t, s) {
				t.Error("session ended while its call ran")
			}
		})
	})
}

// openStream opens session sid's GET stream on g's handler; the returned
// function closes it and waits for the handler to return.
func openStream(t *testing.T, g *harness, sid string) (closeStream func()) {
	ctx, cancel := context.WithCancel(t.Context())
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, g.cfg.Server.MCPPath, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	var wg sync.WaitGroup
	wg.Go(func() { g.Handler().ServeHTTP(httptest.NewRecorder(), req) })
	return func() {
		cancel()
		wg.Wait()
	}
}

// TestRelistKeepsTools checks that an upstream listing the same tools
// again replaces them in place, with one list_changed per change: deleting
// them first (one list_changed for the deletion, one for the addition)
// left a moment in which a call found no tool.
func TestRelistKeepsTools(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, _ := newGateway(t, nil)
		tools := []registry.Tool{{Name: "up__a", Kind: registry.MCP}, {Name: "up__b", Kind: registry.MCP}}
		if err := g.reg.ReplaceSource("up", tools); err != nil {
			t.Fatal(err)
		}
		s := newHandlerSession(t, g)
		synctest.Wait()
		ch := g.liveClient(s.id).notes
		before := len(ch)
		if err := g.reg.ReplaceSource("up", []registry.Tool{tools[0]}); err != nil { // b goes, a stays
			t.Fatal(err)
		}
		synctest.Wait()
		if got := len(ch) - before; got != 1 {
			t.Errorf("a re-list that removes one tool sent %d list_changed, want 1", got)
		}
		if err := g.reg.ReplaceSource("up", []registry.Tool{tools[0]}); err != nil { // the same again
			t.Fatal(err)
		}
		synctest.Wait()
		if got := len(ch) - before; got != 2 {
			t.Errorf("a re-list of the same tool sent %d list_changed, want 1: it was deleted first", got-1)
		}
		served, list := *g.tools.Load(), *g.list.Load()
		if served["up__a"] == nil || served["up__b"] != nil || slices.ContainsFunc(list, func(t *frontTool) bool { return t.Def.Name == "up__b" }) {
			t.Errorf("the front has up__a %v, up__b %v, list %d; want only up__a", served["up__a"] != nil, served["up__b"] != nil, len(list))
		}
	})
}

// TestBatchAfterReinitialize checks that a session created by an
// initialize that carried another session's Mcp-Session-Id (mcp-go ignores
// the header and makes a new session, as a client re-initializing on a
// live connection does) takes batches.
func TestBatchAfterReinitialize(t *testing.T) {
	g, _ := newGateway(t, nil)
	old := newHandlerSession(t, g)
	rec := old.post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	s := &handlerSession{h: old.h, g: g, id: rec.Header().Get("Mcp-Session-Id")}
	if rec.Code != http.StatusOK || s.id == "" || s.id == old.id {
		t.Fatalf("initialize with a session header = HTTP %d, session %q (old %q), want a new session", rec.Code, s.id, old.id)
	}
	if rec := s.post(`[{"jsonrpc":"2.0","id":2,"method":"ping"}]`); rec.Code != http.StatusOK {
		t.Errorf("batch in the new session = HTTP %d %s, want 200", rec.Code, rec.Body)
	}
}

// fakeSession is a ClientSession of no transport in particular.
type fakeSession struct {
	id string
	ch chan mcp.JSONRPCNotification
}

func (f *fakeSession) SessionID() string                                   { return f.id }
func (f *fakeSession) NotificationChannel() chan<- mcp.JSONRPCNotification { return f.ch }
func (f *fakeSession) Initialize()                                         {}
func (f *fakeSession) Initialized() bool                                   { return true }

// The end of a session forgets that session, not a newer one that took
// its ID meanwhile.
func TestClientEndedKeepsNewerSession(t *testing.T) {
	g, _ := newGateway(t, nil)
	s1, s2 := &fakeSession{id: "x"}, &fakeSession{id: "x"}
	g.clientStarted(t.Context(), s1)
	g.clientStarted(t.Context(), s2)
	g.clientEnded(s1)
	if c := g.liveClient("x"); c == nil || c.inner != s2 {
		t.Fatalf("after the older session ended, liveClient = %v, want the newer session", c)
	}
	g.clientEnded(s2)
	if c := g.liveClient("x"); c != nil {
		t.Errorf("after both ended, liveClient = %v, want none", c)
	}
}

// A GET stream that panics still ends its activity, so the session
// expires.
func TestPanickingStreamEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 8 * time.Second
		g, _ := newGateway(t, func(c *config.Config) { c.Server.SessionIdleTTL = config.Duration(ttl) })
		s := newHandlerSession(t, g)
		req := httptest.NewRequest(http.MethodGet, g.cfg.Server.MCPPath, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", s.id)
		panicked := false
		func() {
			defer func() { panicked = recover() != nil }()
			g.Handler().ServeHTTP(panicFlusher{httptest.NewRecorder()}, req)
		}()
		if !panicked {
			t.Fatal("the GET stream did not panic (the case this test is about)")
		}
		time.Sleep(ttl + idle.Interval(ttl) + time.Second)
		synctest.Wait()
		if g.liveClient(s.id) != nil {
			t.Error("the session of a GET that panicked never expired")
		}
	})
}

// panicFlusher panics when the stream is flushed.
type panicFlusher struct{ *httptest.ResponseRecorder }

func (panicFlusher) Flush() { panic(http.ErrAbortHandler) }

// A session's GET stream and its DELETE, sent at once, leave no stream
// behind: a GET either finds the session gone, or its stream ends with the
// session.
func TestStreamAndDeleteRace(t *testing.T) {
	g, _ := newGateway(t, nil)
	srv := serveHTTP(t, g)
	url := srv.URL + "/mcp"
	ctx, cancel := context.WithTimeout(t.Context(), batchWait)
	defer cancel()
	send := func(method, sid string) {
		req, _ := http.NewRequestWithContext(ctx, method, url, nil)
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return // the GET's stream ended with the server's close
		}
		_, _ = io.Copy(io.Discard, resp.Body) // a GET: until the DELETE ends its stream
		resp.Body.Close()
	}
	// The count below finds a GET stream by its function's name: one must
	// be found while a GET stream is open, or the name changed.
	s := newVersionedSession(t, url, "2025-11-25", true)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Mcp-Session-Id", s.id)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if n := pumps(); n != 1 {
		t.Fatalf("%d GET streams found with one open, want 1: was serveGet renamed?", n)
	}
	send(http.MethodDelete, s.id)
	_, _ = io.Copy(io.Discard, resp.Body) // the DELETE ends the stream
	resp.Body.Close()

	for range 500 {
		s := newVersionedSession(t, url, "2025-11-25", true)
		var wg sync.WaitGroup
		wg.Go(func() { send(http.MethodGet, s.id) })
		wg.Go(func() { send(http.MethodDelete, s.id) })
		wg.Wait()
	}
	live := 0
	g.clients.Range(func(any, any) bool { live++; return true })
	if n := live; n != 0 {
		t.Errorf("%d sessions live after every one was deleted", n)
	}
	// A stream that outlived its session never ends; one that did not
	// ends soon after its DELETE.
	deadline := time.Now().Add(5 * time.Second)
	for n := pumps(); n != 0; n = pumps() {
		if time.Now().After(deadline) {
			t.Fatalf("%d GET streams outlived their sessions", n)
		}
		runtime.Gosched()
	}
}

// pumps counts the GET streams running.
func pumps() int {
	buf := make([]byte, 1<<22)
	return strings.Count(string(buf[:runtime.Stack(buf, true)]), "mcpfront.(*Front).serveGet(")
}
