package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/gateway/internal/batchtool"
	"github.com/toolgate/toolgate/internal/syncbuf"
	"github.com/toolgate/toolgate/registry"
)

const (
	aliceToken = "alice-0123456789abcdef"
	bobToken   = "bob-0123456789abcdef00"
	opsToken   = "ops-0123456789abcdef00"
)

// authGateway is newGateway with three principals: alice may call echo
// only (counter is denied), bob every tool, and ops, in auth.admins, every
// tool too.
func authGateway(t *testing.T, mutate func(*config.Config)) *Gateway {
	t.Helper()
	g, _ := newGateway(t, func(c *config.Config) {
		c.Auth.Tokens = []config.AuthToken{
			{Name: "alice", Token: aliceToken, Allow: []string{"echo", "count*", "toolgate_*"}, Deny: []string{"counter"}},
			{Name: "bob", Token: bobToken, Allow: []string{"*"}},
			{Name: "ops", Token: opsToken, Allow: []string{"*"}},
		}
		c.Auth.Admins = []string{"ops"}
		c.BatchTool = true
		if mutate != nil {
			mutate(c)
		}
	})
	return g
}

// get sends a GET with an optional bearer token and returns the status,
// headers and body.
func get(t *testing.T, url, token string, hdr map[string]string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, resp.Header, string(b)
}

func TestAuthRequired(t *testing.T) {
	g := authGateway(t, func(c *config.Config) { c.Server.AllowedOrigins = []string{"https://app.example"} })
	srv := serveHTTP(t, g)
	initialize := fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, "2025-11-25")

	for _, tc := range []struct {
		name, auth string
		presented  bool
	}{
		{"no header", "", false},
		{"wrong token", "Bearer wrong-token-0123456789", true},
		{"basic scheme", "Basic YWxpY2U6eA==", false},
		{"token of another case", "Bearer " + strings.ToUpper(aliceToken), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(initialize))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("HTTP %d, want 401: %s", resp.StatusCode, b)
			}
			want := `Bearer realm="toolgate"`
			if tc.presented {
				want += `, error="invalid_token"`
			}
			if got := resp.Header.Get("WWW-Authenticate"); got != want {
				t.Errorf("WWW-Authenticate = %q, want %q", got, want)
			}
			if resp.Header.Get("Mcp-Session-Id") != "" {
				t.Error("an unauthenticated initialize got a session")
			}
			var body struct {
				Error struct{ Message string } `json:"error"`
			}
			if json.Unmarshal(b, &body) != nil || !strings.Contains(body.Error.Message, "Bearer") {
				t.Errorf("body %s is not a JSON-RPC error naming what to send", b)
			}
			if strings.Contains(string(b), "alice") || strings.Contains(strings.ToLower(string(b)), "expired") {
				t.Errorf("body %s hints at what was wrong", b)
			}
		})
	}

	t.Run("every endpoint but healthz", func(t *testing.T) {
		for _, path := range []string{"/mcp", "/sse", "/events", "/ui/state", "/metrics", "/readyz"} {
			if code, _, _ := get(t, srv.URL+path, "", nil); code != http.StatusUnauthorized {
				t.Errorf("GET %s without a token: HTTP %d, want 401", path, code)
			}
		}
		if code, _, _ := get(t, srv.URL+"/healthz", "", nil); code != http.StatusOK {
			t.Errorf("GET /healthz: HTTP %d", code)
		}
		for _, path := range []string{"/readyz", "/metrics"} {
			// They name every tool: auth.admins only.
			if code, _, body := get(t, srv.URL+path, bobToken, nil); code != http.StatusForbidden || !strings.Contains(body, "auth.admins") {
				t.Errorf("GET %s as bob (not an admin): HTTP %d %s, want 403 naming auth.admins", path, code, body)
			}
			if code, _, _ := get(t, srv.URL+path, opsToken, nil); code != http.StatusOK {
				t.Errorf("GET %s as ops (an admin): HTTP %d", path, code)
			}
		}
		if code, _, _ := get(t, srv.URL+"/.well-known/oauth-protected-resource", "", nil); code != http.StatusNotFound {
			t.Errorf("resource metadata without oauth: HTTP %d, want 404", code)
		}
	})

	t.Run("CORS preflight needs no token", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodOptions, srv.URL+"/mcp", nil)
		req.Header.Set("Origin", "https://app.example")
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent || !strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "Authorization") {
			t.Errorf("preflight: HTTP %d, Allow-Headers %q", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Headers"))
		}
		// And the 401 to a page of an allowed origin is readable by it.
		code, hdr, _ := get(t, srv.URL+"/mcp", "", map[string]string{"Origin": "https://app.example"})
		if code != http.StatusUnauthorized || hdr.Get("Access-Control-Allow-Origin") != "https://app.example" ||
			!strings.Contains(hdr.Get("Access-Control-Expose-Headers"), "WWW-Authenticate") {
			t.Errorf("401 to an allowed origin: HTTP %d, headers %v", code, hdr)
		}
	})
}

