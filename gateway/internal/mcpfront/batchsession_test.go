package mcpfront

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/registry"
)

// listen opens the session's GET stream and returns the data of its
// events (one JSON-RPC message each) until the test ends. mcp-go has
// attached the stream to the session when listen returns.
func (s *versionedSession) listen() <-chan []byte {
	t := s.t
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", s.id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET stream: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		t.Fatalf("GET stream: HTTP %d", resp.StatusCode)
	}
	events := make(chan []byte, 256)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if d, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: ")); ok {
				select {
				case events <- bytes.Clone(d):
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		resp.Body.Close()
		<-done
	})
	return events
}

// endMarker is a notification a test sends to mark the end of what it
// counts on a GET stream.
const endMarker = "notifications/toolgate_test/end"

// countUntilEnd counts the notifications of method on a GET stream until
// endMarker arrives. mcp-go delivers a session's notifications in the
// order they were sent.
func countUntilEnd(t *testing.T, events <-chan []byte, method string) int {
	t.Helper()
	timeout := time.After(batchWait)
	n := 0
	for {
		select {
		case d, ok := <-events:
			if !ok {
				t.Fatalf("the GET stream ended after %d %s", n, method)
			}
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if err := json.Unmarshal(d, &m); err != nil {
				t.Fatalf("GET stream event %s: %v", d, err)
			}
			switch {
			case m.ID != nil: // a heartbeat ping
			case m.Method == endMarker:
				return n
			case m.Method == method:
				n++
			}
		case <-timeout:
			t.Fatalf("no end marker on the GET stream; %d %s before it gave up", n, method)
		}
	}
}

