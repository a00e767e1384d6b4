package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// Protocol revision 2026-07-28 end to end (docs/protocol-2026.md): the
// real binary, and mcp-go's client as it comes, which negotiates
// 2026-07-28 through server/discover.

// connect2026 returns an mcp-go client of srv, built with opts, that
// negotiated 2026-07-28, sending header h with every request (nil for
// none).
func connect2026(t *testing.T, srv *server, h map[string]string, opts ...client.ClientOption) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(srv.URL+"/mcp", transport.WithHTTPHeaders(h))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, opts...)
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatalf("starting the client: %v", err)
	}
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "toolgate-e2e-2026", Version: "1"}
	res, err := c.Initialize(ctx, req)
	if err != nil {
		t.Fatalf("negotiating: %v", err)
	}
	if res.ProtocolVersion != mcp.ProtocolVersion20260728 || c.ProtocolVersion() != mcp.ProtocolVersion20260728 {
		t.Fatalf("negotiated %q (client %q), want %s", res.ProtocolVersion, c.ProtocolVersion(), mcp.ProtocolVersion20260728)
	}
	if c.GetSessionId() != "" {
		t.Errorf("a 2026-07-28 client got session %q", c.GetSessionId())
	}
	return c
}

// handleOf returns the thread handle a result hands back, or "".
func handleOf(res *mcp.CallToolResult) string {
	if res.Meta == nil {
		return ""
	}
	h, _ := res.Meta.AdditionalFields["toolgate/thread_handle"].(string)
	return h
}

// TestProtocol2026Scratchpad: a 2026-07-28 client has no session, and
// keeps a scratchpad across calls with the handle its first result gave
// it; without the handle each call has a fresh thread; a 2025 client's
// session thread is unaffected.
func TestProtocol2026Scratchpad(t *testing.T) {
	srv := startServe(t, baseConfig)
	c := connect2026(t, srv, nil)
	put := func(key, value string) map[string]any {
		return map[string]any{"op": "put", "key": key, "value": value}
	}
	get := func(key string) map[string]any { return map[string]any{"op": "get", "key": key} }
	with := func(args map[string]any, handle string) map[string]any { args["thread"] = handle; return args }

	// tools/list shows the handle argument, with the 2026-07-28 cache hints.
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	list, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(list.Tools, func(tl mcp.Tool) bool { return tl.Name == "scratchpad" })
	if i < 0 {
		t.Fatal("tools/list has no scratchpad")
	}
	if !bytes.Contains(list.Tools[i].RawInputSchema, []byte(`"thread"`)) && list.Tools[i].InputSchema.Properties["thread"] == nil {
		t.Errorf("scratchpad's schema has no thread argument")
	}

	first := mustCall(t, c, "scratchpad", put("note", "kept"), "")
	if first.IsError {
		t.Fatalf("put: %q", resultText(first))
	}
	handle := handleOf(first)
	if !strings.HasPrefix(handle, "th_") || !strings.Contains(resultText(first), handle) {
		t.Fatalf("put: no thread handle in %q (meta %v)", resultText(first), first.Meta)
	}
	wantOK(t, mustCall(t, c, "scratchpad", with(get("note"), handle), ""), "kept")
	// Without the handle: a new thread, and a new handle.
	res := mustCall(t, c, "scratchpad", get("note"), "")
	wantError(t, res, "not_found")
	if h := handleOf(res); h == "" || h == handle {
		t.Errorf("a call without a handle got handle %q, want a new one", h)
	}
	// A made-up or altered handle is refused, not a fresh thread.
	for _, bad := range []string{"th_made-up", handle[:len(handle)-2] + "AA", "not-a-handle"} {
		wantError(t, mustCall(t, c, "scratchpad", with(get("note"), bad), ""), "validation")
	}
	// A second 2026-07-28 client holding the handle reaches the thread:
	// without authentication the handle is the only key.
	c2 := connect2026(t, srv, nil)
	wantOK(t, mustCall(t, c2, "scratchpad", with(get("note"), handle), ""), "kept")

	// A thread named in _meta works without a session too (no handle).
	if res := mustCall(t, c, "scratchpad", put("named", "in meta"), "e2e-2026-thread"); res.IsError || handleOf(res) != "" {
		t.Errorf("put in a named thread: %q, handle %q; want success and no handle", resultText(res), handleOf(res))
	}
	wantOK(t, mustCall(t, c2, "scratchpad", get("named"), "e2e-2026-thread"), "in meta")

	// A 2025 client: its session thread, no handle minted; the handle
	// works there too.
	old := connect(t, streamableHTTP, srv)
	res = mustCall(t, old, "scratchpad", put("mine", "session"), "")
	if res.IsError || handleOf(res) != "" {
		t.Errorf("2025 put: %q, handle %q; want success and no handle", resultText(res), handleOf(res))
	}
	wantOK(t, mustCall(t, old, "scratchpad", get("mine"), ""), "session")
	wantOK(t, mustCall(t, old, "scratchpad", with(get("note"), handle), ""), "kept")
}

