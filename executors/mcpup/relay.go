package mcpup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/toolgate/toolgate/internal/callslot"
	"github.com/toolgate/toolgate/internal/mcppeer"
)

// maxRelayWait bounds how long toolgate waits for its client to answer an
// upstream's sampling, elicitation or roots request. The call the request
// serves ends it first, as a rule (its deadline is the upstream's
// timeout): this only bounds a request made during a call without one.
const maxRelayWait = 10 * time.Minute

// answerTimeout bounds sending the answer to an upstream's request over
// streamable HTTP (see [conn.answer]).
const answerTimeout = 30 * time.Second

type peerKey struct{}

// peerRef is the value [WithPeer] puts in a context: a pointer, so that a
// request of the upstream's that arrives with a context derived from a
// call's can be matched to that call (onRequest).
type peerRef struct{ p mcppeer.Peer }

// WithPeer returns ctx carrying p: requests the upstreams make while a
// call or request made with ctx runs go to p.
func WithPeer(ctx context.Context, p mcppeer.Peer) context.Context {
	return context.WithValue(ctx, peerKey{}, &peerRef{p: p})
}

// PeerFrom returns the [mcppeer.Peer] in ctx, or nil.
func PeerFrom(ctx context.Context) mcppeer.Peer {
	if r := refFrom(ctx); r != nil {
		return r.p
	}
	return nil
}

func refFrom(ctx context.Context) *peerRef {
	r, _ := ctx.Value(peerKey{}).(*peerRef)
	return r
}

// inflight is a request to the upstream made for a peer.
type inflight struct {
	ctx  context.Context // the request's own: its deadline and cancellation are the call's
	peer mcppeer.Peer
	ref  *peerRef
}

// trackPeer records that a request with ID id is in flight for ctx's peer,
// if ctx has one; the returned function forgets it.
func (c *conn) trackPeer(ctx context.Context, id string) func() {
	r := refFrom(ctx)
	if r == nil {
		return func() {}
	}
	c.peersMu.Lock()
	c.peers[id] = inflight{ctx: ctx, peer: r.p, ref: r}
	c.peersMu.Unlock()
	return func() {
		c.peersMu.Lock()
		defer c.peersMu.Unlock()
		delete(c.peers, id)
		c.endedLocked(r.p.Session())
	}
}

// endedLocked records that a request of session ended: the sessions still
// in flight outlived it (an upstream that names no call in its messages,
// over stdio, may send one of the ended call's late, and it must not reach
// them: issue 31), and a session with nothing left in flight is forgotten.
// c.peersMu is held.
func (c *conn) endedLocked(session string) {
	left := false
	for _, in := range c.peers {
		if s := in.peer.Session(); s != session {
			c.outlived[s] = true
		} else {
			left = true
		}
	}
	if !left {
		delete(c.outlived, session)
	}
}

// soloPeer returns the one peer the connection has requests in flight for
// (the latest of them if one session has several): an upstream's message
// that names no request (stdio cannot tell) belongs to it. ok is false
// when requests of more than one session are in flight: the message
// cannot be attributed, and must not reach another client. f.peer is nil
// when none is in flight.
//
// A message read at position pos of a stdio upstream's stream (0 for
// none) is not attributed to a call that waits for its client: one with
// a request relayed to its client and unanswered, since a fence that
// passed before pos (awaitClient). Such a call is blocked on its
// client's answer, and everything it sent with that request was read
// before the fence passed; so when the other calls in flight are one
// session's, the message is that session's, and a call waiting for its
// client (an input_required left unanswered, say) holds no other
// client's requests (issue 26). When every call in flight waits, they
// all count.
func (c *conn) soloPeer(pos uint64) (f inflight, ok bool) {
	c.peersMu.Lock()
	defer c.peersMu.Unlock()
	f, ok = c.soloLocked(pos)
	if ok && f.peer == nil {
		f, ok = c.soloLocked(0)
	}
	return f, ok
}

// soloLocked is soloPeer leaving out the calls waiting for their clients
// since before pos, if any. c.peersMu is held.
func (c *conn) soloLocked(pos uint64) (f inflight, ok bool) {
	for _, in := range c.peers {
		if w := c.waits[in.ref]; w != nil && w.passed != 0 && w.passed < pos {
			continue
		}
		if f.peer != nil && f.peer.Session() != in.peer.Session() {
			return inflight{}, false
		}
		f = in
	}
	return f, true
}

// outlivedOther reports whether session's calls in flight outlived a call
// of another session's: a message naming no call may be the ended one's.
func (c *conn) outlivedOther(session string) bool {
	c.peersMu.Lock()
	defer c.peersMu.Unlock()
	return c.outlived[session]
}

// clientWait is a call's wait for its client's answers (awaitClient).
type clientWait struct {
	n      int    // the call's requests relayed to its client and not yet answered
	passed uint64 // the position of the first fence's answer that passed while n > 0; 0 until then
}

