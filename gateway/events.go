package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/internal/principal"
	"github.com/toolgate/toolgate/internal/textcut"
	"github.com/toolgate/toolgate/retry"
)

// Every call the record step sees goes through these states, in order:
// pending once it is resolved; running before each attempt (the number
// says which); then completed or error. A call refused before dispatch
// (validation, shutdown, a full queue) goes from pending to error.
const (
	statePending   = "pending"
	stateRunning   = "running"
	stateCompleted = "completed"
	stateError     = "error"
)

const (
	// eventBuffer is how many events a subscriber may have queued. One
	// that falls further behind is dropped: publishing never waits, so a
	// slow consumer can never delay a call.
	eventBuffer = 256
	// maxSubscribers bounds the open event streams (/events, /ui pages):
	// each holds a buffer, and every call is offered to each.
	maxSubscribers = 64
	// eventWriteTimeout bounds one write to an event stream.
	eventWriteTimeout = 10 * time.Second
	// eventPing is how often an idle event stream gets a comment.
	eventPing = 25 * time.Second
	// maxEventMessage caps an error event's message, in bytes.
	maxEventMessage = 2048
	// recentCalls is how many finished calls /ui/state lists, so that a
	// page just opened is not empty.
	recentCalls = 100
)

// callEvent is one transition of one call, as /events sends it. Threads
// and sessions are hashed (threadLabel): a session ID is a bearer
// credential and thread names are the client's.
type callEvent struct {
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
	// only, at most maxEventMessage bytes).
	Message string `json:"message,omitempty"`

	// thread and session are the raw IDs behind Thread and Session, which
	// labelled fills in (hashing costs; only events someone reads pay it).
	thread, session string
}

// labelled returns e with its thread and session hashed into Thread and
// Session and the raw IDs gone, as it may be shown.
func (e callEvent) labelled() callEvent {
	e.Thread, e.Session = threadLabel(e.thread), threadLabel(e.session)
	e.thread, e.session = "", ""
	return e
}

// eventFilter selects the events a subscriber receives. The zero value
// selects all.
type eventFilter struct {
	tool      string // a path.Match pattern on the tool's name
	principal string // exactly this principal
	outcome   string // "ok" or "error": only the final events of that outcome
	// own, when set, selects only the calls of principal owner, whatever
	// the query asked: with authentication on, a principal sees no other
	// principal's calls (scopeToViewer).
	own   bool
	owner string
}

// parseEventFilter reads a filter from /events's query: tool (a glob),
// principal, outcome (ok or error).
func parseEventFilter(q url.Values) (eventFilter, error) {
	f := eventFilter{tool: q.Get("tool"), principal: q.Get("principal"), outcome: q.Get("outcome")}
	if f.tool != "" {
		if _, err := path.Match(f.tool, ""); err != nil {
			return eventFilter{}, fmt.Errorf("query tool=%q is not a valid glob; use * and ? as in calc* or *__search", f.tool)
		}
	}
	switch f.outcome {
	case "", "ok", "error":
	default:
		return eventFilter{}, fmt.Errorf("query outcome=%q is not ok or error", f.outcome)
	}
	return f, nil
}

// errOthersCalls refuses a query that names another principal than the
// authenticated one.
var errOthersCalls = errors.New("a principal sees only its own calls: leave out the query's principal, or name your own")

// scopeToViewer narrows f to the calls r's principal may see. With
// authentication on, that is its own calls only (issue 11): tool names,
// outcomes and error messages of one principal are not another's to read,
// and no query widens that (one naming another principal is
// errOthersCalls). Calls without a principal (the embedding program's)
// are then nobody's to read over HTTP. Without authentication every call
// stays visible, as the MCP endpoint is open to all alike.
func (g *Gateway) scopeToViewer(r *http.Request, f *eventFilter) error {
	if g.auth == nil {
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

func (f *eventFilter) match(e *callEvent) bool {
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
		return e.State == stateCompleted
	case "error":
		return e.State == stateError
	}
	return true
}

// subscription is one consumer of the bus. Its channel is closed by the
// bus, and only by it: when the consumer unsubscribes, when it has fallen
// eventBuffer events behind, or when the gateway closes.
type subscription struct {
	ch     chan callEvent
	filter eventFilter
	// dropped is set before ch is closed for falling behind, so the
	// consumer can tell it from the other reasons.
	dropped atomic.Bool
}

// eventBus fans call events out to subscribers without ever blocking the
// publisher. It also numbers calls.
type eventBus struct {
	buf     int
	dropped prometheus.Counter
	ids     atomic.Uint64 // numbers call IDs
	n       atomic.Int32  // len(subs), read on every call without mu

	mu     sync.Mutex                 // guards subs and closed
	subs   map[*subscription]struct{} // guarded by mu
	closed bool                       // guarded by mu: no new subscriptions

	recentMu sync.Mutex  // guards recent and next
	recent   []callEvent // guarded by recentMu: a ring of the last final events
	next     int         // guarded by recentMu: where the next one goes
}

func newEventBus(reg *prometheus.Registry, buf int) *eventBus {
	b := &eventBus{
		buf:  buf,
		subs: map[*subscription]struct{}{},
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolgate_events_dropped_total",
			Help: "Lifecycle event subscribers (/events, /ui) dropped for falling behind by more than the buffer.",
		}),
	}
	reg.MustRegister(b.dropped, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "toolgate_event_subscribers",
		Help: "Open lifecycle event subscriptions (/events streams, /ui pages).",
	}, func() float64 { return float64(b.n.Load()) }))
	return b
}

