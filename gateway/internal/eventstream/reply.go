// Package eventstream writes the server-sent event streams of MCP's
// streamable HTTP transport: one JSON-RPC message as an event ([Event]),
// a stream's header ([Begin]), writes under a deadline ([Write]), and
// [Reply], the response of one POSTed request, the one writer of
// everything the request causes.
//
// A request's answer goes out as JSON unless something is sent before it:
// its progress, its upstream's log messages and progress, its requests to
// the client (sampling, elicitation, roots), or, for subscriptions/listen,
// the notifications the client subscribed to. The first of those turns
// the response into an event stream, which carries them, each as an
// event, and the answer as its last event. A session's other
// notifications go out on its GET stream, never here, so a call's last
// progress always precedes its result.
//
// Whoever sends a message never waits for the client: it is queued
// (refused when the queue is full) and a writer goroutine writes the
// queue, each event under a write deadline. An upstream's progress arrives
// on that upstream's shared read goroutine, which a client that stops
// reading must not hold.
//
// It knows of MCP only the JSON-RPC envelope of a notification; the MCP
// front (gateway/internal/mcpfront) decides what goes on which stream.
// eventstream imports no toolgate package.
package eventstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// queueLen bounds the messages a Reply holds for a client that reads
// slower than they come.
const queueLen = 100

// WriteTimeout bounds one write of an event to a client.
const WriteTimeout = 10 * time.Second

var (
	// ErrEnded: the request's answer has begun; nothing more is sent on
	// its stream.
	ErrEnded = errors.New("the request's answer has begun")
	// ErrFull: as many messages as a stream holds wait for the client.
	ErrFull = fmt.Errorf("the client is not reading its request's stream: %d messages wait for it", queueLen)
)

// Reply is the response of one POSTed request. Build it with [NewReply];
// its methods are safe for concurrent use, and [Reply.Finish] ends it.
type Reply struct {
	w  http.ResponseWriter
	rc *http.ResponseController

	qmu    sync.Mutex
	queue  chan []byte   // guarded by qmu; nil until the first message
	closed bool          // guarded by qmu: the answer has begun
	writer chan struct{} // closed when the writer has exited; made with queue

	mu      sync.Mutex // guards the fields below and every write to w
	started bool       // the event stream's header is sent
	broken  bool       // a write failed: nothing more is written
}

type key struct{}

// NewReply returns the reply of w, or nil when w cannot stream (the
// request's messages then go where the session's go).
func NewReply(w http.ResponseWriter) *Reply {
	if _, ok := w.(http.Flusher); !ok {
		return nil
	}
	return &Reply{w: w, rc: http.NewResponseController(w)}
}

// With returns ctx carrying s, which requests made within it use.
func With(ctx context.Context, s *Reply) context.Context {
	if s == nil {
		return ctx
	}
	return context.WithValue(ctx, key{}, s)
}

// From returns the reply of the request ctx belongs to, or nil.
func From(ctx context.Context) *Reply {
	s, _ := ctx.Value(key{}).(*Reply)
	return s
}

// Notify queues a notification of method with params, and reports
// whether it did.
func (s *Reply) Notify(method string, params any) bool {
	msg, err := json.Marshal(struct {
		JSONRPC string `json:"jsonrpc"`
		Method  string `json:"method"`
		Params  any    `json:"params,omitempty"`
	}{"2.0", method, params})
	if err != nil {
		return false
	}
	return s.Send(msg) == nil
}

// Send queues msg, one JSON-RPC message, for the client: ErrEnded once
// the answer has begun, ErrFull when the client reads too slowly to take
// more.
func (s *Reply) Send(msg []byte) error {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	if s.closed {
		return ErrEnded
	}
	if s.queue == nil {
		s.queue = make(chan []byte, queueLen)
		s.writer = make(chan struct{})
		go s.write(s.queue)
	}
	select {
	case s.queue <- msg:
		return nil
	default:
		return ErrFull
	}
}

// Open starts the event stream now, before anything is queued (a
// subscriptions/listen stream).
func (s *Reply) Open() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.start()
}

// start sends the header of an event stream, once. s.mu is held.
func (s *Reply) start() {
	if s.started {
		return
	}
	s.started = true
	s.broken = Begin(s.w, s.rc) != nil
}

// write writes the queued messages until Finish closes the queue.
func (s *Reply) write(queue <-chan []byte) {
	defer close(s.writer)
	for msg := range queue {
		s.mu.Lock()
		s.start()
		s.event(msg)
		s.mu.Unlock()
	}
}

// event writes msg as one event under the write deadline. s.mu is held.
func (s *Reply) event(msg []byte) {
	if !s.broken {
		s.broken = Write(s.w, s.rc, Event(msg)) != nil
	}
}

// Finish writes what is still queued, then the answer: as the stream's
// last event when the stream has begun, else as JSON with status (202
// with no body when body is nil). Nothing is sent after it.
func (s *Reply) Finish(status int, body []byte) {
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
	if !s.started {
		Answer(s.w, status, body)
		return
	}
	if body != nil {
		s.event(body)
	}
}

// Answer writes body as the JSON answer with status, or 202 with no body
// for none.
func Answer(w http.ResponseWriter, status int, body []byte) {
	if body == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// Begin sends the header of an event stream on w (whose controller is
// rc) and flushes it; an error means the client cannot be written to.
func Begin(w http.ResponseWriter, rc *http.ResponseController) error {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return rc.Flush()
}

// Write writes b, whole events, to w and flushes it, within WriteTimeout.
func Write(w http.ResponseWriter, rc *http.ResponseController, b []byte) error {
	_ = rc.SetWriteDeadline(time.Now().Add(WriteTimeout))
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
	if _, err := w.Write(b); err != nil {
		return err
	}
	return rc.Flush()
}

// Event is msg, one line of JSON, as an SSE message event.
func Event(msg []byte) []byte {
	b := make([]byte, 0, len(msg)+24)
	b = append(b, "event: message\ndata: "...)
	b = append(b, msg...)
	return append(b, "\n\n"...)
}
