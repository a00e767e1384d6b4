package mcpup

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/internal/mcppeer"
	"github.com/toolgate/toolgate/retry"
)

// newTestServer is an mcp-go streamable HTTP server with the tools the
// tests of the HTTP path call for real: echo (its raw arguments as text),
// ask (elicits a name) and sample (asks the client's model).
func newTestServer(t *testing.T) http.Handler {
	t.Helper()
	s := server.NewMCPServer("test", "1", server.WithToolCapabilities(true))
	s.AddTool(mcp.NewToolWithRawSchema("echo", "Echoes its raw arguments.", json.RawMessage(`{"type":"object"}`)),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(string(req.Params.RawArguments)), nil
		})
	s.AddTool(mcp.NewTool("ask", mcp.WithDescription("Asks the user's name.")),
		func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			res, err := s.RequestElicitation(ctx, mcp.ElicitationRequest{Params: mcp.ElicitationParams{
				Message:         "your name?",
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}},
			}})
			if err != nil {
				return mcp.NewToolResultError("eliciting: " + err.Error()), nil
			}
			b, _ := json.Marshal(res.Content)
			return mcp.NewToolResultText(string(res.Action) + " " + string(b)), nil
		})
	s.AddTool(mcp.NewTool("sample", mcp.WithDescription("Asks the client's model.")),
		func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			res, err := s.RequestSampling(ctx, mcp.CreateMessageRequest{CreateMessageParams: mcp.CreateMessageParams{
				Messages:  []mcp.SamplingMessage{{Role: mcp.RoleUser, Content: mcp.NewTextContent("2+2?")}},
				MaxTokens: 10,
			}})
			if err != nil {
				return mcp.NewToolResultError("sampling: " + err.Error()), nil
			}
			txt, _ := mcp.AsTextContent(res.Content)
			if txt == nil {
				return mcp.NewToolResultError("sampling: no text"), nil
			}
			return mcp.NewToolResultText("the model says " + txt.Text), nil
		})
	h := server.NewStreamableHTTPServer(s, server.WithStateful(true))
	t.Cleanup(func() { _ = h.Shutdown(context.Background()) })
	return h
}

// fakeUpstream serves h, except that it hands the tools/call of each tool
// in calls to calls' handler instead, and a GET with Last-Event-ID to
// resume. It records every POST it gets.
type fakeUpstream struct {
	h      http.Handler
	calls  map[string]http.HandlerFunc
	resume http.HandlerFunc

	// mu guards posts.
	mu    sync.Mutex
	posts []seenPost
}

// seenPost is a POST a fakeUpstream got.
type seenPost struct {
	header http.Header
	body   callBody
	raw    string
}

// callBody is what the tests read of a message toolgate sends.
type callBody struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name      string `json:"name"`
		RequestID string `json:"requestId"`
		Meta      struct {
			ProgressToken string `json:"progressToken"`
		} `json:"_meta"`
	} `json:"params"`
}

func (f *fakeUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") != "" && f.resume != nil {
		f.resume(w, r)
		return
	}
	if r.Method == http.MethodPost {
		raw, _ := io.ReadAll(r.Body)
		var b callBody
		_ = json.Unmarshal(raw, &b)
		f.mu.Lock()
		f.posts = append(f.posts, seenPost{header: r.Header.Clone(), body: b, raw: string(raw)})
		f.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(raw))
		if h := f.calls[b.Params.Name]; b.Method == string(mcp.MethodToolsCall) && h != nil {
			h(w, r)
			return
		}
	}
	f.h.ServeHTTP(w, r)
}

// postsOf returns the POSTs of method the fake got.
func (f *fakeUpstream) postsOf(method string) []seenPost {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []seenPost
	for _, p := range f.posts {
		if p.body.Method == method {
			out = append(out, p)
		}
	}
	return out
}

