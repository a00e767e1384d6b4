package mcpfront

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/registry"
)

// batchWait bounds how long a test waits for something that must happen;
// it only turns a hang into a failure.
const batchWait = 20 * time.Second

// versionedSession is a raw streamable HTTP session that negotiated a
// given protocol version.
type versionedSession struct {
	t      *testing.T
	url    string
	id     string
	header string // the Mcp-Protocol-Version header sent, "" for none
}

// newVersionedSession initializes a session asking for version. With
// sendHeader it sends the Mcp-Protocol-Version header afterwards, as
// 2025-06-18 and later clients must.
func newVersionedSession(t *testing.T, url, version string, sendHeader bool) *versionedSession {
	t.Helper()
	s := &versionedSession{t: t, url: url}
	status, body, hdr := s.post(t.Context(), fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, version))
	if status != http.StatusOK || !strings.Contains(string(body), fmt.Sprintf(`"protocolVersion":%q`, version)) {
		t.Fatalf("initialize %s: HTTP %d: %s", version, status, body)
	}
	s.id = hdr.Get("Mcp-Session-Id")
	if sendHeader {
		s.header = version
	}
	if status, body, _ := s.post(t.Context(), `{"jsonrpc":"2.0","method":"notifications/initialized"}`); status != http.StatusAccepted {
		t.Fatalf("initialized: HTTP %d: %s", status, body)
	}
	t.Cleanup(func() {
		req, _ := http.NewRequest(http.MethodDelete, s.url, nil)
		req.Header.Set("Mcp-Session-Id", s.id)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	})
	return s
}

func (s *versionedSession) post(ctx context.Context, body string) (int, []byte, http.Header) {
	s.t.Helper()
	status, b, hdr, err := s.tryPost(ctx, body)
	if err != nil {
		s.t.Fatalf("POST: %v", err)
	}
	return status, b, hdr
}

func (s *versionedSession) tryPost(ctx context.Context, body string) (int, []byte, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, strings.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s.id != "" {
		req.Header.Set("Mcp-Session-Id", s.id)
	}
	if s.header != "" {
		req.Header.Set("Mcp-Protocol-Version", s.header)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header, err
}

// batchReply is one entry of a batch's reply.
type batchReply struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    struct {
			Suggestions []string `json:"suggestions"`
		} `json:"data"`
	} `json:"error"`
}

func decodeReplies(t *testing.T, b []byte) []batchReply {
	t.Helper()
	var rs []batchReply
	if err := json.Unmarshal(b, &rs); err != nil {
		t.Fatalf("reply %s is not a JSON array of responses: %v", b, err)
	}
	return rs
}

func decodeReply(t *testing.T, b []byte) batchReply {
	t.Helper()
	var r batchReply
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("reply %s is not one JSON-RPC response: %v", b, err)
	}
	return r
}

// mixedBatch is the batch every transport gets: a call, a call of an
// unknown tool, a notification, a call with a miscased name and a ping.
const mixedBatch = `[
 {"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"one"}}},
 {"jsonrpc":"2.0","id":"two","method":"tools/call","params":{"name":"ecoh","arguments":{"text":"x"}}},
 {"jsonrpc":"2.0","method":"notifications/roots/list_changed"},
 {"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"ECHO","arguments":{"text":"three"}}},
 {"jsonrpc":"2.0","id":4,"method":"ping"}
]`

// checkMixed checks the reply to mixedBatch.
func checkMixed(t *testing.T, b []byte) {
	t.Helper()
	rs := decodeReplies(t, b)
	var ids []string
	for _, r := range rs {
		ids = append(ids, string(r.ID))
	}
	if got, want := strings.Join(ids, ","), `1,"two",3,4`; got != want {
		t.Fatalf("reply ids = %s, want %s (the requests' order, no entry for the notification); reply %s", got, want, b)
	}
	if rs[0].Error != nil || !strings.Contains(string(rs[0].Result), `"text":"one"`) {
		t.Errorf("echo reply = %s", b)
	}
	if e := rs[1].Error; e == nil || e.Code != mcp.INVALID_PARAMS || len(e.Data.Suggestions) == 0 || e.Data.Suggestions[0] != "echo" {
		t.Errorf("unknown tool reply = %+v, want -32602 with data.suggestions [echo ...]", e)
	}
	if rs[2].Error != nil || !strings.Contains(string(rs[2].Result), `"text":"three"`) {
		t.Errorf("miscased call reply = %s, want the echo result", b)
	}
	if rs[3].Error != nil || string(rs[3].Result) != "{}" {
		t.Errorf("ping reply = %s", b)
	}
}

