package mcpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/gateway/internal/continuation"
	"github.com/toolgate/toolgate/internal/mcppeer"
	"github.com/toolgate/toolgate/internal/principal"
	"github.com/toolgate/toolgate/registry"
)

// Multi-round-trip requests for 2026-07-28 clients (modern.go): a tool
// that drives its Peer as an upstream's relay does, asked through mcp-go's
// client as it comes and through raw requests.

// askTool registers "ask" in g: its argument "ask" names what it asks its
// client, in order ("sampling", "elicitation", "roots", "elicit" for
// Request.Elicit, "both" for sampling and elicitation at once); its result
// is each answer's JSON, or the error, joined by " | ". Each answer or
// error also goes to the returned channel.
func askTool(t *testing.T, g *harness) <-chan string {
	t.Helper()
	got := make(chan string, 16)
	if err := g.reg.Add(registry.Tool{Name: "ask", Kind: registry.Stateless, Source: "test"}); err != nil {
		t.Fatal(err)
	}
	params := map[string]json.RawMessage{
		"sampling":    json.RawMessage(`{"messages":[{"role":"user","content":{"type":"text","text":"a haiku"}}],"maxTokens":50}`),
		"elicitation": json.RawMessage(`{"message":"your name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}}}}`),
		"roots":       nil,
	}
	methods := map[string]string{"sampling": "sampling/createMessage", "elicitation": "elicitation/create", "roots": "roots/list"}
	g.SetTools([]Tool{{Def: &registry.Tool{Name: "ask", Source: "test"}, Call: func(ctx context.Context, req *Request) *executors.Result {
		var args map[string]any
		_ = json.Unmarshal(req.Raw, &args)
		what, _ := args["ask"].(string)
		one := func(w string) string {
			var out string
			switch w {
			case "elicit":
				if req.Elicit == nil {
					out = "cannot elicit"
					break
				}
				action, content, err := req.Elicit(ctx, "go on?", map[string]any{"type": "object"})
				out = fmt.Sprintf("%s %v %v", action, content, err)
			default:
				if req.Peer == nil {
					out = "no peer"
					break
				}
				res, err := req.Peer.Request(ctx, methods[w], params[w])
				if err != nil {
					code := 0
					if e, ok := errors.AsType[*mcppeer.RPCError](err); ok {
						code = e.Code
					}
					out = fmt.Sprintf("error %d: %v", code, err)
				} else {
					out = string(res)
				}
			}
			got <- out
			return out
		}
		var parts []string
		switch what {
		case "both":
			var wg sync.WaitGroup
			parts = make([]string, 2)
			for i, w := range []string{"sampling", "elicitation"} {
				wg.Go(func() { parts[i] = one(w) })
			}
			wg.Wait()
		default:
			for w := range strings.SplitSeq(what, ",") {
				parts = append(parts, one(w))
			}
		}
		return new(executors.Text(strings.Join(parts, " | ")))
	}}}, nil)
	return got
}

// answerAll is a 2026-07-28 client's user and model: it answers sampling,
// elicitation and roots.
type answerAll struct{ asked chan string }

func (a answerAll) CreateMessage(context.Context, mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	a.asked <- "sampling"
	return &mcp.CreateMessageResult{SamplingMessage: mcp.SamplingMessage{Role: mcp.RoleAssistant, Content: mcp.NewTextContent("sampled")}, Model: "m", StopReason: "endTurn"}, nil
}

func (a answerAll) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	a.asked <- "elicitation " + req.Params.Message
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"name": "Ada"}}}, nil
}

func (a answerAll) ListRoots(context.Context, mcp.ListRootsRequest) (*mcp.ListRootsResult, error) {
	a.asked <- "roots"
	return &mcp.ListRootsResult{Roots: []mcp.Root{{URI: "file:///work", Name: "work"}}}, nil
}