// remember keeps e, a call's final event, among the recent ones.
func (b *eventBus) remember(e callEvent) {
	b.recentMu.Lock()
	defer b.recentMu.Unlock()
	if len(b.recent) < recentCalls {
		b.recent = append(b.recent, e)
		return
	}
	b.recent[b.next] = e
	b.next = (b.next + 1) % recentCalls
}

// recentCalls returns the final events of the latest calls that f
// selects, oldest first. The ring is shared: of its recentCalls, f may
// select fewer.
func (b *eventBus) recentCalls(f *eventFilter) []callEvent {
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

// nextID returns a new call ID.
func (b *eventBus) nextID() string { return "c-" + strconv.FormatUint(b.ids.Add(1), 10) }

// active reports whether anyone listens, so that calls build no event
// when nobody does.
func (b *eventBus) active() bool { return b.n.Load() > 0 }

// subscribe returns a new subscription, or nil once the bus is closed or
// holds maxSubscribers (full is then true).
func (b *eventBus) subscribe(f eventFilter) (s *subscription, full bool) {
	s = &subscription{ch: make(chan callEvent, b.buf), filter: f}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, false
	}
	if len(b.subs) >= maxSubscribers {
		return nil, true
	}
	b.subs[s] = struct{}{}
	b.n.Store(int32(len(b.subs)))
	return s, false
}

// unsubscribe ends s unless the bus already has.
func (b *eventBus) unsubscribe(s *subscription) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.remove(s)
}

// remove closes s's channel if s is still subscribed; b.mu is held.
func (b *eventBus) remove(s *subscription) {
	if _, ok := b.subs[s]; ok {
		delete(b.subs, s)
		close(s.ch)
		b.n.Store(int32(len(b.subs)))
	}
}

// publish hands e to every subscriber whose filter matches. A subscriber
// whose buffer is full is dropped, not waited for.
func (b *eventBus) publish(e callEvent) {
	e = e.labelled()
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
			b.dropped.Inc()
		}
	}
}

// close ends every subscription and refuses new ones, so that /events
// streams end when the gateway closes.
func (b *eventBus) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for s := range b.subs {
		b.remove(s)
	}
}

// event returns c's event in state with the fields every state has.
func callEventOf(c *Call, state string) callEvent {
	return callEvent{
		State: state, ID: c.ID, Time: time.Now(),
		Tool: c.Tool.Name, Source: c.Tool.Source, Kind: string(c.Tool.Kind),
		thread: c.Thread, Principal: c.Principal, session: c.Session,
	}
}

// callPending gives c its ID and announces it, in an event and a debug
// line. The record step calls it once c is resolved.
func (g *Gateway) callPending(ctx context.Context, c *Call) {
	if c.ID == "" {
		c.ID = g.events.nextID()
	}
	if g.events.active() {
		g.events.publish(callEventOf(c, statePending))
	}
	if g.logger.Enabled(ctx, slog.LevelDebug) {
		g.logger.LogAttrs(ctx, slog.LevelDebug, "tool call pending",
			slog.String("call_id", c.ID), slog.String("tool", c.Tool.Name), slog.String("kind", string(c.Tool.Kind)),
			slog.String("thread", threadLabel(c.Thread)), slog.String("session", threadLabel(c.Session)),
			slog.String("principal", c.Principal))
	}
}

