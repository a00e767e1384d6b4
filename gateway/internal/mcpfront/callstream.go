package mcpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// A call's own notifications on its own stream.
//
// mcp-go queues every notification of a streamable HTTP session on one
// channel, which the session's GET stream and each of its POSTs in flight
// all read (MCPGO.md, pitfall 1). A call's progress can then leave on the
// GET stream and reach the client after the call's result went out on the
// POST: the client has forgotten the progress token by then and drops it
// (the conformance scenario tools-call-with-progress lost its last
// notification so on a loaded machine). A 2026-07-28 request has no
// session at all that a notification could be addressed to.
//
// So the front writes the notifications a request causes — its progress,
// its upstream's log messages and progress — itself, on that request's
// POST response: [callStream] wraps the response mcp-go writes, turns it
// into an event stream once a notification is queued, and frames mcp-go's
// answer as the stream's last event when mcp-go, not having seen a
// notification of its own, answers in JSON.
//
// Whoever reports a notification never waits for the client: it is
// queued (dropped when the queue is full, as mcp-go drops a session's),
// and a writer goroutine of the stream writes the queue, each event under
// a write deadline. An upstream's progress arrives on that upstream's
// shared read goroutine, which a client that stops reading must not hold.
// Every write to the response, mcp-go's and the writer's, is made under
// one lock, and a write of mcp-go's that is part of an event (its stored
// events come as "id: N\n" then the rest) is held until the event is
// whole, so events never interleave. By end, every notification queued
// before the handler returned has been written, then mcp-go's answer.
//
// The front's events carry no event ID, so they are not stored for
// resumption (Last-Event-ID); what mcp-go writes itself still is.

// callStream is the response of one POSTed request, as mcp-go and the
// front both write it.
type callStream struct {
	w http.ResponseWriter
	f http.Flusher
	// hdr is the header mcp-go sets, on its handler's goroutine; it is
	// copied to w's when mcp-go's status goes out. The writer goroutine
	// touches only w's, under mu.
	hdr http.Header

	// wantEvents is set by the first message queued: the response is an
	// event stream, whoever starts it. plain is set when mcp-go's answer
	// starts as JSON instead: nothing is queued from then on. start
	// decides between them under qmu, where send checks plain and sets
	// wantEvents, so a message is either queued for an event stream or
	// refused.
	wantEvents bool // guarded by qmu
	plain      bool // guarded by qmu

	qmu    sync.Mutex
	queue  chan []byte   // guarded by qmu; the front's events for the writer; nil until the first
	closed bool          // guarded by qmu; end has begun: nothing more is queued
	writer chan struct{} // closed when the writer has exited; made with queue

	mu        sync.Mutex // guards what follows, and every write to w
	started   bool       // the status line and header are sent
	events    bool       // the response is an event stream
	held      []byte     // mcp-go's JSON answer on an event stream, sent as an event by end
	heldEvent []byte     // mcp-go's answer as an event, sent by end
	partial   []byte     // the start of an event mcp-go writes in several Writes
	broken    bool       // a write of the front's failed: it writes nothing more
}

// callStreamQueue bounds the notifications a stream holds for a client
// that reads slower than they come (mcp-go's session queue holds 100).
const callStreamQueue = 100

// callStreamWriteTimeout bounds one write of the front's to a client.
const callStreamWriteTimeout = 10 * time.Second

type callStreamKey struct{}

// withCallStream returns w wrapped as a [callStream] and ctx with it, or
// w and ctx as they are when w cannot stream. The caller must call end
// once the handler has returned (deferred: also on a panic).
func withCallStream(ctx context.Context, w http.ResponseWriter) (*callStream, http.ResponseWriter, context.Context) {
	f, ok := w.(http.Flusher)
	if !ok {
		return nil, w, ctx
	}
	s := &callStream{w: w, f: f, hdr: http.Header{}}
	return s, s, context.WithValue(ctx, callStreamKey{}, s)
}

// callStreamOf returns the stream of the request ctx belongs to, or nil.
func callStreamOf(ctx context.Context) *callStream {
	s, _ := ctx.Value(callStreamKey{}).(*callStream)
	return s
}

func (s *callStream) Header() http.Header         { return s.hdr }
func (s *callStream) Unwrap() http.ResponseWriter { return s.w }

// WriteHeader passes mcp-go's status on, unless the response is an event
// stream already or is to be one.
func (s *callStream) WriteHeader(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return
	}
	s.start(code)
}

// start sends mcp-go's header with code, or that of an event stream when
// a notification is queued. s.mu is held, on mcp-go's goroutine.
func (s *callStream) start(code int) {
	h := s.w.Header()
	for k, v := range s.hdr {
		h[k] = v
	}
	s.qmu.Lock()
	events := s.wantEvents
	s.plain = !events && !isEventStream(h)
	s.qmu.Unlock()
	if events {
		s.startEvents()
		return
	}
	s.started = true
	s.events = isEventStream(h)
	s.w.WriteHeader(code)
}