// TestMultiRoundTripClient: mcp-go's client negotiating 2026-07-28, with
// sampling, elicitation and roots handlers, gets the tool's final result:
// each request reached it as an input_required result and its answers
// reached the tool; nothing is left waiting. A client that declared
// nothing is not asked: the tool gets -32601.
func TestMultiRoundTripClient(t *testing.T) {
	g, _ := newGateway(t, nil)
	askTool(t, g)
	srv := serveHTTP(t, g)
	a := answerAll{asked: make(chan string, 16)}
	tr, err := transport.NewStreamableHTTP(srv.URL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithSamplingHandler(a), client.WithElicitationHandler(a), client.WithRootsHandler(a))
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(t.Context(), mcp.InitializeRequest{}); err != nil || c.ProtocolVersion() != mcp.ProtocolVersion20260728 {
		t.Fatalf("negotiating: %v, %q", err, c.ProtocolVersion())
	}
	for _, tc := range []struct{ ask, want string }{
		{"sampling", `{"role":"assistant","content":{"type":"text","text":"sampled"},"model":"m","stopReason":"endTurn"}`},
		{"elicitation", `{"action":"accept","content":{"name":"Ada"}}`},
		{"roots", `{"roots":[{"uri":"file:///work","name":"work"}]}`},
		{"elicit", `accept map[name:Ada] <nil>`},
		{"sampling,elicitation,roots", `{"role":"assistant","content":{"type":"text","text":"sampled"},"model":"m","stopReason":"endTurn"} | {"action":"accept","content":{"name":"Ada"}} | {"roots":[{"uri":"file:///work","name":"work"}]}`},
		{"both", `{"role":"assistant","content":{"type":"text","text":"sampled"},"model":"m","stopReason":"endTurn"} | {"action":"accept","content":{"name":"Ada"}}`},
	} {
		t.Run(tc.ask, func(t *testing.T) {
			res, err := c.CallTool(t.Context(), callReq("ask", map[string]any{"ask": tc.ask}))
			if err != nil {
				t.Fatal(err)
			}
			if got := resultText(res); got != tc.want || res.IsError || res.ResultType != mcp.ResultTypeComplete {
				t.Errorf("ask %s = %q (%s), want %q", tc.ask, got, res.ResultType, tc.want)
			}
		})
	}
	if n := g.mrtr.Len(); n != 0 {
		t.Errorf("%d calls still wait for a retry", n)
	}

	// A client that declared nothing: the tool is told so, with -32601,
	// and the call is not detached.
	plain := modernClient(t, srv)
	res, err := plain.CallTool(t.Context(), callReq("ask", map[string]any{"ask": "sampling,elicit"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := resultText(res); !strings.Contains(got, "error -32601: sampling/createMessage: the client that made this call did not declare the sampling capability") ||
		!strings.HasSuffix(got, "cannot elicit") {
		t.Errorf("undeclared = %q, want -32601 for sampling and no Elicit", got)
	}
}

// mrtrMeta is the _meta of a 2026-07-28 request whose client declared
// caps.
func mrtrMeta(caps string) string {
	return `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":` + caps + `}`
}

// rpcReply is a JSON-RPC answer as a raw 2026-07-28 client reads it.
type rpcReply struct {
	Result struct {
		ResultType    string                     `json:"resultType"`
		Content       []mcp.TextContent          `json:"content"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// postCall POSTs a 2026-07-28 tools/call of "ask" with params (after its
// name) as principal who ("" for none), and reads the answer, whether
// JSON or an event stream.
func postCall(t *testing.T, url, who, params string) (int, rpcReply) {
	t.Helper()
	hdr := map[string]string{mcp.HeaderMethod: "tools/call", mcp.HeaderName: "ask"}
	if who != "" {
		hdr["X-Test-Principal"] = who
	}
	status, _, body := postModern(t, url+"/mcp", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ask",`+params+`}}`, hdr)
	if i := bytes.LastIndex(body, []byte("data: ")); i >= 0 {
		body = body[i+len("data: "):]
	}
	var r rpcReply
	if err := json.Unmarshal(bytes.TrimSpace(body), &r); err != nil {
		t.Fatalf("reading %d %s: %v", status, body, err)
	}
	return status, r
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(a json.RawMessage, b string) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal([]byte(b), &y) == nil && cmp.Equal(x, y)
}

// withPrincipals makes g's HTTP requests those of the principal named by
// their X-Test-Principal header.
func withPrincipals(g *harness) {
	g.o.Authenticate = func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := &principal.Identity{Name: r.Header.Get("X-Test-Principal")}
			next.ServeHTTP(w, r.WithContext(principal.With(r.Context(), id)))
		})
	}
}

