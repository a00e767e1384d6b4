package mcpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// JSON-RPC batches: a JSON array of requests and notifications, allowed by
// MCP 2024-11-05 and 2025-03-26 and removed in 2025-06-18. mcp-go v1.2.1
// has no batch support (it answers an array with a -32700 parse error on
// every transport), so toolgate splits batches at its transport layer:
// every message of a batch is handled concurrently, exactly as if it had
// arrived alone (preflight included, in the same session), and the replies
// go back as one array in the order of the messages. Sessions of a later
// revision get the protocol's error.

// maxBatch caps the messages of one batch.
const maxBatch = 100

// elemKind is what a batch message is, as far as batching cares.
type elemKind int

const (
	elemOther        elemKind = iota // a request, or an object too malformed to tell
	elemNotification                 // method, no id member: no reply
	elemResponse                     // result or error, no method: the client answering a server request; no reply
	elemNotObject                    // not a JSON object: JSON-RPC 2.0 §6 answers it with its own -32600
	elemInvalid                      // a request that may not be sent (in a batch): -32600 saying problem
)

// batchElem is one message of a batch.
type batchElem struct {
	index   int
	msg     json.RawMessage
	kind    elemKind
	id      json.RawMessage // the id member; nil when absent or null
	problem string          // what is wrong with an elemInvalid message
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

// splitBatch splits a batch into its messages. When the batch as a whole
// is wrong (not JSON, empty, too long, or holding an initialize, which may
// not be batched) it returns instead the JSON-RPC error answering it.
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
	for i, m := range raw {
		e := batchElem{index: i, msg: m, kind: elemNotObject}
		if m[0] == '{' {
			var head struct {
				ID     json.RawMessage `json:"id"`
				Method *string         `json:"method"`
				Params json.RawMessage `json:"params"`
				Result json.RawMessage `json:"result"`
				Error  json.RawMessage `json:"error"`
			}
			e.kind = elemOther
			if json.Unmarshal(m, &head) == nil {
				if string(head.ID) != "null" {
					e.id = head.ID
				}
				switch {
				case head.Method != nil && *head.Method == string(mcp.MethodInitialize):
					return nil, jsonRPCError(mcp.INVALID_REQUEST,
						"initialize must not be part of a JSON-RPC batch: send it on its own, then batch the requests that follow")
				case head.Method != nil && head.ID == nil:
					e.kind = elemNotification
				case head.Method != nil && e.id == nil:
					// JSON-RPC 2.0 allows a null id but discourages it; MCP
					// requires a string or an integer. Answered rather than
					// taken for a notification, so the client learns why.
					e.kind = elemInvalid
					e.problem = fmt.Sprintf(`batch message %d has "id": null: give a request a string or integer id, or leave out the id member to send a notification`, i)
				case head.Method != nil && modernRequest(head.Params):
					// Batches ended with 2025-03-26, and such a request would
					// otherwise reach the legacy session it was batched in.
					e.kind = elemInvalid
					e.problem = fmt.Sprintf("batch message %d is a request of protocol version %s or later (params._meta %q), which has no JSON-RPC batches: send it on its own",
						i, mcp.ProtocolVersion20260728, mcp.MetaKeyProtocolVersion)
				case head.Method == nil && (head.Result != nil || head.Error != nil):
					e.kind = elemResponse
				}
			}
		}
		elems[i] = e
	}
	return elems, nil
}

