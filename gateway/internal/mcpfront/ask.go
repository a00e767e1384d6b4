package mcpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// A call's own requests to its client, on its own stream.
//
// mcp-go sends a streamable HTTP session's sampling/createMessage and
// roots/list on the session's GET stream only (and elicitation/create
// too, unless mcp-go's own POST handling runs the call, which the fast
// path's calls skip). A client that opens no GET stream (the transport
// spec lets it) never sees them, and the call waits until its deadline.
// One that opens it can lose them as well: with an event store the
// listening stream's pump starts with the first GET and can take a
// request before that GET's connection attaches, and the request is then
// only recorded, for a Last-Event-ID the new connection does not send
// (TestRelay hung so on a loaded machine).
//
// So a request a call makes goes out on the call's own response
// (callstream.go), as the transport spec has it ("these messages SHOULD
// relate to the originating client request"), with an ID of the front's:
// a string mcp-go's numbered requests never take. The client POSTs its
// answer in the session; the front takes it off the route before mcp-go
// sees it (answer) and hands it to the waiting call. Only the session's
// owner can POST in it (ownedBy), so no other client can answer.
// Requests made outside a streamable HTTP call (over SSE or stdio, whose
// one stream mcp-go uses, or during a call in a batch, whose reply is one
// JSON array) go through mcp-go as before.

// askPrefix begins the ID of every request the front asks a client.
const askPrefix = "toolgate-"

// ask sends method with params to client session s on the stream of the
// call that call is the context of, and returns the result the client
// answered, waiting no longer than ctx. ok is false when that call has no
// stream of its own (the caller then asks through mcp-go): not a
// streamable HTTP call, or one whose answer has begun (a stray request).
func (f *Front) ask(ctx, call context.Context, s server.ClientSession, method string, params any) (result json.RawMessage, ok bool, err error) {
	if call == nil || s == nil {
		return nil, false, nil
	}
	cs := callStreamOf(call)
	if cs == nil {
		return nil, false, nil
	}
	c := f.liveClient(s.SessionID())
	if c == nil || c.streamableVersion() == "" {
		return nil, false, nil
	}
	id := askPrefix + strconv.FormatUint(c.askSeq.Add(1), 10)
	msg, err := json.Marshal(struct {
		JSONRPC string `json:"jsonrpc"`
		ID      string `json:"id"`
		Method  string `json:"method"`
		Params  any    `json:"params,omitempty"`
	}{"2.0", id, method, params})
	if err != nil {
		return nil, true, fmt.Errorf("%s: encoding the params: %w", method, err)
	}
	answer := make(chan []byte, 1)
	c.asks.Store(id, answer)
	defer c.asks.Delete(id)
	if err := cs.send(msg); errors.Is(err, errStreamEnded) {
		return nil, false, nil // a request after the call's answer: through mcp-go
	} else if err != nil {
		return nil, true, fmt.Errorf("%s: %w", method, err)
	}
	select {
	case m := <-answer:
		return answerResult(method, m)
	case <-ctx.Done():
		// The spec's way to say the answer is no longer wanted; best
		// effort, as the call's stream may be ending.
		cs.notify(string(mcp.MethodNotificationCancelled), map[string]any{"requestId": id, "reason": "the request that asked ended: " + context.Cause(ctx).Error()})
		return nil, true, fmt.Errorf("%s: no answer from the client: %w", method, ctx.Err())
	}
}

// rawParams is params as ask sends them: none when empty.
func rawParams(params json.RawMessage) any {
	if len(bytes.TrimSpace(params)) == 0 {
		return nil
	}
	return params
}

// answerResult is the result of the client's answer m to method, or the
// client's JSON-RPC error as an *RPCError.
func answerResult(method string, m []byte) (json.RawMessage, bool, error) {
	var a struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(m, &a); err != nil {
		return nil, true, fmt.Errorf("%s: the client's answer is not a JSON-RPC response: %v", method, err)
	}
	if a.Error != nil {
		return nil, true, fmt.Errorf("%s: the client answered: %w", method, &RPCError{Code: a.Error.Code, Msg: a.Error.Message})
	}
	if r := bytes.TrimSpace(a.Result); len(r) == 0 || r[0] != '{' {
		return nil, true, fmt.Errorf("%s: the client's answer has no result object", method)
	}
	return a.Result, true, nil
}

// answer hands msg, a client's response POSTed in session c, to the call
// that asked it, and reports whether one did: an answer to anything else
// (mcp-go's own requests) is mcp-go's to route. msg is copied.
func (c *clientSession) answer(id json.RawMessage, msg []byte) bool {
	key, ok := askIDKey(id)
	if !ok || c == nil {
		return false
	}
	v, ok := c.asks.LoadAndDelete(key)
	if !ok {
		return false
	}
	v.(chan []byte) <- bytes.Clone(msg)
	return true
}

// isAskID reports whether id, a raw JSON-RPC id, is one the front gives
// its requests.
func isAskID(id json.RawMessage) bool {
	_, ok := askIDKey(id)
	return ok
}

// askIDKey is id as the key of c.asks.
func askIDKey(id json.RawMessage) (string, bool) {
	if len(id) < len(askPrefix)+3 || id[0] != '"' {
		return "", false
	}
	var key string
	if json.Unmarshal(id, &key) != nil || !strings.HasPrefix(key, askPrefix) {
		return "", false
	}
	return key, true
}
