package mcpfront

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/gateway/internal/eventstream"
)

// A streamable HTTP session's GET stream and its DELETE.
//
// The GET stream carries what belongs to the session rather than to one of
// its requests: list changes, log messages and resource updates mcp-go's
// broadcasts queue on the session, and the front's requests to the client
// made outside any request (ask.go). One GET stream reads a session at a
// time: a new one (a client reconnecting) replaces the one before. Its
// events carry no IDs: what the session queued while no stream was open
// waits in its queue (sessionQueue) for the next one, so there is nothing
// to replay.

// heartbeat is how often an idle GET stream sends an SSE comment, so that
// proxies keep it open and a client that went away is noticed.
func (f *Front) heartbeat() time.Duration {
	if ttl := f.o.SessionIdleTTL; ttl > 0 {
		return min(25*time.Second, ttl/3)
	}
	return 25 * time.Second
}

// serveSessionStream serves a GET (the session's stream) or a DELETE (the
// session's end) of session sid.
func (f *Front) serveSessionStream(w http.ResponseWriter, r *http.Request, sid string) {
	s := f.ownSession(w, r, sid)
	if s == nil {
		return
	}
	if r.Method == http.MethodDelete {
		f.endSession(r.Context(), s)
		w.WriteHeader(http.StatusOK)
		return
	}
	if !s.Begin() {
		writeUnknownSession(w)
		return
	}
	defer s.Finish()
	f.serveGet(w, r, s)
}

// serveGet streams session s's queue until the client goes away, the
// session ends, a newer GET replaces this one, or the front closes or
// ends its streams (EndStreams).
func (f *Front) serveGet(w http.ResponseWriter, r *http.Request, s *session) {
	if _, ok := w.(http.Flusher); !ok {
		writeJSON(w, http.StatusMethodNotAllowed, jsonRPCError(mcp.INVALID_REQUEST, "this connection cannot stream: open the GET stream over a connection that can"))
		return
	}
	ctx, stop := context.WithCancel(r.Context())
	defer stop()
	defer context.AfterFunc(f.streams, stop)()
	// Take the session's turn: the stream before this one ends first.
	var mine sync.WaitGroup
	mine.Add(1)
	defer mine.Done()
	s.getMu.Lock()
	prevStop, prev := s.getStop, s.getWG
	s.getStop, s.getWG = stop, &mine
	s.getMu.Unlock()
	if prev != nil {
		prevStop()
		prev.Wait()
	}
	rc := http.NewResponseController(w)
	if eventstream.Begin(w, rc) != nil {
		return
	}
	beat := time.NewTicker(f.heartbeat())
	defer beat.Stop()
	for {
		var out []byte
		select {
		case n := <-s.notes:
			msg, err := json.Marshal(n)
			if err != nil {
				continue
			}
			out = eventstream.Event(msg)
		case msg := <-s.toGet:
			out = eventstream.Event(msg)
		case <-beat.C:
			out = []byte(": keep-alive\n\n")
		case <-ctx.Done():
			return
		case <-s.done:
			return
		}
		if eventstream.Write(w, rc, out) != nil {
			return
		}
	}
}