// awaitClient records that the call of ref waits for its client's answer
// to a request the upstream sent over stdio, from a fence on: a ping of
// the upstream's, whose answer is read after everything the upstream sent
// before it read the ping, requests the call sent along with this one
// included. Messages read after that answer are attributed as if the call
// were not in flight (soloPeer). done ends the wait, once the client has
// answered. On other transports it records nothing: their requests name
// their calls.
func (c *conn) awaitClient(ref *peerRef) (done func()) {
	st, ok := c.tr.(*stdioTransport)
	if !ok {
		return func() {}
	}
	c.peersMu.Lock()
	w := c.waits[ref]
	if w == nil {
		w = &clientWait{}
		c.waits[ref] = w
	}
	w.n++
	c.peersMu.Unlock()
	ctx, cancel := context.WithCancel(c.life)
	var fence sync.WaitGroup
	fence.Go(func() {
		_ = st.fence(ctx, "toolgate-fence-"+strconv.FormatUint(c.u.m.nextID(), 10), func(pos uint64) {
			c.peersMu.Lock()
			if w.passed == 0 {
				w.passed = pos
			}
			c.peersMu.Unlock()
		})
	})
	return func() {
		cancel()
		fence.Wait()
		c.peersMu.Lock()
		if w.n--; w.n == 0 {
			delete(c.waits, ref)
		}
		c.peersMu.Unlock()
	}
}

// inflightOf returns the request in flight for r: the call whose context
// a request of the upstream's arrived with.
func (c *conn) inflightOf(r *peerRef) (inflight, bool) {
	c.peersMu.Lock()
	defer c.peersMu.Unlock()
	for _, in := range c.peers {
		if in.ref == r {
			return in, true
		}
	}
	return inflight{}, false
}

// onRequest answers a request the upstream sends its client (toolgate):
// ping at once; sampling/createMessage, elicitation/create and roots/list
// relayed to the client whose call the upstream is serving, with the
// answer relayed back; an accepted elicitation's answer with the defaults
// of the fields the client left out ([fillDefaults]). It runs on a
// goroutine of its own: the stdio transport's, mcp-go's streamable HTTP
// transport's, or one of a call's (readEvents); over streamable HTTP
// [conn.relay] sends the answer.
//
// The wait for the client's answer ends with the call the request serves
// (its deadline, its cancellation), when ctx is cancelled (the stream the
// request came on has ended), or after [maxRelayWait]; not when ctx
// merely reaches its deadline: mcp-go's streamable HTTP transport gives
// its handler 30 seconds, less than a human may take to answer an
// elicitation, and the call's own deadline is the one that counts.
func (c *conn) onRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	switch req.Method {
	case string(mcp.MethodPing):
		return transport.NewJSONRPCResultResponse(req.ID, json.RawMessage("{}")), nil
	case string(mcp.MethodSamplingCreateMessage), string(mcp.MethodElicitationCreate), string(mcp.MethodListRoots):
	default:
		return transport.NewJSONRPCErrorResponse(req.ID, mcp.METHOD_NOT_FOUND, "toolgate does not serve "+strconv.Quote(req.Method)+" to upstreams", nil), nil
	}
	var target inflight
	pos, overStdio := readPosOf(ctx)
	if r := refFrom(ctx); r != nil {
		// Streamable HTTP: the request arrived on the call's own response
		// stream, with a context derived from the call's.
		var ok bool
		if target, ok = c.inflightOf(r); !ok {
			target = inflight{ctx: ctx, peer: r.p, ref: r} // the call has just ended
		}
	} else {
		var ok bool
		if target, ok = c.soloPeer(pos); !ok {
			return transport.NewJSONRPCErrorResponse(req.ID, mcp.INTERNAL_ERROR,
				req.Method+": calls of several clients are in flight on this connection and the request names none of them; toolgate relays it only when it can tell whose call it serves", nil), nil
		}
		if target.peer != nil && c.outlivedOther(target.peer.Session()) {
			return transport.NewJSONRPCErrorResponse(req.ID, mcp.INTERNAL_ERROR,
				req.Method+": another client's call on this connection ended while the one in flight ran, and the request names no call: it may be the ended call's, so toolgate relays it to no one", nil), nil
		}
	}
	if target.peer == nil {
		return transport.NewJSONRPCErrorResponse(req.ID, mcp.METHOD_NOT_FOUND,
			req.Method+": no MCP client of toolgate is waiting on this upstream (no call is in flight, or the call came from no MCP session, like toolgate call's); toolgate relays it only to the client whose call the upstream is serving", nil), nil
	}
	release, ok := c.asking.admit(target.ref)
	if !ok {
		return transport.NewJSONRPCErrorResponse(req.ID, mcp.INTERNAL_ERROR, fmt.Sprintf(
			"%s: the call already has %d requests waiting for its client's answers; send another once one is answered", req.Method, maxClientRequests), nil), nil
	}
	defer release()
	if overStdio && target.ref != nil {
		defer c.awaitClient(target.ref)()
	}
	params, err := json.Marshal(req.Params)
	if err != nil || req.Params == nil {
		params = json.RawMessage("{}")
	}
	wait, stop := outlive(ctx, target.ctx, maxRelayWait)
	defer stop()
	// Waiting for its client, the call holds no concurrency slot (issue
	// 31): an input_required left unanswered, or a human slow to answer,
	// keeps nobody else's calls waiting.
	resume := callslot.Park(target.ctx)
	res, err := target.peer.Request(wait, req.Method, params)
	if rerr := resume(wait); rerr != nil && err == nil {
		err = rerr
	}
	if err != nil {
		code := mcp.INTERNAL_ERROR
		if e, ok := errors.AsType[*mcppeer.RPCError](err); ok {
			code = e.Code // the client's own, through the front's wrapping
		}
		return transport.NewJSONRPCErrorResponse(req.ID, code, c.u.redact(err.Error()), nil), nil
	}
	if req.Method == string(mcp.MethodElicitationCreate) {
		res = fillDefaults(params, res)
	}
	return transport.NewJSONRPCResultResponse(req.ID, res), nil
}

