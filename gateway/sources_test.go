package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/config/configtest"
	"github.com/toolgate/toolgate/gateway/internal/reloadplan"
)

// echoUpstream serves an MCP server over streamable HTTP whose one tool,
// echo, answers its text prefixed with name.
func echoUpstream(t *testing.T, name string) string {
	t.Helper()
	s := server.NewMCPServer(name, "1")
	s.AddTool(mcp.NewToolWithRawSchema("echo", "echo", json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(name + ":" + req.GetArguments()["text"].(string)), nil
		})
	h := server.NewStreamableHTTPServer(s, server.WithStateful(true))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { _ = h.Shutdown(context.Background()) })
	return srv.URL
}

// namedBackend answers every request with its name.
func namedBackend(t *testing.T, name string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"from":%q}`, name)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// listeningClient is an initialised client of url over streamable HTTP
// with its GET stream open, so that it is told of list changes; token,
// when not empty, is its bearer token.
func listeningClient(ctx context.Context, t *testing.T, url, token string) *client.Client {
	t.Helper()
	opts := []transport.StreamableHTTPCOption{transport.WithContinuousListening()}
	if token != "" {
		opts = append(opts, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	}
	tr, err := transport.NewStreamableHTTP(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	t.Cleanup(func() { _ = c.Close() })
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

func parseYAML(t *testing.T, lines ...string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("t.yaml", configtest.Lines(lines...), nil)
	if err != nil {
		t.Fatalf("config.Parse = %v", err)
	}
	return cfg
}

func registered(g *Gateway) []string {
	var out []string
	for _, t := range g.Tools() {
		out = append(out, t.Name)
	}
	return out
}

// TestApply: a new configuration's difference is applied while a client
// stays connected: an upstream removed, one kept (same manager, so the
// same process and sessions), a REST tool added and one changed; the
// client is told and sees the new list. An invalid configuration changes
// nothing and says where it is wrong.
func TestApply(t *testing.T) {
	upA, upB := echoUpstream(t, "a"), echoUpstream(t, "b")
	one, two := namedBackend(t, "one"), namedBackend(t, "two")
	base := parseYAML(t,
		"upstreams:",
		"  - {name: a, transport: streamable-http, url: '"+upA+"'}",
		"  - {name: b, transport: streamable-http, url: '"+upB+"'}",
		"rest:",
		"  - {name: weather, url: '"+one+"/w'}",
	)
	g, _ := newGateway(t, func(c *config.Config) { c.Upstreams, c.Rest = base.Upstreams, base.Rest })
	srv := serveHTTP(t, g)
	g.StartUpstreams()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := g.WaitUpstreams(ctx); err != nil {
		t.Fatalf("WaitUpstreams = %v", err)
	}
	c := listeningClient(ctx, t, srv.URL+"/mcp", "")
	changed := make(chan struct{}, 16)
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationToolsListChanged) {
			changed <- struct{}{}
		}
	})
	keptB := g.ups.Get("b")

	next := parseYAML(t,
		"upstreams:",
		"  - {name: b, transport: streamable-http, url: '"+upB+"'}",
		"rest:",
		"  - {name: weather, url: '"+two+"/w'}",
		"  - {name: forecast, url: '"+two+"/f'}",
	)
	applied, err := g.Apply(next)
	if err != nil {
		t.Fatalf("Apply = %v", err)
	}
	want := &Applied{Added: []string{"rest:forecast"}, Changed: []string{"rest:weather"}, Removed: []string{"upstream:a"}}
	if d := cmp.Diff(want, applied); d != "" {
		t.Errorf("Apply (-want +got):\n%s", d)
	}
	if g.ups.Get("b") != keptB {
		t.Error("the unchanged upstream b was restarted; it should keep its manager")
	}
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatal("no notifications/tools/list_changed after Apply")
	}
	listed, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range listed.Tools {
		names = append(names, tl.Name)
	}
	for _, n := range []string{"forecast", "weather", "b__echo"} {
		if !slices.Contains(names, n) {
			t.Errorf("tools/list after Apply = %v, want %s among them", names, n)
		}
	}
	if slices.Contains(names, "a__echo") {
		t.Errorf("tools/list after Apply = %v, still has the removed upstream's a__echo", names)
	}
	res, err := g.Call(ctx, "weather", nil, nil)
	if err != nil || !strings.Contains(resultText(t, res), "two") {
		t.Errorf("weather after Apply = %v, %v; want the changed URL's answer (two)", res, err)
	}
	res, err = g.Call(ctx, "b__echo", json.RawMessage(`{"text":"hi"}`), nil)
	if err != nil || resultText(t, res) != "b:hi" {
		t.Errorf("b__echo after Apply = %v, %v", res, err)
	}

	// Nothing changed: nothing to apply.
	if applied, err := g.Apply(next); err != nil || len(applied.Added)+len(applied.Changed)+len(applied.Removed) != 0 {
		t.Errorf("Apply(same) = %+v, %v; want no change", applied, err)
	}

	// Invalid: every problem at its position; nothing changes.
	bad := parseYAML(t,
		"rest:",
		"  - {name: weather, url: '"+two+"/w'}",
		"  - {name: broken, url: 'ftp://h/x'}",
	)
	before := registered(g)
	if _, err := g.Apply(bad); err == nil || !strings.Contains(err.Error(), "t.yaml:3:") {
		t.Errorf("Apply(invalid) = %v, want an error at t.yaml:3", err)
	}
	if d := cmp.Diff(before, registered(g)); d != "" {
		t.Errorf("tools after an invalid Apply changed (-before +after):\n%s", d)
	}
	if g.ups.Get("b") != keptB {
		t.Error("an invalid Apply touched upstream b")
	}

	// A setting that needs a restart is reported, not applied.
	moved := parseYAML(t,
		"server: {listen: '127.0.0.1:9999'}",
		"upstreams:",
		"  - {name: b, transport: streamable-http, url: '"+upB+"'}",
		"rest:",
		"  - {name: weather, url: '"+two+"/w'}",
		"  - {name: forecast, url: '"+two+"/f'}",
	)
	if applied, err := g.Apply(moved); err != nil || !slices.Contains(applied.Restart, "server.listen") {
		t.Errorf("Apply(listen changed) = %+v, %v; want server.listen in Restart", applied, err)
	}

	// Hooks: the next call goes through the new ones.
	hooked := parseYAML(t,
		"upstreams:",
		"  - {name: b, transport: streamable-http, url: '"+upB+"'}",
		"rest:",
		"  - {name: weather, url: '"+two+"/w'}",
		"  - {name: forecast, url: '"+two+"/f'}",
		"hooks:",
		"  - {type: redact, patterns: ['s3cret'], tools: [echo]}",
	)
	if applied, err := g.Apply(hooked); err != nil || !slices.Equal(applied.Changed, []string{"hooks"}) {
		t.Errorf("Apply(hooks added) = %+v, %v; want hooks changed", applied, err)
	}
	res, err = g.Call(ctx, "echo", json.RawMessage(`{"text":"a s3cret"}`), nil)
	if err != nil || resultText(t, res) != "a [redacted]" {
		t.Errorf("echo after the hooks were reloaded = %v, %v; want it redacted", res, err)
	}
}

// TestSourcesFromGo: the embedding API adds and removes REST tools and
// upstreams while serving; clients are told.
func TestSourcesFromGo(t *testing.T) {
	g, _ := newGateway(t, nil)
	srv := serveHTTP(t, g)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	c := listeningClient(ctx, t, srv.URL+"/mcp", "")
	changed := make(chan struct{}, 16)
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationToolsListChanged) {
			changed <- struct{}{}
		}
	})
	wait := func(what string) {
		t.Helper()
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("no notifications/tools/list_changed after %s", what)
		}
	}
	if err := g.AddREST(config.RESTTool{Name: "ping", URL: namedBackend(t, "pong") + "/p", Method: http.MethodGet}); err != nil {
		t.Fatalf("AddREST = %v", err)
	}
	wait("AddREST")
	if res, err := g.Call(ctx, "ping", nil, nil); err != nil || !strings.Contains(resultText(t, res), "pong") {
		t.Errorf("ping = %v, %v", res, err)
	}
	if err := g.AddREST(config.RESTTool{Name: "bad", URL: "ftp://h/x"}); err == nil || !strings.Contains(err.Error(), "url") {
		t.Errorf("AddREST(ftp URL) = %v, want an error naming url", err)
	}
	g.StartUpstreams()
	if err := g.AddUpstream(config.Upstream{Name: "up", Transport: "streamable-http", URL: echoUpstream(t, "up"),
		Isolation: "shared", Timeout: config.Duration(10 * time.Second), StartupTimeout: config.Duration(10 * time.Second)}); err != nil {
		t.Fatalf("AddUpstream = %v", err)
	}
	if err := g.WaitUpstreams(ctx); err != nil {
		t.Fatalf("WaitUpstreams = %v", err)
	}
	if res, err := g.Call(ctx, "up__echo", json.RawMessage(`{"text":"x"}`), nil); err != nil || resultText(t, res) != "up:x" {
		t.Errorf("up__echo = %v, %v", res, err)
	}
	if !g.RemoveUpstream("up") || g.RemoveUpstream("up") {
		t.Error("RemoveUpstream: want true once, then false")
	}
	if !g.RemoveREST("ping") {
		t.Error("RemoveREST(ping) = false")
	}
	for _, n := range registered(g) {
		if n == "ping" || strings.HasPrefix(n, "up__") {
			t.Errorf("tool %s still registered after its source was removed", n)
		}
	}
	if _, ok := g.upstreamStatus()["up"]; ok {
		t.Error("/readyz still reports the removed upstream")
	}
}

// TestRecordReload: reloads are counted by result and a failed one makes
// /readyz say degraded.
func TestRecordReload(t *testing.T) {
	g, _ := newGateway(t, nil)
	g.RecordReload(&Applied{}, nil)
	g.RecordReload(nil, fmt.Errorf("t.yaml:1:1: x"))
	rec := httptest.NewRecorder()
	g.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, want := range []string{`toolgate_config_reloads_total{result="ok"} 1`, `toolgate_config_reloads_total{result="error"} 1`} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	rec = httptest.NewRecorder()
	g.serveReady(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	var body struct {
		Status string            `json:"status"`
		Reload reloadplan.Status `json:"reload"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if body.Status != "degraded" || body.Reload.Result != "error" || body.Reload.Problems != 1 {
		t.Errorf("/readyz after a failed reload = %s, want degraded with the reload's error", rec.Body)
	}
}

