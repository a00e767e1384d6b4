package mcpfront

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/registry"
)

// modernMeta is the _meta of a 2026-07-28 request.
const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`

// modernClient returns mcp-go's client, as it comes, of srv: it
// negotiates 2026-07-28 through server/discover.
func modernClient(t *testing.T, srv *httptest.Server) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(srv.URL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(t.Context(), mcp.InitializeRequest{}); err != nil {
		t.Fatalf("negotiating: %v", err)
	}
	if v := c.ProtocolVersion(); v != mcp.ProtocolVersion20260728 {
		t.Fatalf("negotiated %q, want %s", v, mcp.ProtocolVersion20260728)
	}
	return c
}

// postModern POSTs body as a 2026-07-28 request with the standard headers
// (hdr overrides or adds some; "" removes one).
func postModern(t *testing.T, url, body string, hdr map[string]string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(mcp.HeaderProtocolVersion, mcp.ProtocolVersion20260728)
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// TestModern2026 pins doc.go fact 17: mcp-go serves a 2026-07-28 client
// without a session — toolgate counts and registers none — and with it
// server/discover, cache hints and subscriptions/listen; calls, preflight
// and name repair work for it.
func TestModern2026(t *testing.T) {
	g, _ := newGateway(t, func(c *config.Config) { c.Guards.NameRepair = true })
	srv := serveHTTP(t, g)
	c := modernClient(t, srv)
	ctx := t.Context()

	res, err := c.CallTool(ctx, callReq("echo", map[string]any{"text": "hi"}))
	if err != nil || res.IsError || resultText(res) != "hi" {
		t.Fatalf("echo = %v, %v", res, err)
	}
	if res, err := c.CallTool(ctx, callReq("ECHO", map[string]any{"text": "repaired"})); err != nil || resultText(res) != "repaired" {
		t.Errorf("a repaired name = %v, %v; want the echo (Mcp-Name rewritten with the body)", res, err)
	}
	if _, err := c.CallTool(ctx, callReq("nope", nil)); err == nil {
		t.Error("an unknown tool was called")
	}
	if n := clientCount(g); n != 0 {
		t.Errorf("%d sessions registered for a 2026-07-28 client, want 0", n)
	}
	if n := g.limits.Live(); n != 0 {
		t.Errorf("%d sessions counted against max_sessions, want 0", n)
	}

	// tools/list carries the revision's cache hints; unknown tools get
	// preflight's suggestions, with 400.
	status, _, body := postModern(t, srv.URL+"/mcp", `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{`+modernMeta+`}}`,
		map[string]string{mcp.HeaderMethod: "tools/list"})
	if status != http.StatusOK || !strings.Contains(string(body), `"ttlMs"`) || !strings.Contains(string(body), `"cacheScope"`) {
		t.Errorf("tools/list: %d %s; want cache hints", status, body)
	}
	status, _, body = postModern(t, srv.URL+"/mcp", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"ehco",`+modernMeta+`}}`,
		map[string]string{mcp.HeaderMethod: "tools/call", mcp.HeaderName: "ehco"})
	if status != http.StatusBadRequest || !strings.Contains(string(body), `"suggestions":["echo"]`) {
		t.Errorf("unknown tool: %d %s; want 400 with suggestions", status, body)
	}

	// subscriptions/listen: acknowledged, then the list change.
	notes := make(chan string, 16)
	c.OnNotification(func(n mcp.JSONRPCNotification) { notes <- n.Method })
	stop, err := c.ListenAsync(ctx, mcp.SubscriptionFilter{ToolsListChanged: true}, func(err error) { t.Errorf("listen: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	waitMethod(t, notes, mcp.MethodNotificationSubscriptionsAcknowledged)
	if err := g.RegisterStateless(registry.Tool{Name: "added", Description: "added later"},
		func(context.Context, map[string]any) (executors.Result, error) { return executors.Text("x"), nil }); err != nil {
		t.Fatal(err)
	}
	waitMethod(t, notes, mcp.MethodNotificationToolsListChanged)
}

func waitMethod(t *testing.T, notes <-chan string, method string) {
	t.Helper()
	for {
		select {
		case m := <-notes:
			if m == method {
				return
			}
		case <-t.Context().Done():
			t.Fatalf("no %s", method)
		}
	}
}

func callReq(name string, args any) mcp.CallToolRequest {
	var req mcp.CallToolRequest
	req.Params.Name = name
	req.Params.Arguments = args
	return req
}

func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := mcp.AsTextContent(c); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// TestModernVersionsAndHeaders: unknown and malformed versions get
// -32022 with the served list as JSON-RPC; a 2026-07-28 GET gets 405 in JSON-RPC; Mcp-Method
// and Mcp-Name must agree with the body.
func TestModernVersionsAndHeaders(t *testing.T) {
	g, _ := newGateway(t, nil)
	srv := serveHTTP(t, g)
	url := srv.URL + "/mcp"
	type rpcErr struct {
		ID    json.RawMessage `json:"id"`
		Error struct {
			Code int `json:"code"`
			Data struct {
				Supported []string `json:"supported"`
			} `json:"data"`
		} `json:"error"`
	}
	decode := func(t *testing.T, b []byte) rpcErr {
		t.Helper()
		var e rpcErr
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatalf("body %q is not JSON-RPC: %v", b, err)
		}
		return e
	}
	for _, tc := range []struct {
		name, version string
	}{{"future", "2099-01-01"}, {"malformed", "garbage"}, {"unknown legacy", "2025-01-01"}, {"empty date", "0000-00-00"}} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := postModern(t, url, `{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{}}`,
				map[string]string{mcp.HeaderProtocolVersion: tc.version})
			e := decode(t, body)
			if status != http.StatusBadRequest || e.Error.Code != mcp.UNSUPPORTED_PROTOCOL_VERSION || string(e.ID) != "9" ||
				!slices.Equal(e.Error.Data.Supported, mcp.ValidProtocolVersions) {
				t.Errorf("POST: %d %s; want 400, -32022 for id 9 listing %v", status, body, mcp.ValidProtocolVersions)
			}
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
			req.Header.Set(mcp.HeaderProtocolVersion, tc.version)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if e := decode(t, b); resp.StatusCode != http.StatusBadRequest || e.Error.Code != mcp.UNSUPPORTED_PROTOCOL_VERSION {
				t.Errorf("GET: %d %s; want 400, -32022", resp.StatusCode, b)
			}
		})
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	req.Header.Set(mcp.HeaderProtocolVersion, mcp.ProtocolVersion20260728)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != http.MethodPost || decode(t, b).Error.Code != mcp.INVALID_REQUEST {
		t.Errorf("2026-07-28 GET: %d %s; want 405, Allow: POST, a JSON-RPC error", resp.StatusCode, b)
	}

	call := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},` + modernMeta + `}}`
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		code int
	}{
		{"headers agree", map[string]string{mcp.HeaderMethod: "tools/call", mcp.HeaderName: "echo"}, 0},
		{"Mcp-Name missing", map[string]string{mcp.HeaderMethod: "tools/call"}, mcp.HEADER_MISMATCH},
		{"Mcp-Name differs", map[string]string{mcp.HeaderMethod: "tools/call", mcp.HeaderName: "counter"}, mcp.HEADER_MISMATCH},
		{"Mcp-Method differs", map[string]string{mcp.HeaderMethod: "tools/list", mcp.HeaderName: "echo"}, mcp.HEADER_MISMATCH},
		{"header version differs from _meta", map[string]string{mcp.HeaderMethod: "tools/call", mcp.HeaderName: "echo",
			mcp.HeaderProtocolVersion: mcp.ProtocolVersion20251125}, mcp.HEADER_MISMATCH},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := postModern(t, url, call, tc.hdr)
			if tc.code == 0 {
				if status != http.StatusOK || !strings.Contains(string(body), `"text":"x"`) {
					t.Errorf("%d %s; want the echo", status, body)
				}
				return
			}
			if e := decode(t, body); status != http.StatusBadRequest || e.Error.Code != tc.code {
				t.Errorf("%d %s; want 400 with %d", status, body, tc.code)
			}
		})
	}
}

// TestModernCallAnswers: what a 2026-07-28 tools/call is answered, on the
// front's own call path: the result with its resultType and the server's
// identity, a tool's failure as an isError result, a panicking tool and a
// malformed message as JSON-RPC errors with the revision's HTTP status.
func TestModernCallAnswers(t *testing.T) {
	g, _ := newGateway(t, nil)
	g.addTool(t, "boom", func(context.Context, *Request) *executors.Result { panic("boom") })
	srv := serveHTTP(t, g)
	call := func(head, name, args string) string {
		return `{` + head + `"method":"tools/call","params":{"name":"` + name + `",` + args + modernMeta + `}}`
	}
	const v2 = `"jsonrpc":"2.0","id":"a-1",`
	for _, tc := range []struct {
		name, body string
		status     int
		want       []string
	}{
		{"result", call(v2, "echo", `"arguments":{"text":"same"},`), http.StatusOK,
			[]string{`"id":"a-1"`, `"text":"same"`, `"resultType":"complete"`, `"io.modelcontextprotocol/serverInfo":{"name":"toolgate","version":"test"}`}},
		{"invalid arguments", call(v2, "echo", `"arguments":{"text":12},`), http.StatusOK, []string{`"isError":true`, `"resultType":"complete"`}},
		{"null arguments", call(v2, "echo", `"arguments":null,`), http.StatusOK, []string{`"isError":true`, `text`}},
		{"numeric id", call(`"jsonrpc":"2.0","id":7,`, "echo", `"arguments":{"text":"id"},`), http.StatusOK, []string{`"id":7`, `"text":"id"`}},
		{"panic", call(v2, "boom", `"arguments":{},`), http.StatusOK, []string{`"code":-32603`, `"id":"a-1"`}},
		{"jsonrpc 1.0", call(`"jsonrpc":"1.0","id":1,`, "echo", `"arguments":{"text":"v"},`), http.StatusBadRequest, []string{`"code":-32600`}},
		{"object id", call(`"jsonrpc":"2.0","id":{"a":1},`, "echo", `"arguments":{"text":"v"},`), http.StatusBadRequest, []string{`"code":-32600`, `"id":null`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var name struct {
				Params struct{ Name string } `json:"params"`
			}
			_ = json.Unmarshal([]byte(tc.body), &name)
			status, h, body := postModern(t, srv.URL+"/mcp", tc.body, map[string]string{mcp.HeaderMethod: "tools/call", mcp.HeaderName: name.Params.Name})
			if status != tc.status || h.Get("Content-Type") != "application/json" || h.Get(mcp.HeaderSessionID) != "" {
				t.Errorf("%d %q session %q; want %d, JSON, no session", status, h.Get("Content-Type"), h.Get(mcp.HeaderSessionID), tc.status)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(body), w) {
					t.Errorf("%s; want %s in it", body, w)
				}
			}
		})
	}
}

// TestModernHeaderParams: a 2026-07-28 call of a tool whose schema has an
// x-mcp-header parameter is refused when the header and the argument
// differ (HEADER_MISMATCH), and served when they agree; a tool without one takes
// no header.
func TestModernHeaderParams(t *testing.T) {
	g, _ := newGateway(t, nil)
	err := g.RegisterStateless(registry.Tool{Name: "regional", InputSchema: json.RawMessage(
		`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}},"required":["region"]}`)},
		func(_ context.Context, args map[string]any) (executors.Result, error) {
			return executors.Text("in " + args["region"].(string)), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	url := serveHTTP(t, g).URL + "/mcp"
	call := func(name, args, region string) string {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + name + `","arguments":` + args + `,` + mrtrMeta(`{}`) + `}}`
		hdr := map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": name}
		if region != "" {
			hdr["Mcp-Param-Region"] = region
		}
		_, _, b := postModern(t, url, body, hdr)
		return string(b)
	}
	if got := call("regional", `{"region":"eu"}`, "us"); !strings.Contains(got, fmt.Sprintf(`"code":%d`, mcp.HEADER_MISMATCH)) {
		t.Errorf("header us, argument eu: %s; want error %d", got, mcp.HEADER_MISMATCH)
	}
	if got := call("regional", `{"region":"eu"}`, "eu"); !strings.Contains(got, `in eu`) {
		t.Errorf("header and argument eu: %s; want the call served", got)
	}
	if got := call("echo", `{"text":"hi"}`, ""); !strings.Contains(got, `"text":"hi"`) {
		t.Errorf("echo without header params: %s; want it served", got)
	}
}
