package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// get GETs url and returns the status and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatalf("building GET %s: %v", url, err)
	}
	resp, err := newHTTPClient().Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading GET %s: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

func TestHealthAndReady(t *testing.T) {
	srv := startServe(t, baseConfig)
	if code, body := get(t, srv.URL+"/healthz"); code != http.StatusOK || strings.TrimSpace(body) != "ok" {
		t.Errorf("GET /healthz = %d %q, want 200 \"ok\"", code, body)
	}
	code, body := get(t, srv.URL+"/readyz")
	var ready struct {
		Status string `json:"status"`
		Tools  int    `json:"tools"`
	}
	if err := json.Unmarshal([]byte(body), &ready); err != nil {
		t.Fatalf("GET /readyz body %q: %v", body, err)
	}
	if code != http.StatusOK || ready.Status != "ready" || ready.Tools != 4 {
		t.Errorf("GET /readyz = %d %+v, want 200 {status: ready, tools: 4}", code, ready)
	}
}

func TestMetricsCounters(t *testing.T) {
	srv := startServe(t, baseConfig)
	okCalc := map[string]string{"tool": "calc", "kind": "stateless", "outcome": "ok", "error_class": ""}
	execCalc := map[string]string{"tool": "calc", "kind": "stateless", "outcome": "error", "error_class": "execution"}
	validCalc := map[string]string{"tool": "calc", "kind": "stateless", "outcome": "error", "error_class": "validation"}
	durCalc := map[string]string{"tool": "calc", "kind": "stateless"}

	before := scrape(t, srv.URL)
	// Every documented series is exported before any call.
	for _, name := range []string{"toolgate_tool_calls_in_flight", "toolgate_sessions", "toolgate_unknown_tool_calls_total"} {
		if _, ok := metricValue(before, name, nil); !ok {
			t.Errorf("/metrics has no %s sample before any call", name)
		}
	}
	if v, ok := metricValue(before, "toolgate_thread_instances", map[string]string{"tool": "scratchpad"}); !ok || v != 0 {
		t.Errorf("toolgate_thread_instances{tool=\"scratchpad\"} = %v (present %v), want 0 and present", v, ok)
	}
	if v, ok := metricValue(before, "toolgate_thread_instances", map[string]string{"tool": "calc"}); ok {
		t.Errorf("toolgate_thread_instances{tool=\"calc\"} = %v, want no sample for a stateless tool", v)
	}

	c := connect(t, streamableHTTP, srv)
	const okCalls = 5
	for i := range okCalls {
		wantOK(t, mustCall(t, c, "calc", map[string]any{"expression": fmt.Sprintf("%d+1", i)}, ""), fmt.Sprint(i+1))
	}
	wantError(t, mustCall(t, c, "calc", map[string]any{"expression": "1/0"}, ""), "execution")
	wantError(t, mustCall(t, c, "calc", map[string]any{"expression": 1}, ""), "validation")
	if _, err := callTool(t, c, "no_such_tool", map[string]any{}, ""); err == nil {
		t.Errorf("tools/call no_such_tool succeeded, want a JSON-RPC error")
	}

	after := scrape(t, srv.URL)
	deltas := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"toolgate_tool_calls_total", okCalc, okCalls},
		{"toolgate_tool_calls_total", execCalc, 1},
		{"toolgate_tool_calls_total", validCalc, 1},
		{"toolgate_tool_call_duration_seconds_count", durCalc, okCalls + 2},
		{"toolgate_unknown_tool_calls_total", nil, 1},
	}
	for _, d := range deltas {
		b, a := metricOrZero(before, d.name, d.labels), metricOrZero(after, d.name, d.labels)
		if a-b != d.want {
			t.Errorf("%s%s went from %v to %v, want +%v", d.name, fmtLabels(d.labels), b, a, d.want)
		}
	}
	if v := metricOrZero(after, "toolgate_tool_calls_in_flight", nil); v != 0 {
		t.Errorf("toolgate_tool_calls_in_flight = %v after every call returned, want 0", v)
	}
	if v := metricOrZero(after, "toolgate_sessions", nil); v != 1 {
		t.Errorf("toolgate_sessions = %v with one session open, want 1", v)
	}
	// Labels come from registered names only: what a client typed never
	// becomes a series.
	if strings.Contains(after, "no_such_tool") {
		t.Errorf("/metrics mentions the unknown tool name no_such_tool")
	}
}