// TestProtocol2026HandlesPerPrincipal: with authentication, a handle is
// valid only for the principal it was minted for; tools/list of a
// sessionless request is filtered by the requester's permissions.
func TestProtocol2026HandlesPerPrincipal(t *testing.T) {
	srv := startServe(t, `
builtin: [calc, clock_now, scratchpad]
auth:
  tokens:
    - name: alice
      token: alice-token-0123456789abcdef
    - name: bob
      token: bob-token-0123456789abcdef
    - name: ops
      token: ops-token-0123456789abcdef
      deny: ["scratch*"]
`)
	alice := connect2026(t, srv, map[string]string{"Authorization": "Bearer alice-token-0123456789abcdef"})
	bob := connect2026(t, srv, map[string]string{"Authorization": "Bearer bob-token-0123456789abcdef"})
	ops := connect2026(t, srv, map[string]string{"Authorization": "Bearer ops-token-0123456789abcdef"})

	res := mustCall(t, alice, "scratchpad", map[string]any{"op": "put", "key": "secret", "value": "alice's"}, "")
	handle := handleOf(res)
	if res.IsError || handle == "" {
		t.Fatalf("alice put: %q, handle %q", resultText(res), handle)
	}
	get := map[string]any{"op": "get", "key": "secret", "thread": handle}
	wantOK(t, mustCall(t, alice, "scratchpad", get, ""), "alice's")
	res = mustCall(t, bob, "scratchpad", get, "")
	wantError(t, res, "validation")
	if strings.Contains(resultText(res), "alice's") {
		t.Errorf("bob read alice's note: %q", resultText(res))
	}
	// The same named _meta thread is per principal too.
	if got, want := listNames(t, ops), []string{"calc", "clock_now"}; !slices.Equal(got, want) {
		t.Errorf("ops (2026-07-28) sees %v, want %v", got, want)
	}
	if res := mustCall(t, ops, "scratchpad", get, ""); !res.IsError || !strings.Contains(resultText(res), "permission") {
		t.Errorf("ops calling scratchpad = %q, want a permission error", resultText(res))
	}
	// Unauthenticated 2026-07-28 requests are refused like any other.
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
	r := postRaw(t, newHTTPClient(), srv.URL+"/mcp", body, http.Header{
		"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"server/discover"}})
	if r.Status != http.StatusUnauthorized {
		t.Errorf("unauthenticated server/discover: %d %s, want 401", r.Status, r.Body)
	}
}

// TestProtocol2026Versions: unknown and malformed protocol versions get
// the revision's -32022 with the versions served, as a JSON-RPC body.
func TestProtocol2026Versions(t *testing.T) {
	srv := startServe(t, baseConfig)
	hc := newHTTPClient()
	meta := func(v string) string {
		return `{"io.modelcontextprotocol/protocolVersion":"` + v + `","io.modelcontextprotocol/clientCapabilities":{}}`
	}
	for _, tc := range []struct{ name, header, body string }{
		{"future version", "2027-01-01", `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"_meta":` + meta("2027-01-01") + `}}`},
		{"malformed header", "garbage", `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}`},
		{"unknown legacy header", "2025-01-01", `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := postRaw(t, hc, srv.URL+"/mcp", []byte(tc.body), http.Header{
				"Mcp-Protocol-Version": {tc.header}, "Mcp-Method": {"tools/list"}})
			if r.Status != http.StatusBadRequest {
				t.Errorf("status %d, want 400", r.Status)
			}
			var reply struct {
				ID    json.RawMessage `json:"id"`
				Error struct {
					Code int `json:"code"`
					Data struct {
						Supported []string `json:"supported"`
					} `json:"data"`
				} `json:"error"`
			}
			if err := json.Unmarshal(r.Body, &reply); err != nil {
				t.Fatalf("body %q is not JSON-RPC: %v", r.Body, err)
			}
			if reply.Error.Code != mcp.UNSUPPORTED_PROTOCOL_VERSION || string(reply.ID) != "7" ||
				!slices.Contains(reply.Error.Data.Supported, mcp.ProtocolVersion20260728) ||
				!slices.Contains(reply.Error.Data.Supported, mcp.ProtocolVersion20251125) {
				t.Errorf("reply %s, want -32022 for id 7 listing 2026-07-28 and 2025-11-25", r.Body)
			}
		})
	}
}

// TestProtocol2026Upstream: a 2026-07-28 client calls a prefixed
// server-everything's tools through toolgate, reads its resources, gets
// its prompts and completions, and gets the progress of a long call
// streamed in its POST's response (mcp-go's modern path, which the
// front's fast path leaves such calls to). Its sampling and elicitation
// tools: TestProtocol2026AskUpstream.
func TestProtocol2026Upstream(t *testing.T) {
	m := newProcMarker(t)
	srv := serveUpstreams(t, m, "upstreams:\n"+everythingUpstream(t, m))
	c := connect2026(t, srv, nil)
	waitTools(t, c, "ev__echo", "ev__get-sum", "ev__trigger-long-running-operation")

	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"ev__echo", map[string]any{"message": "from 2026"}, "Echo: from 2026"},
		{"ev__get-sum", map[string]any{"a": 2, "b": 3}, "5"},
	} {
		if res := mustCall(t, c, tc.tool, tc.args, ""); res.IsError || !strings.Contains(resultText(res), tc.want) {
			t.Errorf("%s: %q (isError %v), want it to contain %q", tc.tool, resultText(res), res.IsError, tc.want)
		}
	}

	// Resources, templates, prompts and completion, as a 2025 session
	// gets them (everything_surface_test.go), with the revision's cache
	// hints on the lists.
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	resources, err := c.ListResources(ctx, mcp.ListResourcesRequest{})
	if err != nil || len(resources.Resources) == 0 {
		t.Fatalf("resources/list = %+v, %v", resources, err)
	}
	if _, set := resources.TTL(); !set {
		t.Errorf("resources/list carries no ttlMs")
	}
	read := mcp.ReadResourceRequest{}
	read.Params.URI = "demo://resource/dynamic/text/7"
	if res, err := c.ReadResource(ctx, read); err != nil || len(res.Contents) == 0 {
		t.Errorf("resources/read %s = %+v, %v", read.Params.URI, res, err)
	}
	get := mcp.GetPromptRequest{}
	get.Params.Name = "ev__completable-prompt"
	get.Params.Arguments = map[string]string{"department": "Sales", "name": "Eve"}
	if res, err := c.GetPrompt(ctx, get); err != nil || len(res.Messages) == 0 {
		t.Errorf("prompts/get = %+v, %v", res, err)
	}
	comp := mcp.CompleteRequest{}
	comp.Params.Ref = mcp.PromptReference{Type: "ref/prompt", Name: "ev__completable-prompt"}
	comp.Params.Argument = mcp.CompleteArgument{Name: "department", Value: "Eng"}
	if done, err := c.Complete(ctx, comp); err != nil || !slices.Equal(done.Completion.Values, []string{"Engineering"}) {
		t.Errorf("completion/complete = %+v, %v; want [Engineering]", done, err)
	}

	progress := collect(c, "notifications/progress")
	req := callRequest("ev__trigger-long-running-operation", map[string]any{"duration": 1, "steps": 4}, "")
	req.Params.Meta = &mcp.Meta{ProgressToken: "p-2026"}
	done := make(chan error, 1)
	go func() {
		res, err := c.CallTool(ctx, req)
		if err == nil && res.IsError {
			err = fmt.Errorf("isError: %s", resultText(res))
		}
		done <- err
	}()
	waitProgress(t, progress, "p-2026", done)
	if err := <-done; err != nil {
		t.Fatalf("long-running operation: %v", err)
	}
}

// TestProtocol2026AskUpstream: server-everything's sampling and
// elicitation tools through toolgate for 2026-07-28 clients, which have
// no server-to-client requests: the upstream's request reaches mcp-go's
// client as an input_required result, which it answers with its handlers
// and retries, getting the tool's final result. A client that declared
// neither capability is not asked: the upstream gets -32601. The
// requestState is bound to the principal and checked: another
// principal's, an altered one, and one already answered (as an expired
// one) are refused with -32602.
func TestProtocol2026AskUpstream(t *testing.T) {
	m := newProcMarker(t)
	srv := serveUpstreams(t, m, aliceAndBob+"upstreams:\n"+everythingUpstream(t, m))
	aliceAuth := map[string]string{"Authorization": "Bearer alice-token-0123456789abcdef"}
	asked := make(chan string, 4)
	c := connect2026(t, srv, aliceAuth, client.WithSamplingHandler(promptSampler{sampler{asked}}), client.WithElicitationHandler(formFiller{}))
	waitTools(t, c, "ev__trigger-sampling-request", "ev__trigger-elicitation-request")

	res := mustCall(t, c, "ev__trigger-sampling-request", map[string]any{"prompt": "a haiku please"}, "")
	if res.IsError || !strings.Contains(resultText(res), "sampled by the test client") {
		t.Errorf("trigger-sampling-request = %q (isError %v), want the client's answer in it", resultText(res), res.IsError)
	}
	wasAsked(t, asked, "a haiku please")
	res = mustCall(t, c, "ev__trigger-elicitation-request", map[string]any{}, "")
	if res.IsError || !strings.Contains(resultText(res), "Ada Lovelace") {
		t.Errorf("trigger-elicitation-request = %q (isError %v), want the client's answer in it", resultText(res), res.IsError)
	}

	// A client that declared no sampling: the upstream is told so.
	plain := connect2026(t, srv, aliceAuth)
	res = mustCall(t, plain, "ev__trigger-sampling-request", map[string]any{"prompt": "x"}, "")
	if !res.IsError || !strings.Contains(resultText(res), "did not declare the sampling capability") {
		t.Errorf("without sampling: %q (isError %v), want the upstream's error saying the client did not declare sampling", resultText(res), res.IsError)
	}

	// The exchange by hand, with the requestState checked.
	const tool = "ev__trigger-elicitation-request"
	call := func(token, extra string) (int, mrtrReply) {
		t.Helper()
		return askByHand(t, srv.URL, tool, token, extra)
	}
	status, first := call("alice-token-0123456789abcdef", "")
	if status != http.StatusOK || first.Result.ResultType != "input_required" || len(first.Result.InputRequests) != 1 || first.Result.RequestState == "" {
		t.Fatalf("first answer: %d %+v; want input_required with one request and a requestState", status, first)
	}
	var key string
	for k, req := range first.Result.InputRequests {
		key = k
		if req.Method != "elicitation/create" || !strings.Contains(string(req.Params), "Your full, legal name") {
			t.Errorf("input request %s = %s %s, want server-everything's elicitation", k, req.Method, req.Params)
		}
	}
	state := first.Result.RequestState
	answer := `"inputResponses":{"` + key + `":{"action":"accept","content":{"name":"Grace Hopper"}}},`
	altered := []byte(state)
	altered[len(altered)-2] ^= 1
	for _, tc := range []struct{ name, token, state string }{
		{"another principal's", "bob-token-0123456789abcdef", state},
		{"altered", "alice-token-0123456789abcdef", string(altered)},
		{"forged", "alice-token-0123456789abcdef", "tg1.0123456789abcdef.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"},
	} {
		status, r := call(tc.token, answer+`"requestState":"`+tc.state+`",`)
		if status != http.StatusBadRequest || r.Error == nil || r.Error.Code != mcp.INVALID_PARAMS {
			t.Errorf("%s requestState: %d %+v, want 400 with -32602", tc.name, status, r.Error)
		}
	}
	status, done := call("alice-token-0123456789abcdef", answer+`"requestState":"`+state+`",`)
	var text strings.Builder
	for _, part := range done.Result.Content {
		text.WriteString(part.Text)
	}
	if status != http.StatusOK || done.Result.ResultType != "complete" || !strings.Contains(text.String(), "Name: Grace Hopper") {
		t.Errorf("retry: %d %+v; want the tool's result with the answer", status, done)
	}
	// Answered: the state names no waiting call any more, as an expired
	// one does.
	status, again := call("alice-token-0123456789abcdef", answer+`"requestState":"`+state+`",`)
	if status != http.StatusBadRequest || again.Error == nil || !strings.Contains(again.Error.Message, "names no call waiting for answers") {
		t.Errorf("the state again: %d %+v, want 400 saying no call waits", status, again.Error)
	}
}

// promptSampler is sampler for a 2026-07-28 client, whose mcp-go decodes
// an input request's message content as a map, not as mcp.TextContent.
type promptSampler struct{ sampler }

func (s promptSampler) CreateMessage(ctx context.Context, req mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	for i, m := range req.Messages {
		if c, ok := m.Content.(map[string]any); ok && c["type"] == "text" {
			text, _ := c["text"].(string)
			req.Messages[i].Content = mcp.NewTextContent(text)
		}
	}
	return s.sampler.CreateMessage(ctx, req)
}

// mrtrReply is the answer to a 2026-07-28 tools/call as a client reads it.
type mrtrReply struct {
	Result struct {
		ResultType    string            `json:"resultType"`
		Content       []mcp.TextContent `json:"content"`
		InputRequests map[string]struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		} `json:"inputRequests"`
		RequestState string `json:"requestState"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}
