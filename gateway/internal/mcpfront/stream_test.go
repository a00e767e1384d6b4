package mcpfront

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/executors"
)

// addChatty registers a tool "chatty" that reports progress steps times
// and sends an upstream's log message at each step, then answers "done".
func addChatty(t *testing.T, g *harness, steps int) {
	t.Helper()
	g.addTool(t, "chatty", func(_ context.Context, req *Request) *executors.Result {
		for i := range steps {
			if req.Progress != nil {
				req.Progress(float64(i+1), float64(steps), "")
			}
			if req.Peer != nil {
				req.Peer.Notify(string(mcp.MethodNotificationMessage), map[string]any{"level": "info", "logger": "up", "data": fmt.Sprint("step ", i+1)})
			}
		}
		return new(executors.Text("done"))
	})
}

// streamEvents is what a POST's answer carried, in order: the methods of
// its notifications and, last, "result" for the response.
func streamEvents(t *testing.T, body []byte) (notes []string, afterResult int) {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	seenResult := false
	for sc.Scan() {
		d, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok {
			continue
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal(d, &m); err != nil {
			t.Fatalf("event %s: %v", d, err)
		}
		switch {
		case seenResult:
			afterResult++
		case m.Result != nil:
			seenResult = true
			if !bytes.Contains(m.Result, []byte(`"done"`)) {
				t.Fatalf("result %s, want the tool's", m.Result)
			}
		default:
			notes = append(notes, m.Method)
		}
	}
	if !seenResult {
		t.Fatalf("no result in the answer:\n%s", body)
	}
	return notes, afterResult
}

func count(xs []string, x string) int {
	n := 0
	for _, v := range xs {
		if v == x {
			n++
		}
	}
	return n
}

// A call's progress and log messages go out on the call's own POST
// stream, all before its result, even while the session's GET stream is
// open: mcp-go alone lets the GET stream take some of them, where a
// progress notification after the result is lost to the client (MCPGO.md,
// pitfall 1; the conformance scenario tools-call-with-progress).
func TestCallNotificationsOnOwnStream(t *testing.T) {
	const steps = 40
	g, _ := newGateway(t, nil)
	addChatty(t, g, steps)
	srv := serveHTTP(t, g)
	s := newVersionedSession(t, srv.URL+"/mcp", "2025-11-25", true)
	if status, body, _ := s.post(t.Context(), `{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"info"}}`); status != 200 {
		t.Fatalf("setLevel: HTTP %d: %s", status, body)
	}
	events := s.listen()
	for round := range 3 {
		status, body, hdr := s.post(t.Context(), fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"chatty","arguments":{},"_meta":{"progressToken":"tok"}}}`, 10+round))
		if status != 200 || !isEventStream(hdr) {
			t.Fatalf("call: HTTP %d, %s: %s", status, hdr.Get("Content-Type"), body)
		}
		notes, after := streamEvents(t, body)
		if p, l := count(notes, "notifications/progress"), count(notes, "notifications/message"); p != steps || l != steps || after != 0 {
			t.Fatalf("round %d: the call's stream had %d progress and %d log notifications before its result and %d events after; want %d, %d and 0", round, p, l, after, steps, steps)
		}
	}
	g.mcp.SendNotificationToAllClients(endMarker, nil)
	if n := countUntilEnd(t, events, "notifications/progress"); n != 0 {
		t.Fatalf("the GET stream took %d of the calls' progress notifications", n)
	}
}

// Without a progress token or a log level the call's answer is plain JSON,
// as before.
func TestCallWithoutNotificationsAnswersJSON(t *testing.T) {
	g, _ := newGateway(t, nil)
	addChatty(t, g, 3)
	srv := serveHTTP(t, g)
	s := newVersionedSession(t, srv.URL+"/mcp", "2025-11-25", true)
	status, body, hdr := s.post(t.Context(), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"chatty","arguments":{}}}`)
	if status != 200 || hdr.Get("Content-Type") != "application/json" || !bytes.Contains(body, []byte(`"done"`)) {
		t.Fatalf("call: HTTP %d, %s: %s", status, hdr.Get("Content-Type"), body)
	}
}

// A 2026-07-28 request has no session to address a notification to: its
// log messages reach it on its own stream when its _meta asked for a
// level, and not otherwise; its progress too.
func TestModernCallNotifications(t *testing.T) {
	const steps = 5
	g, _ := newGateway(t, nil)
	addChatty(t, g, steps)
	srv := serveHTTP(t, g)
	call := func(meta string) (int, []byte) {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"chatty","arguments":{},"_meta":{%s"io.modelcontextprotocol/protocolVersion":%q,"io.modelcontextprotocol/clientCapabilities":{}}}}`, meta, mcp.ProtocolVersion20260728)
		status, _, b := postModern(t, srv.URL+"/mcp", body, map[string]string{mcp.HeaderMethod: "tools/call", mcp.HeaderName: "chatty"})
		return status, b
	}
	status, body := call(`"progressToken":7,"io.modelcontextprotocol/logLevel":"debug",`)
	if status != 200 {
		t.Fatalf("HTTP %d: %s", status, body)
	}
	notes, after := streamEvents(t, body)
	if p, l := count(notes, "notifications/progress"), count(notes, "notifications/message"); p != steps || l != steps || after != 0 {
		t.Fatalf("with a progress token and log level debug: %d progress, %d log notifications, %d events after the result; want %d, %d, 0:\n%s", p, l, after, steps, steps, body)
	}
	status, body = call(`"progressToken":7,"io.modelcontextprotocol/logLevel":"error",`)
	if notes, _ = streamEvents(t, body); status != 200 || count(notes, "notifications/message") != 0 || count(notes, "notifications/progress") != steps {
		t.Fatalf("with log level error: HTTP %d, notifications %v; want progress only", status, notes)
	}
	status, body = call(`"progressToken":7,`)
	if notes, _ = streamEvents(t, body); status != 200 || count(notes, "notifications/message") != 0 {
		t.Fatalf("without a log level: HTTP %d, notifications %v; want no log message", status, notes)
	}
}

// A client that stops reading its call's response holds nobody but its
// own request: reporting progress never waits for it (an upstream's
// progress comes on the upstream's shared read goroutine), the call
// returns, and what the client cannot take is dropped.
func TestCallStreamSlowClientBlocksNobody(t *testing.T) {
	g, _ := newGateway(t, nil)
	returned := make(chan struct{})
	big := strings.Repeat("x", 4096)
	g.addTool(t, "chatty", func(_ context.Context, req *Request) *executors.Result {
		defer close(returned)
		for i := range 5000 { // 20 MB, far past what socket buffers hold
			req.Progress(float64(i), 0, big)
		}
		return new(executors.Text("done"))
	})
	srv := serveHTTP(t, g)
	s := newVersionedSession(t, srv.URL+"/mcp", "2025-11-25", true)
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"chatty","arguments":{},"_meta":{"progressToken":"p"}}}`
	fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Session-Id: %s\r\nMcp-Protocol-Version: 2025-11-25\r\nContent-Length: %d\r\n\r\n%s", s.id, len(body), body)
	// ... and never reads.
	select {
	case <-returned:
	case <-time.After(batchWait):
		t.Fatal("the tool's progress reports are blocked by a client that does not read")
	}
}