func TestGracefulShutdown(t *testing.T) {
	srv := startServe(t, `
server:
  sse: true
  shutdown_grace: 20s
builtin: [calc, clock_now, scratchpad, sleep]
`)
	c := connect(t, streamableHTTP, srv)

	type outcome struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan outcome, 1)
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	go func() {
		res, err := c.CallTool(ctx, callRequest("sleep", map[string]any{"ms": 3000}, ""))
		done <- outcome{res, err}
	}()
	waitMetric(t, srv.URL, "toolgate_tool_calls_in_flight", nil, 1)
	srv.Signal(t, syscall.SIGTERM)

	select {
	case o := <-done:
		if o.err != nil {
			t.Fatalf("the call in flight at SIGTERM failed: %v", o.err)
		}
		wantOK(t, o.res, "slept 3000 ms")
	case <-ctx.Done():
		t.Fatalf("the call in flight at SIGTERM did not return: %v", ctx.Err())
	}
	if code := srv.Wait(t, stopTimeout); code != 0 {
		t.Errorf("toolgate serve exited with code %d after SIGTERM, want 0", code)
	}

	hctx, hcancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer hcancel()
	req, err := http.NewRequestWithContext(hctx, http.MethodGet, srv.URL+"/healthz", nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := newHTTPClient().Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("GET /healthz after exit = %d, want the connection to fail", resp.StatusCode)
	}
}

func TestShutdownGraceExpires(t *testing.T) {
	srv := startServe(t, `
server:
  sse: true
  shutdown_grace: 1s
builtin: [calc, clock_now, scratchpad, sleep]
`)
	c := connect(t, streamableHTTP, srv)

	type outcome struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan outcome, 1)
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	go func() {
		res, err := c.CallTool(ctx, callRequest("sleep", map[string]any{"ms": 20000}, ""))
		done <- outcome{res, err}
	}()
	waitMetric(t, srv.URL, "toolgate_tool_calls_in_flight", nil, 1)
	start := time.Now()
	srv.Signal(t, syscall.SIGTERM)

	select {
	case o := <-done:
		// The call is cancelled when the grace runs out, and its client
		// still gets the cancelled result.
		if o.err != nil {
			t.Fatalf("the call in flight at SIGTERM failed: %v; want a cancelled result", o.err)
		}
		wantError(t, o.res, "cancelled")
	case <-ctx.Done():
		t.Fatalf("the call in flight at SIGTERM did not end: %v", ctx.Err())
	}
	if code := srv.Wait(t, stopTimeout); code != 0 {
		t.Errorf("toolgate serve exited with code %d after SIGTERM, want 0", code)
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Errorf("toolgate serve took %v to exit with shutdown_grace 1s and a 20s call in flight", d)
	}
}

// toolsCall is the raw JSON of a tools/call request.
func toolsCall(id int, name, args string) []byte {
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, name, args)
}

