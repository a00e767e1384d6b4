package mcpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"sync"
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
// into an event stream at the first notification, and frames mcp-go's
// answer as the stream's last event when mcp-go, not having seen a
// notification of its own, answers in JSON. Everything is written under
// one lock, each event in one Write, so the front's events and mcp-go's
// never interleave, and the answer comes after every notification the
// call sent before returning.
//
// The front's events carry no event ID, so they are not stored for
// resumption (Last-Event-ID); what mcp-go writes itself still is.

// callStream is the response of one POSTed request, as mcp-go and the
// front both write it.
type callStream struct {
	w http.ResponseWriter
	f http.Flusher

	mu      sync.Mutex
	started bool   // guarded by mu; the status line and header are sent
	events  bool   // guarded by mu; the response is an event stream
	held    []byte // guarded by mu; mcp-go's JSON answer on an event stream, sent as an event by end
	ended   bool   // guarded by mu
}

type callStreamKey struct{}

// withCallStream returns w wrapped as a [callStream] and r with it in its
// context, or w and r as they are when w cannot stream. The caller calls
// end once the handler has returned.
func withCallStream(w http.ResponseWriter, r *http.Request) (*callStream, http.ResponseWriter, *http.Request) {
	f, ok := w.(http.Flusher)
	if !ok {
		return nil, w, r
	}
	s := &callStream{w: w, f: f}
	return s, s, r.WithContext(context.WithValue(r.Context(), callStreamKey{}, s))
}

// callStreamOf returns the stream of the request ctx belongs to, or nil.
func callStreamOf(ctx context.Context) *callStream {
	s, _ := ctx.Value(callStreamKey{}).(*callStream)
	return s
}

func (s *callStream) Header() http.Header         { return s.w.Header() }
func (s *callStream) Unwrap() http.ResponseWriter { return s.w }

// WriteHeader passes mcp-go's status on, unless the front has already
// made the response an event stream.
func (s *callStream) WriteHeader(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return
	}
	s.started = true
	s.events = isEventStream(s.w.Header())
	s.w.WriteHeader(code)
}

// Write passes mcp-go's bytes on. On an event stream the front started,
// mcp-go's answer in JSON (a body beginning with '{', where an event
// begins with a field name) is held and sent as an event by end.
func (s *callStream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held != nil || (s.events && len(p) > 0 && p[0] == '{') {
		s.held = append(s.held, p...)
		return len(p), nil
	}
	if !s.started {
		s.started = true
		s.events = isEventStream(s.w.Header())
	}
	return s.w.Write(p)
}

func (s *callStream) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held == nil {
		s.f.Flush()
	}
}

// notify writes a notification of method with params as an event,
// making the response an event stream if nothing was written yet. It
// reports false, writing nothing, when the answer has gone out as JSON or
// the request is over: the notification would come after the result.
func (s *callStream) notify(method string, params any) bool {
	msg, err := json.Marshal(struct {
		JSONRPC string `json:"jsonrpc"`
		Method  string `json:"method"`
		Params  any    `json:"params,omitempty"`
	}{"2.0", method, params})
	if err != nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended || s.held != nil || (s.started && !s.events) {
		return false
	}
	if !s.started {
		h := s.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		s.w.WriteHeader(http.StatusOK)
		s.started, s.events = true, true
	}
	if writeEvent(s.w, msg) != nil {
		return false
	}
	s.f.Flush()
	return true
}

// end sends mcp-go's held answer as the stream's last event; nothing is
// written after it.
func (s *callStream) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = true
	if s.held == nil {
		return
	}
	_ = writeEvent(s.w, bytes.TrimSpace(s.held))
	s.held = nil
	s.f.Flush()
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
