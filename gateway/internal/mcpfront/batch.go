package mcpfront

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime/debug"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
)

// JSON-RPC batches: a JSON array of requests and notifications, allowed by
// MCP 2024-11-05 and 2025-03-26 and removed in 2025-06-18. Every message
// of a batch is served concurrently, exactly as if it had arrived alone in
// the same session (handle), and the answers go back as one array in the
// order of the messages. Sessions of a later revision get the protocol's
// error.

// maxBatch caps the messages of one batch.
const maxBatch = 100

// batchElem is one message of a batch: decoded, or refused with reject.
type batchElem struct {
	m      message
	reject []byte
}

// isBatch reports whether msg is a JSON array, that is a JSON-RPC batch.
func isBatch(msg []byte) bool {
	for _, c := range msg {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c == '['
	}
	return false
}

// splitBatch decodes a batch into its messages. When the batch as a whole
// is wrong (not JSON, empty, too long, or holding an initialize, which may
// not be batched) it returns instead the JSON-RPC error answering it. A
// message that is wrong on its own (not an object, an "id": null, a
// request of the 2026-07-28 era, which has no batches) gets its own error
// in the answer.
func splitBatch(msg []byte) (elems []batchElem, reject []byte) {
	var raw []json.RawMessage
	if err := json.Unmarshal(msg, &raw); err != nil {
		return nil, jsonRPCError(mcp.PARSE_ERROR, "batch is not valid JSON: send a JSON array of JSON-RPC messages")
	}
	switch {
	case len(raw) == 0:
		return nil, jsonRPCError(mcp.INVALID_REQUEST, "empty batch: a JSON-RPC batch holds at least one message")
	case len(raw) > maxBatch:
		return nil, jsonRPCError(mcp.INVALID_REQUEST,
			fmt.Sprintf("batch holds %d messages; at most %d are allowed, so split it", len(raw), maxBatch))
	}
	elems = make([]batchElem, len(raw))
	for i, r := range raw {
		e := &elems[i]
		e.m.raw = r
		if r[0] != '{' {
			e.reject = jsonRPCError(mcp.INVALID_REQUEST, fmt.Sprintf("batch message %d is not a JSON-RPC message (an object)", i))
			continue
		}
		e.m, e.reject = decodeMessage(r)
		switch {
		case e.m.method == string(mcp.MethodInitialize):
			return nil, jsonRPCError(mcp.INVALID_REQUEST,
				"initialize must not be part of a JSON-RPC batch: send it on its own, then batch the requests that follow")
		case e.reject != nil:
			e.reject = prefixError(e.reject, i)
		case e.m.method != "" && e.m.modern():
			// Batches ended with 2025-03-26, and such a request would
			// otherwise reach the legacy session it was batched in.
			e.reject = rpcError(e.m.id, mcp.INVALID_REQUEST, fmt.Sprintf("batch message %d is a request of protocol version %s or later (params._meta %q), which has no JSON-RPC batches: send it on its own",
				i, mcp.ProtocolVersion20260728, mcp.MetaKeyProtocolVersion), nil)
		}
	}
	return elems, nil
}