// readCallBody reads the tools/call r carries.
func readCallBody(r *http.Request) callBody {
	var b callBody
	_ = json.NewDecoder(r.Body).Decode(&b)
	return b
}

// writeEvents answers with an event stream of events, each flushed as it
// is written.
func writeEvents(w http.ResponseWriter, events ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	for _, e := range events {
		_, _ = io.WriteString(w, e)
		w.(http.Flusher).Flush()
	}
}

// writeJSON answers with a JSON body of status.
func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// resultEvent is the event of a response to id with a text result.
func resultEvent(id json.RawMessage, text string) string {
	return fmt.Sprintf("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":%q}]}}\n\n", id, text)
}

// startHTTP starts a Manager for f served over loopback as streamable
// HTTP upstream "fs" and waits until it is up.
func startHTTP(t *testing.T, f *fakeUpstream, up Upstream, opts *Options) (*testManager, *recorder) {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	up.Name, up.Transport, up.URL = "fs", TransportStreamableHTTP, srv.URL
	m, rec, _ := startUp(t, up, opts)
	return m, rec
}

// A JSON answer: the call is one POST, carrying the session mcp-go's
// client negotiated, its protocol version and the upstream's headers, and
// the arguments as the client sent them; the result passes through.
func TestHTTPCallJSON(t *testing.T) {
	f := &fakeUpstream{h: newTestServer(t)}
	m, _ := startHTTP(t, f, Upstream{Headers: map[string]string{"X-Key": "k-123456"}}, nil)
	if got := text(t, mustCall(t, m, "t", "fs__echo", `{"b":1, "a":[2]}`)); got != `{"b":1,"a":[2]}` {
		t.Errorf("echo = %q", got)
	}
	c := m.ups[0].runner.current()
	posts := f.postsOf(string(mcp.MethodToolsCall))
	if len(posts) != 1 {
		t.Fatalf("the upstream got %d tools/call POSTs, want 1", len(posts))
	}
	h := posts[0].header
	want := map[string]string{
		transport.HeaderKeySessionID:       c.client.GetSessionId(),
		transport.HeaderKeyProtocolVersion: mcp.ProtocolVersion20251125,
		"Accept":                           "application/json, text/event-stream",
		"Content-Type":                     "application/json",
		"X-Key":                            "k-123456",
	}
	got := map[string]string{}
	for k := range want {
		got[k] = h.Get(k)
	}
	if diff := cmp.Diff(want, got); diff != "" || want[transport.HeaderKeySessionID] == "" {
		t.Errorf("tools/call headers (-want +got):\n%s", diff)
	}
	if c.client.ProtocolVersion() != mcp.ProtocolVersion20251125 {
		t.Errorf("negotiated %q", c.client.ProtocolVersion())
	}
	if !strings.Contains(posts[0].raw, `"params":{"name":"echo","arguments":{"b":1,"a":[2]}}`) {
		t.Errorf("tools/call body = %s", posts[0].raw)
	}
}