// fillDefaults applies the defaults of an elicitation's form (SEP-1034) to
// the client's answer res to it, whose params the upstream sent: when the
// answer accepts, each top-level property of the requested schema that is
// missing from its content and has a default of the property's primitive
// type (string, integer, number, boolean; a single-select enum is a
// string) gets that default, creating the content if the answer has none.
// A value the client gave is kept, whatever it is; a declined or cancelled
// answer, a form without such defaults, and anything that does not decode
// as the revision describes are returned unchanged, byte for byte.
func fillDefaults(params, res json.RawMessage) json.RawMessage {
	var answer map[string]json.RawMessage
	if json.Unmarshal(res, &answer) != nil {
		return res
	}
	var action string
	if json.Unmarshal(answer["action"], &action) != nil || action != string(mcp.ElicitationResponseActionAccept) {
		return res
	}
	var form struct {
		RequestedSchema struct {
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"requestedSchema"`
	}
	if json.Unmarshal(params, &form) != nil {
		return res
	}
	content := map[string]json.RawMessage{}
	if raw := answer["content"]; len(raw) > 0 && string(raw) != "null" {
		if json.Unmarshal(raw, &content) != nil {
			return res // not an object: the upstream's to judge
		}
	}
	filled := false
	for name, raw := range form.RequestedSchema.Properties {
		if _, given := content[name]; given {
			continue
		}
		var prop struct {
			Type    string          `json:"type"`
			Default json.RawMessage `json:"default"`
		}
		if json.Unmarshal(raw, &prop) != nil || !primitiveOf(prop.Type, prop.Default) {
			continue
		}
		content[name] = prop.Default
		filled = true
	}
	if !filled {
		return res
	}
	b, err := json.Marshal(content)
	if err != nil {
		return res
	}
	answer["content"] = b
	out, err := json.Marshal(answer)
	if err != nil {
		return res
	}
	return out
}

// primitiveOf reports whether v is a JSON value of the elicitation schema's
// primitive type typ: a string, a boolean, a number, or an integral number.
func primitiveOf(typ string, v json.RawMessage) bool {
	var x any
	if len(v) == 0 || json.Unmarshal(v, &x) != nil {
		return false
	}
	switch x := x.(type) {
	case string:
		return typ == "string"
	case bool:
		return typ == "boolean"
	case float64:
		return typ == "number" || typ == "integer" && x == math.Trunc(x)
	}
	return false
}

// outlive returns a context derived from base that ends after d at most,
// and when in is cancelled, but not when in reaches its deadline; stop
// releases it.
func outlive(in, base context.Context, d time.Duration) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithTimeout(base, d)
	if err := in.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		cancel() // AfterFunc would cancel it only a moment later
		return ctx, cancel
	}
	unwatch := context.AfterFunc(in, func() {
		if !errors.Is(in.Err(), context.DeadlineExceeded) {
			cancel()
		}
	})
	return ctx, func() { unwatch(); cancel() }
}

// forwardLog relays an upstream's log message to the client whose call
// caused it, or to every client when no call is in flight (an unsolicited
// message); when calls of several clients are in flight it cannot be
// attributed and goes to none. The logger names the upstream:
// "<upstream>" or "<upstream>/<its logger>".
func (c *conn) forwardLog(f map[string]any) {
	if c.u.m.onNotify == nil {
		return
	}
	params := maps.Clone(f)
	name := c.u.cfg.Name
	if l, _ := params["logger"].(string); l != "" {
		name += "/" + l
	}
	params["logger"] = name
	target, ok := c.soloPeer(0)
	if !ok || target.peer != nil && c.outlivedOther(target.peer.Session()) {
		return // may be another client's: see onRequest
	}
	c.u.m.onNotify(c.u.cfg.Name, string(mcp.MethodNotificationMessage), params, target.peer)
}