// TestMultiRoundTripState: the input_required result as the revision
// shapes it; a retry with another principal's, an altered or a made-up
// requestState, another tool's or other arguments, or an answer missing,
// is refused with -32602 and 400, and leaves the call waiting; the right
// retry gets the result, and the same state again is refused.
func TestMultiRoundTripState(t *testing.T) {
	g, _ := newGateway(t, nil)
	withPrincipals(g)
	got := askTool(t, g)
	if err := g.reg.Add(registry.Tool{Name: "other", Kind: registry.Stateless, Source: "test"}); err != nil {
		t.Fatal(err)
	}
	srv := serveHTTP(t, g)
	meta := mrtrMeta(`{"sampling":{}}`)
	status, first := postCall(t, srv.URL, "alice", `"arguments":{"ask":"sampling"},`+meta)
	st := first.Result.RequestState
	if status != http.StatusOK || first.Result.ResultType != "input_required" || !strings.HasPrefix(st, continuation.StatePrefix+g.mrtr.Instance()+".") ||
		!sameJSON(first.Result.InputRequests["sampling-1"], `{"method":"sampling/createMessage","params":{"messages":[{"role":"user","content":{"type":"text","text":"a haiku"}}],"maxTokens":50}}`) {
		t.Fatalf("first answer %d %+v; want input_required asking sampling-1, with a requestState", status, first)
	}
	answer := `"inputResponses":{"sampling-1":{"role":"assistant","content":{"type":"text","text":"ok"},"model":"m"}}`
	altered := []byte(st)
	altered[len(altered)-3] ^= 1
	for _, tc := range []struct{ name, who, params, want string }{
		{"another principal", "bob", `"arguments":{"ask":"sampling"},` + answer + `,"requestState":"` + st + `",` + meta, "not one this toolgate issued to you"},
		{"altered", "alice", `"arguments":{"ask":"sampling"},` + answer + `,"requestState":"` + string(altered) + `",` + meta, "not one this toolgate issued to you"},
		{"made up", "alice", `"arguments":{"ask":"sampling"},` + answer + `,"requestState":"xyz",` + meta, "not one this toolgate issued to you"},
		{"another instance", "alice", `"arguments":{"ask":"sampling"},` + answer + `,"requestState":"tg1.0000000000000000.AAAA",` + meta, "another toolgate instance"},
		{"no state", "alice", `"arguments":{"ask":"sampling"},` + answer + `,` + meta, "inputResponses without a requestState"},
		{"other arguments", "alice", `"arguments":{"ask":"roots"},` + answer + `,"requestState":"` + st + `",` + meta, "the arguments differ"},
		{"no answer", "alice", `"arguments":{"ask":"sampling"},"inputResponses":{"x":{}},"requestState":"` + st + `",` + meta, `no answer to "sampling-1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, r := postCall(t, srv.URL, tc.who, tc.params)
			if status != http.StatusBadRequest || r.Error == nil || r.Error.Code != mcp.INVALID_PARAMS || !strings.Contains(r.Error.Message, tc.want) {
				t.Errorf("%d %+v; want 400, -32602 saying %q", status, r.Error, tc.want)
			}
		})
	}
	// Another tool: the retry names "other" with ask's state.
	status, _, body := postModern(t, srv.URL+"/mcp", `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"other","arguments":{"ask":"sampling"},`+answer+`,"requestState":"`+st+`",`+meta+`}}`,
		map[string]string{mcp.HeaderMethod: "tools/call", mcp.HeaderName: "other", "X-Test-Principal": "alice"})
	if status != http.StatusBadRequest || !strings.Contains(string(body), `continues tools/call \"ask\", not tools/call \"other\"`) {
		t.Errorf("another tool: %d %s", status, body)
	}
	if n := g.mrtr.Len(); n != 1 {
		t.Fatalf("%d calls wait after refused retries, want 1", n)
	}
	// The right retry: the tool gets the client's answer as it was sent.
	status, r := postCall(t, srv.URL, "alice", `"arguments":{"ask":"sampling"},`+answer+`,"requestState":"`+st+`",`+meta)
	if want := `{"role":"assistant","content":{"type":"text","text":"ok"},"model":"m"}`; status != http.StatusOK || r.Result.ResultType != "complete" ||
		len(r.Result.Content) != 1 || r.Result.Content[0].Text != want {
		t.Errorf("retry: %d %+v; want the result %s", status, r, want)
	}
	if a := <-got; !strings.Contains(a, `"text":"ok"`) {
		t.Errorf("the tool got %q", a)
	}
	// The same state again: gone.
	status, r = postCall(t, srv.URL, "alice", `"arguments":{"ask":"sampling"},`+answer+`,"requestState":"`+st+`",`+meta)
	if status != http.StatusBadRequest || r.Error == nil || !strings.Contains(r.Error.Message, "names no call waiting for answers") {
		t.Errorf("replayed state: %d %+v", status, r.Error)
	}
	if n := g.mrtr.Len(); n != 0 {
		t.Errorf("%d calls wait, want 0", n)
	}
}