// An event stream answer: the notifications before the result reach their
// handlers (progress to the call's callback, in order, before the call
// returns; a log message to OnNotify), what is no message of the call's is
// skipped, and the result passes through; CRLF and LF, comments, IDs and
// data over several lines are read as the format has them.
func TestHTTPCallEventStream(t *testing.T) {
	f := &fakeUpstream{h: newTestServer(t), calls: map[string]http.HandlerFunc{
		"stream": func(w http.ResponseWriter, r *http.Request) {
			b := readCallBody(r)
			progress := func(p int) string {
				return fmt.Sprintf("event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\r\ndata: \"params\":{\"progressToken\":%q,\"progress\":%d,\"total\":2}}\r\n\r\n", b.Params.Meta.ProgressToken, p)
			}
			writeEvents(w,
				": keep-alive\n\n",
				progress(1),
				"id: 7\ndata: not JSON\n\n",
				`data: {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","logger":"l","data":"hi"}}`+"\n\n",
				progress(2),
				`data: {"jsonrpc":"2.0","id":"someone-else","result":{}}`+"\n\n",
				resultEvent(b.ID, "done"),
			)
		},
	}}
	notes := make(chan string, 10)
	m, _ := startHTTP(t, f, Upstream{}, &Options{OnNotify: func(_, method string, params map[string]any, _ mcppeer.Peer) {
		notes <- method + " " + fmt.Sprint(params["logger"])
	}})
	var progress []float64 // written by the call's own reader, before it returns
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	res, err := callIn(ctx, t, m, "t", "fs__stream", `{}`, func(p, _ float64, _ string) { progress = append(progress, p) })
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, res); got != "done" {
		t.Errorf("result = %q", got)
	}
	if diff := cmp.Diff([]float64{1, 2}, progress); diff != "" {
		t.Errorf("progress (-want +got):\n%s", diff)
	}
	select {
	case n := <-notes:
		if n != "notifications/message fs/l" {
			t.Errorf("OnNotify got %q", n)
		}
	default:
		t.Error("the log message did not reach OnNotify before the call returned")
	}
}

