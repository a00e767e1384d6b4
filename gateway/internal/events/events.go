// Package events is the call lifecycle events and the live calls page:
// a [Bus] that fans each call's events out to subscribers without ever
// blocking the call, and a [Server] that streams them at /events and
// serves the page at /ui and its data at /ui/state. The gateway's record
// step (gateway/events.go) makes and publishes the events; this package
// knows neither the pipeline nor Prometheus, whose counter of dropped
// subscribers the gateway passes in as [Options.OnDrop].
package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/internal/principal"
	"github.com/toolgate/toolgate/internal/textcut"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/threadctx"
)

// Every call the record step sees goes through these states, in order:
// pending once it is resolved; running before each attempt (the number
// says which); then completed or error. A call refused before dispatch
// (validation, shutdown, a full queue) goes from pending to error.
const (
	StatePending   = "pending"
	StateRunning   = "running"
	StateCompleted = "completed"
	StateError     = "error"
)

const (
	// defaultBuffer is how many events a subscriber may have queued
	// unless [Options.Buffer] says otherwise. One that falls further
	// behind is dropped: publishing never waits, so a slow consumer can
	// never delay a call.
	defaultBuffer = 256
	// maxSubscribers bounds the open event streams (/events, /ui pages):
	// each holds a buffer, and every call is offered to each.
	maxSubscribers = 64
	// adminRoom of them are kept for admins (and clients without
	// authentication): the streams of principals that see only their own
	// calls are at most maxSubscribers - adminRoom together, and at most
	// maxPerPrincipal for one, so that no principal can take every stream
	// (issue 31).
	adminRoom       = 8
	maxPerPrincipal = 8
	// writeTimeout bounds one write to an event stream.
	writeTimeout = 10 * time.Second
	// pingEvery is how often an idle event stream gets a comment.
	pingEvery = 25 * time.Second
	// maxMessage caps an error event's message, in bytes.
	maxMessage = 2048
	// recentCalls is how many finished calls /ui/state lists, so that a
	// page just opened is not empty.
	recentCalls = 100
)

// Event is one transition of one call, as /events sends it. Threads and
// sessions are hashed ([threadctx.Label]): a session ID is a bearer
// credential and thread names are the client's.
type Event struct {
	State     string    `json:"state"`
	ID        string    `json:"id"`
	Time      time.Time `json:"time"`
	Tool      string    `json:"tool"`
	Source    string    `json:"source"`
	Kind      string    `json:"kind"`
	Thread    string    `json:"thread,omitempty"`
	Principal string    `json:"principal,omitempty"`
	Session   string    `json:"session,omitempty"`
	// Attempt is the attempt starting, from 1 (running only).
	Attempt int `json:"attempt,omitempty"`
	// Attempts is how many attempts the call made, 0 when it was never
	// dispatched (completed and error only).
	Attempts int `json:"attempts,omitempty"`
	// Class is the error's class (error only).
	Class string `json:"class,omitempty"`
	// DurationMS is the call's duration through the pipeline (completed
	// and error only).
	DurationMS float64 `json:"duration_ms,omitempty"`
	// Message is the text the model saw, class prefix included (error
	// only, at most maxMessage bytes: see [Message]).
	Message string `json:"message,omitempty"`
	// Cache is the result cache's answer, hit or miss, for a tool with a
	// cache (completed and error only).
	Cache string `json:"cache,omitempty"`

	// thread and session are the raw IDs behind Thread and Session, which
	// labelled fills in (hashing costs; only events someone reads pay it).
	thread, session string
}

// New returns the event in state of call id of tool t, with the fields
// every state has. thread and session are the raw IDs, hashed only when
// the event is shown.
func New(state, id string, t *registry.Tool, thread, principal, session string) Event {
	return Event{
		State: state, ID: id, Time: time.Now(),
		Tool: t.Name, Source: t.Source, Kind: string(t.Kind),
		thread: thread, Principal: principal, session: session,
	}
}

// Message returns s, the text the model saw of a failed call, as an
// event's Message: capped at maxMessage bytes.
func Message(s string) string {
	if len(s) > maxMessage {
		s = textcut.Prefix(s, maxMessage) + "…"
	}
	return s
}

