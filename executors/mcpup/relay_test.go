package mcpup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/toolgate/toolgate/internal/mcppeer"
)

// transportRequestTimeout is what mcp-go's streamable HTTP transport gives
// the handler of a server's request (client/transport/streamable_http.go,
// handleIncomingRequest).
const transportRequestTimeout = 30 * time.Second

// slowPeer is a client that answers after delay, or fails with ctx's
// error when ctx ends first.
type slowPeer struct {
	delay time.Duration
}

func (p *slowPeer) Session() string { return "s1" }

func (p *slowPeer) Request(ctx context.Context, method string, _ json.RawMessage) (json.RawMessage, error) {
	select {
	case <-time.After(p.delay):
		return json.RawMessage(`{"action":"accept","content":{"name":"Ada"}}`), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (p *slowPeer) Notify(string, map[string]any) {}

// The relay waits for the client's answer past the deadline mcp-go's
// transport puts on the handler's context, but ends with the call it
// serves (its deadline or cancellation), when the transport cancels the
// handler's context, and after maxRelayWait at most.
func TestRelayDeadlines(t *testing.T) {
	elicit := transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(int64(7)), Method: string(mcp.MethodElicitationCreate),
		Params: map[string]any{"message": "your name?", "requestedSchema": map[string]any{"type": "object"}}}
	tests := []struct {
		name        string
		answerAfter time.Duration
		callTimeout time.Duration // 0: none
		cancelAfter time.Duration // the transport cancels the handler's context; 0: never
		cancelCall  time.Duration // the client cancels its call; 0: never
		wantAfter   time.Duration
		wantAnswer  bool
	}{
		{name: "slow human", answerAfter: 45 * time.Second, callTimeout: 5 * time.Minute, wantAfter: 45 * time.Second, wantAnswer: true},
		{name: "fast answer", answerAfter: time.Second, callTimeout: 5 * time.Minute, wantAfter: time.Second, wantAnswer: true},
		{name: "call deadline", answerAfter: 2 * time.Minute, callTimeout: 40 * time.Second, wantAfter: 40 * time.Second},
		{name: "call deadline within the transport's", answerAfter: 2 * time.Minute, callTimeout: 10 * time.Second, wantAfter: 10 * time.Second},
		{name: "call cancelled", answerAfter: 2 * time.Minute, callTimeout: 5 * time.Minute, cancelCall: 50 * time.Second, wantAfter: 50 * time.Second},
		{name: "transport cancels", answerAfter: 2 * time.Minute, callTimeout: 5 * time.Minute, cancelAfter: 12 * time.Second, wantAfter: 12 * time.Second},
		{name: "own bound", answerAfter: 24 * time.Hour, wantAfter: maxRelayWait},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newTestConn(bareUpstream(t))
				p := &slowPeer{delay: tc.answerAfter}
				call, cancelCall := context.WithCancel(WithPeer(t.Context(), p))
				defer cancelCall()
				if tc.callTimeout > 0 {
					var cancel context.CancelFunc
					call, cancel = context.WithTimeout(call, tc.callTimeout)
					defer cancel()
				}
				if tc.cancelCall > 0 {
					time.AfterFunc(tc.cancelCall, cancelCall)
				}
				defer c.trackPeer(call, "toolgate-1")()
				// What the transport does: the call's response stream's
				// context, under a 30 s timeout of its own.
				stream, cancelStream := context.WithCancel(call)
				defer cancelStream()
				in, cancel := context.WithTimeout(stream, transportRequestTimeout)
				defer cancel()
				if tc.cancelAfter > 0 {
					time.AfterFunc(tc.cancelAfter, cancelStream)
				}

				start := time.Now()
				resp, err := c.onRequest(in, elicit)
				if err != nil {
					t.Fatalf("onRequest: %v", err)
				}
				if got := time.Since(start); got != tc.wantAfter {
					t.Errorf("onRequest returned after %v, want %v", got, tc.wantAfter)
				}
				if gotAnswer := resp.Error == nil; gotAnswer != tc.wantAnswer {
					t.Fatalf("onRequest = %+v (error %+v), want an answer: %v", resp, resp.Error, tc.wantAnswer)
				}
				if tc.wantAnswer && string(resp.Result) != `{"action":"accept","content":{"name":"Ada"}}` {
					t.Errorf("onRequest result = %s", resp.Result)
				}
			})
		})
	}
}

// answerPeer is a client that answers every request with answer.
type answerPeer struct {
	answer string
}

func (p answerPeer) Session() string { return "s1" }

func (p answerPeer) Request(context.Context, string, json.RawMessage) (json.RawMessage, error) {
	return json.RawMessage(p.answer), nil
}

func (p answerPeer) Notify(string, map[string]any) {}