// The upstream's JSON-RPC errors and HTTP failures fail the call with
// their class; none of them takes the connection down.
func TestHTTPCallErrors(t *testing.T) {
	rpcError := func(id json.RawMessage, code int, msg string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%q}}`, id, code, msg)
	}
	tests := []struct {
		name     string
		fake     http.HandlerFunc // nil: the real server's answer
		tool     string
		want     retry.Class
		wantText string
	}{
		{name: "unknown tool", tool: "nosuch", want: retry.NotFound, wantText: "not found"},
		{name: "JSON-RPC error", want: retry.Execution, wantText: "boom (JSON-RPC error -32603)", fake: func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, rpcError(readCallBody(r).ID, mcp.INTERNAL_ERROR, "boom"))
		}},
		{name: "JSON-RPC error on an event stream", want: retry.Validation, wantText: "bad (JSON-RPC error -32602)", fake: func(w http.ResponseWriter, r *http.Request) {
			writeEvents(w, "data: "+rpcError(readCallBody(r).ID, mcp.INVALID_PARAMS, "bad")+"\n\n")
		}},
		{name: "JSON-RPC error with HTTP 400", want: retry.Validation, wantText: "bad (JSON-RPC error -32602)", fake: func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusBadRequest, rpcError(readCallBody(r).ID, mcp.INVALID_PARAMS, "bad"))
		}},
		{name: "HTTP 500", want: retry.Unavailable, wantText: "HTTP 500: busy", fake: func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "busy", http.StatusInternalServerError)
		}},
		{name: "HTTP 401", want: retry.Permission, fake: func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusUnauthorized)
		}},
		{name: "another content type", want: retry.Unavailable, wantText: `content type "text/html"`, fake: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = io.WriteString(w, "<p>hi</p>")
		}},
		{name: "another id", want: retry.Unavailable, wantText: "no JSON-RPC response", fake: func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, `{"jsonrpc":"2.0","id":"nobody","result":{}}`)
		}},
		{name: "stream ends first", want: retry.Unavailable, wantText: "ended the event stream before", fake: func(w http.ResponseWriter, r *http.Request) {
			writeEvents(w, `data: {"jsonrpc":"2.0","method":"notifications/message","params":{}}`+"\n\n")
		}},
	}
	f := &fakeUpstream{h: newTestServer(t), calls: map[string]http.HandlerFunc{}}
	for _, tc := range tests {
		if tc.fake != nil {
			tc.tool = strings.ReplaceAll(tc.name, " ", "_")
			f.calls[tc.tool] = tc.fake
		}
	}
	m, rec := startHTTP(t, f, Upstream{}, nil)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tool := tc.tool
			if tool == "" {
				tool = strings.ReplaceAll(tc.name, " ", "_")
			}
			ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
			defer cancel()
			_, err := callIn(ctx, t, m, "t", "fs__"+tool, `{}`, nil)
			wantClass(t, err, tc.want)
			if !strings.Contains(err.Error(), tc.wantText) {
				t.Errorf("error %q does not say %q", err, tc.wantText)
			}
		})
	}
	stillUp(t, m, rec)
}

// stillUp checks that the upstream answers a call, and was not
// restarted.
func stillUp(t *testing.T, m *testManager, rec *recorder) {
	t.Helper()
	if got := text(t, mustCall(t, m, "t", "fs__echo", `{}`)); got != `{}` {
		t.Errorf("echo = %q", got)
	}
	select {
	case <-rec.restarts:
		t.Error("the upstream was restarted; the connection should have stayed up")
	default:
	}
}

// A 404 to a call (the upstream has forgotten the session) fails it with
// class unavailable and a RetryAfter, and the connection is replaced:
// mcp-go's client initializes a new session, which the next call carries.
func TestHTTPSessionExpired(t *testing.T) {
	var expired atomic.Bool
	f := &fakeUpstream{h: newTestServer(t)}
	f.calls = map[string]http.HandlerFunc{"echo": func(w http.ResponseWriter, r *http.Request) {
		if expired.CompareAndSwap(false, true) {
			http.NotFound(w, r)
			return
		}
		f.h.ServeHTTP(w, r)
	}}
	m, rec := startHTTP(t, f, Upstream{}, nil)
	old := m.ups[0].runner.current().client.GetSessionId()

	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	_, err := callIn(ctx, t, m, "t", "fs__echo", `{}`, nil)
	wantClass(t, err, retry.Unavailable)
	if e, _ := err.(*retry.Error); e.RetryAfter <= 0 || !strings.Contains(e.Error(), "restarting") {
		t.Errorf("error %v (RetryAfter %v), want a restart announced with a RetryAfter", e, e.RetryAfter)
	}
	rec.waitState(t, false)
	rec.waitState(t, true)
	select {
	case <-rec.restarts:
	default:
		t.Error("OnRestart was not called")
	}
	if got := text(t, mustCall(t, m, "t", "fs__echo", `{"again":1}`)); got != `{"again":1}` {
		t.Errorf("echo after the new session = %q", got)
	}
	posts := f.postsOf(string(mcp.MethodToolsCall))
	if sid := posts[len(posts)-1].header.Get(transport.HeaderKeySessionID); sid == "" || sid == old {
		t.Errorf("the call after the 404 carried session %q; want a new one (the old was %q)", sid, old)
	}
}

// A sampling request the upstream sends on the call's event stream
// reaches the client whose call it serves, and the answer reaches the
// upstream, which completes the call with it.
func TestHTTPCallRelaysSampling(t *testing.T) {
	f := &fakeUpstream{h: newTestServer(t)}
	m, _ := startHTTP(t, f, Upstream{}, nil)
	ctx, cancel := context.WithTimeout(WithPeer(t.Context(), answerPeer{answer: `{"role":"assistant","content":{"type":"text","text":"4"},"model":"m"}`}), waitLimit)
	defer cancel()
	res, err := callIn(ctx, t, m, "t", "fs__sample", `{}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, res); got != "the model says 4" {
		t.Errorf("sample = %q", got)
	}
	answers := 0
	for _, p := range f.postsOf("") { // an answer has no method
		if strings.Contains(p.raw, `"text":"4"`) && p.header.Get(transport.HeaderKeySessionID) != "" {
			answers++
		}
	}
	if answers != 1 {
		t.Errorf("the upstream got %d answers with the session, want 1", answers)
	}
}