// labelled returns e with its thread and session hashed into Thread and
// Session and the raw IDs gone, as it may be shown. An event of another
// replica came labelled, and has no raw IDs: it stays as it is.
func (e Event) labelled() Event {
	if e.thread != "" {
		e.Thread, e.thread = threadctx.Label(e.thread), ""
	}
	if e.session != "" {
		e.Session, e.session = threadctx.Label(e.session), ""
	}
	return e
}

// Filter selects the events a subscriber receives. The zero value
// selects all.
type Filter struct {
	tool      string // a path.Match pattern on the tool's name
	principal string // exactly this principal
	outcome   string // "ok" or "error": only the final events of that outcome
	// own, when set, selects only the calls of principal owner, whatever
	// the query asked: with authentication on, a principal sees no other
	// principal's calls (scopeToViewer).
	own   bool
	owner string
}

// ParseFilter reads a filter from /events's query: tool (a glob),
// principal, outcome (ok or error).
func ParseFilter(q url.Values) (Filter, error) {
	f := Filter{tool: q.Get("tool"), principal: q.Get("principal"), outcome: q.Get("outcome")}
	if f.tool != "" {
		if _, err := path.Match(f.tool, ""); err != nil {
			return Filter{}, fmt.Errorf("query tool=%q is not a valid glob; use * and ? as in calc* or *__search", f.tool)
		}
	}
	switch f.outcome {
	case "", "ok", "error":
	default:
		return Filter{}, fmt.Errorf("query outcome=%q is not ok or error", f.outcome)
	}
	return f, nil
}

func (f *Filter) match(e *Event) bool {
	if f.tool != "" {
		if ok, _ := path.Match(f.tool, e.Tool); !ok {
			return false
		}
	}
	if f.principal != "" && f.principal != e.Principal {
		return false
	}
	if f.own && e.Principal != f.owner {
		return false
	}
	switch f.outcome {
	case "ok":
		return e.State == StateCompleted
	case "error":
		return e.State == StateError
	}
	return true
}

// Subscription is one consumer of a [Bus]. Its channel is closed by the
// bus, and only by it: when the consumer unsubscribes, when it has fallen
// the buffer's worth of events behind, or when the bus closes.
type Subscription struct {
	ch     chan Event
	filter Filter
	// dropped is set before ch is closed for falling behind, so the
	// consumer can tell it from the other reasons.
	dropped atomic.Bool
}

// C is the subscription's events; it is closed when the subscription
// ends.
func (s *Subscription) C() <-chan Event { return s.ch }

// Dropped reports whether the bus ended the subscription because it fell
// behind.
func (s *Subscription) Dropped() bool { return s.dropped.Load() }

// Options configure a [Bus]. The zero value works.
type Options struct {
	// Buffer is how many events a subscriber may have queued; 0 means
	// 256.
	Buffer int
	// OnDrop, when not nil, is called each time a subscriber is dropped
	// for falling behind (the gateway counts them in
	// toolgate_events_dropped_total). It runs with the bus locked and
	// must not call the bus.
	OnDrop func()
	// Replica, in a cluster, is this replica's ID: call IDs then name it
	// ("c-<replica>-<n>"), so that they are unique across replicas.
	Replica string
	// Remote, in a cluster with Redis, carries events to and from the
	// other replicas; nil for one replica.
	Remote Remote
}

// Remote carries call events to and from the other replicas of a cluster
// (the gateway adapts internal/cluster/eventrelay to it): the events of
// the other replicas come back through [Bus.Deliver].
type Remote interface {
	// Wanted reports whether another replica has watchers.
	Wanted() bool
	// Send hands e, labelled, to the other replicas, without waiting.
	Send(e Event)
	// Watch tells the other replicas that this one has a new watcher,
	// and returns once they relay (or after a bounded wait).
	Watch(ctx context.Context)
	// Unwatch tells it that a watcher left.
	Unwatch()
}

// RawRemote relays encoded events (internal/cluster/eventrelay's Relay):
// a [Remote] but that its Send takes an event's JSON.
type RawRemote interface {
	Wanted() bool
	Send(ev json.RawMessage)
	Watch(ctx context.Context)
	Unwatch()
}

// JSONRemote is the [Remote] that sends each event through r as its
// JSON; the other replicas' events come back through [Bus.DeliverJSON].
func JSONRemote(r RawRemote) Remote { return jsonRemote{r} }

type jsonRemote struct{ RawRemote }

func (r jsonRemote) Send(e Event) {
	b, _ := json.Marshal(e) // cannot fail: strings, numbers, a time
	r.RawRemote.Send(b)
}