// TestApplyTokens: a reload that removes a token refuses its next request
// at once, and one that narrows a principal's permissions hides the tools
// it lost from its open session's next tools/list and refuses their
// calls; the session is told (list_changed).
func TestApplyTokens(t *testing.T) {
	g := authGateway(t, nil)
	srv := serveHTTP(t, g)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	alice := newRawSessionAs(t, srv.URL+"/mcp", aliceToken)
	bob := newRawSessionAs(t, srv.URL+"/mcp", bobToken)
	if names := toolNames(t, bob.call("tools/list", `{}`)); !slices.Contains(names, "counter") {
		t.Fatalf("bob's tools before the reload = %v, want counter among them", names)
	}
	c := listeningClient(ctx, t, srv.URL+"/mcp", bobToken)
	changed := make(chan struct{}, 16)
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationToolsListChanged) {
			changed <- struct{}{}
		}
	})

	next := *g.cfg
	next.Auth.Tokens = []config.AuthToken{
		{Name: "bob", Token: bobToken, Allow: []string{"echo"}},
		{Name: "ops", Token: opsToken, Allow: []string{"*"}},
	}
	applied, err := g.Apply(&next)
	if err != nil {
		t.Fatalf("Apply = %v", err)
	}
	if d := cmp.Diff(&Applied{Changed: []string{"auth"}}, applied); d != "" {
		t.Errorf("Apply (-want +got):\n%s", d)
	}
	if status, body, _ := alice.post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); status != http.StatusUnauthorized {
		t.Errorf("alice's request after her token was removed: HTTP %d %s, want 401", status, body)
	}
	if names := toolNames(t, bob.call("tools/list", `{}`)); slices.Contains(names, "counter") || !slices.Contains(names, "echo") {
		t.Errorf("bob's tools after the reload = %v, want echo and not counter", names)
	}
	if res := decodeCall(t, bob.call("tools/call", `{"name":"counter"}`)); !res.IsError || !strings.HasPrefix(res.Content[0].Text, "permission: ") {
		t.Errorf("bob's call of counter after the reload = %+v, want a permission error", res)
	}
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatal("no notifications/tools/list_changed after the tokens changed")
	}
}