func TestBatchStreamableHTTP(t *testing.T) {
	g, _ := newGateway(t, nil)
	srv := serveHTTP(t, g)
	url := srv.URL + "/mcp"
	old := newVersionedSession(t, url, mcp.ProtocolVersion20250326, false)

	t.Run("mixed", func(t *testing.T) {
		status, body, hdr := old.post(t.Context(), mixedBatch)
		if status != http.StatusOK || hdr.Get("Content-Type") != "application/json" {
			t.Fatalf("batch = HTTP %d %q: %s, want 200 application/json", status, hdr.Get("Content-Type"), body)
		}
		checkMixed(t, body)
	})

	for _, tc := range []struct {
		name       string
		body       string
		wantStatus int
		wantCode   int    // of the one error answering the whole batch; 0 for an array
		wantMsg    string // substring of that error's message
		wantIDs    string // for an array: the ids of its entries
	}{
		{name: "notifications only", body: `[{"jsonrpc":"2.0","method":"notifications/roots/list_changed"},{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}}]`,
			wantStatus: http.StatusAccepted},
		{name: "client response only", body: `[{"jsonrpc":"2.0","id":7,"result":{}}]`, wantStatus: http.StatusAccepted},
		{name: "empty", body: `[]`, wantStatus: http.StatusBadRequest, wantCode: mcp.INVALID_REQUEST, wantMsg: "empty batch"},
		{name: "initialize inside", body: `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"initialize","params":{}}]`,
			wantStatus: http.StatusBadRequest, wantCode: mcp.INVALID_REQUEST, wantMsg: "initialize must not be part of a JSON-RPC batch"},
		{name: "too many", body: pings(maxBatch + 1), wantStatus: http.StatusBadRequest, wantCode: mcp.INVALID_REQUEST, wantMsg: "at most 100"},
		{name: "the most", body: pings(maxBatch), wantStatus: http.StatusOK, wantIDs: idList(maxBatch)},
		{name: "not JSON", body: `[{"jsonrpc":"2.0","id":1,`, wantStatus: http.StatusBadRequest, wantCode: mcp.PARSE_ERROR, wantMsg: "not valid JSON"},
		{name: "non-object elements", body: `[1,{"jsonrpc":"2.0","id":5,"method":"ping"},"x",null]`, wantStatus: http.StatusOK, wantIDs: "null,5,null,null"},
		{name: "invalid object", body: `[{"foo":"bar"},{"jsonrpc":"2.0","id":6,"method":"ping"}]`, wantStatus: http.StatusOK, wantIDs: "null,6"},
		{name: "unknown method", body: `[{"jsonrpc":"2.0","id":8,"method":"no/such"}]`, wantStatus: http.StatusOK, wantIDs: "8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body, _ := old.post(t.Context(), tc.body)
			if status != tc.wantStatus {
				t.Fatalf("batch = HTTP %d: %s, want %d", status, body, tc.wantStatus)
			}
			switch {
			case tc.wantCode != 0:
				r := decodeReply(t, body)
				if string(r.ID) != "null" || r.Error == nil || r.Error.Code != tc.wantCode || !strings.Contains(r.Error.Message, tc.wantMsg) {
					t.Errorf("batch = %s, want one error, id null, code %d, message containing %q", body, tc.wantCode, tc.wantMsg)
				}
			case tc.wantIDs != "":
				var ids []string
				for _, r := range decodeReplies(t, body) {
					ids = append(ids, string(r.ID))
				}
				if got := strings.Join(ids, ","); got != tc.wantIDs {
					t.Errorf("reply ids = %s, want %s: %s", got, tc.wantIDs, body)
				}
			default:
				if len(body) != 0 {
					t.Errorf("body = %s, want none", body)
				}
			}
		})
	}

	t.Run("non-object element gets -32600", func(t *testing.T) {
		_, body, _ := old.post(t.Context(), `[1,{"jsonrpc":"2.0","id":5,"method":"ping"}]`)
		rs := decodeReplies(t, body)
		if rs[0].Error == nil || rs[0].Error.Code != mcp.INVALID_REQUEST || rs[1].Error != nil {
			t.Errorf("reply = %s, want -32600 for 1 and a ping result", body)
		}
	})

	t.Run("same session and thread", func(t *testing.T) {
		s := newVersionedSession(t, url, mcp.ProtocolVersion20241105, false)
		call := `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"counter"}}`
		status, body, _ := s.post(t.Context(), "["+fmt.Sprintf(call, 1)+","+fmt.Sprintf(call, 2)+","+fmt.Sprintf(call, 3)+"]")
		if status != http.StatusOK {
			t.Fatalf("batch = HTTP %d: %s", status, body)
		}
		seen := map[float64]bool{}
		for _, r := range decodeReplies(t, body) {
			var res struct {
				StructuredContent struct{ N float64 } `json:"structuredContent"`
			}
			_ = json.Unmarshal(r.Result, &res)
			seen[res.StructuredContent.N] = true
		}
		if !seen[1] || !seen[2] || !seen[3] {
			t.Errorf("batch results = %s, want counts 1, 2 and 3 from one instance", body)
		}
		_, body, _ = s.post(t.Context(), fmt.Sprintf(call, 4))
		if !strings.Contains(string(body), `"structuredContent":{"n":4}`) {
			t.Errorf("call after the batch = %s, want n 4: the batch ran in the session's thread", body)
		}
	})

	for _, tc := range []struct {
		version    string
		sendHeader bool
	}{
		{mcp.ProtocolVersion20250618, true},
		{mcp.ProtocolVersion20250618, false}, // the negotiated version decides, not the header
		{mcp.ProtocolVersion20251125, true},
	} {
		t.Run(fmt.Sprintf("refused in %s, header %v", tc.version, tc.sendHeader), func(t *testing.T) {
			s := newVersionedSession(t, url, tc.version, tc.sendHeader)
			status, body, _ := s.post(t.Context(), mixedBatch)
			r := decodeReply(t, body)
			if status != http.StatusBadRequest || string(r.ID) != "null" || r.Error == nil || r.Error.Code != mcp.INVALID_REQUEST ||
				!strings.Contains(r.Error.Message, "not supported in protocol version "+tc.version) ||
				!strings.Contains(r.Error.Message, "one message per request") {
				t.Errorf("batch = HTTP %d %s, want 400 and one -32600 error, id null, naming %s", status, body, tc.version)
			}
		})
	}

	t.Run("no session", func(t *testing.T) {
		s := &versionedSession{t: t, url: url}
		status, body, _ := s.post(t.Context(), `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`)
		if status != http.StatusBadRequest || !strings.Contains(string(body), "missing Mcp-Session-Id") {
			t.Errorf("batch without a session = HTTP %d %s, want 400 naming the missing header", status, body)
		}
	})
	t.Run("unknown session", func(t *testing.T) {
		s := &versionedSession{t: t, url: url, id: "mcp-session-00000000-0000-0000-0000-000000000000"}
		if status, body, _ := s.post(t.Context(), `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`); status != http.StatusNotFound {
			t.Errorf("batch in an unknown session = HTTP %d %s, want 404", status, body)
		}
	})
}