// defaultsForm is the form of the conformance suite's scenario
// elicitation-sep1034-client-defaults: every field has a default, none is
// required.
const defaultsForm = `{"message":"please accept with defaults","requestedSchema":{"type":"object","properties":{
	"name":{"type":"string","default":"John Doe"},
	"age":{"type":"integer","default":30},
	"score":{"type":"number","default":95.5},
	"status":{"type":"string","enum":["active","inactive","pending"],"default":"active"},
	"verified":{"type":"boolean","default":true}},"required":[]}}`

// An accepted elicitation's answer reaches the upstream with the defaults
// of the fields the client left out (SEP-1034); other answers, and answers
// to other requests, pass as the client gave them.
func TestRelayFillsElicitationDefaults(t *testing.T) {
	var form map[string]any
	if err := json.Unmarshal([]byte(defaultsForm), &form); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		method mcp.MCPMethod
		answer string
		want   string
	}{
		{name: "accept, nothing given", method: mcp.MethodElicitationCreate, answer: `{"action":"accept","content":{}}`,
			want: `{"action":"accept","content":{"age":30,"name":"John Doe","score":95.5,"status":"active","verified":true}}`},
		{name: "accept, some given", method: mcp.MethodElicitationCreate, answer: `{"action":"accept","content":{"name":"Ada","verified":false,"age":0},"_meta":{"k":1}}`,
			want: `{"_meta":{"k":1},"action":"accept","content":{"age":0,"name":"Ada","score":95.5,"status":"active","verified":false}}`},
		{name: "accept, no content", method: mcp.MethodElicitationCreate, answer: `{"action":"accept"}`,
			want: `{"action":"accept","content":{"age":30,"name":"John Doe","score":95.5,"status":"active","verified":true}}`},
		{name: "decline", method: mcp.MethodElicitationCreate, answer: `{"action":"decline"}`, want: `{"action":"decline"}`},
		{name: "cancel", method: mcp.MethodElicitationCreate, answer: `{"action":"cancel"}`, want: `{"action":"cancel"}`},
		{name: "sampling", method: mcp.MethodSamplingCreateMessage, answer: `{"action":"accept","content":{}}`, want: `{"action":"accept","content":{}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestConn(bareUpstream(t))
			call := WithPeer(t.Context(), answerPeer{answer: tc.answer})
			defer c.trackPeer(call, "toolgate-1")()
			req := transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(int64(7)), Method: string(tc.method), Params: form}
			resp, err := c.onRequest(call, req)
			if err != nil || resp.Error != nil {
				t.Fatalf("onRequest = %+v, %v; want an answer", resp, err)
			}
			if string(resp.Result) != tc.want {
				t.Errorf("the upstream gets %s, want %s", resp.Result, tc.want)
			}
		})
	}
}

// fillDefaults fills only top-level properties whose default is of their
// own primitive type, never overwrites what the client gave (null
// included), and leaves what it cannot read byte for byte as it is.
func TestFillDefaults(t *testing.T) {
	tests := []struct {
		name         string
		params       string
		answer, want string
	}{
		{name: "no defaults", params: `{"requestedSchema":{"type":"object","properties":{"a":{"type":"string"}}}}`,
			answer: `{"action": "accept", "content": {}}`, want: `{"action": "accept", "content": {}}`},
		{name: "all given", params: defaultsForm,
			answer: `{"action":"accept","content":{"name":"x","age":1,"score":2,"status":"pending","verified":false}}`,
			want:   `{"action":"accept","content":{"name":"x","age":1,"score":2,"status":"pending","verified":false}}`},
		{name: "null given", params: `{"requestedSchema":{"properties":{"a":{"type":"string","default":"d"}}}}`,
			answer: `{"action":"accept","content":{"a":null}}`, want: `{"action":"accept","content":{"a":null}}`},
		{name: "null content", params: `{"requestedSchema":{"properties":{"a":{"type":"string","default":"d"}}}}`,
			answer: `{"action":"accept","content":null}`, want: `{"action":"accept","content":{"a":"d"}}`},
		{name: "defaults of another type", params: `{"requestedSchema":{"properties":{
			"s":{"type":"string","default":1},"i":{"type":"integer","default":1.5},"n":{"type":"number","default":"1"},
			"b":{"type":"boolean","default":"true"},"u":{"default":"untyped"},"z":{"type":"string","default":null}}}}`,
			answer: `{"action":"accept","content":{}}`, want: `{"action":"accept","content":{}}`},
		{name: "integral number as integer", params: `{"requestedSchema":{"properties":{"i":{"type":"integer","default":2.0}}}}`,
			answer: `{"action":"accept","content":{}}`, want: `{"action":"accept","content":{"i":2.0}}`},
		{name: "multi-select and nested", params: `{"requestedSchema":{"properties":{
			"tags":{"type":"array","items":{"type":"string","enum":["a","b"]},"default":["a"]},
			"o":{"type":"object","properties":{"x":{"type":"string","default":"x"}},"default":{"x":"y"}}}}}`,
			answer: `{"action":"accept","content":{}}`, want: `{"action":"accept","content":{}}`},
		{name: "content not an object", params: defaultsForm, answer: `{"action":"accept","content":[1]}`, want: `{"action":"accept","content":[1]}`},
		{name: "no form (url mode)", params: `{"mode":"url","url":"http://127.0.0.1/x","message":"go"}`,
			answer: `{"action":"accept"}`, want: `{"action":"accept"}`},
		{name: "unreadable form", params: `{"requestedSchema":{"properties":[]}}`, answer: `{"action":"accept"}`, want: `{"action":"accept"}`},
		{name: "unreadable answer", params: defaultsForm, answer: `"accept"`, want: `"accept"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := fillDefaults(json.RawMessage(tc.params), json.RawMessage(tc.answer)); string(got) != tc.want {
				t.Errorf("fillDefaults(%s,\n%s) = %s, want %s", tc.params, tc.answer, got, tc.want)
			}
		})
	}
}

