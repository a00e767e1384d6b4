package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/registry"
)

// rawSession speaks JSON-RPC over streamable HTTP by hand, so tests can see
// what goes over the wire (error codes, error data, HTTP statuses).
type rawSession struct {
	t     *testing.T
	url   string
	id    string
	next  int
	token string // sent as a bearer token when not empty
}

func newRawSession(t *testing.T, url string) *rawSession {
	t.Helper()
	return newRawSessionAs(t, url, "")
}

// newRawSessionAs opens a session authenticated with a bearer token.
func newRawSessionAs(t *testing.T, url, token string) *rawSession {
	t.Helper()
	s := &rawSession{t: t, url: url, token: token}
	status, body, hdr := s.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, mcp.ProtocolVersion20251125))
	if status != http.StatusOK {
		t.Fatalf("initialize: HTTP %d: %s", status, body)
	}
	s.id = hdr.Get("Mcp-Session-Id")
	if s.id == "" {
		t.Fatalf("initialize: no Mcp-Session-Id in %v", hdr)
	}
	if status, body, _ := s.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); status != http.StatusAccepted {
		t.Fatalf("initialized: HTTP %d: %s", status, body)
	}
	t.Cleanup(func() {
		req, _ := http.NewRequest(http.MethodDelete, s.url, nil)
		req.Header.Set("Mcp-Session-Id", s.id)
		if s.token != "" {
			req.Header.Set("Authorization", "Bearer "+s.token)
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	})
	return s
}

func (s *rawSession) post(body string) (int, []byte, http.Header) {
	s.t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.url, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	if s.id != "" {
		req.Header.Set("Mcp-Session-Id", s.id)
		req.Header.Set("Mcp-Protocol-Version", mcp.ProtocolVersion20251125)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("POST: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b = lastSSEData(b)
	}
	return resp.StatusCode, b, resp.Header
}

func lastSSEData(b []byte) []byte {
	var last []byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if d, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: ")); ok {
			last = append([]byte(nil), d...)
		}
	}
	return last
}

type rpcResponse struct {
	ID     any             `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    struct {
			Suggestions []string `json:"suggestions"`
		} `json:"data"`
	} `json:"error"`
}

func (s *rawSession) call(method, params string) rpcResponse {
	s.t.Helper()
	s.next++
	status, body, _ := s.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, s.next, method, params))
	if status != http.StatusOK {
		s.t.Fatalf("%s: HTTP %d: %s", method, status, body)
	}
	var r rpcResponse
	if err := json.Unmarshal(body, &r); err != nil {
		s.t.Fatalf("%s: response %s: %v", method, body, err)
	}
	return r
}

func serveHTTP(t *testing.T, g *Gateway) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(func() {
		g.Close() // ends the long-lived streams first
		srv.Close()
	})
	return srv
}

func TestUnknownToolOverHTTP(t *testing.T) {
	g, _ := newGateway(t, nil)
	srv := serveHTTP(t, g)
	s := newRawSession(t, srv.URL+"/mcp")

	r := s.call("tools/call", `{"name":"ecoh","arguments":{"text":"x"}}`)
	if r.Error == nil || r.Error.Code != mcp.INVALID_PARAMS {
		t.Fatalf("tools/call ecoh = %+v, want JSON-RPC -32602", r)
	}
	if !strings.Contains(r.Error.Message, `unknown tool "ecoh"; did you mean "echo"`) {
		t.Errorf("message = %q", r.Error.Message)
	}
	if len(r.Error.Data.Suggestions) == 0 || r.Error.Data.Suggestions[0] != "echo" {
		t.Errorf("data.suggestions = %v, want [echo ...]", r.Error.Data.Suggestions)
	}
	if fmt.Sprint(r.ID) != "1" {
		t.Errorf("id = %v, want 1", r.ID)
	}

	r = s.call("tools/call", `{"name":"Echo","arguments":{"text":"repaired"},"_meta":{"x":1}}`)
	if r.Error != nil || !strings.Contains(string(r.Result), "repaired") {
		t.Errorf("tools/call Echo = %s %+v, want the echo result", r.Result, r.Error)
	}

	r = s.call("tools/call", `{"name":"echo","arguments":"not an object"}`)
	if r.Error != nil || !strings.Contains(string(r.Result), `"isError":true`) || !strings.Contains(string(r.Result), "validation: arguments must be a JSON object") {
		t.Errorf("tools/call with string arguments = %s %+v, want a validation isError", r.Result, r.Error)
	}

	r = s.call("no/such/method", `{}`)
	if r.Error == nil || r.Error.Code != mcp.METHOD_NOT_FOUND {
		t.Errorf("unknown method = %+v, want -32601", r)
	}
}

func TestBodyCap(t *testing.T) {
	g, _ := newGateway(t, func(c *config.Config) { c.Server.MaxBodyBytes = 2048 })
	srv := serveHTTP(t, g)
	s := newRawSession(t, srv.URL+"/mcp")
	big := fmt.Sprintf(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q}}}`, strings.Repeat("a", 4096))
	status, body, _ := s.post(big)
	if status != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "server.max_body_bytes") || !json.Valid(body) {
		t.Errorf("oversized POST = HTTP %d %s, want 413 with a JSON-RPC error naming server.max_body_bytes", status, body)
	}
	// The session still works.
	if r := s.call("tools/call", `{"name":"echo","arguments":{"text":"ok"}}`); r.Error != nil {
		t.Errorf("call after oversized POST: %+v", r.Error)
	}
}