func pings(n int) string {
	var b strings.Builder
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i)
	}
	b.WriteByte(']')
	return b.String()
}

func idList(n int) string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprint(i)
	}
	return strings.Join(ids, ",")
}

// barrier is a tool whose calls all block until n of them are inside it
// at once: calls that do not run concurrently never return (until their
// context ends).
type barrier struct {
	n    int
	full chan struct{}

	mu     sync.Mutex
	inside int // guarded by mu
}

func newBarrier(n int) *barrier { return &barrier{n: n, full: make(chan struct{})} }

func (b *barrier) call(ctx context.Context, _ map[string]any) (executors.Result, error) {
	b.mu.Lock()
	b.inside++
	if b.inside == b.n {
		close(b.full)
	}
	b.mu.Unlock()
	select {
	case <-b.full:
		return executors.Text("met"), nil
	case <-ctx.Done():
		return executors.Result{}, ctx.Err()
	}
}

func barrierBatch(n int) string {
	calls := make([]string, n)
	for i := range calls {
		calls[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"barrier"}}`, i)
	}
	return "[" + strings.Join(calls, ",") + "]"
}

// checkBarrier checks that every call of barrierBatch(n) met the others.
func checkBarrier(t *testing.T, body []byte, n int) {
	t.Helper()
	rs := decodeReplies(t, body)
	if len(rs) != n {
		t.Fatalf("reply has %d entries, want %d: %s", len(rs), n, body)
	}
	for i, r := range rs {
		if string(r.ID) != fmt.Sprint(i) || !strings.Contains(string(r.Result), `"text":"met"`) {
			t.Errorf("entry %d = %s, want id %d and the barrier met (all %d calls in flight together)", i, r.Result, i, n)
		}
	}
}

func TestBatchRunsConcurrently(t *testing.T) {
	const n = 8 // within defaults.max_parallel_per_session
	g, _ := newGateway(t, nil)
	if err := g.RegisterStateless(registry.Tool{Name: "barrier"}, newBarrier(n).call); err != nil {
		t.Fatal(err)
	}
	srv := serveHTTP(t, g)
	s := newVersionedSession(t, srv.URL+"/mcp", mcp.ProtocolVersion20250326, false)
	ctx, cancel := context.WithTimeout(t.Context(), batchWait)
	defer cancel()
	status, body, _ := s.post(ctx, barrierBatch(n))
	if status != http.StatusOK {
		t.Fatalf("batch = HTTP %d: %s", status, body)
	}
	checkBarrier(t, body, n)
}

// TestBatchCancelledWithRequest proves that ending the batch's HTTP
// request cancels every call of the batch in flight.
func TestBatchCancelledWithRequest(t *testing.T) {
	const n = 4
	g, _ := newGateway(t, nil)
	entered, cancelled := make(chan struct{}, n), make(chan struct{}, n)
	err := g.RegisterStateless(registry.Tool{Name: "hold"}, func(ctx context.Context, _ map[string]any) (executors.Result, error) {
		entered <- struct{}{}
		<-ctx.Done()
		cancelled <- struct{}{}
		return executors.Result{}, ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := serveHTTP(t, g)
	s := newVersionedSession(t, srv.URL+"/mcp", mcp.ProtocolVersion20250326, false)
	calls := make([]string, n)
	for i := range calls {
		calls[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"hold"}}`, i)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, _, _, err := s.tryPost(ctx, "["+strings.Join(calls, ",")+"]")
		done <- err
	}()
	timeout := time.After(batchWait)
	for range n {
		select {
		case <-entered:
		case <-timeout:
			t.Fatal("the batch's calls did not all start")
		}
	}
	cancel()
	for i := range n {
		select {
		case <-cancelled:
		case <-timeout:
			t.Fatalf("%d of %d calls cancelled after the request ended, want all", i, n)
		}
	}
	if err := <-done; err == nil {
		t.Error("the cancelled POST succeeded")
	}
}