// prefixError is reject, a JSON-RPC error, with its message saying which
// message of the batch it answers.
func prefixError(reject []byte, i int) []byte {
	var e struct {
		ID    json.RawMessage `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(reject, &e) != nil {
		return reject
	}
	return rpcError(e.ID, e.Error.Code, fmt.Sprintf("batch message %d: %s", i, e.Error.Message), nil)
}

// batchVersionError returns the error answering a batch sent in a session
// that negotiated protocol version v ("" when none was negotiated), or nil
// when v allows batches.
func batchVersionError(v string) []byte {
	switch v {
	case mcp.ProtocolVersion20241105, mcp.ProtocolVersion20250326:
		return nil
	case "":
		return jsonRPCError(mcp.INVALID_REQUEST,
			"batch sent before the session negotiated a protocol version: send initialize first, on its own")
	}
	return jsonRPCError(mcp.INVALID_REQUEST, fmt.Sprintf(
		"JSON-RPC batches are not supported in protocol version %s (they were removed after %s): send one message per request",
		v, mcp.ProtocolVersion20250326))
}

// serveBatch serves the messages of a batch concurrently in x's session,
// each with no stream of its own, waits for all of them, and returns their
// answers as one JSON array in message order; nil when none has one.
// Notifications never get one; a client's answer goes to respond.
func (f *Front) serveBatch(x exchange, elems []batchElem, respond func(*message)) []byte {
	replies := make([][]byte, len(elems))
	var wg sync.WaitGroup
	for i := range elems {
		wg.Go(func() { replies[i] = f.serveElement(x, &elems[i], respond) })
	}
	wg.Wait()
	var out bytes.Buffer
	for _, r := range replies {
		if r == nil {
			continue
		}
		if out.Len() == 0 {
			out.WriteByte('[')
		} else {
			out.WriteByte(',')
		}
		out.Write(r)
	}
	if out.Len() == 0 {
		return nil
	}
	out.WriteByte(']')
	return out.Bytes()
}

// serveElement serves one message of a batch on a goroutine of its own,
// recovering its panic as the transports recover theirs.
func (f *Front) serveElement(x exchange, e *batchElem, respond func(*message)) (reply []byte) {
	switch {
	case e.reject != nil:
		return e.reject
	case e.m.response:
		respond(&e.m)
		return nil
	}
	defer func() {
		if v := recover(); v != nil {
			f.logger.Error("batch message handler panicked", "panic", v, "stack", string(debug.Stack()))
			reply = nil
			if e.m.id != nil {
				reply = rpcError(e.m.id, mcp.INTERNAL_ERROR, "internal error while handling this message", nil)
			}
		}
	}()
	return f.traced(&x, &e.m).body
}

// serveHTTPBatch answers a batch POSTed to the streamable HTTP endpoint in
// session sid. Its messages run under the batch request's context: a
// cancelled batch request cancels all of them. A batch counts as activity
// of its session for the idle expiry while it runs.
func (f *Front) serveHTTPBatch(w http.ResponseWriter, r *http.Request, sid string, msg []byte) {
	elems, reject := splitBatch(msg)
	if reject != nil {
		writeJSON(w, http.StatusBadRequest, reject)
		return
	}
	s := f.ownSession(w, r, sid)
	if s == nil {
		return
	}
	if reject := batchVersionError(batchVersion(s.negotiated(), r)); reject != nil {
		writeJSON(w, http.StatusBadRequest, reject)
		return
	}
	if !s.Begin() {
		writeUnknownSession(w) // expired just now
		return
	}
	defer s.Finish()
	reply := f.serveBatch(*f.exchange(r, s, nil), elems, func(m *message) {
		s.answer(m.id, m.raw) // to a request of the front's (ask.go); late ones are dropped
	})
	if reply == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	writeJSON(w, http.StatusOK, reply)
}

// batchVersion is the protocol version a batch is sent in: version, the
// one its session negotiated, unless the Mcp-Protocol-Version header names
// one from 2026-07-28 on, whose messages stand apart from the session, so
// the batch gets that version's answer.
func batchVersion(version string, r *http.Request) string {
	if h := r.Header.Get(mcp.HeaderProtocolVersion); mcp.IsModernProtocol(h) {
		return h
	}
	return version
}

// batchRuns owns goroutines that serve messages after their request was
// answered (SSE, stdio). Its zero value is ready to use.
type batchRuns struct {
	mu     sync.Mutex // guards closed and the start of goroutines
	closed bool
	wg     sync.WaitGroup
}

// start runs f on a new goroutine, unless wait has been called.
func (b *batchRuns) start(f func()) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.wg.Go(f)
	return true
}

// wait refuses new runs and waits for the running ones.
func (b *batchRuns) wait() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.wg.Wait()
}