// addTools registers n tools, each of which makes mcp-go broadcast
// notifications/tools/list_changed.
func addTools(t *testing.T, g *harness, prefix string, n int) {
	t.Helper()
	for i := range n {
		err := g.RegisterStateless(registry.Tool{Name: fmt.Sprintf("%s_%d", prefix, i)}, func(context.Context, map[string]any) (executors.Result, error) {
			return executors.Text("added"), nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestBatchKeepsSessionNotifications checks that notifications meant for
// a session's GET stream all reach it while batches of that session run:
// none is taken and dropped on the way by the batch's messages. Before
// batches were handled in the session, every message's POST to mcp-go ran
// a forwarder that took notifications off the session's queue and dropped
// them.
func TestBatchKeepsSessionNotifications(t *testing.T) {
	const (
		batches  = 2
		perBatch = 4 // calls in flight together, within max_parallel_per_session
		n        = 20
	)
	g, _ := newGateway(t, nil)
	entered, release := make(chan struct{}, batches*perBatch), make(chan struct{})
	err := g.RegisterStateless(registry.Tool{Name: "hold"}, func(ctx context.Context, _ map[string]any) (executors.Result, error) {
		entered <- struct{}{}
		select {
		case <-release:
			return executors.Text("held"), nil
		case <-ctx.Done():
			return executors.Result{}, ctx.Err()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := serveHTTP(t, g)
	s := newVersionedSession(t, srv.URL+"/mcp", mcp.ProtocolVersion20250326, false)
	events := s.listen()

	calls := make([]string, perBatch)
	for i := range calls {
		calls[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"hold"}}`, i)
	}
	type reply struct {
		status int
		body   []byte
		err    error
	}
	replies := make([]reply, batches)
	var wg sync.WaitGroup
	for b := range batches {
		wg.Go(func() {
			status, body, _, err := s.tryPost(t.Context(), "["+strings.Join(calls, ",")+"]")
			replies[b] = reply{status, body, err}
		})
	}
	timeout := time.After(batchWait)
	for i := range batches * perBatch {
		select {
		case <-entered:
		case <-timeout:
			close(release)
			wg.Wait()
			t.Fatalf("%d of %d batch calls started", i, batches*perBatch)
		}
	}
	// Every call of both batches is in flight: each list_changed is sent
	// while they run.
	addTools(t, g, "added", n)
	close(release)
	wg.Wait()
	for b, r := range replies {
		if r.err != nil || r.status != http.StatusOK || bytes.Count(r.body, []byte(`"text":"held"`)) != perBatch {
			t.Fatalf("batch %d = HTTP %d %s (%v), want %d held calls", b, r.status, r.body, r.err, perBatch)
		}
	}
	g.mcp.SendNotificationToAllClients(endMarker, nil)
	if got := countUntilEnd(t, events, string(mcp.MethodNotificationToolsListChanged)); got != n {
		t.Errorf("the GET stream received %d tools/list_changed, want all %d sent while the batches ran", got, n)
	}
}

// handlerSession is a 2025-03-26 streamable HTTP session driven through
// the gateway's handler in process, for tests inside a synctest bubble.
type handlerSession struct {
	h  http.Handler
	g  *harness
	id string
}

func newHandlerSession(t *testing.T, g *harness) *handlerSession {
	t.Helper()
	s := &handlerSession{h: g.Handler(), g: g}
	rec := s.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, mcp.ProtocolVersion20250326))
	s.id = rec.Header().Get("Mcp-Session-Id")
	if rec.Code != http.StatusOK || s.id == "" {
		t.Fatalf("initialize = HTTP %d %s", rec.Code, rec.Body)
	}
	if rec := s.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); rec.Code != http.StatusAccepted {
		t.Fatalf("initialized = HTTP %d %s", rec.Code, rec.Body)
	}
	return s
}

func (s *handlerSession) post(body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, s.g.cfg.Server.MCPPath, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s.id != "" {
		req.Header.Set("Mcp-Session-Id", s.id)
	}
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, req)
	return rec
}

// TestBatchLeavesNotificationsQueued checks that a batch never takes the
// session's notifications off its queue: with no GET stream open they stay
// queued for the client's next stream. In a synctest bubble, so that
// synctest.Wait can tell when mcp-go's goroutines are done.
func TestBatchLeavesNotificationsQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = sessionQueue // the queue full
		g, _ := newGateway(t, nil)
		s := newHandlerSession(t, g)
		synctest.Wait() // the forwarders of the POSTs so far have exited
		addTools(t, g, "queued", n)
		c := g.liveClient(s.id)
		if got := len(c.notes); got != n {
			t.Fatalf("%d notifications queued for the session, want %d", got, n)
		}
		if rec := s.post(`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}]`); rec.Code != http.StatusOK {
			t.Fatalf("batch = HTTP %d %s", rec.Code, rec.Body)
		}
		synctest.Wait()
		if got := len(c.notes); got != n {
			t.Errorf("after a batch %d notifications are queued for the session, want all %d", got, n)
		}
	})
}

// TestBatchKeepsSessionAlive checks that a session whose client sends only
// batches outlives server.session_idle_ttl, and that it still expires once
// they stop. Fake time: toolgate's idle sweeper reads the bubble's clock.
func TestBatchKeepsSessionAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 8 * time.Second // swept every ttl/4
		g, _ := newGateway(t, func(c *config.Config) { c.Server.SessionIdleTTL = config.Duration(ttl) })
		s := newHandlerSession(t, g)
		const batch = `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}]`
		start := time.Now()
		for time.Since(start) < 4*ttl {
			time.Sleep(ttl / 3) // fake time
			if rec := s.post(batch); rec.Code != http.StatusOK {
				t.Fatalf("batch after %v of batches only = HTTP %d %s, want the session alive", time.Since(start), rec.Code, rec.Body)
			}
		}
		time.Sleep(2 * ttl) // fake time: idle past the TTL and the next sweep
		if rec := s.post(batch); rec.Code != http.StatusNotFound {
			t.Errorf("batch after %v idle = HTTP %d %s, want 404: the session expired", 2*ttl, rec.Code, rec.Body)
		}
	})
}

// TestBatchClientResponses checks that a client's answer to a server
// request, sent in a batch, reaches the request waiting for it: mcp-go
// routes client responses only in its POST handling.
func TestBatchClientResponses(t *testing.T) {
	g, _ := newGateway(t, nil)
	err := g.RegisterStateless(registry.Tool{Name: "ask"}, func(ctx context.Context, _ map[string]any) (executors.Result, error) {
		res, err := g.mcp.RequestElicitation(ctx, mcp.ElicitationRequest{Params: mcp.ElicitationParams{
			Message: "your name?", RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}},
		}})
		if err != nil {
			return executors.Result{}, err
		}
		return executors.Text(fmt.Sprintf("%s %v", res.Action, res.Content)), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := serveHTTP(t, g)
	s := newVersionedSession(t, srv.URL+"/mcp", mcp.ProtocolVersion20250326, false)
	events := s.listen()
	type reply struct {
		body []byte
		err  error
	}
	asked := make(chan reply, 1)
	go func() {
		_, body, _, err := s.tryPost(t.Context(), `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask"}}]`)
		asked <- reply{body, err}
	}()
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	timeout := time.After(batchWait)
	for req.Method != string(mcp.MethodElicitationCreate) {
		select {
		case d := <-events:
			req.Method = ""
			_ = json.Unmarshal(d, &req)
		case <-timeout:
			t.Fatal("no elicitation/create on the GET stream")
		}
	}
	answer := fmt.Sprintf(`[{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"name":"Ada"}}},{"jsonrpc":"2.0","id":2,"method":"ping"}]`, req.ID)
	if status, body, _ := s.post(t.Context(), answer); status != http.StatusOK || !strings.Contains(string(body), `"id":2`) || strings.Contains(string(body), req.Method) {
		t.Errorf("batch with the answer = HTTP %d %s, want only the ping's reply", status, body)
	}
	select {
	case r := <-asked:
		if r.err != nil || !strings.Contains(string(r.body), "accept map[name:Ada]") {
			t.Errorf("the asking call = %s (%v), want the client's answer", r.body, r.err)
		}
	case <-time.After(batchWait):
		t.Fatal("the answer did not reach the asking call")
	}
}

// TestBatchHTTPChecks checks that a batch passes the checks a single
// message does before any of its messages runs. (The Host rule is the
// gateway's, before the front: gateway's TestLoopbackHostRule.)
func TestBatchHTTPChecks(t *testing.T) {
	g, _ := newGateway(t, nil)
	err := g.RegisterStateless(registry.Tool{Name: "must_not_run"}, func(context.Context, map[string]any) (executors.Result, error) {
		t.Error("a refused batch ran a call")
		return executors.Text("ran"), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := serveHTTP(t, g) // on a loopback address
	s := newVersionedSession(t, srv.URL+"/mcp", mcp.ProtocolVersion20250326, false)
	const batch = `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"must_not_run"}}]`
	for _, tc := range []struct {
		name       string
		edit       func(*http.Request)
		wantStatus int
		wantBody   string
	}{
		{"content type", func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }, http.StatusBadRequest, "Content-Type: application/json"},
		{"unknown protocol version", func(r *http.Request) { r.Header.Set("Mcp-Protocol-Version", "1999-01-01") }, http.StatusBadRequest, `"code":-32022`},
		{"2026-07-28 header", func(r *http.Request) { r.Header.Set("Mcp-Protocol-Version", mcp.ProtocolVersion20260728) }, http.StatusBadRequest,
			"not supported in protocol version " + mcp.ProtocolVersion20260728},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.url, strings.NewReader(batch))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Mcp-Session-Id", s.id)
			tc.edit(req)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body bytes.Buffer
			_, _ = body.ReadFrom(resp.Body)
			if resp.StatusCode != tc.wantStatus || !strings.Contains(body.String(), tc.wantBody) {
				t.Errorf("batch = HTTP %d %s, want %d with %q", resp.StatusCode, body.String(), tc.wantStatus, tc.wantBody)
			}
		})
	}
}

