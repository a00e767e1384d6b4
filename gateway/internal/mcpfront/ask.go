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

	"github.com/toolgate/toolgate/gateway/internal/eventstream"
	"github.com/toolgate/toolgate/internal/mcppeer"
)

// The front's requests to a client of a streamable HTTP session
// (sampling/createMessage, elicitation/create, roots/list).
//
// A request made during a request of the client's goes out on that
// request's own response (package eventstream), as the transport spec has it ("these
// messages SHOULD relate to the originating client request"); one made
// outside any (or after its answer began) goes out on the session's GET
// stream. Each has an ID of the front's, numbered per session. The client
// POSTs its answer in the session; the front hands it to the waiting
// request (answer). Only the session's owner can POST in it, so no other
// client can answer. The SSE and stdio sessions are mcp-go's, and so are
// their requests (relay.go).

// askPrefix begins the ID of every request the front asks a client.
const askPrefix = "toolgate-"

// ask sends method with params to the client of s, on st when it can take
// it, else on the GET stream, and returns the result the client answered,
// waiting no longer than ctx.
func (s *session) ask(ctx context.Context, st *eventstream.Reply, method string, params any) (json.RawMessage, error) {
	id := askPrefix + strconv.FormatUint(s.askSeq.Add(1), 10)
	msg, err := json.Marshal(struct {
		JSONRPC string `json:"jsonrpc"`
		ID      string `json:"id"`
		Method  string `json:"method"`
		Params  any    `json:"params,omitempty"`
	}{"2.0", id, method, params})
	if err != nil {
		return nil, fmt.Errorf("%s: encoding the params: %w", method, err)
	}
	answer := make(chan []byte, 1)
	s.asks.Store(id, answer)
	defer s.asks.Delete(id)
	sent := false
	if st != nil {
		switch err := st.Send(msg); {
		case err == nil:
			sent = true
		case !errors.Is(err, eventstream.ErrEnded):
			return nil, fmt.Errorf("%s: %w", method, err)
		}
	}
	if !sent {
		select {
		case s.toGet <- msg:
		case <-s.done:
			return nil, fmt.Errorf("%s: the session ended", method)
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: no GET stream of the session took the request: %w", method, ctx.Err())
		}
	}
	select {
	case m := <-answer:
		return answerResult(method, m)
	case <-s.done:
		return nil, fmt.Errorf("%s: the session ended before the client answered", method)
	case <-ctx.Done():
		if st != nil {
			// The spec's way to say the answer is no longer wanted; best
			// effort, as the request's stream may be ending.
			st.Notify(string(mcp.MethodNotificationCancelled), map[string]any{"requestId": id, "reason": "the request that asked ended: " + context.Cause(ctx).Error()})
		}
		return nil, fmt.Errorf("%s: no answer from the client: %w", method, ctx.Err())
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
// client's JSON-RPC error as an *mcppeer.RPCError.
func answerResult(method string, m []byte) (json.RawMessage, error) {
	var a struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(m, &a); err != nil {
		return nil, fmt.Errorf("%s: the client's answer is not a JSON-RPC response: %v", method, err)
	}
	if a.Error != nil {
		return nil, fmt.Errorf("%s: the client answered: %w", method, &mcppeer.RPCError{Code: a.Error.Code, Message: a.Error.Message})
	}
	if r := bytes.TrimSpace(a.Result); len(r) == 0 || r[0] != '{' {
		return nil, fmt.Errorf("%s: the client's answer has no result object", method)
	}
	return a.Result, nil
}

// answer hands msg, a client's response (with id) in session s, to the
// request that asked it, and reports whether one waited. msg is copied.
func (s *session) answer(id json.RawMessage, msg []byte) bool {
	key, ok := askIDKey(id)
	if !ok {
		return false
	}
	v, ok := s.asks.LoadAndDelete(key)
	if !ok {
		return false
	}
	v.(chan []byte) <- bytes.Clone(msg)
	return true
}

// askIDKey is id, a raw JSON-RPC id, as the key of s.asks; false for an
// ID the front never gives.
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