func TestBadInput(t *testing.T) {
	srv := startServe(t, baseConfig)
	s := openRawSession(t, srv.URL)

	huge := strings.Repeat("7", 1<<20) // 1 MiB, over calc's maxLength of 4096
	tests := []struct {
		name        string
		body        []byte
		withSession bool
		header      http.Header // when set, sent instead of the session's headers
		wantStatus  int         // 0: any status below 500
		check       func(t *testing.T, h httpReply)
	}{
		{
			name: "malformed JSON", body: []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"`), withSession: true,
			check: func(t *testing.T, h httpReply) {
				if r := h.rpc(t); r.Error == nil || r.Error.Code != -32700 {
					t.Errorf("error = %+v, want code -32700 (parse error)", r.Error)
				}
			},
		},
		{
			name: "unknown method", body: []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/frobnicate","params":{}}`), withSession: true,
			check: func(t *testing.T, h httpReply) {
				r := h.rpc(t)
				if r.Error == nil || r.Error.Code != -32601 {
					t.Errorf("error = %+v, want code -32601 (method not found)", r.Error)
				}
				if string(r.ID) != "2" {
					t.Errorf("id = %s, want 2", r.ID)
				}
			},
		},
		{
			name: "arguments not an object", body: toolsCall(3, "calc", `[1]`), withSession: true, wantStatus: http.StatusOK,
			check: func(t *testing.T, h httpReply) {
				wantError(t, h.rpc(t).toolResult(t), "validation")
			},
		},
		{
			name: "1 MiB string argument", body: toolsCall(4, "calc", fmt.Sprintf(`{"expression":%q}`, huge)), withSession: true, wantStatus: http.StatusOK,
			check: func(t *testing.T, h httpReply) {
				res := h.rpc(t).toolResult(t)
				wantError(t, res, "validation")
				if !strings.Contains(resultText(res), "/expression") {
					t.Errorf("error text %.200q does not name /expression", resultText(res))
				}
			},
		},
		{
			name: "invalid UTF-8 in a string", body: []byte("{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"calc\",\"arguments\":{\"expression\":\"1+\xff\xfe\xc3\"}}}"), withSession: true,
			check: func(t *testing.T, h httpReply) {
				r := h.rpc(t)
				if r.Error != nil {
					return // rejecting the message is fine
				}
				if res := r.toolResult(t); !res.IsError {
					t.Errorf("calc of an expression with invalid UTF-8 succeeded: %q", resultText(res))
				}
			},
		},
		{
			name: "missing session id", body: []byte(`{"jsonrpc":"2.0","id":6,"method":"tools/list"}`), withSession: false, wantStatus: http.StatusBadRequest,
		},
		{
			name: "unknown session id", body: []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`),
			header:     http.Header{"Mcp-Session-Id": {"mcp-session-00000000-0000-4000-8000-000000000000"}, "Mcp-Protocol-Version": {protocolVersion}},
			wantStatus: http.StatusNotFound, // the transport spec's answer: start a new session
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var h httpReply
			if tc.header != nil {
				h = postRaw(t, newHTTPClient(), s.URL, tc.body, tc.header)
			} else {
				h = s.post(t, tc.body, tc.withSession)
			}
			switch {
			case tc.wantStatus != 0 && h.Status != tc.wantStatus:
				t.Errorf("HTTP %d, want %d; body %.300s", h.Status, tc.wantStatus, h.Body)
			case h.Status >= 500:
				t.Errorf("HTTP %d, want a client error or a JSON-RPC answer; body %.300s", h.Status, h.Body)
			}
			if tc.check != nil {
				tc.check(t, h)
			}
		})
	}

	// The process still serves the session that sent all of that, new raw
	// sessions and mcp-go clients.
	wantOK(t, s.call(t, 100, "calc", map[string]any{"expression": "6*7"}).toolResult(t), "42")
	fresh := openRawSession(t, srv.URL)
	wantOK(t, fresh.call(t, 1, "calc", map[string]any{"expression": "6*7"}).toolResult(t), "42")
	wantOK(t, mustCall(t, connect(t, streamableHTTP, srv), "calc", map[string]any{"expression": "6*7"}, ""), "42")
}

func TestOversizedBody(t *testing.T) {
	srv := startServe(t, `
server:
  sse: true
  max_body_bytes: 2048
builtin: [calc, clock_now, scratchpad, sleep]
`)
	s := openRawSession(t, srv.URL)
	big := toolsCall(1, "calc", fmt.Sprintf(`{"expression":%q}`, strings.Repeat("1", 3000)))
	small := toolsCall(2, "calc", `{"expression":"40+2"}`)

	tests := []struct {
		name   string
		url    string
		header http.Header
	}{
		{"streamable HTTP, established session", s.URL, http.Header{"Mcp-Session-Id": {s.ID}, "Mcp-Protocol-Version": {protocolVersion}}},
		{"streamable HTTP, no session", s.URL, nil},
		{"legacy SSE message endpoint", srv.URL + "/message?sessionId=unknown", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := postRaw(t, newHTTPClient(), tc.url, big, tc.header)
			if h.Status != http.StatusRequestEntityTooLarge {
				t.Fatalf("POST of %d bytes: HTTP %d, want 413; body %.300s", len(big), h.Status, h.Body)
			}
			if r := h.rpc(t); r.Error == nil {
				t.Errorf("413 body %s has no JSON-RPC error", h.Body)
			}
		})
	}
	wantOK(t, s.call(t, 2, "calc", map[string]any{"expression": "40+2"}).toolResult(t), "42")
	if h := s.post(t, small, true); h.Status != http.StatusOK {
		t.Errorf("a small request after the oversized ones: HTTP %d, want 200", h.Status)
	}
	wantOK(t, mustCall(t, connect(t, streamableHTTP, srv), "calc", map[string]any{"expression": "40+2"}, ""), "42")
}

func TestSecretsNeverLogged(t *testing.T) {
	const secret = "sk-test-SECRET-123"
	srv := startServe(t, baseConfig) // log level: the default
	c := connect(t, streamableHTTP, srv)
	sse := connect(t, legacySSE, srv)
	for _, cl := range []struct {
		name string
		call func(name string, args any) error
	}{
		{"streamable", func(name string, args any) error { _, err := callTool(t, c, name, args, ""); return err }},
		{"sse", func(name string, args any) error { _, err := callTool(t, sse, name, args, ""); return err }},
	} {
		_ = cl.call("calc", map[string]any{"expression": secret})
		_ = cl.call("scratchpad", map[string]any{"op": "put", "key": "api_key", "value": secret})
		_ = cl.call("clock_now", map[string]any{"timezone": secret})
		_ = cl.call("calc", map[string]any{"expression": "1", "token": secret})
		if err := cl.call("no_such_tool", map[string]any{"token": secret}); err == nil {
			t.Errorf("%s: tools/call no_such_tool succeeded", cl.name)
		}
	}
	raw := openRawSession(t, srv.URL)
	raw.post(t, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"calc","arguments":{"expression":"`+secret+`"`), true)

	if code := srv.Stop(t); code != 0 {
		t.Errorf("toolgate serve exited with code %d after SIGTERM, want 0", code)
	}
	stderr := srv.Stderr()
	if stderr == "" {
		t.Fatalf("toolgate serve wrote nothing to stderr; expected at least its lifecycle logs")
	}
	t.Run("argument value", func(t *testing.T) {
		if strings.Contains(stderr, secret) {
			t.Errorf("the argument value %q appears in the server's stderr:\n%s", secret, stderr)
		}
	})
	// A session ID grants use of the session, like a token: it is a header
	// and must not be logged either.
	t.Run("session id", func(t *testing.T) {
		if strings.Contains(stderr, raw.ID) {
			t.Errorf("the Mcp-Session-Id %q appears in the server's stderr:\n%s", raw.ID, stderr)
		}
	})
}