// TestBatchInvalidRequests checks the requests a batch answers with
// -32600 on every transport: one with a null id (not a notification) and
// one of protocol 2026-07-28, which has no batches.
func TestBatchInvalidRequests(t *testing.T) {
	batch := fmt.Sprintf(`[
 {"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}},
 {"jsonrpc":"2.0","method":"notifications/roots/list_changed"},
 {"jsonrpc":"2.0","id":2,"method":"ping","params":{"_meta":{%q:%q,"io.modelcontextprotocol/clientCapabilities":{}}}},
 {"jsonrpc":"2.0","id":3,"method":"ping"}
]`, mcp.MetaKeyProtocolVersion, mcp.ProtocolVersion20260728)
	check := func(t *testing.T, b []byte) {
		t.Helper()
		rs := decodeReplies(t, b)
		var ids []string
		for _, r := range rs {
			ids = append(ids, string(r.ID))
		}
		if got, want := strings.Join(ids, ","), "null,2,3"; got != want {
			t.Fatalf("reply ids = %s, want %s (no entry for the notification): %s", got, want, b)
		}
		if e := rs[0].Error; e == nil || e.Code != mcp.INVALID_REQUEST || !strings.Contains(e.Message, `"id": null`) {
			t.Errorf("reply to the null id = %+v, want -32600 naming the null id", e)
		}
		if e := rs[1].Error; e == nil || e.Code != mcp.INVALID_REQUEST || !strings.Contains(e.Message, mcp.ProtocolVersion20260728) {
			t.Errorf("reply to the 2026-07-28 request = %+v, want -32600 naming the version", e)
		}
		if rs[2].Error != nil {
			t.Errorf("reply to the ping = %s", b)
		}
	}
	g, _ := newGateway(t, nil)
	t.Run("streamable HTTP", func(t *testing.T) {
		srv := serveHTTP(t, g)
		s := newVersionedSession(t, srv.URL+"/mcp", mcp.ProtocolVersion20250326, false)
		status, body, _ := s.post(t.Context(), batch)
		if status != http.StatusOK {
			t.Fatalf("batch = HTTP %d %s", status, body)
		}
		check(t, body)
	})
	t.Run("stdio", func(t *testing.T) {
		c := newStdioClient(t, g)
		defer c.close()
		c.initialize(mcp.ProtocolVersion20241105)
		c.send(batch)
		check(t, c.next())
	})
}