// TestMultiRoundTripRounds: a call that asks again after the answer gets
// another input_required with a new state; the previous state is refused.
func TestMultiRoundTripRounds(t *testing.T) {
	g, _ := newGateway(t, nil)
	askTool(t, g)
	srv := serveHTTP(t, g)
	meta := mrtrMeta(`{"sampling":{},"elicitation":{}}`)
	args := `"arguments":{"ask":"sampling,elicitation"},`
	_, r1 := postCall(t, srv.URL, "", args+meta)
	if r1.Result.InputRequests["sampling-1"] == nil {
		t.Fatalf("first: %+v", r1)
	}
	_, r2 := postCall(t, srv.URL, "", args+`"inputResponses":{"sampling-1":{"role":"assistant","content":{"type":"text","text":"s"},"model":"m"}},"requestState":"`+r1.Result.RequestState+`",`+meta)
	if r2.Result.ResultType != "input_required" || r2.Result.InputRequests["elicitation-2"] == nil || r2.Result.RequestState == r1.Result.RequestState {
		t.Fatalf("second: %+v; want input_required asking elicitation-2 with a new state", r2)
	}
	status, r := postCall(t, srv.URL, "", args+`"inputResponses":{"sampling-1":{}},"requestState":"`+r1.Result.RequestState+`",`+meta)
	if status != http.StatusBadRequest || r.Error == nil || !strings.Contains(r.Error.Message, "answered already") {
		t.Errorf("the first round's state again: %d %+v", status, r.Error)
	}
	_, r3 := postCall(t, srv.URL, "", args+`"inputResponses":{"elicitation-2":{"action":"decline"}},"requestState":"`+r2.Result.RequestState+`",`+meta)
	if want := `{"role":"assistant","content":{"type":"text","text":"s"},"model":"m"} | {"action":"decline"}`; r3.Result.ResultType != "complete" || r3.Result.Content[0].Text != want {
		t.Errorf("third: %+v; want %s", r3, want)
	}
}