// errPeer is a client that answers every request with err.
type errPeer struct{ err error }

func (p errPeer) Session() string { return "s1" }
func (p errPeer) Request(context.Context, string, json.RawMessage) (json.RawMessage, error) {
	return nil, p.err
}
func (p errPeer) Notify(string, map[string]any) {}

// The client's JSON-RPC error code reaches the upstream, also when the
// peer's error wraps it (the front says which request the client
// answered); any other error is -32603.
func TestRelayKeepsTheClientsCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{&mcppeer.RPCError{Code: -1, Message: "the user declined"}, -1},
		{fmt.Errorf("sampling/createMessage: the client answered: %w", &mcppeer.RPCError{Code: -1, Message: "the user declined"}), -1},
		{errors.New("no"), mcp.INTERNAL_ERROR},
	} {
		c := newTestConn(bareUpstream(t))
		call := WithPeer(t.Context(), errPeer{err: tc.err})
		done := c.trackPeer(call, "toolgate-1")
		req := transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(int64(7)), Method: string(mcp.MethodSamplingCreateMessage), Params: map[string]any{}}
		resp, err := c.onRequest(call, req)
		done()
		if err != nil || resp.Error == nil || resp.Error.Code != tc.want {
			t.Errorf("a peer's %q: the upstream gets %+v, %v; want code %d", tc.err, resp, err, tc.want)
		}
	}
}

// gatePeer is a client that holds every request until open is closed,
// counting those it holds.
type gatePeer struct {
	open chan struct{}
	held atomic.Int64
}

func (p *gatePeer) Session() string { return "s1" }

func (p *gatePeer) Request(ctx context.Context, _ string, _ json.RawMessage) (json.RawMessage, error) {
	p.held.Add(1)
	select {
	case <-p.open:
		return json.RawMessage(`{"role":"assistant","content":{"type":"text","text":"ok"},"model":"m"}`), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (p *gatePeer) Notify(string, map[string]any) {}

// One call's requests to its client (sampling here) are relayed at most
// maxClientRequests at a time; the upstream's requests past that are
// refused at once, with an error saying why (issue 31, item 9: 200
// sampling requests of one call were all relayed at once).
func TestRelayCapsRequestsPerCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTestConn(bareUpstream(t))
		p := &gatePeer{open: make(chan struct{})}
		call, cancel := context.WithCancel(WithPeer(t.Context(), p))
		defer cancel()
		defer c.trackPeer(call, "toolgate-1")()
		const n = 3 * maxClientRequests
		var refused atomic.Int64
		var wg sync.WaitGroup
		for i := range n {
			req := transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(int64(i)), Method: string(mcp.MethodSamplingCreateMessage),
				Params: map[string]any{"messages": []any{}, "maxTokens": 10}}
			wg.Go(func() {
				resp, err := c.onRequest(call, req)
				if err != nil {
					t.Errorf("onRequest: %v", err)
					return
				}
				if resp.Error != nil {
					refused.Add(1)
				}
			})
		}
		synctest.Wait()
		if got := p.held.Load(); got != maxClientRequests {
			t.Errorf("%d sampling requests of one call: %d reached the client at once, want %d", n, got, maxClientRequests)
		}
		if got := refused.Load(); got != n-maxClientRequests {
			t.Errorf("%d refused while the client held %d, want %d", got, maxClientRequests, n-maxClientRequests)
		}
		close(p.open)
		wg.Wait()
	})
}
