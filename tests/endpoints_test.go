package tests

// Virtual servers (config endpoints, issue 30 item 2): several MCP
// endpoints on one toolgate, each a bundle of the tools with its own
// instructions, over streamable HTTP, SSE and stdio, under the principal's
// own permissions.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

const endpointsYAML = `builtin: [calc, clock_now, scratchpad, sleep]
batch_tool: true
server:
  sse: true
endpoints:
  - name: math
    tools: [calc]
    instructions: Arithmetic only.
  - name: clock
    tools: ["clock_*", toolgate_batch]
`

// endpointClient is an initialized client of url (streamable HTTP, or SSE
// when sse), sending headers; it returns the initialize result too.
func endpointClient(t *testing.T, url string, sse bool, headers map[string]string) (*client.Client, *mcp.InitializeResult, error) {
	t.Helper()
	var tr transport.Interface
	var err error
	if sse {
		tr, err = transport.NewSSE(url, transport.WithHeaders(headers))
	} else {
		tr, err = transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(headers))
	}
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(t.Context()); err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = protocolVersion
	req.Params.ClientInfo = mcp.Implementation{Name: "toolgate-e2e", Version: "1"}
	res, err := c.Initialize(ctx, req)
	return c, res, err
}

// toolNames lists c's tools by name.
func toolNames(t *testing.T, c *client.Client) []string {
	t.Helper()
	res, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

func TestEndpoints(t *testing.T) {
	srv := startServe(t, endpointsYAML)
	if !strings.Contains(srv.Stderr(), srv.URL+"/mcp/math") {
		t.Errorf("the listening line does not name the endpoints' URLs:\n%s", srv.Stderr())
	}

	for _, sse := range []bool{false, true} {
		base, name := srv.URL+"/mcp/", "streamable HTTP"
		if sse {
			base, name = srv.URL+"/sse/", "SSE"
		}
		t.Run(name, func(t *testing.T) {
			math, init, err := endpointClient(t, base+"math", sse, nil)
			if err != nil {
				t.Fatalf("initialize at %smath: %v", base, err)
			}
			if init.Instructions != "Arithmetic only." {
				t.Errorf("math's instructions = %q, want its own", init.Instructions)
			}
			if got := toolNames(t, math); !slices.Equal(got, []string{"calc"}) {
				t.Errorf("math's tools = %v, want [calc]", got)
			}
			wantOK(t, mustCall(t, math, "calc", map[string]any{"expression": "6*7"}, ""), "42")
			// A tool of another endpoint is unknown here, by its name and
			// by a repair.
			for _, tool := range []string{"clock_now", "Clock-Now"} {
				if _, err := callTool(t, math, tool, map[string]any{}, ""); err == nil || !strings.Contains(err.Error(), "unknown tool") {
					t.Errorf("math's call of %s: %v, want unknown tool", tool, err)
				}
			}

			clock, init, err := endpointClient(t, base+"clock", sse, nil)
			if err != nil {
				t.Fatalf("initialize at %sclock: %v", base, err)
			}
			if init.Instructions == "Arithmetic only." {
				t.Error("clock has math's instructions")
			}
			if got := toolNames(t, clock); !slices.Equal(got, []string{"clock_now", "toolgate_batch"}) {
				t.Errorf("clock's tools = %v, want [clock_now toolgate_batch]", got)
			}
			// toolgate_batch runs only the endpoint's tools.
			res := mustCall(t, clock, "toolgate_batch", map[string]any{"calls": []any{
				map[string]any{"tool": "clock_now", "arguments": map[string]any{}},
				map[string]any{"tool": "calc", "arguments": map[string]any{"expression": "1+1"}},
			}}, "")
			if text := resultText(res); !strings.Contains(text, `"failed":1`) && !strings.Contains(text, `"failed": 1`) {
				t.Errorf("clock's toolgate_batch with calc: %s; want calc to fail", text)
			}
		})
	}

	// The default endpoint serves every tool, as without endpoints.
	all := connect(t, streamableHTTP, srv)
	if got := toolNames(t, all); !slices.Equal(got, []string{"calc", "clock_now", "scratchpad", "sleep", "toolgate_batch"}) {
		t.Errorf("the default endpoint's tools = %v, want every tool", got)
	}
	if _, _, err := endpointClient(t, srv.URL+"/mcp/none", false, nil); err == nil {
		t.Error("initialize at /mcp/none succeeded")
	}
	text := scrape(t, srv.URL)
	if v := metricOrZero(text, "toolgate_endpoint_calls_total", map[string]string{"endpoint": "math", "outcome": "ok"}); v != 2 {
		t.Errorf("toolgate_endpoint_calls_total{endpoint=math,outcome=ok} = %v, want 2 (one call over each transport)", v)
	}
	if !strings.Contains(srv.Stderr(), `"endpoint":"math"`) {
		t.Error("no call log line names the endpoint math")
	}
}

// TestEndpointsStdio: `toolgate stdio --endpoint NAME` serves that
// endpoint; an unknown name is a usage error naming the file.
func TestEndpointsStdio(t *testing.T) {
	path := writeConfig(t, endpointsYAML)
	c, err := client.NewStdioMCPClient(toolgateBin, nil, "stdio", "--config", path, "--endpoint", "math")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = protocolVersion
	req.Params.ClientInfo = mcp.Implementation{Name: "toolgate-e2e", Version: "1"}
	init, err := c.Initialize(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if init.Instructions != "Arithmetic only." {
		t.Errorf("instructions over stdio = %q, want math's", init.Instructions)
	}
	if got := toolNames(t, c); !slices.Equal(got, []string{"calc"}) {
		t.Errorf("tools over stdio --endpoint math = %v, want [calc]", got)
	}

	r := runCLI(t, "stdio", "--config", path, "--endpoint", "nope")
	if r.code != 2 || !strings.Contains(r.stderr, `--endpoint "nope"`) || !strings.Contains(r.stderr, path) {
		t.Errorf("stdio --endpoint nope: %s\nwant exit 2 naming the endpoint and the file", r)
	}
}

// TestEndpointsAuth: an endpoint's principals rule, and the principal's own
// permissions inside an endpoint.
func TestEndpointsAuth(t *testing.T) {
	srv := startServe(t, `builtin: [calc, clock_now]
auth:
  max_sessions: 1
  tokens:
    - name: alice
      token: `+aliceToken+`
    - name: bob
      token: `+bobToken+`
      deny: [calc]
endpoints:
  - name: ops
    tools: ["*"]
    principals: [bob]
  - name: all
    tools: ["*"]
`)
	bearer := func(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }
	if _, _, err := endpointClient(t, srv.URL+"/mcp/ops", false, bearer(aliceToken)); err == nil {
		t.Error("alice initialized at ops, which is bob's only")
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/mcp/ops", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := newHTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var refusal struct {
		JSONRPC string `json:"jsonrpc"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	// A JSON-RPC error, as every other refusal of an MCP endpoint, that
	// names what to do.
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Content-Type") != "application/json" ||
		json.Unmarshal(body, &refusal) != nil || refusal.JSONRPC != "2.0" || refusal.Error.Code == 0 ||
		!strings.Contains(refusal.Error.Message, "endpoint's principals") {
		t.Errorf("alice's POST to ops: %d %s %s; want 403 with a JSON-RPC error naming the endpoint's principals", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	bob, _, err := endpointClient(t, srv.URL+"/mcp/ops", false, bearer(bobToken))
	if err != nil {
		t.Fatalf("bob at ops: %v", err)
	}
	if got := toolNames(t, bob); !slices.Equal(got, []string{"clock_now"}) {
		t.Errorf("bob's tools at ops = %v, want [clock_now]: his deny of calc applies inside an endpoint", got)
	}
	// auth.max_sessions counts a principal's sessions at every endpoint.
	if _, _, err := endpointClient(t, srv.URL+"/mcp", false, bearer(bobToken)); err == nil || !strings.Contains(err.Error(), "max_sessions") {
		t.Errorf("bob's second session, at the default endpoint: %v; want refused naming auth.max_sessions", err)
	}
	alice, _, err := endpointClient(t, srv.URL+"/mcp/all", false, bearer(aliceToken))
	if err != nil {
		t.Fatalf("alice at all: %v", err)
	}
	if got := toolNames(t, alice); !slices.Equal(got, []string{"calc", "clock_now"}) {
		t.Errorf("alice's tools at all = %v", got)
	}
	if _, _, err := endpointClient(t, srv.URL+"/mcp/all", false, nil); err == nil {
		t.Error("a client without a token initialized at all")
	}
}

// TestEndpointsSearch: an endpoint with catalog: search lists the search
// meta-tools (and catalog.always's tools it serves) in place of its
// tools; they search, describe and call only its tools; no other
// endpoint lists them or answers them.
func TestEndpointsSearch(t *testing.T) {
	srv := startServe(t, `builtin: [calc, clock_now, scratchpad, sleep]
batch_tool: true
catalog:
  always: [toolgate_batch, "clock_*"]
endpoints:
  - name: math
    tools: [calc, scratchpad, toolgate_batch]
    catalog: search
  - name: clock
    tools: ["clock_*"]
`)
	math, _, err := endpointClient(t, srv.URL+"/mcp/math", false, nil)
	if err != nil {
		t.Fatalf("initialize at /mcp/math: %v", err)
	}
	// clock_now matches always, but is not math's.
	if got, want := toolNames(t, math), []string{"toolgate_batch", "toolgate_call", "toolgate_describe", "toolgate_search"}; !slices.Equal(got, want) {
		t.Errorf("math's tools = %v, want %v", got, want)
	}
	search := func(query string) []string {
		t.Helper()
		res := mustCall(t, math, "toolgate_search", map[string]any{"query": query, "limit": 50}, "")
		var out struct{ Tools []struct{ Name string } }
		if res.IsError || json.Unmarshal([]byte(resultText(res)), &out) != nil {
			t.Fatalf("toolgate_search %q = %s", query, resultText(res))
		}
		var names []string
		for _, h := range out.Tools {
			names = append(names, h.Name)
		}
		slices.Sort(names)
		return names
	}
	if got := search("calc"); !slices.Equal(got, []string{"calc"}) {
		t.Errorf("math's search for calc = %v, want [calc]", got)
	}
	for _, query := range []string{"clock time now", "sleep seconds"} {
		if got := search(query); slices.ContainsFunc(got, func(n string) bool { return n != "calc" && n != "scratchpad" }) {
			t.Errorf("math's search for %q = %v, want only math's tools", query, got)
		}
	}
	wantOK(t, mustCall(t, math, "toolgate_call", map[string]any{"name": "calc", "arguments": map[string]any{"expression": "6*7"}}, ""), "42")
	wantError(t, mustCall(t, math, "toolgate_call", map[string]any{"name": "clock_now"}, ""), "permission")
	wantError(t, mustCall(t, math, "toolgate_describe", map[string]any{"name": "sleep"}, ""), "not_found")
	if _, err := callTool(t, math, "calc", map[string]any{"expression": "1"}, ""); err == nil || !strings.Contains(err.Error(), "toolgate_call") {
		t.Errorf("math's call of calc by name: %v, want it pointed at toolgate_call", err)
	}

	// The other endpoints list each tool, and know no meta-tool.
	clock, _, err := endpointClient(t, srv.URL+"/mcp/clock", false, nil)
	if err != nil {
		t.Fatalf("initialize at /mcp/clock: %v", err)
	}
	if got := toolNames(t, clock); !slices.Equal(got, []string{"clock_now"}) {
		t.Errorf("clock's tools = %v, want [clock_now]", got)
	}
	all := connect(t, streamableHTTP, srv)
	if got := toolNames(t, all); !slices.Equal(got, []string{"calc", "clock_now", "scratchpad", "sleep", "toolgate_batch"}) {
		t.Errorf("the default endpoint's tools = %v, want every tool and no meta-tool", got)
	}
	for name, c := range map[string]*client.Client{"clock": clock, "the default endpoint": all} {
		if _, err := callTool(t, c, "toolgate_search", map[string]any{"query": "calc"}, ""); err == nil || !strings.Contains(err.Error(), "unknown tool") {
			t.Errorf("%s's call of toolgate_search: %v, want unknown tool", name, err)
		}
	}
}
