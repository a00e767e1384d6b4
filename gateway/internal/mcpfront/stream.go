package mcpfront

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// The response of one POSTed request, the one writer of everything the
// request causes.
//
// A request's answer goes out as JSON unless something is sent before it:
// its progress, its upstream's log messages and progress, its requests to
// the client (sampling, elicitation, roots: ask.go), or, for
// subscriptions/listen, the notifications the client subscribed to. The
// first of those turns the response into an event stream, which carries
// them, each as an event, and the answer as its last event. A session's
// other notifications go out on its GET stream (get.go), never here, so a
// call's last progress always precedes its result.
//
// Whoever sends a message never waits for the client: it is queued
// (refused when the queue is full) and a writer goroutine writes the
// queue, each event under a write deadline. An upstream's progress arrives
// on that upstream's shared read goroutine, which a client that stops
// reading must not hold.

// streamQueue bounds the messages a stream holds for a client that reads
// slower than they come.
const streamQueue = 100

// streamWriteTimeout bounds one write of an event to a client.
const streamWriteTimeout = 10 * time.Second

var (
	// errStreamEnded: the request's answer has begun; nothing more is
	// sent on its stream.
	errStreamEnded = errors.New("the request's answer has begun")
	// errStreamFull: streamQueue messages wait for the client.
	errStreamFull = fmt.Errorf("the client is not reading its request's stream: %d messages wait for it", streamQueue)
)

// replyStream is the response of one POSTed request.
type replyStream struct {
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

type streamKey struct{}

// newReplyStream returns the stream of w, or nil when w cannot stream
// (the request's messages then go where the session's go).
func newReplyStream(w http.ResponseWriter) *replyStream {
	if _, ok := w.(http.Flusher); !ok {
		return nil
	}
	return &replyStream{w: w, rc: http.NewResponseController(w)}
}

// withStream returns ctx carrying s, which requests made within it use.
func withStream(ctx context.Context, s *replyStream) context.Context {
	if s == nil {
		return ctx
	}
	return context.WithValue(ctx, streamKey{}, s)
}

// streamOf returns the stream of the request ctx belongs to, or nil.
func streamOf(ctx context.Context) *replyStream {
	s, _ := ctx.Value(streamKey{}).(*replyStream)
	return s
}

// notify queues a notification of method with params, and reports
// whether it did.
func (s *replyStream) notify(method string, params any) bool {
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

// send queues msg, one JSON-RPC message, for the client: errStreamEnded
// once the answer has begun, errStreamFull when the client reads too
// slowly to take more.
func (s *replyStream) send(msg []byte) error {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	if s.closed {
		return errStreamEnded
	}
	if s.queue == nil {
		s.queue = make(chan []byte, streamQueue)
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

// open starts the event stream now, before anything is queued (a
// subscriptions/listen stream).
func (s *replyStream) open() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.start()
}

// start sends the header of an event stream, once. s.mu is held.
func (s *replyStream) start() {
	if s.started {
		return
	}
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	s.w.WriteHeader(http.StatusOK)
	s.started = true
	s.broken = s.rc.Flush() != nil
}

// write writes the queued messages until finish closes the queue.
func (s *replyStream) write(queue <-chan []byte) {
	defer close(s.writer)
	for msg := range queue {
		s.mu.Lock()
		s.start()
		s.event(msg)
		s.mu.Unlock()
	}
}

// event writes msg as one event under the write deadline. s.mu is held.
func (s *replyStream) event(msg []byte) {
	if s.broken {
		return
	}
	_ = s.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	err := writeEvent(s.w, msg)
	if err == nil {
		err = s.rc.Flush()
	}
	_ = s.rc.SetWriteDeadline(time.Time{})
	s.broken = err != nil
}

// finish writes what is still queued, then the answer: as the stream's
// last event when the stream has begun, else as JSON with status (202
// with no body when body is nil). Nothing is sent after it.
func (s *replyStream) finish(status int, body []byte) {
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
		writeAnswer(s.w, status, body)
		return
	}
	if body != nil {
		s.event(body)
	}
}

// writeAnswer writes body as the JSON answer with status, or 202 with no
// body for none.
func writeAnswer(w http.ResponseWriter, status int, body []byte) {
	if body == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	writeJSON(w, status, append(body, '\n'))
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