// An event over the message cap fails its call with class execution; the
// connection stays up.
func TestHTTPCallEventOverCap(t *testing.T) {
	f := &fakeUpstream{h: newTestServer(t), calls: map[string]http.HandlerFunc{
		"big": func(w http.ResponseWriter, r *http.Request) {
			b := readCallBody(r)
			writeEvents(w,
				`data: {"jsonrpc":"2.0","method":"notifications/message","params":{}}`+"\n\n",
				resultEvent(b.ID, strings.Repeat("x", 4096)))
		},
	}}
	m, rec := startHTTP(t, f, Upstream{MaxMessageBytes: MinMaxMessageBytes}, nil)
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	_, err := callIn(ctx, t, m, "t", "fs__big", `{}`, nil)
	wantClass(t, err, retry.Execution)
	if !strings.Contains(err.Error(), "over upstreams[].max_message_bytes (1 KiB)") {
		t.Errorf("error %q does not name the setting", err)
	}
	stillUp(t, m, rec)
}

// An upstream that never answers holds the call until its deadline, and
// no longer: the call fails with class timeout and the upstream is told
// with notifications/cancelled naming the call.
func TestHTTPCallStalled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeUpstream{h: newTestServer(t), calls: map[string]http.HandlerFunc{
			"stall": func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() },
		}}
		m, _ := startPipe(t, f, nil)
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		start := time.Now()
		_, err := callIn(ctx, t, m, "t", "fs__stall", `{}`, nil)
		if took := time.Since(start); took != time.Minute {
			t.Errorf("the call returned after %v, want 1m (its deadline)", took)
		}
		wantClass(t, err, retry.Timeout)
		synctest.Wait() // notifications/cancelled goes in the background
		calls, cancels := f.postsOf(string(mcp.MethodToolsCall)), f.postsOf(string(mcp.MethodNotificationCancelled))
		if len(cancels) != 1 || `"`+cancels[0].body.Params.RequestID+`"` != string(calls[0].body.ID) {
			t.Errorf("notifications/cancelled sent: %+v; want one naming %s", cancels, calls[0].body.ID)
		}
	})
}

// An event stream the upstream ends before the response, after an event
// with an ID, is resumed with a GET carrying Last-Event-ID, after the
// reconnection time the upstream asked for (SEP-1699).
func TestHTTPCallResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var callID json.RawMessage // guarded by mu
		var resumed http.Header    // guarded by mu
		f := &fakeUpstream{h: newTestServer(t), calls: map[string]http.HandlerFunc{
			"poll": func(w http.ResponseWriter, r *http.Request) {
				b := readCallBody(r)
				mu.Lock()
				callID = b.ID
				mu.Unlock()
				writeEvents(w, "id: e1\nretry: 2000\ndata:\n\n")
			},
		}}
		f.resume = func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			resumed = r.Header.Clone()
			id := callID
			mu.Unlock()
			writeEvents(w, "id: e2\n"+resultEvent(id, "polled"))
		}
		m, _ := startPipe(t, f, nil)
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		start := time.Now()
		res, err := callIn(ctx, t, m, "t", "fs__poll", `{}`, nil)
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took != 2*time.Second {
			t.Errorf("the call took %v, want 2s (the retry the upstream asked for)", took)
		}
		if got := text(t, res); got != "polled" {
			t.Errorf("result = %q", got)
		}
		mu.Lock()
		defer mu.Unlock()
		if resumed.Get("Last-Event-ID") != "e1" || resumed.Get("Accept") != "text/event-stream" || resumed.Get(transport.HeaderKeySessionID) == "" {
			t.Errorf("resumed with headers %v", resumed)
		}
	})
}

