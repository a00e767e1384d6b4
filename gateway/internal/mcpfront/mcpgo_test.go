package mcpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// TestMCPGoInternals pins what the front relies on in how mcp-go v1.2.1
// is built (doc.go lists each). A failure here after an mcp-go upgrade
// says which workaround to revisit, not necessarily a bug.
func TestMCPGoInternals(t *testing.T) {
	t.Run("1 batches are a parse error", func(t *testing.T) {
		s := server.NewMCPServer("pin", "1")
		reply := s.HandleMessage(t.Context(), json.RawMessage(`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`))
		b, _ := json.Marshal(reply)
		if !strings.Contains(string(b), `"code":-32700`) {
			t.Errorf("mcp-go answers a batch with %s; it has batch support now: drop batch.go's splitting", b)
		}
	})

	t.Run("2 unknown tool has no suggestions", func(t *testing.T) {
		s := server.NewMCPServer("pin", "1", server.WithToolCapabilities(true))
		ctx := s.WithContext(t.Context(), &pinSession{id: "x"})
		reply := s.HandleMessage(ctx, json.RawMessage(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope"}}`))
		b, _ := json.Marshal(reply)
		if !strings.Contains(string(b), `"code":-32602`) || strings.Contains(string(b), `"data"`) {
			t.Errorf("mcp-go answers an unknown tool with %s; preflight answers it itself because mcp-go gives no data", b)
		}
	})

	t.Run("3 streamable sessions are told apart by a method", func(t *testing.T) {
		h, _ := newGateway(t, nil)
		s := newHandlerSession(t, h)
		c := h.liveClient(s.id)
		if c == nil || !c.streamable {
			t.Fatal("a session initialized over streamable HTTP does not implement streamableSession (sessions.go)")
		}
		if _, ok := any(&pinSession{}).(streamableSession); ok {
			t.Fatal("streamableSession is too wide: a plain session implements it")
		}
	})

	t.Run("4 HEAD gets the Host check and nothing else", func(t *testing.T) {
		s := server.NewStreamableHTTPServer(server.NewMCPServer("pin", "1"))
		srv := httptest.NewServer(s)
		defer srv.Close()
		for _, tc := range []struct {
			host string
			want int
		}{{"", http.StatusOK}, {"evil.example:80", http.StatusForbidden}} {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodHead, srv.URL+"/mcp", nil)
			if tc.host != "" {
				req.Host = tc.host
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("HEAD with Host %q = %d, want %d: hostRefused (batch.go) reads mcp-go's verdict from a HEAD", tc.host, resp.StatusCode, tc.want)
			}
		}
	})

	t.Run("5 SSE endpoint event comes first, in one write", func(t *testing.T) {
		s := server.NewSSEServer(server.NewMCPServer("pin", "1"), server.WithUseFullURLForMessageEndpoint(false))
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		w := &firstWrite{ResponseRecorder: httptest.NewRecorder(), cancel: cancel}
		s.SSEHandler().ServeHTTP(w, httptest.NewRequestWithContext(ctx, http.MethodGet, "/sse", nil))
		if endpointSessionID(w.first) == "" {
			t.Errorf("mcp-go's first SSE write is %q; sseStream learns the session ID from it", w.first)
		}
	})

	t.Run("7 its own event store keeps every event", func(t *testing.T) {
		s := server.NewInMemoryEventStore()
		first, _ := s.StoreEvent(t.Context(), "s", "st", json.RawMessage(`{}`))
		const n = 2 * eventsPerSession
		for range n {
			_, _ = s.StoreEvent(t.Context(), "s", "st", json.RawMessage(`{}`))
		}
		replayed := 0
		_, err := s.ReplayEventsAfter(t.Context(), "s", first, func(string, json.RawMessage) error { replayed++; return nil })
		if err != nil || replayed != n {
			t.Errorf("mcp-go's InMemoryEventStore replayed %d of %d events (%v); it is bounded now: eventstore.go may go", replayed, n, err)
		}
	})

	t.Run("6 tool handlers see the raw arguments", func(t *testing.T) {
		var req mcp.CallToolRequest
		if err := json.Unmarshal([]byte(`{"method":"tools/call","params":{"name":"x","arguments":{"a": 1}}}`), &req); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(req.Params.RawArguments, []byte(`{"a": 1}`)) {
			t.Errorf("RawArguments = %s; proxied calls forward the client's bytes from it", req.Params.RawArguments)
		}
	})
}

// TestMCPGoSessionInternals pins what sessions.go relies on in mcp-go's
// session handling (doc.go facts 9 and 14).
func TestMCPGoSessionInternals(t *testing.T) {
	type key struct{}
	t.Run("8 a GET registers a session that outlives it", func(t *testing.T) {
		registered := make(chan context.Context, 1)
		var mu sync.Mutex
		live := 0
		hooks := &server.Hooks{}
		hooks.AddOnRegisterSession(func(ctx context.Context, _ server.ClientSession) {
			mu.Lock()
			live++
			mu.Unlock()
			registered <- ctx
		})
		hooks.AddOnUnregisterSession(func(context.Context, server.ClientSession) { mu.Lock(); live--; mu.Unlock() })
		s := server.NewStreamableHTTPServer(server.NewMCPServer("pin", "1", server.WithHooks(hooks)),
			server.WithStateful(true), server.WithEventStore(newEventStore(4)))
		defer func() { _ = s.Shutdown(context.Background()) }()
		ctx, cancel := context.WithCancel(context.WithValue(t.Context(), key{}, "request"))
		req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/mcp", nil)
		req.Header.Set("Accept", "text/event-stream")
		done := make(chan struct{})
		go func() { defer close(done); s.ServeHTTP(httptest.NewRecorder(), req) }()
		var hookCtx context.Context
		select {
		case hookCtx = <-registered:
		case <-time.After(5 * time.Second):
			t.Fatal("mcp-go registered no session for a GET without Mcp-Session-Id; serveStream's refusal may go")
		}
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		if live != 1 {
			t.Errorf("%d sessions registered after the GET ended, want 1: mcp-go no longer keeps it", live)
		}
		if hookCtx.Value(key{}) != "request" {
			t.Error("the register hook's ctx does not derive from the request's; clientStarted finds no slot in it")
		}
	})

	t.Run("9 the session ID resolver gets the request", func(t *testing.T) {
		var got any
		res := resolverFunc(func(r *http.Request) server.SessionIdManager {
			if r != nil {
				got = r.Context().Value(key{})
			}
			return &server.InsecureStatefulSessionIdManager{}
		})
		s := server.NewStreamableHTTPServer(server.NewMCPServer("pin", "1"), server.WithSessionIdManagerResolver(res))
		defer func() { _ = s.Shutdown(context.Background()) }()
		req := httptest.NewRequestWithContext(context.WithValue(t.Context(), key{}, "request"), http.MethodPost, "/mcp",
			strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"pin","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		s.ServeHTTP(httptest.NewRecorder(), req)
		if got != "request" {
			t.Error("the session ID resolver did not get the initialize's request; sessionIDs cannot tie an ID to its slot")
		}
	})

	t.Run("10 the stateful ID manager keeps ended IDs", func(t *testing.T) {
		m := &server.InsecureStatefulSessionIdManager{}
		id := m.Generate()
		if _, err := m.Terminate(id); err != nil {
			t.Fatal(err)
		}
		if terminated, err := m.Validate(id); !terminated || err != nil {
			t.Errorf("after Terminate, Validate = %v, %v; mcp-go forgets ended IDs now: sessionIDs may go", terminated, err)
		}
	})
}

type resolverFunc func(*http.Request) server.SessionIdManager

func (f resolverFunc) ResolveSessionIdManager(r *http.Request) server.SessionIdManager { return f(r) }

// pinSession is a minimal mcp-go session.
type pinSession struct{ id string }

func (p *pinSession) SessionID() string { return p.id }
func (p *pinSession) NotificationChannel() chan<- mcp.JSONRPCNotification {
	return make(chan mcp.JSONRPCNotification, 1)
}
func (p *pinSession) Initialize()       {}
func (p *pinSession) Initialized() bool { return true }

// firstWrite keeps the first Write and then ends the request.
type firstWrite struct {
	*httptest.ResponseRecorder
	cancel context.CancelFunc
	first  []byte
}

func (w *firstWrite) Write(b []byte) (int, error) {
	if w.first == nil {
		w.first = append([]byte{}, b...)
		w.cancel()
	}
	return w.ResponseRecorder.Write(b)
}