// Bus fans call events out to subscribers without ever blocking the
// publisher. It also numbers calls, and keeps the final events of the
// latest ones. Its methods are safe for concurrent use; [Bus.Close] ends
// it.
type Bus struct {
	buf    int
	onDrop func()
	idBase string        // "c-", or "c-<replica>-" in a cluster
	remote Remote        // nil but in a cluster with Redis
	ids    atomic.Uint64 // numbers call IDs
	n      atomic.Int32  // len(subs), read on every call without mu

	mu     sync.Mutex                 // guards subs, owned, owners and closed
	subs   map[*Subscription]struct{} // guarded by mu
	owned  int                        // guarded by mu: the subscriptions of principals that see only their own calls
	owners map[string]int             // guarded by mu: those subscriptions by principal
	closed bool                       // guarded by mu: no new subscriptions

	recentMu sync.Mutex // guards recent and next
	recent   []Event    // guarded by recentMu: a ring of the last final events
	next     int        // guarded by recentMu: where the next one goes
}

// NewBus returns a bus configured by o; nil means the defaults.
func NewBus(o *Options) *Bus {
	b := &Bus{owners: map[string]int{}, buf: defaultBuffer, onDrop: func() {}, idBase: "c-", subs: map[*Subscription]struct{}{}}
	if o != nil {
		if o.Replica != "" {
			b.idBase = "c-" + o.Replica + "-"
		}
		b.remote = o.Remote
		if o.Buffer > 0 {
			b.buf = o.Buffer
		}
		if o.OnDrop != nil {
			b.onDrop = o.OnDrop
		}
	}
	return b
}

// Remember keeps e, a call's final event, among the recent ones.
func (b *Bus) Remember(e Event) {
	b.recentMu.Lock()
	defer b.recentMu.Unlock()
	if len(b.recent) < recentCalls {
		b.recent = append(b.recent, e)
		return
	}
	b.recent[b.next] = e
	b.next = (b.next + 1) % recentCalls
}

// Recent returns the final events of the latest calls that f selects,
// oldest first, as they may be shown. The ring is shared: of its
// recentCalls, f may select fewer.
func (b *Bus) Recent(f *Filter) []Event {
	b.recentMu.Lock()
	all := append(slices.Clone(b.recent[b.next:]), b.recent[:b.next]...)
	b.recentMu.Unlock()
	out := all[:0]
	for _, e := range all {
		if f.match(&e) {
			out = append(out, e.labelled())
		}
	}
	return out
}

// NextID returns a new call ID, "c-<n>", or "c-<replica>-<n>" in a
// cluster.
func (b *Bus) NextID() string { return b.idBase + strconv.FormatUint(b.ids.Add(1), 10) }

// Active reports whether anyone listens, here or on another replica, so
// that calls build no event when nobody does.
func (b *Bus) Active() bool {
	return b.n.Load() > 0 || (b.remote != nil && b.remote.Wanted())
}

// Watch tells the other replicas of a cluster that s, a new subscription,
// watches, and returns once they relay their events (at most a second
// later); it does nothing for one replica. Unwatch undoes it.
func (b *Bus) Watch(ctx context.Context) {
	if b.remote != nil {
		b.remote.Watch(ctx)
	}
}

// Unwatch tells the other replicas that a subscription [Bus.Watch]
// announced ended.
func (b *Bus) Unwatch() {
	if b.remote != nil {
		b.remote.Unwatch()
	}
}

// Subscribers is the number of open subscriptions.
func (b *Bus) Subscribers() int { return int(b.n.Load()) }

// Subscribe returns a new subscription to the events f selects; nil and
// a nil error once the bus is closed, nil and an error saying which bound
// when the bus holds maxSubscribers, or when f is narrowed to
// one principal's own calls ([Server.scopeToViewer]) and that principal
// holds maxPerPrincipal or such principals hold all but adminRoom
// together. The caller ends it with [Bus.Unsubscribe].
func (b *Bus) Subscribe(f Filter) (s *Subscription, err error) {
	s = &Subscription{ch: make(chan Event, b.buf), filter: f}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.closed:
		return nil, nil
	case len(b.subs) >= maxSubscribers:
		return nil, fmt.Errorf("%d event streams are open, the most toolgate serves; close one or try again later", maxSubscribers)
	case f.own && b.owners[f.owner] >= maxPerPrincipal:
		return nil, fmt.Errorf("you have %d event streams open, the most one principal may; close one of yours first", maxPerPrincipal)
	case f.own && b.owned >= maxSubscribers-adminRoom:
		return nil, fmt.Errorf("%d event streams of principals are open, the most toolgate serves them (the rest is kept for admins); close one or try again later", b.owned)
	}
	b.subs[s] = struct{}{}
	if f.own {
		b.owned++
		b.owners[f.owner]++
	}
	b.n.Store(int32(len(b.subs)))
	return s, nil
}