// toolNames lists the tools of a tools/list response.
func toolNames(t *testing.T, r rpcResponse) []string {
	t.Helper()
	var res struct {
		Tools []struct{ Name string } `json:"tools"`
	}
	if err := json.Unmarshal(r.Result, &res); err != nil {
		t.Fatalf("tools/list result %s: %v", r.Result, err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

// wireCallResult decodes a tools/call response's result.
type wireCallResult struct {
	IsError bool `json:"isError"`
	Content []struct {
		Text string `json:"text"`
	} `json:"content"`
	Meta map[string]any `json:"_meta"`
}

func decodeCall(t *testing.T, r rpcResponse) wireCallResult {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("tools/call: JSON-RPC error %d %s", r.Error.Code, r.Error.Message)
	}
	var res wireCallResult
	if err := json.Unmarshal(r.Result, &res); err != nil {
		t.Fatalf("tools/call result %s: %v", r.Result, err)
	}
	return res
}

func TestAuthPermissionsOverHTTP(t *testing.T) {
	g := authGateway(t, nil)
	srv := serveHTTP(t, g)
	alice := newRawSessionAs(t, srv.URL+"/mcp", aliceToken)
	bob := newRawSessionAs(t, srv.URL+"/mcp", bobToken)

	if got, want := toolNames(t, alice.call("tools/list", `{}`)), []string{"echo", "toolgate_batch"}; !slices.Equal(got, want) {
		t.Errorf("alice's tools/list = %v, want %v", got, want)
	}
	if got, want := toolNames(t, bob.call("tools/list", `{}`)), []string{"counter", "echo", "toolgate_batch"}; !slices.Equal(got, want) {
		t.Errorf("bob's tools/list = %v, want %v", got, want)
	}

	t.Run("a denied tool is a permission result naming only it", func(t *testing.T) {
		res := decodeCall(t, alice.call("tools/call", `{"name":"counter"}`))
		text := res.Content[0].Text
		if !res.IsError || !strings.HasPrefix(text, "permission: ") || !strings.Contains(text, `"counter"`) {
			t.Fatalf("alice calling counter = %+v", res)
		}
		for _, other := range []string{"echo", "toolgate_batch"} {
			if strings.Contains(text, other) {
				t.Errorf("the refusal names %s: %q", other, text)
			}
		}
		if res := decodeCall(t, bob.call("tools/call", `{"name":"counter"}`)); res.IsError {
			t.Errorf("bob calling counter = %+v", res)
		}
	})

	t.Run("repair never reaches a hidden tool, suggestions only visible ones", func(t *testing.T) {
		r := alice.call("tools/call", `{"name":"COUNTER"}`)
		if r.Error == nil || r.Error.Code != -32602 || len(r.Error.Data.Suggestions) != 0 || strings.Contains(r.Error.Message, "counter") {
			t.Errorf("alice calling COUNTER = %+v", r.Error)
		}
		r = alice.call("tools/call", `{"name":"countr"}`)
		if r.Error == nil || slices.Contains(r.Error.Data.Suggestions, "counter") || strings.Contains(r.Error.Message, `"counter"`) {
			t.Errorf("alice calling countr = %+v", r.Error)
		}
		if r := bob.call("tools/call", `{"name":"COUNTER"}`); r.Error != nil {
			t.Errorf("bob calling COUNTER (repaired) = %+v", r.Error)
		}
	})

	t.Run("inside toolgate_batch", func(t *testing.T) {
		res := decodeCall(t, alice.call("tools/call", `{"name":"toolgate_batch","arguments":{"calls":[{"tool":"echo","arguments":{"text":"hi"}},{"tool":"counter"}]}}`))
		var out batchtool.Result
		if err := json.Unmarshal([]byte(res.Content[0].Text), &out); err != nil {
			t.Fatalf("batch result %q: %v", res.Content[0].Text, err)
		}
		if len(out.Results) != 2 || out.Results[0].Status != "ok" || out.Results[1].Class != "permission" {
			t.Errorf("alice's batch = %+v", out.Results)
		}
	})
}

func TestAuthSessionBoundToPrincipal(t *testing.T) {
	g := authGateway(t, nil)
	srv := serveHTTP(t, g)
	alice := newRawSessionAs(t, srv.URL+"/mcp", aliceToken)
	if res := decodeCall(t, alice.call("tools/call", `{"name":"echo","arguments":{"text":"mine"}}`)); res.IsError {
		t.Fatalf("alice's own call: %+v", res)
	}
	// Bob, authenticated, presents alice's session ID.
	thief := &rawSession{t: t, url: srv.URL + "/mcp", id: alice.id, token: bobToken}
	if code, body, _ := thief.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`); code != http.StatusNotFound {
		t.Errorf("bob's POST in alice's session: HTTP %d %s, want 404", code, body)
	}
	if code, body, _ := thief.post(`[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`); code != http.StatusNotFound {
		t.Errorf("bob's batch in alice's session: HTTP %d %s, want 404", code, body)
	}
	hdr := map[string]string{"Mcp-Session-Id": alice.id, "Accept": "text/event-stream"}
	if code, _, _ := get(t, srv.URL+"/mcp", bobToken, hdr); code != http.StatusNotFound {
		t.Errorf("bob's GET stream of alice's session: HTTP %d, want 404", code)
	}
	req, _ := http.NewRequest(http.MethodDelete, srv.URL+"/mcp", nil)
	req.Header.Set("Mcp-Session-Id", alice.id)
	req.Header.Set("Authorization", "Bearer "+bobToken)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("bob's DELETE of alice's session: %v %v, want 404", resp.StatusCode, err)
	} else {
		resp.Body.Close()
	}
	// Alice's session is intact.
	if res := decodeCall(t, alice.call("tools/call", `{"name":"echo","arguments":{"text":"still mine"}}`)); res.IsError || res.Content[0].Text != "still mine" {
		t.Errorf("alice after the attempts: %+v", res)
	}
}

func TestAuthGatewayCallPrincipal(t *testing.T) {
	g := authGateway(t, nil)
	for _, tc := range []struct {
		principal string
		class     string
	}{
		{"", ""},                  // the embedding program itself
		{"bob", ""},               // bob may
		{"alice", "permission"},   // alice may not
		{"mallory", "permission"}, // nobody configured may not
	} {
		ctx := t.Context()
		if tc.principal != "" {
			ctx = WithPrincipal(ctx, tc.principal)
		}
		res, err := g.Call(ctx, "counter", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if errorClass(res) != tc.class {
			t.Errorf("counter as %q = %q (class %q), want class %q", tc.principal, resultText(t, res), errorClass(res), tc.class)
		}
	}
}

func TestAuthRateLimit(t *testing.T) {
	g := authGateway(t, func(c *config.Config) {
		c.Auth.Tokens[1].Rate, c.Auth.Tokens[1].Burst = "1/h", 2
	})
	ctx := WithPrincipal(t.Context(), "bob")
	for i := range 2 {
		if res, _ := g.Call(ctx, "echo", json.RawMessage(`{"text":"x"}`), nil); res.IsError {
			t.Fatalf("call %d within the burst: %q", i, resultText(t, res))
		}
	}
	res, _ := g.Call(ctx, "echo", json.RawMessage(`{"text":"x"}`), nil)
	wait, _ := res.Meta[RetryAfterMetaKey].(int64)
	if errorClass(res) != "rate_limited" || wait < 1000 || !strings.Contains(resultText(t, res), "auth rate") {
		t.Errorf("third call = %q (class %q, retry after %v ms)", resultText(t, res), errorClass(res), res.Meta[RetryAfterMetaKey])
	}
	// Alice has no rate: unaffected.
	if res, _ := g.Call(WithPrincipal(t.Context(), "alice"), "echo", json.RawMessage(`{"text":"x"}`), nil); res.IsError {
		t.Errorf("alice after bob's limit: %q", resultText(t, res))
	}
}

func TestAuthSessionCap(t *testing.T) {
	g := authGateway(t, func(c *config.Config) { c.Auth.MaxSessions = 2 })
	srv := serveHTTP(t, g)
	newRawSessionAs(t, srv.URL+"/mcp", aliceToken)
	newRawSessionAs(t, srv.URL+"/mcp", aliceToken)
	third := &rawSession{t: t, url: srv.URL + "/mcp", token: aliceToken}
	code, body, hdr := third.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if code != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" || !strings.Contains(string(body), "auth.max_sessions") {
		t.Errorf("alice's third session: HTTP %d %s (Retry-After %q)", code, body, hdr.Get("Retry-After"))
	}
	// Bob is not affected by alice's sessions.
	newRawSessionAs(t, srv.URL+"/mcp", bobToken)
}

func TestAuthThreadsPerPrincipal(t *testing.T) {
	g := authGateway(t, func(c *config.Config) {
		c.Auth.Tokens[0].Deny = nil // alice may call counter here
	})
	thread := map[string]any{ThreadMetaKey: "shared-name"}
	count := func(who string) float64 {
		res, err := g.Call(WithPrincipal(t.Context(), who), "counter", nil, thread)
		if err != nil || res.IsError {
			t.Fatalf("counter as %s: %v %v", who, err, res)
		}
		return structuredN(t, res)
	}
	count("alice")
	count("alice")
	if n := count("bob"); n != 1 {
		t.Errorf("bob's first call in his thread %q counted %v: alice's thread of that name reached", "shared-name", n)
	}
}

func TestAuthEvictionFairness(t *testing.T) {
	g := authGateway(t, func(c *config.Config) {
		c.Auth.Tokens[0].Deny = nil
		c.Threads.MaxInstances = 4
	})
	call := func(who, thread string) *Result {
		res, err := g.Call(WithPrincipal(t.Context(), who), "counter", nil, map[string]any{ThreadMetaKey: thread})
		if err != nil || res.IsError {
			t.Fatalf("counter as %s in %s: %v %v", who, thread, err, res)
		}
		return res
	}
	call("bob", "notes")
	// Alice opens far more threads than the pool holds.
	for i := range 20 {
		call("alice", fmt.Sprintf("a%d", i))
	}
	res := call("bob", "notes")
	if n := structuredN(t, res); n != 2 {
		t.Errorf("bob's instance was evicted by alice's threads: his second call counted %v (%q)", n, resultText(t, res))
	}
	// Alice's own oldest were evicted, and her next call there says why.
	res = call("alice", "a0")
	if !strings.Contains(resultText(t, res), "principal's cap") {
		t.Errorf("alice's evicted thread: %q", resultText(t, res))
	}
}

func TestAuthSSESessionBoundToPrincipal(t *testing.T) {
	g := authGateway(t, nil)
	srv := serveHTTP(t, g)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/sse", nil)
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// The first event names the message endpoint with the session ID.
	br := bufio.NewReader(resp.Body)
	var endpoint string
	for endpoint == "" {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the SSE stream: %v", err)
		}
		if d, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok {
			endpoint = d
		}
	}
	post := func(token string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(bobToken); code != http.StatusNotFound {
		t.Errorf("bob posting to alice's SSE session: HTTP %d, want 404", code)
	}
	if code := post(aliceToken); code != http.StatusAccepted {
		t.Errorf("alice posting to her SSE session: HTTP %d, want 202", code)
	}
}

func TestAuthPrincipalLogged(t *testing.T) {
	var buf syncbuf.Buffer
	cfg := testConfig(t)
	cfg.Auth.Tokens = []config.AuthToken{{Name: "bob", Token: bobToken, Allow: []string{"*"}}}
	g, err := New(cfg, WithLogger(slog.New(slog.NewJSONHandler(&buf, nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	if err := g.RegisterStateless(registry.Tool{Name: "noop"}, func(context.Context, map[string]any) (executors.Result, error) {
		return executors.Text("ok"), nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Call(WithPrincipal(t.Context(), "bob"), "noop", nil, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"msg":"tool call"`) || !strings.Contains(buf.String(), `"principal":"bob"`) {
		t.Errorf("the call's log line does not name its principal:\n%s", buf.String())
	}
	if strings.Contains(buf.String(), bobToken) {
		t.Error("the token reached the log")
	}
}

// TestAuthPermitBeforeValidate checks that a principal calling a tool it
// may not use learns only that: its arguments are not checked against the
// tool's schema first, whose violation messages would show the schema
// (issue 31, item 7).
func TestAuthPermitBeforeValidate(t *testing.T) {
	g := authGateway(t, func(c *config.Config) {
		c.Auth.Tokens[0].Deny = []string{"counter", "echo"}
	})
	res, err := g.Call(WithPrincipal(t.Context(), "alice"), "echo", json.RawMessage(`{"text":"this text is far too long for the schema","n":"x"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if text := resultText(t, res); errorClass(res) != "permission" || strings.Contains(text, "/text") || strings.Contains(text, "maxLength") {
		t.Errorf("alice calling echo, denied, with bad arguments: %q (class %q); want only that echo is not permitted", text, errorClass(res))
	}
}

// TestAuthBatchRepairsOnlyVisibleTools checks that toolgate_batch's name
// repair and its unknown-tool message go only over the tools the
// principal may use: a name that repairs to a tool it may not use is
// unknown, with no suggestion of that tool and no count of the tools
// registered (issue 31, item 7).
func TestAuthBatchRepairsOnlyVisibleTools(t *testing.T) {
	g := authGateway(t, nil)
	res, err := g.Call(WithPrincipal(t.Context(), "alice"), BatchToolName,
		json.RawMessage(`{"calls":[{"tool":"COUNTER","arguments":{}},{"tool":"countr","arguments":{}}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	text := resultText(t, res)
	if strings.Contains(text, `"counter"`) || strings.Contains(text, `\"counter\"`) || strings.Contains(text, "available tools") || !strings.Contains(text, "not_found") {
		t.Errorf("alice's batch of COUNTER and countr (counter denied to her) = %s; want both unknown, counter never named, no tool count", text)
	}
	// bob may use counter: the repair is his.
	res, err = g.Call(WithPrincipal(t.Context(), "bob"), BatchToolName, json.RawMessage(`{"calls":[{"tool":"COUNTER","arguments":{}}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if text := resultText(t, res); !strings.Contains(text, `"tool":"counter","status":"ok"`) {
		t.Errorf("bob's batch of COUNTER = %s; want counter run", text)
	}
}