func TestEventReader(t *testing.T) {
	type event struct {
		Data, LastID string
	}
	tests := []struct {
		name      string
		in        string
		want      []event
		wantRetry time.Duration
	}{
		{name: "one", in: "event: message\ndata: {}\n\n", want: []event{{Data: "{}"}}},
		{name: "crlf and lines", in: "data: a\r\ndata:b\r\n\r\ndata:  c\n\n", want: []event{{Data: "a\nb"}, {Data: " c"}}},
		{name: "comments and empty events", in: ": hi\n\nid: 1\n\nevent: x\n\ndata: d\n\n", want: []event{{Data: "d", LastID: "1"}}},
		{name: "ids", in: "id: 1\ndata: a\n\ndata: b\n\nid\ndata: c\n\nid: x\x00\ndata: d\n\n",
			want: []event{{Data: "a", LastID: "1"}, {Data: "b", LastID: "1"}, {Data: "c"}, {Data: "d"}}},
		{name: "retry", in: "retry: 1500\ndata: a\n\nretry: soon\n\n", want: []event{{Data: "a"}}, wantRetry: 1500 * time.Millisecond},
		{name: "cut short", in: "id: 9\ndata: a\n\nid: 10\ndata: b", want: []event{{Data: "a", LastID: "9"}, {Data: "b", LastID: "9"}}},
		{name: "long line", in: "data: " + strings.Repeat("y", 3*eventBufferSize) + "\n\n", want: []event{{Data: strings.Repeat("y", 3*eventBufferSize)}}},
		{name: "no field value", in: "data\ndata\n\n", want: []event{{Data: "\n"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newEventReader(strings.NewReader(tc.in))
			var got []event
			for {
				data, err := r.next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, event{Data: string(data), LastID: r.lastID})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if r.retry != tc.wantRetry {
				t.Errorf("retry = %v, want %v", r.retry, tc.wantRetry)
			}
		})
	}
}

// An answer to an upstream's request is sent with the session's headers,
// also when the context of the request has reached its deadline (mcp-go's
// transport gives its handler 30 seconds), but not when it was cancelled
// (the call or its stream has ended).
func TestAnswer(t *testing.T) {
	got := make(chan seenPost, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seenPost{header: r.Header.Clone(), raw: string(b)}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	m, err := New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	u := newUpstream(m, Upstream{Name: "up", Transport: TransportStreamableHTTP, URL: srv.URL})
	c := newConn(m.ctx, u, "")
	c.http = u.newHTTPSession("sess-1", mcp.ProtocolVersion20251125)
	defer u.httpTransport.CloseIdleConnections()

	expired, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel()
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	for _, tc := range []struct {
		name     string
		ctx      context.Context
		wantSent bool
	}{
		{name: "live", ctx: t.Context(), wantSent: true},
		{name: "past its deadline", ctx: expired, wantSent: true},
		{name: "cancelled", ctx: cancelled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.answer(tc.ctx, transport.NewJSONRPCResultResponse(mcp.NewRequestId(int64(7)), json.RawMessage(`{"action":"accept"}`)))
			select {
			case p := <-got:
				if !tc.wantSent {
					t.Fatalf("sent %s", p.raw)
				}
				if p.raw != `{"jsonrpc":"2.0","id":7,"result":{"action":"accept"}}` || p.header.Get(transport.HeaderKeySessionID) != "sess-1" {
					t.Errorf("sent %s with session %q", p.raw, p.header.Get(transport.HeaderKeySessionID))
				}
			default:
				if tc.wantSent {
					t.Error("not sent")
				}
			}
		})
	}
}

// A context outliving one that is already cancelled is cancelled when
// outlive returns, not a moment later: an answer for a call that has ended
// is never sent.
func TestOutliveCancelledAtOnce(t *testing.T) {
	in, cancel := context.WithCancel(t.Context())
	cancel()
	ctx, stop := outlive(in, context.WithoutCancel(in), time.Minute)
	defer stop()
	if ctx.Err() == nil {
		t.Fatal("the context outliving a cancelled one is live")
	}
	expired, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel()
	ctx, stop = outlive(expired, context.WithoutCancel(expired), time.Minute)
	defer stop()
	if ctx.Err() != nil {
		t.Fatalf("the context outliving one past its deadline ended: %v", ctx.Err())
	}
}