// TestMultiRoundTripExpiry: a call whose client does not retry in time is
// cancelled: the tool's request gets an error saying so, and the state is
// refused afterwards.
func TestMultiRoundTripExpiry(t *testing.T) {
	g, _ := newGateway(t, nil)
	g.mrtr.Limits.Wait = 20 * time.Millisecond
	got := askTool(t, g)
	srv := serveHTTP(t, g)
	meta := mrtrMeta(`{"sampling":{}}`)
	_, r := postCall(t, srv.URL, "", `"arguments":{"ask":"sampling"},`+meta)
	if r.Result.ResultType != "input_required" {
		t.Fatalf("first: %+v", r)
	}
	if a := <-got; !strings.Contains(a, "error -32603: sampling/createMessage: the client did not answer within 20ms") {
		t.Errorf("the tool got %q, want the expiry", a)
	}
	status, r := postCall(t, srv.URL, "", `"arguments":{"ask":"sampling"},"inputResponses":{"sampling-1":{}},"requestState":"`+r.Result.RequestState+`",`+meta)
	if status != http.StatusBadRequest || r.Error == nil || !strings.Contains(r.Error.Message, "it expired (toolgate waits 20ms for the retry") {
		t.Errorf("expired state: %d %+v", status, r.Error)
	}
	if n := g.mrtr.Len(); n != 0 {
		t.Errorf("%d calls wait, want 0", n)
	}
}

// TestMultiRoundTripBounds: past the bound per principal, a call's request
// is refused at once and the call goes on; other principals are not
// affected; a call left waiting is cancelled when the front closes.
func TestMultiRoundTripBounds(t *testing.T) {
	g, _ := newGateway(t, nil)
	g.mrtr.Limits.MaxPerPrincipal = 1
	withPrincipals(g)
	got := askTool(t, g)
	srv := serveHTTP(t, g)
	meta := mrtrMeta(`{"sampling":{}}`)
	if _, r := postCall(t, srv.URL, "alice", `"arguments":{"ask":"sampling"},`+meta); r.Result.ResultType != "input_required" {
		t.Fatalf("first: %+v", r)
	}
	_, r := postCall(t, srv.URL, "alice", `"arguments":{"ask":"sampling"},`+meta)
	if r.Result.ResultType != "complete" || !strings.Contains(r.Result.Content[0].Text, "error -32603: toolgate already holds 1 calls of this client's principal waiting") {
		t.Errorf("past the bound: %+v; want the call's result, its request refused", r)
	}
	<-got
	if _, r := postCall(t, srv.URL, "bob", `"arguments":{"ask":"sampling"},`+meta); r.Result.ResultType != "input_required" {
		t.Errorf("another principal: %+v; want input_required", r)
	}
	if n := g.mrtr.Len(); n != 2 {
		t.Errorf("%d calls wait, want 2", n)
	}
	g.Close()
	for range 2 {
		if a := <-got; !strings.Contains(a, "toolgate is shutting down") {
			t.Errorf("on close the tool got %q", a)
		}
	}
}

// TestMultiRoundTripClientGone: a client that goes away while its call
// runs, before anything was asked, ends the call, as a 2025 session's
// does.
func TestMultiRoundTripClientGone(t *testing.T) {
	g, _ := newGateway(t, nil)
	call, started, ended := waitTool()
	g.addTool(t, "slow", call)
	srv := serveHTTP(t, g)
	ctx, cancel := context.WithCancel(t.Context())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/mcp",
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow",`+mrtrMeta(`{"elicitation":{}}`)+`}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(mcp.HeaderProtocolVersion, mcp.ProtocolVersion20260728)
	req.Header.Set(mcp.HeaderMethod, "tools/call")
	req.Header.Set(mcp.HeaderName, "slow")
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	select {
	case <-started:
	case <-done:
		t.Fatal("answered before the call started")
	}
	cancel()
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Errorf("the call ended with %v, want it cancelled", err)
	}
	<-done
}