// TestNotificationPostAccepted checks that a POSTed notification gets 202
// and no body, as the transport spec says, even while notifications wait
// in the session's queue: mcp-go's POST handling would stream them in the
// reply (taking them from the client's GET stream) and answer 200.
func TestNotificationPostAccepted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 5
		g, _ := newGateway(t, nil)
		s := newHandlerSession(t, g)
		synctest.Wait()
		addTools(t, g, "queued", n)
		c := g.liveClient(s.id)
		rec := s.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		if rec.Code != http.StatusAccepted || rec.Body.Len() != 0 {
			t.Fatalf("notification = HTTP %d %q, want 202 and no body", rec.Code, rec.Body)
		}
		synctest.Wait()
		if got := len(c.notes); got != n {
			t.Errorf("after a notification %d notifications are queued for the session, want all %d", got, n)
		}
	})
}

// TestNotificationPostRefused: a notification mcp-go cannot accept (the
// scanner passes an invalid escape in a value it skips) is answered 400
// with mcp-go's JSON-RPC error, not 202.
func TestNotificationPostRefused(t *testing.T) {
	g, _ := newGateway(t, nil)
	s := newHandlerSession(t, g)
	rec := s.post(`{"jsonrpc":"2.0","method":"notifications/initialized","params":{"x":"\q"}}`)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `"error"`) {
		t.Fatalf("invalid notification = HTTP %d %q, want 400 with a JSON-RPC error", rec.Code, rec.Body)
	}
}
