package mcpfront

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// openEventStream sends req and returns its response, which must be an event
// stream; the test reads its body.
func openEventStream(t *testing.T, req *http.Request) *http.Response {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK || !isEventStream(resp.Header) {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s %s: HTTP %d %s, want an event stream", req.Method, req.URL, resp.StatusCode, b)
	}
	return resp
}

// sessionGet is the GET of session sid's stream, given up after
// batchWait.
func sessionGet(t *testing.T, url, sid string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(boundedCtx(t), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	return req
}

// TestEndStreams: EndStreams ends a session's GET stream cleanly (the
// body ends, no reset) and keeps the session, whose calls go on; a GET
// opened afterwards ends at once; a 2026-07-28 subscriptions/listen
// stream is answered, its last event the result of the listen request.
func TestEndStreams(t *testing.T) {
	g, _ := newGateway(t, nil)
	srv := serveHTTP(t, g)
	url := srv.URL + "/mcp"
	s := newVersionedSession(t, url, "2025-11-25", true)
	get := openEventStream(t, sessionGet(t, url, s.id))

	listenReq, err := http.NewRequestWithContext(boundedCtx(t), http.MethodPost, url, strings.NewReader(
		`{"jsonrpc":"2.0","id":"sub-1","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},`+modernMeta+`}}`))
	if err != nil {
		t.Fatal(err)
	}
	listenReq.Header.Set("Content-Type", "application/json")
	listenReq.Header.Set("Accept", "application/json, text/event-stream")
	listenReq.Header.Set(mcp.HeaderProtocolVersion, mcp.ProtocolVersion20260728)
	listenReq.Header.Set(mcp.HeaderMethod, "subscriptions/listen")
	listen := openEventStream(t, listenReq)
	events := bufio.NewReader(listen.Body)
	if first := nextEvent(t, events); !bytes.Contains(first, []byte(mcp.MethodNotificationSubscriptionsAcknowledged)) {
		t.Fatalf("the listen stream's first event = %s, want the acknowledgement", first)
	}

	g.EndStreams()

	if b, err := io.ReadAll(get.Body); err != nil {
		t.Errorf("the GET stream ended with %v (read %q), want a clean end", err, b)
	}
	last := nextEvent(t, events)
	var reply struct {
		ID     string          `json:"id"`
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(last, &reply); err != nil || reply.ID != "sub-1" || reply.Result == nil {
		t.Errorf("the listen stream's last event = %s, want the result of request sub-1", last)
	}
	if rest, err := io.ReadAll(events); err != nil || len(bytes.TrimSpace(rest)) > 0 {
		t.Errorf("after the listen result: %q, %v; want a clean end", rest, err)
	}

	// The session stays: its calls go on, and its next GET ends at once.
	status, body, _ := s.post(t.Context(), `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"still here"}}}`)
	if status != http.StatusOK || !strings.Contains(string(body), "still here") {
		t.Errorf("a call after EndStreams: HTTP %d %s, want the echo", status, body)
	}
	again := openEventStream(t, sessionGet(t, url, s.id))
	if b, err := io.ReadAll(again.Body); err != nil || len(b) > 0 {
		t.Errorf("a GET after EndStreams read %q, %v; want it ended at once, empty", b, err)
	}
}

// nextEvent returns the data of the next event on r.
func nextEvent(t *testing.T, r *bufio.Reader) []byte {
	t.Helper()
	for {
		line, err := r.ReadBytes('\n')
		if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
			return bytes.TrimSpace(d)
		}
		if err != nil {
			t.Fatalf("the stream ended (%v) before its next event", err)
		}
	}
}

// boundedCtx is the test's context, ended after batchWait: a stream that
// does not end fails the test rather than hanging it.
func boundedCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), batchWait)
	t.Cleanup(cancel)
	return ctx
}
