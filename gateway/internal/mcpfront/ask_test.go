package mcpfront

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/mcppeer"
)

// askClient is a raw streamable HTTP session of a client that declared
// sampling, reading a call's response stream event by event.
type askClient struct {
	*versionedSession
}

func newAskClient(t *testing.T, url, version string) askClient {
	t.Helper()
	s := &versionedSession{t: t, url: url}
	status, body, hdr := s.post(t.Context(), fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{"sampling":{}},"clientInfo":{"name":"raw","version":"1"}}}`, version))
	if status != http.StatusOK {
		t.Fatalf("initialize: HTTP %d: %s", status, body)
	}
	s.id, s.header = hdr.Get("Mcp-Session-Id"), version
	if status, body, _ := s.post(t.Context(), `{"jsonrpc":"2.0","method":"notifications/initialized"}`); status != http.StatusAccepted {
		t.Fatalf("initialized: HTTP %d: %s", status, body)
	}
	return askClient{s}
}

// wireMsg is a JSON-RPC message as the client reads it.
type wireMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
}

// stream POSTs body and returns the messages of its event stream as they
// come; the channel closes at the stream's end.
func (c askClient) stream(ctx context.Context, body string) <-chan wireMsg {
	c.t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", c.id)
	req.Header.Set("Mcp-Protocol-Version", c.header)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	if !isEventStream(resp.Header) {
		resp.Body.Close()
		c.t.Fatalf("the call answered %s, want an event stream carrying the request", resp.Header.Get("Content-Type"))
	}
	out := make(chan wireMsg, 16)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		rd := bufio.NewReader(resp.Body)
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				return
			}
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				var m wireMsg
				_ = json.Unmarshal([]byte(data), &m)
				out <- m
			}
		}
	}()
	return out
}

// next is the next message of events, failing the test at its end.
func next(t *testing.T, ctx context.Context, events <-chan wireMsg) wireMsg {
	t.Helper()
	select {
	case m, ok := <-events:
		if !ok {
			t.Fatal("the call's stream ended early")
		}
		return m
	case <-ctx.Done():
		t.Fatal("no message on the call's stream")
	}
	return wireMsg{}
}

// A source's request during a call goes out on the call's own stream
// with an ID of the front's, the client's answer (a JSON-RPC error here,
// whose code reaches the source) comes back in the session, through a
// batch too, and an answer nothing waits for is refused; a request the
// source stops waiting for is cancelled on the stream.
func TestAskOnCallStream(t *testing.T) {
	g, _ := newGateway(t, nil)
	const params = `{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxTokens":5,"x-extra":true}`
	src := &fakeSource{answer: func(ctx context.Context, peer mcppeer.Peer, _ string, p any) (json.RawMessage, error) {
		if p.(map[string]any)["uri"] == "test://impatient" {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, time.Millisecond)
			defer cancel()
		}
		res, err := peer.Request(ctx, "sampling/createMessage", json.RawMessage(params))
		text := string(res)
		if rpc := (*mcppeer.RPCError)(nil); errors.As(err, &rpc) {
			text = fmt.Sprintf("code %d: %s", rpc.Code, rpc.Message)
		} else if err != nil {
			text = "error: " + err.Error()
		}
		b, _ := json.Marshal(text)
		return json.RawMessage(`{"contents":[{"uri":"test://r","text":` + string(b) + `}]}`), nil
	}}
	g.SetCatalog("upstream:s", &Catalog{Resources: []json.RawMessage{
		json.RawMessage(`{"uri":"test://r","name":"r"}`), json.RawMessage(`{"uri":"test://impatient","name":"i"}`),
	}, Forward: src.forward})
	url := serveHTTP(t, g).URL + "/mcp"
	ctx, cancel := context.WithTimeout(t.Context(), batchWait)
	defer cancel()
	read := func(uri string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"resources/read","params":{"uri":"` + uri + `"}}`
	}
	resultText := func(m wireMsg) string {
		var r struct{ Contents []struct{ Text string } }
		if json.Unmarshal(m.Result, &r) != nil || len(r.Contents) != 1 {
			t.Fatalf("the read's result is %s", m.Result)
		}
		return r.Contents[0].Text
	}

	t.Run("answered with an error", func(t *testing.T) {
		c := newAskClient(t, url, "2025-11-25")
		events := c.stream(ctx, read("test://r"))
		ask := next(t, ctx, events)
		if ask.Method != "sampling/createMessage" || !strings.HasPrefix(string(ask.ID), `"toolgate-`) || string(ask.Params) != params {
			t.Fatalf("the call's stream carried %+v, want the source's sampling request as it sent it, with an ID of toolgate's", ask)
		}
		answer := `{"jsonrpc":"2.0","id":` + string(ask.ID) + `,"error":{"code":-1,"message":"the user declined"}}`
		if status, body, _ := c.post(ctx, answer); status != http.StatusAccepted {
			t.Fatalf("answer: HTTP %d: %s", status, body)
		}
		if got := resultText(next(t, ctx, events)); got != "code -1: the user declined" {
			t.Errorf("the source got %q, want the client's error", got)
		}
		status, body, _ := c.post(ctx, answer)
		if status != http.StatusBadRequest || !strings.Contains(string(body), "no request of this session waits") {
			t.Errorf("a second answer: HTTP %d: %s; want 400 saying nothing waits for it", status, body)
		}
		gone := *c.versionedSession
		gone.id = "mcp-session-gone"
		if status, body, _ := gone.post(ctx, answer); status != http.StatusNotFound {
			t.Errorf("an answer in no session: HTTP %d: %s; want 404, which tells the client to start a new session", status, body)
		}
	})

	t.Run("answered in a batch", func(t *testing.T) {
		c := newAskClient(t, url, "2025-03-26") // the last version with batches
		events := c.stream(ctx, read("test://r"))
		ask := next(t, ctx, events)
		answer := `[{"jsonrpc":"2.0","id":` + string(ask.ID) + `,"result":{"role":"assistant","content":{"type":"text","text":"sampled"},"model":"m"}}]`
		if status, body, _ := c.post(ctx, answer); status != http.StatusAccepted {
			t.Fatalf("answer: HTTP %d: %s", status, body)
		}
		if got := resultText(next(t, ctx, events)); got != `{"role":"assistant","content":{"type":"text","text":"sampled"},"model":"m"}` {
			t.Errorf("the source got %q, want the client's result as it sent it", got)
		}
	})

	t.Run("IDs per session", func(t *testing.T) {
		// Two sessions asked in turn: each one's first request is
		// toolgate-1, so an ID tells a client nothing of other sessions.
		for i := range 2 {
			c := newAskClient(t, url, "2025-11-25")
			events := c.stream(ctx, read("test://r"))
			ask := next(t, ctx, events)
			if string(ask.ID) != `"toolgate-1"` {
				t.Errorf("session %d's first request has ID %s, want \"toolgate-1\"", i+1, ask.ID)
			}
			if status, body, _ := c.post(ctx, `{"jsonrpc":"2.0","id":`+string(ask.ID)+`,"error":{"code":-1,"message":"no"}}`); status != http.StatusAccepted {
				t.Fatalf("answer: HTTP %d: %s", status, body)
			}
			next(t, ctx, events)
		}
	})

	t.Run("given up", func(t *testing.T) {
		c := newAskClient(t, url, "2025-11-25")
		events := c.stream(ctx, read("test://impatient"))
		ask := next(t, ctx, events)
		cancelled := next(t, ctx, events)
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		_ = json.Unmarshal(cancelled.Params, &p)
		if cancelled.Method != "notifications/cancelled" || string(p.RequestID) != string(ask.ID) {
			t.Fatalf("after the source gave up the stream carried %+v, want notifications/cancelled of %s", cancelled, ask.ID)
		}
		if got := resultText(next(t, ctx, events)); !strings.Contains(got, "deadline exceeded") {
			t.Errorf("the source got %q, want its deadline", got)
		}
	})
}
