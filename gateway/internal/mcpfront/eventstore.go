package mcpfront

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/mark3labs/mcp-go/server"
)

// eventStore is a bounded server.EventStore: it keeps the last perSession
// events of each session. mcp-go v1.2.1 drops progress notifications under
// concurrency unless an event store is set (mark3labs/mcp-go PR #969), and
// its InMemoryEventStore keeps every event until the session ends.
type eventStore struct {
	perSession int

	mu       sync.Mutex
	seq      uint64                   // guarded by mu
	sessions map[string][]storedEvent // guarded by mu; oldest first
}

type storedEvent struct {
	id, stream string
	msg        json.RawMessage
}

var _ server.EventStore = (*eventStore)(nil)

func newEventStore(perSession int) *eventStore {
	return &eventStore{perSession: perSession, sessions: map[string][]storedEvent{}}
}

func (s *eventStore) StoreEvent(_ context.Context, sessionID, streamID string, message json.RawMessage) (string, error) {
	msg := slices.Clone(message)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	id := strconv.FormatUint(s.seq, 10)
	log := s.sessions[sessionID]
	if len(log) >= s.perSession {
		n := copy(log, log[len(log)-s.perSession+1:])
		clear(log[n:])
		log = log[:n]
	}
	s.sessions[sessionID] = append(log, storedEvent{id: id, stream: streamID, msg: msg})
	return id, nil
}

func (s *eventStore) ReplayEventsAfter(_ context.Context, sessionID, lastEventID string, send func(eventID string, message json.RawMessage) error) (string, error) {
	s.mu.Lock()
	log := s.sessions[sessionID]
	i := slices.IndexFunc(log, func(e storedEvent) bool { return e.id == lastEventID })
	if i < 0 {
		s.mu.Unlock()
		return "", fmt.Errorf("replaying events after %q: %w", lastEventID, server.ErrUnknownEventID)
	}
	stream := log[i].stream
	var later []storedEvent
	for _, e := range log[i+1:] {
		if e.stream == stream {
			later = append(later, e)
		}
	}
	s.mu.Unlock()
	for _, e := range later {
		if err := send(e.id, e.msg); err != nil {
			return stream, err
		}
	}
	return stream, nil
}

func (s *eventStore) PurgeSession(_ context.Context, sessionID string) error {
	s.mu.Lock()
	delete(s.sessions, sessionID)
	s.mu.Unlock()
	return nil
}