// sseClient speaks the legacy SSE transport by hand.
type sseClient struct {
	t        *testing.T
	base     string
	endpoint string
	events   chan string // data of each message event
}

func newSSEClient(t *testing.T, base string) *sseClient {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/sse", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	c := &sseClient{t: t, base: base, events: make(chan string, 16)}
	endpoint := make(chan string, 1)
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		defer close(c.events)
		br := bufio.NewReader(resp.Body)
		event := ""
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimRight(line, "\r\n")
			switch {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data := strings.TrimPrefix(line, "data: ")
				if event == "endpoint" {
					endpoint <- data
				} else if event == "message" {
					c.events <- data
				}
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		resp.Body.Close()
		<-readerDone
	})
	select {
	case c.endpoint = <-endpoint:
	case <-time.After(batchWait):
		t.Fatal("no endpoint event")
	}
	return c
}

func (c *sseClient) post(body string) (int, []byte) {
	c.t.Helper()
	resp, err := http.Post(c.base+c.endpoint, "application/json", strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// next returns the data of the next message event that is not a
// notification.
func (c *sseClient) next() []byte {
	c.t.Helper()
	timeout := time.After(batchWait)
	for {
		select {
		case d, ok := <-c.events:
			if !ok {
				c.t.Fatal("the SSE stream ended")
			}
			if strings.HasPrefix(d, `{"jsonrpc":"2.0","method"`) {
				continue
			}
			return []byte(d)
		case <-timeout:
			c.t.Fatal("no message on the SSE stream")
		}
	}
}

func (c *sseClient) initialize(version string) {
	c.t.Helper()
	if status, body := c.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, version)); status != http.StatusAccepted {
		c.t.Fatalf("initialize: HTTP %d %s", status, body)
	}
	if got := c.next(); !strings.Contains(string(got), fmt.Sprintf(`"protocolVersion":%q`, version)) {
		c.t.Fatalf("initialize = %s", got)
	}
	c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

func TestBatchSSE(t *testing.T) {
	const n = 6
	g, _ := newGateway(t, nil)
	if err := g.RegisterStateless(registry.Tool{Name: "barrier"}, newBarrier(n).call); err != nil {
		t.Fatal(err)
	}
	srv := serveHTTP(t, g)

	t.Run("before initialize", func(t *testing.T) {
		c := newSSEClient(t, srv.URL)
		status, body := c.post(`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`)
		if r := decodeReply(t, body); status != http.StatusBadRequest || r.Error == nil || !strings.Contains(r.Error.Message, "send initialize first") {
			t.Errorf("batch before initialize = HTTP %d %s, want 400 asking for initialize", status, body)
		}
	})

	c := newSSEClient(t, srv.URL)
	c.initialize(mcp.ProtocolVersion20241105)
	t.Run("mixed", func(t *testing.T) {
		if status, body := c.post(mixedBatch); status != http.StatusAccepted || len(body) != 0 {
			t.Fatalf("batch POST = HTTP %d %s, want 202 and no body", status, body)
		}
		checkMixed(t, c.next())
	})
	t.Run("concurrent", func(t *testing.T) {
		if status, body := c.post(barrierBatch(n)); status != http.StatusAccepted {
			t.Fatalf("batch POST = HTTP %d %s", status, body)
		}
		checkBarrier(t, c.next(), n)
	})
	t.Run("notifications only", func(t *testing.T) {
		if status, _ := c.post(`[{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}]`); status != http.StatusAccepted {
			t.Fatalf("batch POST = HTTP %d", status)
		}
		c.post(`{"jsonrpc":"2.0","id":"after","method":"ping"}`)
		if got := c.next(); !strings.Contains(string(got), `"id":"after"`) {
			t.Errorf("next message = %s, want the ping's reply: a notification-only batch has none", got)
		}
	})
	t.Run("empty", func(t *testing.T) {
		status, body := c.post(`[]`)
		if r := decodeReply(t, body); status != http.StatusBadRequest || r.Error == nil || r.Error.Code != mcp.INVALID_REQUEST {
			t.Errorf("empty batch = HTTP %d %s, want 400 and -32600", status, body)
		}
	})

	t.Run("refused in 2025-06-18", func(t *testing.T) {
		c := newSSEClient(t, srv.URL)
		c.initialize(mcp.ProtocolVersion20250618)
		status, body := c.post(mixedBatch)
		if r := decodeReply(t, body); status != http.StatusBadRequest || string(r.ID) != "null" || r.Error == nil ||
			!strings.Contains(r.Error.Message, "not supported in protocol version 2025-06-18") {
			t.Errorf("batch = HTTP %d %s, want 400 and the version error", status, body)
		}
	})
}

// stdioClient drives ServeStdio over pipes.
type stdioClient struct {
	t     *testing.T
	in    *io.PipeWriter
	lines chan []byte
	done  chan error
}

func newStdioClient(t *testing.T, g *harness) *stdioClient {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := &stdioClient{t: t, in: inW, lines: make(chan []byte, 16), done: make(chan error, 1)}
	go func() {
		c.done <- g.ServeStdio(t.Context(), inR, outW)
		outW.Close()
	}()
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(outR)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			c.lines <- bytes.Clone(sc.Bytes())
		}
	}()
	return c
}

