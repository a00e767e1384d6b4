package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// protocolVersion is the MCP revision the tests negotiate: the newest with
// sessions. 2026-07-28, which mcp-go's client negotiates unless told
// otherwise, is tested in protocol2026_test.go.
const protocolVersion = mcp.ProtocolVersion20251125

// threadMetaKey is the _meta key that names a call's thread.
const threadMetaKey = "toolgate/thread"

// errorClassMetaKey is the result _meta key carrying a failure's class.
const errorClassMetaKey = "toolgate/error_class"

// The transports an mcp-go client reaches toolgate over.
const (
	streamableHTTP = "streamable-http"
	legacySSE      = "sse"
	stdioPipe      = "stdio"
)

// allTransports is every transport, for behaviour that must not depend on
// the transport.
var allTransports = []string{streamableHTTP, legacySSE, stdioPipe}

// connect returns an initialized mcp-go client of srv over transport. Over
// stdio the client starts its own `toolgate stdio` with srv's config. The
// client is closed in t.Cleanup (over streamable HTTP, Close sends DELETE).
func connect(t *testing.T, transport string, srv *server) *client.Client {
	t.Helper()
	var (
		c   *client.Client
		err error
	)
	switch transport {
	case streamableHTTP:
		c, err = client.NewStreamableHttpClient(srv.URL + "/mcp")
	case legacySSE:
		c, err = client.NewSSEMCPClient(srv.URL + "/sse")
	case stdioPipe:
		c, err = client.NewStdioMCPClient(toolgateBin, nil, "stdio", "--config", srv.ConfigPath)
	default:
		t.Fatalf("connect: unknown transport %q", transport)
	}
	if err != nil {
		t.Fatalf("creating the %s client: %v", transport, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	// The SSE stream lives as long as Start's context.
	if err := c.Start(t.Context()); err != nil {
		t.Fatalf("starting the %s client: %v", transport, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = protocolVersion
	req.Params.ClientInfo = mcp.Implementation{Name: "toolgate-e2e", Version: "1"}
	res, err := c.Initialize(ctx, req)
	if err != nil {
		t.Fatalf("initialize over %s: %v", transport, err)
	}
	if res.ProtocolVersion != protocolVersion {
		t.Fatalf("initialize over %s: protocol version %q, want %q", transport, res.ProtocolVersion, protocolVersion)
	}
	if res.ServerInfo.Name != "toolgate" {
		t.Errorf("initialize over %s: server name %q, want toolgate", transport, res.ServerInfo.Name)
	}
	return c
}

// callTool calls name with args; thread, when not empty, names the call's
// thread in _meta.
func callTool(t *testing.T, c *client.Client, name string, args any, thread string) (*mcp.CallToolResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	return c.CallTool(ctx, callRequest(name, args, thread))
}

func callRequest(name string, args any, thread string) mcp.CallToolRequest {
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	if thread != "" {
		req.Params.Meta = &mcp.Meta{AdditionalFields: map[string]any{threadMetaKey: thread}}
	}
	return req
}

// mustCall is callTool for calls that must succeed at the protocol level
// (the result may still be an isError result).
func mustCall(t *testing.T, c *client.Client, name string, args any, thread string) *mcp.CallToolResult {
	t.Helper()
	res, err := callTool(t, c, name, args, thread)
	if err != nil {
		t.Fatalf("tools/call %s %v: %v", name, args, err)
	}
	return res
}

// resultText joins the text contents of res.
func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		switch tc := c.(type) {
		case mcp.TextContent:
			parts = append(parts, tc.Text)
		case *mcp.TextContent:
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// errorClass returns the toolgate/error_class of res's _meta, or "".
func errorClass(res *mcp.CallToolResult) string {
	if res.Meta == nil {
		return ""
	}
	s, _ := res.Meta.AdditionalFields[errorClassMetaKey].(string)
	return s
}

// structured returns res's structuredContent decoded into a generic map.
func structured(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatalf("encoding structuredContent: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("structuredContent %s is not an object: %v", b, err)
	}
	return m
}

// wantOK fails unless res is a success whose text is want.
func wantOK(t *testing.T, res *mcp.CallToolResult, want string) {
	t.Helper()
	if res.IsError {
		t.Fatalf("result is an error: %q", resultText(res))
	}
	if got := resultText(res); got != want {
		t.Fatalf("result text = %q, want %q", got, want)
	}
}

// wantError fails unless res is an isError result of class, whose text
// starts with "<class>: ".
func wantError(t *testing.T, res *mcp.CallToolResult, class string) {
	t.Helper()
	if !res.IsError {
		t.Fatalf("result is not an error; text %q", resultText(res))
	}
	if got := resultText(res); !strings.HasPrefix(got, class+": ") {
		t.Errorf("error text = %q, want it to start with %q", got, class+": ")
	}
	if got := errorClass(res); got != class {
		t.Errorf("_meta[%q] = %q, want %q", errorClassMetaKey, got, class)
	}
}

// rpcResponse is a JSON-RPC response as it arrives on the wire.
type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *rpcError       `json:"error"`
}

type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// toolResult decodes r's result as a tools/call result.
func (r rpcResponse) toolResult(t *testing.T) *mcp.CallToolResult {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("got JSON-RPC error %d %q, want a tools/call result", r.Error.Code, r.Error.Message)
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(r.Result, &res); err != nil {
		t.Fatalf("decoding the tools/call result %s: %v", r.Result, err)
	}
	return &res
}

// httpReply is a raw HTTP answer.
type httpReply struct {
	Status int
	Header http.Header
	Body   []byte
}

// rpc decodes the JSON-RPC response in the reply, which is either an
// application/json body or an SSE stream whose message events carry it.
func (h httpReply) rpc(t *testing.T) rpcResponse {
	t.Helper()
	body := h.Body
	if mt, _, _ := mime.ParseMediaType(h.Header.Get("Content-Type")); mt == "text/event-stream" {
		body = lastSSEResponse(body)
	}
	var r rpcResponse
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("HTTP %d: body is not a JSON-RPC response: %v\n%s", h.Status, err, h.Body)
	}
	if r.JSONRPC != "2.0" {
		t.Fatalf("HTTP %d: jsonrpc = %q, want 2.0; body %s", h.Status, r.JSONRPC, h.Body)
	}
	return r
}

// lastSSEResponse returns the data of the last SSE event that is a JSON-RPC
// response (it has an id and a result or error).
func lastSSEResponse(stream []byte) []byte {
	var last []byte
	for event := range strings.SplitSeq(strings.ReplaceAll(string(stream), "\r\n", "\n"), "\n\n") {
		var data []string
		for line := range strings.SplitSeq(event, "\n") {
			if d, ok := strings.CutPrefix(line, "data:"); ok {
				data = append(data, strings.TrimPrefix(d, " "))
			}
		}
		if len(data) == 0 {
			continue
		}
		payload := []byte(strings.Join(data, "\n"))
		var probe struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal(payload, &probe) == nil && len(probe.ID) > 0 && (probe.Result != nil || probe.Error != nil) {
			last = payload
		}
	}
	return last
}

// rawSession is a streamable HTTP session driven by hand, for exchanges
// mcp-go's client would never send.
type rawSession struct {
	URL string // the MCP endpoint
	ID  string // Mcp-Session-Id
	hc  *http.Client
}

// openRawSession initializes a session at base's /mcp: initialize, then
// notifications/initialized. The session is deleted in t.Cleanup.
func openRawSession(t *testing.T, base string) *rawSession {
	t.Helper()
	s := &rawSession{URL: base + "/mcp", hc: newHTTPClient()}
	init := fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"toolgate-e2e-raw","version":"1"}}}`, protocolVersion)
	h := s.post(t, []byte(init), false)
	if h.Status != http.StatusOK {
		t.Fatalf("initialize: HTTP %d, want 200; body %s", h.Status, h.Body)
	}
	if r := h.rpc(t); r.Error != nil {
		t.Fatalf("initialize: JSON-RPC error %d %q", r.Error.Code, r.Error.Message)
	}
	s.ID = h.Header.Get("Mcp-Session-Id")
	if s.ID == "" {
		t.Fatalf("initialize: no Mcp-Session-Id header in the reply")
	}
	h = s.post(t, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), true)
	if h.Status != http.StatusAccepted {
		t.Fatalf("notifications/initialized: HTTP %d, want 202; body %s", h.Status, h.Body)
	}
	t.Cleanup(func() { s.close(t) })
	return s
}

// post sends body to the MCP endpoint, with the session's ID when
// withSession is set.
func (s *rawSession) post(t *testing.T, body []byte, withSession bool) httpReply {
	t.Helper()
	header := http.Header{}
	if withSession {
		header.Set("Mcp-Session-Id", s.ID)
		header.Set("Mcp-Protocol-Version", protocolVersion)
	}
	return postRaw(t, s.hc, s.URL, body, header)
}

// call sends a tools/call with id and returns the decoded response.
func (s *rawSession) call(t *testing.T, id int, name string, args any) rpcResponse {
	t.Helper()
	body, err := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": id, "method": "tools/call",
		"params": map[string]any{"name": name, "arguments": args},
	})
	if err != nil {
		t.Fatalf("encoding tools/call: %v", err)
	}
	h := s.post(t, body, true)
	if h.Status != http.StatusOK {
		t.Fatalf("tools/call %s: HTTP %d, want 200; body %s", name, h.Status, h.Body)
	}
	return h.rpc(t)
}

func (s *rawSession) close(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), callTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, s.URL, nil)
	if err != nil {
		return
	}
	req.Header.Set("Mcp-Session-Id", s.ID)
	req.Header.Set("Mcp-Protocol-Version", protocolVersion)
	if resp, err := s.hc.Do(req); err == nil {
		resp.Body.Close()
	}
}

// postRaw POSTs body as JSON to url with extra headers.
func postRaw(t *testing.T, hc *http.Client, url string, body []byte, header http.Header) httpReply {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatalf("building POST %s: %v", url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(bufio.NewReader(resp.Body))
	if err != nil {
		t.Fatalf("reading the reply to POST %s: %v", url, err)
	}
	return httpReply{Status: resp.StatusCode, Header: resp.Header, Body: b}
}