// TestMultiRoundTripPrompt: a source's sampling request while it answers
// a 2026-07-28 prompts/get reaches mcp-go's client as an input_required
// result, as during a tools/call; during a resources/read the client is
// not asked, and the source gets -32601.
func TestMultiRoundTripPrompt(t *testing.T) {
	g, _ := newGateway(t, nil)
	src := &fakeSource{answer: func(ctx context.Context, peer mcppeer.Peer, method string, _ any) (json.RawMessage, error) {
		res, err := peer.Request(ctx, "sampling/createMessage", json.RawMessage(`{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxTokens":5}`))
		text := string(res)
		if err != nil {
			text = err.Error()
		}
		q, _ := json.Marshal(text)
		if method == string(mcp.MethodResourcesRead) {
			return json.RawMessage(`{"contents":[{"uri":"test://r","text":` + string(q) + `}]}`), nil
		}
		return json.RawMessage(`{"messages":[{"role":"user","content":{"type":"text","text":` + string(q) + `}}]}`), nil
	}}
	g.SetCatalog("upstream:s", &Catalog{
		Resources: []json.RawMessage{json.RawMessage(`{"uri":"test://r","name":"r"}`)},
		Prompts:   []CatalogPrompt{{Name: "s__greet", Orig: "greet", Raw: json.RawMessage(`{"name":"greet","arguments":[{"name":"city"}]}`)}},
		Forward:   src.forward,
	})
	srv := serveHTTP(t, g)
	tr, err := transport.NewStreamableHTTP(srv.URL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithSamplingHandler(samplingAnswer{}))
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(t.Context(), mcp.InitializeRequest{}); err != nil || c.ProtocolVersion() != mcp.ProtocolVersion20260728 {
		t.Fatalf("negotiating: %v, %q", err, c.ProtocolVersion())
	}
	get := mcp.GetPromptRequest{}
	get.Params.Name = "s__greet"
	get.Params.Arguments = map[string]string{"city": "Oslo"}
	res, err := c.GetPrompt(t.Context(), get)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Messages) != 1 || !strings.Contains(fmt.Sprint(res.Messages[0].Content), `"text":"sampled"`) {
		t.Errorf("prompts/get = %+v, want the client's sampling answer in its message", res.Messages)
	}
	read := mcp.ReadResourceRequest{}
	read.Params.URI = "test://r"
	rr, err := c.ReadResource(t.Context(), read)
	if err != nil {
		t.Fatal(err)
	}
	if got := rr.Contents[0].(mcp.TextResourceContents).Text; !strings.Contains(got, "asks only during a tools/call or prompts/get") {
		t.Errorf("resources/read: the source got %q, want -32601 saying when a 2026-07-28 client is asked", got)
	}
	// A retry of the prompt with a made-up state: -32602, 400.
	status, _, body := postModern(t, srv.URL+"/mcp", `{"jsonrpc":"2.0","id":3,"method":"prompts/get","params":{"name":"s__greet","arguments":{"city":"Oslo"},"inputResponses":{"sampling-1":{}},"requestState":"tg1.x.y",`+mrtrMeta(`{"sampling":{}}`)+`}}`,
		map[string]string{mcp.HeaderMethod: "prompts/get", mcp.HeaderName: "s__greet"})
	if status != http.StatusBadRequest || !strings.Contains(string(body), `"code":-32602`) {
		t.Errorf("a prompt's retry with a made-up state: %d %s", status, body)
	}
}

// TestMultiRoundTripProgress: a call that asked for progress goes through
// mcp-go's own 2026-07-28 path, not the front's fast path, and is asked
// and answered alike.
func TestMultiRoundTripProgress(t *testing.T) {
	g, _ := newGateway(t, nil)
	askTool(t, g)
	srv := serveHTTP(t, g)
	meta := strings.Replace(mrtrMeta(`{"roots":{}}`), `"_meta":{`, `"_meta":{"progressToken":"p-1",`, 1)
	_, r := postCall(t, srv.URL, "", `"arguments":{"ask":"roots"},`+meta)
	if r.Result.ResultType != "input_required" || !sameJSON(r.Result.InputRequests["roots-1"], `{"method":"roots/list"}`) {
		t.Fatalf("first: %+v; want input_required asking roots-1", r)
	}
	_, r = postCall(t, srv.URL, "", `"arguments":{"ask":"roots"},"inputResponses":{"roots-1":{"roots":[]}},"requestState":"`+r.Result.RequestState+`",`+meta)
	if r.Result.ResultType != "complete" || len(r.Result.Content) != 1 || r.Result.Content[0].Text != `{"roots":[]}` {
		t.Errorf("retry: %+v; want the roots answer", r)
	}
}