// Unsubscribe ends s unless the bus already has.
func (b *Bus) Unsubscribe(s *Subscription) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.remove(s)
}

// remove closes s's channel if s is still subscribed; b.mu is held.
func (b *Bus) remove(s *Subscription) {
	if _, ok := b.subs[s]; ok {
		delete(b.subs, s)
		close(s.ch)
		if f := &s.filter; f.own {
			b.owned--
			if b.owners[f.owner]--; b.owners[f.owner] <= 0 {
				delete(b.owners, f.owner)
			}
		}
		b.n.Store(int32(len(b.subs)))
	}
}

// Publish hands e to every subscriber whose filter matches, and to the
// other replicas when one watches. A subscriber whose buffer is full is
// dropped, not waited for.
func (b *Bus) Publish(e Event) {
	e = e.labelled()
	b.fanOut(e)
	if b.remote != nil && b.remote.Wanted() {
		b.remote.Send(e)
	}
}

// Deliver hands e, an event of another replica, to the subscribers here,
// and keeps it among the recent calls when it is a call's last.
func (b *Bus) Deliver(e Event) {
	if e.State == StateCompleted || e.State == StateError {
		b.Remember(e)
	}
	b.fanOut(e)
}

// DeliverJSON is [Bus.Deliver] of an event's JSON, as another replica's
// [JSONRemote] sent it; what is not an event's JSON is dropped.
func (b *Bus) DeliverJSON(raw json.RawMessage) {
	var e Event
	if json.Unmarshal(raw, &e) == nil {
		b.Deliver(e)
	}
}

// fanOut hands e, labelled, to every subscriber whose filter matches.
func (b *Bus) fanOut(e Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		if !s.filter.match(&e) {
			continue
		}
		select {
		case s.ch <- e:
		default:
			s.dropped.Store(true)
			b.remove(s)
			b.onDrop()
		}
	}
}

// Close ends every subscription and refuses new ones, so that /events
// streams end when the gateway closes. It is safe to call more than once.
func (b *Bus) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for s := range b.subs {
		b.remove(s)
	}
}

// errOthersCalls refuses a query that names another principal than the
// authenticated one.
var errOthersCalls = errors.New("a principal sees only its own calls: leave out the query's principal, or name your own")

// Server serves the events of its Bus at /events, and the live calls
// page at /ui with its data at /ui/state. Its fields are set before it
// serves and never changed after.
type Server struct {
	// Bus is the events served.
	Bus *Bus
	// Scoped is set with authentication on: each principal then sees its
	// own calls only (auth.admins every call), and calls without a
	// principal are nobody's to read over HTTP.
	Scoped bool
	// Sources returns the tools by source that id (nil without
	// authentication) may see, for /ui/state.
	Sources func(id *principal.Identity) []Source
	// Status is the gateway's status for /ui/state: ready or
	// shutting_down.
	Status func() string
}

// scopeToViewer narrows f to the calls r's principal may see. With
// authentication on, that is its own calls only (issue 11): tool names,
// outcomes and error messages of one principal are not another's to read,
// and no query widens that (one naming another principal is
// errOthersCalls). Calls without a principal (the embedding program's)
// are then nobody's to read over HTTP. Without authentication every call
// stays visible, as the MCP endpoint is open to all alike.
func (s *Server) scopeToViewer(r *http.Request, f *Filter) error {
	if !s.Scoped {
		return nil
	}
	id := principal.From(r.Context())
	if id == nil {
		// The auth middleware always sets one; without it, show nothing.
		return errOthersCalls
	}
	if id.Admin {
		return nil // auth.admins see every call
	}
	if f.principal != "" && f.principal != id.Name {
		return errOthersCalls
	}
	f.own, f.owner = true, id.Name
	return nil
}