// modernRequest reports whether a request's params name, in _meta, a
// protocol version from 2026-07-28 on, as mcp-go decides it.
func modernRequest(params json.RawMessage) bool {
	if !bytes.Contains(params, []byte(mcp.MetaKeyProtocolVersion)) {
		return false // the common case, without decoding the arguments
	}
	var p struct {
		Meta *mcp.Meta `json:"_meta"`
	}
	return json.Unmarshal(params, &p) == nil && mcp.IsModernProtocol(p.Meta.ProtocolVersion())
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

// protocolVersion is the version session negotiated, or "" when unknown.
func protocolVersion(s server.ClientSession) string {
	if v, ok := s.(server.SessionWithProtocolVersion); ok {
		return v.ProtocolVersion()
	}
	return ""
}

// elementHandler handles one message of a batch as its transport handles a
// message that arrives alone, and returns the reply (nil for none).
type elementHandler func(ctx context.Context, e batchElem) []byte

// serveBatch runs the messages of a batch concurrently, each through
// preflight and then handle, waits for all of them, and returns their
// replies as one JSON array in message order; nil when none has a reply.
// Notifications and client responses never get one.
func (f *Front) serveBatch(ctx context.Context, elems []batchElem, handle elementHandler) []byte {
	replies := make([][]byte, len(elems))
	var wg sync.WaitGroup
	for i, e := range elems {
		wg.Go(func() { replies[i] = f.serveElement(ctx, e, handle) })
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

func (f *Front) serveElement(ctx context.Context, e batchElem, handle elementHandler) (reply []byte) {
	switch e.kind {
	case elemNotObject:
		return jsonRPCError(mcp.INVALID_REQUEST, fmt.Sprintf("batch message %d is not a JSON-RPC message (an object)", e.index))
	case elemInvalid:
		return rpcError(e.id, mcp.INVALID_REQUEST, e.problem, nil)
	}
	// The element runs off the goroutine its transport would have used,
	// which recovers panics (net/http per request; mcp-go's SSE and stdio
	// loops per message), so it recovers as they do.
	defer func() {
		if v := recover(); v != nil {
			f.logger.Error("batch message handler panicked", "panic", v, "stack", string(debug.Stack()))
			reply = nil
			if e.kind == elemOther && e.id != nil {
				reply = rpcError(e.id, mcp.INTERNAL_ERROR, "internal error while handling this message", nil)
			}
		}
	}()
	pre, fwd := f.preflight(e.msg, f.identity(ctx))
	if pre != nil {
		return pre
	}
	e.msg = fwd
	reply = handle(ctx, e)
	if e.kind != elemOther {
		return nil
	}
	return reply
}

// serveHTTPBatch answers a batch POSTed to the streamable HTTP endpoint.
// It makes the checks mcp-go makes on a single message (Host, Content-Type,
// Mcp-Protocol-Version, a live session), then hands every message to
// mcp-go's HandleMessage in the session's registered mcp-go session, as the
// SSE and stdio transports do, under the batch request's context: a
// cancelled batch request cancels all of them.
//
// The messages are not POSTed to mcp-go one by one: mcp-go starts a
// forwarder per POST that takes notifications off the session's queue and,
// when it cannot stream them (a batch's reply is one JSON array), drops
// them, so list_changed, progress and log messages meant for the client's
// GET stream were lost while a batch ran. Client responses still go
// through mcp-go's POST handling, since only that routes them to the
// server request waiting for them; it returns for them before it starts
// the forwarder. A batch counts as activity of its session for the idle
// expiry (sessions.go) while it runs.
//
// Unlike a POSTed message, a message of a batch does not see the request's
// headers: mcp-go passes them to handlers (CallToolRequest.Header) under an
// unexported context key it sets only in its own POST handling. toolgate's
// tool handler does not read them.
func (f *Front) serveHTTPBatch(w http.ResponseWriter, r *http.Request, p *httpParts, msg []byte) {
	if p.postRefused(w, r, "a batch") {
		return
	}
	elems, reject := splitBatch(msg)
	if reject != nil {
		writeJSON(w, http.StatusBadRequest, reject)
		return
	}
	sid := r.Header.Get(server.HeaderKeySessionID)
	if sid == "" {
		writeMissingSession(w)
		return
	}
	// Only a session initialized over streamable HTTP: mcp-go registers
	// the sessions of every transport (SSE, stdio) in one table.
	c := f.liveClient(sid)
	if !ownedBy(c, r) {
		writeUnknownSession(w) // another principal's
		return
	}
	version := c.streamableVersion()
	if version == "" {
		writeUnknownSession(w)
		return
	}
	if reject := batchVersionError(batchVersion(version, r)); reject != nil {
		writeJSON(w, http.StatusBadRequest, reject)
		return
	}
	if !c.begin() {
		writeUnknownSession(w) // expired just now
		return
	}
	defer c.end()
	ctx := f.mcp.WithContext(r.Context(), c.session)
	reply := f.serveBatch(ctx, elems, func(ctx context.Context, e batchElem) []byte {
		if e.kind == elemResponse {
			if e.id == nil {
				// Answers nothing toolgate could route it to; mcp-go
				// would take it for a request and start a forwarder.
				return nil
			}
			if isAskID(e.id) {
				c.answer(e.id, e.msg) // to a request of the front's (ask.go); late ones are dropped
				return nil
			}
			return p.postElement(ctx, r, e)
		}
		if e.id == nil {
			c.cancelCall(e.msg) // a fast-path call's notifications/cancelled
		}
		return f.handleInSession(ctx, e)
	})
	if reply == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	writeJSON(w, http.StatusOK, reply)
}

// writeUnknownSession answers a batch in a session mcp-go does not know,
// as mcp-go answers a single message: the client must initialize again.
func writeUnknownSession(w http.ResponseWriter) {
	writeJSON(w, http.StatusNotFound, jsonRPCError(mcp.INVALID_REQUEST,
		"unknown or expired Mcp-Session-Id: send initialize again for a new session"))
}

// postRefused makes the checks mcp-go makes on a POST that toolgate
// answers itself (what is "a batch" or "a message"): the Host
// (hostRefused) and the Content-Type. It reports whether it wrote a
// refusal.
func (p *httpParts) postRefused(w http.ResponseWriter, r *http.Request, what string) bool {
	if hostAccepted(r) && isJSONContent(r) {
		return false // the common case, without hostRefused's copy of r through mcp-go
	}
	if p.hostRefused(w, r) {
		return true
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeJSON(w, http.StatusBadRequest, jsonRPCError(mcp.INVALID_REQUEST,
			what+" must be sent with Content-Type: application/json"))
		return true
	}
	return false
}

// hostRefused applies mcp-go's DNS rebinding protection to a batch request
// (a request that reached a loopback address must name a loopback Host),
// and reports whether it wrote mcp-go's refusal. mcp-go runs that check
// first for every request, and answers a HEAD with 200 and nothing else,
// so a HEAD copy of r gets exactly mcp-go's verdict.
func (p *httpParts) hostRefused(w http.ResponseWriter, r *http.Request) bool {
	hr := r.Clone(r.Context())
	hr.Method = http.MethodHead
	hr.Body, hr.ContentLength = http.NoBody, 0
	rec := &elementRecorder{header: http.Header{}}
	p.streamable.ServeHTTP(rec, hr)
	if rec.code == 0 || rec.code == http.StatusOK {
		return false
	}
	maps.Copy(w.Header(), rec.header)
	w.WriteHeader(rec.code)
	_, _ = w.Write(rec.body.Bytes())
	return true
}

// batchVersion is the protocol version a batch is sent in: version, the
// one its session negotiated, unless the Mcp-Protocol-Version header names
// a version mcp-go does not know or one from 2026-07-28 on, for which
// mcp-go would handle each message apart from the session, so the batch
// gets that version's answer.
func batchVersion(version string, r *http.Request) string {
	if h := r.Header.Get(mcp.HeaderProtocolVersion); h != "" && (!mcp.IsValidProtocolVersion(h) || mcp.IsModernProtocol(h)) {
		return h
	}
	return version
}

// postElement POSTs a client response of a batch to mcp-go alone, with the
// batch's headers and ctx, so that mcp-go routes it to the server request
// (sampling, elicitation, roots) waiting for it. A response never reaches
// the notification forwarder of mcp-go's POST handling.
func (p *httpParts) postElement(ctx context.Context, r *http.Request, e batchElem) []byte {
	er := r.Clone(ctx)
	er.Body = io.NopCloser(bytes.NewReader(e.msg))
	er.ContentLength = int64(len(e.msg))
	rec := &elementRecorder{header: http.Header{}}
	p.streamable.ServeHTTP(rec, er)
	return rec.reply(e)
}

// elementRecorder receives mcp-go's answer to one request of a batch
// (postElement, hostRefused). It is not an http.Flusher, so mcp-go answers
// with plain JSON and never upgrades to an SSE stream.
type elementRecorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (rec *elementRecorder) Header() http.Header { return rec.header }

func (rec *elementRecorder) WriteHeader(code int) {
	if rec.code == 0 {
		rec.code = code
	}
}

func (rec *elementRecorder) Write(b []byte) (int, error) {
	rec.WriteHeader(http.StatusOK)
	return rec.body.Write(b)
}

// reply is the message's reply: mcp-go's JSON-RPC answer, or a JSON-RPC
// error standing for an HTTP error (a Host or header mcp-go refused, a
// session that ended meanwhile) so the request still gets its entry.
func (rec *elementRecorder) reply(e batchElem) []byte {
	body := bytes.TrimSpace(rec.body.Bytes())
	if strings.HasPrefix(rec.header.Get("Content-Type"), "application/json") && json.Valid(body) {
		return body
	}
	if rec.code < http.StatusBadRequest || e.id == nil {
		return nil
	}
	code := mcp.INVALID_REQUEST
	if rec.code >= http.StatusInternalServerError {
		code = mcp.INTERNAL_ERROR
	}
	return rpcError(e.id, code, fmt.Sprintf("HTTP %d: %s", rec.code, body), nil)
}

// sessionSlot learns the mcp-go session in which a transport request runs:
// put it in the request's context with attach, and [learnSession], the
// transports' context function, fills it.
type sessionSlot struct {
	mu sync.Mutex // guards s
	s  server.ClientSession
}

type sessionSlotKey struct{}

func (sl *sessionSlot) attach(ctx context.Context) context.Context {
	return context.WithValue(ctx, sessionSlotKey{}, sl)
}

func (sl *sessionSlot) get() server.ClientSession {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return sl.s
}

func (sl *sessionSlot) set(s server.ClientSession) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	sl.s = s
}

// learnSession is the context function of the SSE server: it fills the
// request's sessionSlot, if it has one, with the session mcp-go put in ctx.
func learnSession(ctx context.Context, _ *http.Request) context.Context {
	if sl, ok := ctx.Value(sessionSlotKey{}).(*sessionSlot); ok {
		if s := server.ClientSessionFromContext(ctx); s != nil {
			sl.set(s)
		}
	}
	return ctx
}

// watch returns r set up so that the stream learns its mcp-go session from
// it, or r itself once the stream knows it.
func (s *sseStream) watch(r *http.Request) *http.Request {
	if s.session.get() != nil {
		return r
	}
	return r.WithContext(s.session.attach(r.Context()))
}

// serveSSEBatch answers a batch POSTed to /message for SSE stream s. As
// mcp-go does for a single message, it answers 202 at once and handles the
// messages afterwards, detached from the POST; the reply array goes onto
// the stream as one message. A batch the session may not send is refused
// with HTTP 400 and the JSON-RPC error, as mcp-go refuses unparsable ones.
func (f *Front) serveSSEBatch(w http.ResponseWriter, p *httpParts, s *sseStream, msg []byte) {
	session := s.session.get()
	elems, reject := splitBatch(msg)
	if reject == nil {
		reject = batchVersionError(protocolVersion(session))
	}
	if reject != nil {
		writeJSON(w, http.StatusBadRequest, reject)
		return
	}
	// f.root ends when the gateway closes.
	ctx := f.mcp.WithContext(f.root, session)
	started := p.sseBatches.start(func() {
		reply := f.serveBatch(ctx, elems, f.handleInSession)
		if reply != nil {
			s.send(reply)
		}
	})
	if !started {
		writeJSON(w, http.StatusServiceUnavailable, jsonRPCError(mcp.INTERNAL_ERROR, "toolgate is shutting down"))
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// handleInSession hands a message to mcp-go in the session that ctx
// carries, as its SSE and stdio transports do.
func (f *Front) handleInSession(ctx context.Context, e batchElem) []byte {
	resp := f.mcp.HandleMessage(ctx, e.msg)
	if resp == nil {
		return nil
	}
	b, err := json.Marshal(resp)
	if err != nil {
		return rpcError(e.id, mcp.INTERNAL_ERROR, "encoding the response failed", nil)
	}
	return b
}

// batchRuns owns goroutines that run batches. Its zero value is ready to
// use.
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

// stdioBatches serves the batches of one ServeStdio. The process is one
// session, whose mcp-go session learn captures when mcp-go starts
// listening.
type stdioBatches struct {
	f      *Front
	ctx    context.Context // ends when the client has gone; cancelled by close
	cancel context.CancelFunc
	out    *lockedWriter // to the client
	fwd    io.Writer     // to mcp-go's read loop
	runs   batchRuns

	mu      sync.Mutex // guards session
	session server.ClientSession
}

func (f *Front) newStdioBatches(ctx context.Context, out *lockedWriter, fwd io.Writer) *stdioBatches {
	ctx, cancel := context.WithCancel(ctx)
	return &stdioBatches{f: f, ctx: ctx, cancel: cancel, out: out, fwd: fwd}
}

// learn is mcp-go's stdio context function.
func (b *stdioBatches) learn(ctx context.Context) context.Context {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.session = server.ClientSessionFromContext(ctx)
	return ctx
}

// serve answers a batch line. Requests run on a goroutine of their own and
// their reply array is written as one line; notifications and client
// responses go to mcp-go's read loop as lines of their own, which is what
// routes responses to the server requests waiting for them. serve returns
// only errors writing to the client or to mcp-go.
func (b *stdioBatches) serve(line []byte) error {
	b.mu.Lock()
	session := b.session
	b.mu.Unlock()
	elems, reject := splitBatch(line)
	if reject == nil {
		reject = batchVersionError(protocolVersion(session))
	}
	if reject != nil {
		_, err := b.out.Write(append(reject, '\n'))
		return err
	}
	var calls []batchElem
	for _, e := range elems {
		if e.kind == elemNotification || e.kind == elemResponse {
			if _, err := b.fwd.Write(append(e.msg, '\n')); err != nil {
				return err
			}
			continue
		}
		calls = append(calls, e)
	}
	if len(calls) == 0 {
		return nil
	}
	ctx := b.f.mcp.WithContext(b.ctx, session)
	b.runs.start(func() {
		if reply := b.f.serveBatch(ctx, calls, b.f.handleInSession); reply != nil {
			// An error means the client has gone; nothing is left to tell.
			_, _ = b.out.Write(append(reply, '\n'))
		}
	})
	return nil
}

// close cancels the batches in flight and waits for them.
func (b *stdioBatches) close() {
	b.cancel()
	b.runs.wait()
}
