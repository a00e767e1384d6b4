package events

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// ServeEvents streams call events as Server-Sent Events (event: call, the
// event's JSON as data) until the client goes, the bus closes, or the
// client falls the buffer's worth of events behind (it then gets event:
// dropped and the stream ends; reconnecting starts afresh). The query may
// filter: tool (a glob), principal, outcome (ok or error: only final
// events). With s.Scoped, a principal gets its own calls' events only.
func (s *Server) ServeEvents(w http.ResponseWriter, r *http.Request) {
	f, err := ParseFilter(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if err := s.scopeToViewer(r, &f); err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	rc := http.NewResponseController(w)
	sub, err := s.Bus.Subscribe(f)
	switch {
	case err != nil:
		w.Header().Set("Retry-After", "10")
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	case sub == nil:
		http.Error(w, "toolgate is shutting down", http.StatusServiceUnavailable)
		return
	}
	defer s.Bus.Unsubscribe(sub)
	// In a cluster, the other replicas relay their calls from now on.
	s.Bus.Watch(r.Context())
	defer s.Bus.Unwatch()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// Every write has a deadline, so a client that stops reading cannot
	// hold this handler (and its connection) once the bus has dropped it.
	deadline := func() { _ = rc.SetWriteDeadline(time.Now().Add(writeTimeout)) }
	deadline()
	// A comment first: the client knows it is subscribed once it reads it.
	if _, err := fmt.Fprint(w, ": subscribed\n\n"); err != nil || rc.Flush() != nil {
		return
	}
	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
	for {
		deadline()
		select {
		case <-r.Context().Done():
			return
		case <-ping.C:
			// Keeps idle streams through proxies, and finds a gone client.
			if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil || rc.Flush() != nil {
				return
			}
		case e, ok := <-sub.ch:
			if !ok {
				if sub.dropped.Load() {
					_, _ = fmt.Fprintf(w, "event: dropped\ndata: {\"reason\":\"fell more than %d events behind\"}\n\n", s.Bus.buf)
					_ = rc.Flush()
				}
				return
			}
			data, _ := json.Marshal(e) // cannot fail: strings, numbers, a time
			if _, err := fmt.Fprintf(w, "event: call\ndata: %s\n\n", data); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
		}
	}
}