func (c *stdioClient) send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.in, strings.ReplaceAll(line, "\n", "")+"\n"); err != nil {
		c.t.Fatal(err)
	}
}

func (c *stdioClient) next() []byte {
	c.t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			c.t.Fatal("stdout closed early")
		}
		return l
	case <-time.After(batchWait):
		c.t.Fatal("no line on stdout")
	}
	return nil
}

// close ends the session (EOF) and waits for ServeStdio.
func (c *stdioClient) close() {
	c.t.Helper()
	c.in.Close()
	if err := <-c.done; err != nil {
		c.t.Errorf("ServeStdio = %v", err)
	}
	for range c.lines {
	}
}

func (c *stdioClient) initialize(version string) {
	c.t.Helper()
	c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, version))
	if got := c.next(); !strings.Contains(string(got), fmt.Sprintf(`"protocolVersion":%q`, version)) {
		c.t.Fatalf("initialize = %s", got)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

func TestBatchStdio(t *testing.T) {
	const n = 6
	g, _ := newGateway(t, nil)
	if err := g.RegisterStateless(registry.Tool{Name: "barrier"}, newBarrier(n).call); err != nil {
		t.Fatal(err)
	}
	c := newStdioClient(t, g)
	defer c.close()
	c.initialize(mcp.ProtocolVersion20250326)

	c.send(mixedBatch)
	checkMixed(t, c.next())

	c.send(barrierBatch(n))
	checkBarrier(t, c.next(), n)

	c.send(`[{"jsonrpc":"2.0","method":"notifications/roots/list_changed"},{"jsonrpc":"2.0","id":99,"result":{}}]`)
	c.send(`{"jsonrpc":"2.0","id":"after","method":"ping"}`)
	if got := c.next(); !strings.Contains(string(got), `"id":"after"`) {
		t.Errorf("next line = %s, want the ping's reply: a batch without requests has none", got)
	}

	for _, tc := range []struct{ name, batch, want string }{
		{"empty", `[]`, "empty batch"},
		{"initialize inside", `[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}]`, "initialize must not be part"},
		{"too many", pings(maxBatch + 1), "at most 100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.send(tc.batch)
			r := decodeReply(t, c.next())
			if string(r.ID) != "null" || r.Error == nil || r.Error.Code != mcp.INVALID_REQUEST || !strings.Contains(r.Error.Message, tc.want) {
				t.Errorf("batch %s = %+v, want -32600 id null containing %q", tc.name, r, tc.want)
			}
		})
	}

	// The stdio session negotiates again: batches are now refused.
	c.initialize(mcp.ProtocolVersion20251125)
	c.send(mixedBatch)
	r := decodeReply(t, c.next())
	if string(r.ID) != "null" || r.Error == nil || !strings.Contains(r.Error.Message, "not supported in protocol version 2025-11-25") {
		t.Errorf("batch in a 2025-11-25 session = %+v, want the version error", r)
	}
}