// TestServeHeapFloor: a serving toolgate raises the collector's
// percentage while its heap is small (internal/gcfloor), and leaves it to
// the operator when GOGC is set in its environment. Both read from the Go
// runtime's own gauge on /metrics.
func TestServeHeapFloor(t *testing.T) {
	raised := func(p float64) bool { return p > 100 }
	for _, c := range []struct {
		gogc string // "unset": no GOGC at all
		ok   func(float64) bool
		want string
	}{
		{"unset", raised, "over 100: the floor raises it for a small heap"},
		{"", raised, "over 100: an empty GOGC is the runtime's default"},
		{"100", func(p float64) bool { return p == 100 }, "100, as GOGC says"},
		{"150", func(p float64) bool { return p == 150 }, "150, as GOGC says"},
	} {
		t.Run("GOGC="+c.gogc, func(t *testing.T) {
			// t.Setenv restores both; the child inherits what they leave.
			t.Setenv("GOGC", c.gogc)
			t.Setenv("GOMEMLIMIT", "")
			unset := []string{"GOMEMLIMIT"}
			if c.gogc == "unset" {
				unset = append(unset, "GOGC")
			}
			for _, name := range unset {
				if err := os.Unsetenv(name); err != nil {
					t.Fatal(err)
				}
			}
			srv := startServe(t, baseConfig)
			p, ok := metricValue(scrape(t, srv.URL), "go_gc_gogc_percent", nil)
			if !ok || !c.ok(p) {
				t.Errorf("go_gc_gogc_percent = %v (present %v), want %s", p, ok, c.want)
			}
		})
	}
}