// Write passes mcp-go's bytes on. On an event stream, mcp-go's answer in
// JSON (a body beginning with '{', where an event begins with a field
// name) is held and sent as an event by end, and mcp-go's events go out
// whole.
func (s *callStream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		s.start(http.StatusOK)
	}
	if !s.events {
		return s.w.Write(p)
	}
	if s.held != nil || (len(s.partial) == 0 && len(p) > 0 && p[0] == '{') { // JSON: mcp-go's answer
		s.held = append(s.held, p...)
		return len(p), nil
	}
	s.partial = append(s.partial, p...)
	if !bytes.HasSuffix(s.partial, []byte("\n\n")) {
		return len(p), nil
	}
	event := s.partial
	s.partial = nil
	if isAnswerEvent(event) {
		// The answer goes last, after what the writer has yet to write.
		s.heldEvent = event
		return len(p), nil
	}
	if _, err := s.w.Write(event); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (s *callStream) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.f.Flush()
}

// startEvents sends the header of an event stream. s.mu is held.
func (s *callStream) startEvents() {
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	s.w.WriteHeader(http.StatusOK)
	s.started, s.events = true, true
}

// notify queues a notification of method with params for the client,
// and reports whether it did: not once the call's answer has begun (the
// notification would follow the result), nor when the client is reading
// too slowly to take more (the queue is full).
func (s *callStream) notify(method string, params any) bool {
	msg, err := json.Marshal(struct {
		JSONRPC string `json:"jsonrpc"`
		Method  string `json:"method"`
		Params  any    `json:"params,omitempty"`
	}{"2.0", method, params})
	if err != nil {
		return false
	}
	return s.send(msg) == nil
}

var (
	// errStreamEnded: the call's answer has begun (mcp-go's JSON answer
	// went out, or end has begun); nothing more is sent on its stream.
	errStreamEnded = errors.New("the call's answer has begun")
	// errStreamFull: callStreamQueue messages wait for the client.
	errStreamFull = fmt.Errorf("the client is not reading its call's stream: %d messages wait for it", callStreamQueue)
)

// send queues msg, one JSON-RPC message, for the client: errStreamEnded
// once the call's answer has begun, errStreamFull when the client reads
// too slowly to take more.
func (s *callStream) send(msg []byte) error {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	if s.closed || s.plain {
		return errStreamEnded
	}
	s.wantEvents = true
	if s.queue == nil {
		s.queue = make(chan []byte, callStreamQueue)
		s.writer = make(chan struct{})
		go s.write(s.queue)
	}
	select {
	case s.queue <- msg:
		return nil
	default:
		return errStreamFull
	}
}

// write writes the queued notifications until end closes the queue.
func (s *callStream) write(queue <-chan []byte) {
	defer close(s.writer)
	rc := http.NewResponseController(s.w)
	for msg := range queue {
		s.mu.Lock()
		if !s.started {
			s.startEvents()
		}
		if s.events && !s.broken { // not when mcp-go's JSON answer went out first
			_ = rc.SetWriteDeadline(time.Now().Add(callStreamWriteTimeout))
			err := writeEvent(s.w, msg)
			if err == nil {
				err = rc.Flush()
			}
			_ = rc.SetWriteDeadline(time.Time{})
			s.broken = err != nil
		}
		s.mu.Unlock()
	}
}

// end writes what is still queued, then mcp-go's held answer as the
// stream's last event; nothing is written after it.
func (s *callStream) end() {
	s.qmu.Lock()
	s.closed = true
	if s.queue != nil {
		close(s.queue)
	}
	writer := s.writer
	s.qmu.Unlock()
	if writer != nil {
		<-writer
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.partial) > 0 { // an event mcp-go never finished: pass it on as it is
		_, _ = s.w.Write(s.partial)
		s.partial = nil
	}
	switch {
	case s.heldEvent != nil:
		_, _ = s.w.Write(s.heldEvent)
		s.f.Flush()
	case s.held != nil:
		_ = writeEvent(s.w, bytes.TrimSpace(s.held))
		s.f.Flush()
	}
	s.held, s.heldEvent = nil, nil
}

// isAnswerEvent reports whether event, one whole SSE event, carries a
// JSON-RPC response (an id and no method).
func isAnswerEvent(event []byte) bool {
	for line := range bytes.Lines(event) {
		if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method *string         `json:"method"`
			}
			return json.Unmarshal(data, &m) == nil && m.ID != nil && m.Method == nil
		}
	}
	return false
}

// writeEvent writes msg, one line of JSON, as an SSE message event in one
// Write.
func writeEvent(w http.ResponseWriter, msg []byte) error {
	b := make([]byte, 0, len(msg)+24)
	b = append(b, "event: message\ndata: "...)
	b = append(b, msg...)
	b = append(b, "\n\n"...)
	_, err := w.Write(b)
	return err
}

func isEventStream(h http.Header) bool {
	ct := h.Get("Content-Type")
	return len(ct) >= 17 && ct[:17] == "text/event-stream"
}