// onAttempt returns the [executors.Call.OnAttempt] of c: it counts c's
// attempts and announces each.
func (g *Gateway) onAttempt(ctx context.Context, c *Call) func(n int) {
	return func(n int) {
		c.attempts = n
		if g.events.active() {
			e := callEventOf(c, stateRunning)
			e.Attempt = n
			g.events.publish(e)
		}
		if g.logger.Enabled(ctx, slog.LevelDebug) {
			g.logger.LogAttrs(ctx, slog.LevelDebug, "tool call running",
				slog.String("call_id", c.ID), slog.String("tool", c.Tool.Name), slog.Int("attempt", n))
		}
	}
}

// callEnded keeps c's outcome among the recent calls and announces it: res, or err when the chain returned
// one; class is "" for a success.
func (g *Gateway) callEnded(ctx context.Context, c *Call, res *Result, err error, class string, d time.Duration) {
	debug := g.logger.Enabled(ctx, slog.LevelDebug)
	e := callEventOf(c, stateCompleted)
	e.Attempts, e.DurationMS = c.attempts, float64(d.Microseconds())/1000
	if class != "" {
		e.State, e.Class = stateError, class
		e.Message = errorMessage(res, err)
	}
	g.events.remember(e)
	if g.events.active() {
		g.events.publish(e)
	}
	if debug {
		msg := "tool call completed"
		if class != "" {
			msg = "tool call failed"
		}
		g.logger.LogAttrs(ctx, slog.LevelDebug, msg,
			slog.String("call_id", c.ID), slog.String("tool", c.Tool.Name), slog.Int("attempts", c.attempts),
			slog.String("class", class), slog.Duration("duration", d))
	}
}

// errorMessage is the text the model saw of a failed call, capped at
// maxEventMessage bytes.
func errorMessage(res *Result, err error) string {
	var s string
	switch {
	case err != nil:
		s = string(retry.Classify(err)) + ": " + err.Error()
	default:
		s = res.decoded().Text()
	}
	if len(s) > maxEventMessage {
		s = textcut.Prefix(s, maxEventMessage) + "…"
	}
	return s
}

// resultClass is the class of an isError result: its own, else the one
// its _meta names (an upstream MCP server may say it, under
// [ErrorClassMetaKey]), else execution.
func resultClass(res *Result) retry.Class {
	if res.Class != "" {
		return res.Class
	}
	if s, ok := res.Meta[ErrorClassMetaKey].(string); ok && retry.Class(s).Valid() {
		return retry.Class(s)
	}
	if res.Passthrough != nil {
		var head struct {
			Meta map[string]any `json:"_meta"`
		}
		if json.Unmarshal(res.Passthrough, &head) == nil {
			if s, ok := head.Meta[ErrorClassMetaKey].(string); ok && retry.Class(s).Valid() {
				return retry.Class(s)
			}
		}
	}
	return retry.Execution
}

// serveEvents streams call events as Server-Sent Events (event: call, the
// event's JSON as data) until the client goes, the gateway closes, or the
// client falls eventBuffer events behind (it then gets event: dropped and
// the stream ends; reconnecting starts afresh). The query may filter:
// tool (a glob), principal, outcome (ok or error: only final events).
// With authentication on, a principal gets its own calls' events only.
func (g *Gateway) serveEvents(w http.ResponseWriter, r *http.Request) {
	f, err := parseEventFilter(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if err := g.scopeToViewer(r, &f); err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	rc := http.NewResponseController(w)
	sub, full := g.events.subscribe(f)
	switch {
	case full:
		w.Header().Set("Retry-After", "10")
		http.Error(w, fmt.Sprintf("%d event streams are open, the most toolgate serves; close one or try again later", maxSubscribers), http.StatusServiceUnavailable)
		return
	case sub == nil:
		http.Error(w, "toolgate is shutting down", http.StatusServiceUnavailable)
		return
	}
	defer g.events.unsubscribe(sub)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// Every write has a deadline, so a client that stops reading cannot
	// hold this handler (and its connection) once the bus has dropped it.
	deadline := func() { _ = rc.SetWriteDeadline(time.Now().Add(eventWriteTimeout)) }
	deadline()
	// A comment first: the client knows it is subscribed once it reads it.
	if _, err := fmt.Fprint(w, ": subscribed\n\n"); err != nil || rc.Flush() != nil {
		return
	}
	ping := time.NewTicker(eventPing)
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
					_, _ = fmt.Fprintf(w, "event: dropped\ndata: {\"reason\":\"fell more than %d events behind\"}\n\n", g.events.buf)
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