func TestBatchVersionError(t *testing.T) {
	for _, tc := range []struct {
		version string
		allowed bool
	}{
		{mcp.ProtocolVersion20241105, true},
		{mcp.ProtocolVersion20250326, true},
		{mcp.ProtocolVersion20250618, false},
		{mcp.ProtocolVersion20251125, false},
		{mcp.ProtocolVersion20260728, false},
		{"", false},
	} {
		t.Run(tc.version, func(t *testing.T) {
			got := batchVersionError(tc.version)
			if (got == nil) != tc.allowed {
				t.Errorf("batchVersionError(%q) = %s, want allowed %v", tc.version, got, tc.allowed)
			}
			if got != nil && !json.Valid(got) {
				t.Errorf("batchVersionError(%q) = %s, not JSON", tc.version, got)
			}
		})
	}
}

func FuzzBatchSplit(f *testing.F) {
	for _, s := range []string{
		mixedBatch, `[]`, `[1,"x",null,{}]`, ` [ {"id":null,"method":"m"} ] `, `[{"jsonrpc":"2.0","id":1,"method":"initialize"}]`,
		`[{"id":1,"result":{}},{"id":2,"error":{"code":1}}]`, `[{"method":5}]`, `[`, `{}`, pings(maxBatch + 1), "[\"\xff\"]",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		elems, reject := splitBatch(msg)
		if reject != nil {
			if elems != nil || !json.Valid(reject) {
				t.Fatalf("splitBatch(%q) = %v, %s; want no elements and a JSON error", msg, elems, reject)
			}
			return
		}
		if len(elems) == 0 || len(elems) > maxBatch {
			t.Fatalf("splitBatch(%q) accepted %d elements", msg, len(elems))
		}
		parts := make([][]byte, len(elems))
		for i, e := range elems {
			if !json.Valid(e.m.raw) {
				t.Fatalf("element %d = %+v", i, e)
			}
			if e.m.raw[0] != '{' && e.reject == nil {
				t.Fatalf("element %s is not an object and was not refused", e.m.raw)
			}
			if e.reject == nil && e.m.method == "" && !e.m.response {
				t.Fatalf("element %s accepted without a method or a result", e.m.raw)
			}
			parts[i] = e.m.raw
		}
		// The elements round-trip: together they are the batch.
		var want, got bytes.Buffer
		if err := json.Compact(&want, msg); err != nil {
			t.Fatalf("splitBatch accepted invalid JSON %q", msg)
		}
		joined := append(append([]byte{'['}, bytes.Join(parts, []byte{','})...), ']')
		if err := json.Compact(&got, joined); err != nil || !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("elements %s do not round-trip to %s", joined, msg)
		}
		if !isBatch(msg) {
			t.Fatalf("isBatch(%q) = false for a batch", msg)
		}
	})
}
