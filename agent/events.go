package agent

import (
	"context"
	"iter"
	"slices"
	"sync"
)

// EventType names a stream event of [Events].
type EventType string

// The stream events, in the order a stream may emit them.
const (
	EventConnect      EventType = "connect"       // the model call is about to be made
	EventBlockStart   EventType = "block_start"   // Block: block Index of this kind started
	EventDelta        EventType = "delta"         // Block and Delta: any block's new text, thinking or argument JSON
	EventCitation     EventType = "citation"      // Citation: a citation of text block Index
	EventBlockStop    EventType = "block_stop"    // Block: block Index is complete (after its content_block event)
	EventText         EventType = "text"          // Delta and Snapshot of text block Index
	EventThinking     EventType = "thinking"      // Delta and Snapshot of thinking block Index
	EventSignature    EventType = "signature"     // Signature of thinking block Index, complete
	EventToolInput    EventType = "tool_input"    // Delta (partial JSON), Snapshot and Parsed of tool call Index
	EventContentBlock EventType = "content_block" // Part or ToolCall: block Index is complete
	EventMessage      EventType = "message"       // Message: the assistant message as received so far, at the end of the stream
	EventFinalMessage EventType = "final_message" // Message: the complete assistant message
	EventError        EventType = "error"         // Err: the call failed
	EventAbort        EventType = "abort"         // Err: the caller's context ended the call
	EventEnd          EventType = "end"           // the call is over, whatever its outcome; always last
)

// Event is one stream event. Which fields matter depends on Type.
type Event struct {
	Type  EventType
	Index int
	// Delta is the new text, thinking or argument JSON.
	Delta string
	// Snapshot is the block's text, thinking or argument JSON so far.
	Snapshot string
	// Parsed is a best-effort parse of a tool call's partial arguments
	// (EventToolInput): the object so far, with open strings, arrays and
	// objects closed; nil when nothing parses yet.
	Parsed any
	// Signature is a thinking block's signature (EventSignature).
	Signature string
	// Part is a completed content part (EventContentBlock).
	Part *Part
	// ToolCall is a completed tool call (EventContentBlock).
	ToolCall *ToolCall
	// Message is the assistant message (EventMessage, EventFinalMessage).
	Message *Message
	// Err is the failure (EventError, EventAbort).
	Err error
	// Block is the kind of block Index: "text", "thinking",
	// "redacted_thinking" or "tool_call" (EventBlockStart, EventDelta,
	// EventBlockStop).
	Block string
	// Citation is the provider's citation object as JSON (EventCitation).
	Citation []byte
}

// EventAll subscribes a handler to every event type ([Events.On]).
const EventAll EventType = "*"

// Subscription identifies one handler of [Events]; pass it to
// [Events.Off].
type Subscription uint64

// Events delivers stream events to subscribed handlers, for UIs. Handlers
// run synchronously on the goroutine reading the stream, in subscription
// order, so they should be quick. The zero value is ready to use; Events
// is safe for concurrent use, and handlers may subscribe and unsubscribe
// (themselves included) while events are delivered.
type Events struct {
	mu       sync.Mutex // guards handlers and next
	handlers []handler
	next     Subscription
}

type handler struct {
	id   Subscription
	typ  EventType
	fn   func(Event)
	once bool
}

// On subscribes fn to events of type t until [Events.Off].
func (e *Events) On(t EventType, fn func(Event)) Subscription { return e.add(t, fn, false) }

// Once subscribes fn to the next event of type t only.
func (e *Events) Once(t EventType, fn func(Event)) Subscription { return e.add(t, fn, true) }

// Off unsubscribes the handler s; unknown or already removed ones are
// ignored.
func (e *Events) Off(s Subscription) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.handlers = slices.DeleteFunc(e.handlers, func(h handler) bool { return h.id == s })
}

func (e *Events) add(t EventType, fn func(Event), once bool) Subscription {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.next++
	e.handlers = append(e.handlers, handler{id: e.next, typ: t, fn: fn, once: once})
	return e.next
}

// has reports whether any handler listens to t; a nil e has none.
func (e *Events) has(t EventType) bool {
	if e == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, h := range e.handlers {
		if h.typ == t || h.typ == EventAll {
			return true
		}
	}
	return false
}

// emit delivers ev to its handlers, outside the lock. A nil e does nothing.
func (e *Events) emit(ev Event) {
	if e == nil {
		return
	}
	e.mu.Lock()
	var fns []func(Event)
	kept := e.handlers[:0]
	for _, h := range e.handlers {
		if h.typ == ev.Type || h.typ == EventAll {
			fns = append(fns, h.fn)
			if h.once {
				continue
			}
		}
		kept = append(kept, h)
	}
	clear(e.handlers[len(kept):])
	e.handlers = kept
	e.mu.Unlock()
	for _, fn := range fns {
		fn(ev)
	}
}

// Emitted returns a channel that receives the next event of type t: the
// awaitable view of one event (a UI waits for EventFinalMessage, a test
// for EventBlockStop). It subscribes at once, so call it before the event
// can happen; the subscription ends with that event.
func (e *Events) Emitted(t EventType) <-chan Event {
	ch := make(chan Event, 1)
	e.Once(t, func(ev Event) { ch <- ev })
	return ch
}

// All returns the events from now on as an iterator, beside the
// callbacks: every event, in order, until the consumer stops or ctx ends.
// Events are queued without bound while the consumer is behind, so the
// stream never waits for it.
func (e *Events) All(ctx context.Context) iter.Seq[Event] {
	q := &eventQueue{ready: make(chan struct{}, 1)}
	s := e.On(EventAll, q.push)
	return func(yield func(Event) bool) {
		defer e.Off(s)
		for {
			for _, ev := range q.take() {
				if !yield(ev) {
					return
				}
			}
			select {
			case <-q.ready:
			case <-ctx.Done():
				return
			}
		}
	}
}

// eventQueue is the unbounded queue behind [Events.All].
type eventQueue struct {
	mu    sync.Mutex // guards evs
	evs   []Event
	ready chan struct{} // holds a token while evs may be non-empty
}

func (q *eventQueue) push(ev Event) {
	q.mu.Lock()
	q.evs = append(q.evs, ev)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

func (q *eventQueue) take() []Event {
	q.mu.Lock()
	defer q.mu.Unlock()
	evs := q.evs
	q.evs = nil
	return evs
}