func TestHealthReadyMetrics(t *testing.T) {
	g, _ := newGateway(t, nil)
	srv := serveHTTP(t, g)
	if _, err := g.Call(t.Context(), "echo", json.RawMessage(`{"text":"x"}`), nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{"/healthz", "ok"},
		{"/readyz", `"status":"ready"`},
		{"/metrics", `toolgate_tool_calls_total{error_class="",kind="stateless",outcome="ok",tool="echo"} 1`},
		{"/metrics", `toolgate_thread_instances{tool="counter"} 0`},
		{"/metrics", `go_goroutines`},
	} {
		resp, err := http.Get(srv.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), tc.want) {
			t.Errorf("GET %s = %d, body lacks %q:\n%s", tc.path, resp.StatusCode, tc.want, b)
		}
	}
}

func TestSSETransport(t *testing.T) {
	g, _ := newGateway(t, nil)
	srv := serveHTTP(t, g)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	c, err := client.NewSSEMCPClient(srv.URL + "/sse")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	changed := make(chan struct{}, 8)
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationToolsListChanged) {
			changed <- struct{}{}
		}
	})
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.ProtocolVersion20241105
	init.Params.ClientInfo = mcp.Implementation{Name: "test", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}

	call := func(name string, args map[string]any) (*mcp.CallToolResult, error) {
		req := mcp.CallToolRequest{}
		req.Params.Name = name
		req.Params.Arguments = args
		return c.CallTool(ctx, req)
	}
	res, err := call("echo", map[string]any{"text": "over sse"})
	if err != nil || mcpText(res) != "over sse" {
		t.Fatalf("echo over SSE = %v, %v", res, err)
	}
	if _, err := call("ecoh", nil); err == nil || !strings.Contains(err.Error(), `unknown tool "ecoh"`) || !strings.Contains(err.Error(), "echo") {
		t.Errorf("unknown tool over SSE error = %v, want the unknown-tool message with a suggestion", err)
	}

	// A tool added at runtime reaches connected clients as list_changed.
	if err := g.RegisterStateless(registry.Tool{Name: "late"}, func(context.Context, map[string]any) (executors.Result, error) {
		return executors.Text("late"), nil
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatal("no notifications/tools/list_changed after a runtime registration")
	}
	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	if !strings.Contains(strings.Join(names, ","), "late") {
		t.Errorf("tools after list_changed = %v, want late among them", names)
	}
}

func TestStreamableClientSessionEndClosesInstances(t *testing.T) {
	g, fc := newGateway(t, nil)
	srv := serveHTTP(t, g)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	c := streamableClient(ctx, t, srv.URL+"/mcp")
	req := mcp.CallToolRequest{}
	req.Params.Name = "counter"
	for want := 1.0; want <= 2; want++ {
		res, err := c.CallTool(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if got := res.StructuredContent.(map[string]any)["n"]; got != want {
			t.Fatalf("counter = %v, want %v", got, want)
		}
	}
	if got := g.pool.Len(); got != 1 {
		t.Fatalf("live instances = %d, want 1", got)
	}
	if err := c.Close(); err != nil { // sends DELETE
		t.Fatal(err)
	}
	if got := fc.closed.Load(); got != 1 {
		t.Errorf("instances closed after the session ended = %d, want 1", got)
	}
	if got := g.pool.Len(); got != 0 {
		t.Errorf("live instances after the session ended = %d, want 0", got)
	}
}

// TestCallsInOneSessionRunConcurrently proves with a barrier that two calls
// of different tools in one session are in flight together: each tool
// waits until the other has started.
func TestCallsInOneSessionRunConcurrently(t *testing.T) {
	g, _ := newGateway(t, nil)
	started := map[string]chan struct{}{"left": make(chan struct{}), "right": make(chan struct{})}
	other := map[string]string{"left": "right", "right": "left"}
	for name := range started {
		if err := g.RegisterStateless(registry.Tool{Name: name}, func(ctx context.Context, _ map[string]any) (executors.Result, error) {
			close(started[name])
			select {
			case <-started[other[name]]:
				return executors.Text(name), nil
			case <-ctx.Done():
				return executors.Result{}, ctx.Err()
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	srv := serveHTTP(t, g)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	c := streamableClient(ctx, t, srv.URL+"/mcp")
	defer c.Close()
	results := make(chan string, 2)
	for name := range started {
		go func() {
			req := mcp.CallToolRequest{}
			req.Params.Name = name
			res, err := c.CallTool(ctx, req)
			if err != nil {
				results <- "error: " + err.Error()
				return
			}
			results <- mcpText(res)
		}()
	}
	got := map[string]bool{<-results: true, <-results: true}
	if !got["left"] || !got["right"] {
		t.Errorf("results = %v, want left and right (the calls must run concurrently)", got)
	}
}

// streamableClient returns an initialised mcp-go client of url over
// streamable HTTP; the caller closes it.
func streamableClient(ctx context.Context, t *testing.T, url string) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url)
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	init.Params.ClientInfo = mcp.Implementation{Name: "test", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	return c
}

// mcpText returns the text of an MCP client's result.
func mcpText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}
