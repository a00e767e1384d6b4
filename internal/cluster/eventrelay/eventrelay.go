// Package eventrelay carries the call events of /events and /ui between
// the replicas of a cluster, through one Redis pub/sub channel (issue 26),
// and only while some replica has someone watching: a call builds and
// sends no event for the other replicas when nobody there listens.
//
// Every replica subscribes to the channel (one connection of its own).
// A replica whose first watcher arrives says "listen" on it and waits,
// at most a second, for each other subscribed replica's "ack": Redis's
// PUBLISH says how many received the word, so the watcher is told it is
// subscribed only once every replica relays. While it has watchers it
// says "listen" again every heartbeat; a replica relays for expiry after
// the last one it heard. A replica that (re)subscribes says "hello", to
// which the listening replicas answer "listen".
//
// Events travel in batches (at most batchMax, at most batchWait after the
// first), in order per replica. A replica's queue is bounded: when Redis
// is slow or down, events past it are dropped and counted, never waited
// for: a call never waits on the relay.
//
// It imports no toolgate package but cluster/store.
package eventrelay

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Channel is the Redis pub/sub channel of the relay.
const Channel = "toolgate:events"

// Bounds and timings.
const (
	heartbeat = 10 * time.Second       // how often a listening replica says so
	expiry    = 3 * heartbeat          // how long a replica relays after hearing it
	handshake = time.Second            // a new watcher's wait for the acks
	batchMax  = 64                     // events in one message at most
	batchWait = 20 * time.Millisecond  // a batch's age at most before it is sent
	queueMax  = 4096                   // events waiting to be sent at most
	retryWait = 500 * time.Millisecond // after a failed receive
)

// message is what goes on the channel, as JSON.
type message struct {
	From   string            `json:"r"`
	Type   string            `json:"t"` // listen, ack, hello, events
	To     string            `json:"to,omitempty"`
	Nonce  uint64            `json:"n,omitempty"`
	Events []json.RawMessage `json:"e,omitempty"`
}

// Redis is the connection the relay uses: *store.Store is one.
type Redis interface {
	Publish(ctx context.Context, channel string, msg []byte) (int64, error)
	Subscribe(ctx context.Context, channel string) *redis.PubSub
}

// Options configure [New].
type Options struct {
	// Self is this replica's ID.
	Self string
	// Deliver receives each event of another replica, as that replica
	// sent it, while this one has watchers. It is called from one
	// goroutine, in the order the events were sent.
	Deliver func(json.RawMessage)
	// Dropped, when set, is told of each event dropped because the queue
	// was full or Redis did not take it (a metric).
	Dropped func()
}

// Relay is one replica's end of the channel. Its methods are safe for
// concurrent use; Close stops it.
type Relay struct {
	r Redis
	o Options

	wanted  atomic.Int64 // unix nanos until which another replica listens
	watched atomic.Int32 // this replica's watchers
	nonce   atomic.Uint64
	queue   chan json.RawMessage

	mu   sync.Mutex               // guards acks
	acks map[uint64]chan struct{} // guarded by mu: handshakes waiting, by nonce

	ctx    context.Context
	cancel context.CancelFunc
	ps     *redis.PubSub
	wg     sync.WaitGroup
}

// New returns a relay over r; [Relay.Start] starts it.
func New(r Redis, o Options) *Relay {
	if o.Dropped == nil {
		o.Dropped = func() {}
	}
	rl := &Relay{r: r, o: o, queue: make(chan json.RawMessage, queueMax), acks: map[uint64]chan struct{}{}}
	rl.ctx, rl.cancel = context.WithCancel(context.Background())
	return rl
}

// Start subscribes to the channel and starts the relay's goroutines, which
// run until Close.
func (rl *Relay) Start() {
	rl.ps = rl.r.Subscribe(rl.ctx, Channel)
	rl.wg.Go(rl.receive)
	rl.wg.Go(rl.send)
	rl.wg.Go(rl.beat)
}

// Close stops the relay; events queued and not yet sent are dropped.
func (rl *Relay) Close() {
	rl.cancel()
	if rl.ps != nil {
		_ = rl.ps.Close()
	}
	rl.wg.Wait()
}

// Wanted reports whether another replica has watchers: then this one's
// events are to be sent. It costs a clock read.
func (rl *Relay) Wanted() bool { return time.Now().UnixNano() < rl.wanted.Load() }

// Send queues ev, one event as JSON, for the other replicas; it never
// waits: when the queue is full, ev is dropped and counted.
func (rl *Relay) Send(ev json.RawMessage) {
	select {
	case rl.queue <- ev:
	default:
		rl.o.Dropped()
	}
}

// Watch notes a new watcher on this replica and, the first time and for
// each one after, asks every other replica to relay, waiting until each
// subscribed one said it will (at most a second, or until ctx ends), so
// that a watcher told it is subscribed misses no call that starts after.
// Unwatch undoes it.
func (rl *Relay) Watch(ctx context.Context) {
	rl.watched.Add(1)
	n := rl.nonce.Add(1)
	acked := make(chan struct{}, 64)
	rl.mu.Lock()
	rl.acks[n] = acked
	rl.mu.Unlock()
	defer func() {
		rl.mu.Lock()
		delete(rl.acks, n)
		rl.mu.Unlock()
	}()
	receivers := rl.say(ctx, message{Type: "listen", Nonce: n})
	timer := time.NewTimer(handshake)
	defer timer.Stop()
	for others := receivers - 1; others > 0; others-- { // this replica received it too
		select {
		case <-acked:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// Unwatch notes that a watcher of this replica left.
func (rl *Relay) Unwatch() { rl.watched.Add(-1) }

// say publishes m from this replica and returns how many received it (0
// when Redis did not take it).
func (rl *Relay) say(ctx context.Context, m message) int64 {
	m.From = rl.o.Self
	b, _ := json.Marshal(m) // cannot fail: strings, a number, raw JSON
	n, err := rl.r.Publish(ctx, Channel, b)
	if err != nil {
		return 0
	}
	return n
}

// receive reads the channel until Close, handling each message of another
// replica.
func (rl *Relay) receive() {
	for {
		msg, err := rl.ps.Receive(rl.ctx)
		if err != nil {
			if rl.ctx.Err() != nil {
				return
			}
			// go-redis dials again at the next Receive; wait a little so
			// that a Redis that is down costs no busy loop.
			select {
			case <-rl.ctx.Done():
				return
			case <-time.After(retryWait):
			}
			continue
		}
		switch msg := msg.(type) {
		case *redis.Subscription:
			// (Re)subscribed: learn who listens.
			rl.say(rl.ctx, message{Type: "hello"})
		case *redis.Message:
			var m message
			if json.Unmarshal([]byte(msg.Payload), &m) == nil && m.From != rl.o.Self {
				rl.handle(&m)
			}
		}
	}
}

// handle acts on m, a message of another replica.
func (rl *Relay) handle(m *message) {
	switch m.Type {
	case "listen":
		until := time.Now().Add(expiry).UnixNano()
		for {
			old := rl.wanted.Load()
			if old >= until || rl.wanted.CompareAndSwap(old, until) {
				break
			}
		}
		rl.say(rl.ctx, message{Type: "ack", To: m.From, Nonce: m.Nonce})
	case "ack":
		if m.To != rl.o.Self {
			return
		}
		rl.mu.Lock()
		acked := rl.acks[m.Nonce]
		rl.mu.Unlock()
		if acked != nil {
			select {
			case acked <- struct{}{}:
			default:
			}
		}
	case "hello":
		if rl.watched.Load() > 0 {
			rl.say(rl.ctx, message{Type: "listen"})
		}
	case "events":
		if rl.watched.Load() > 0 {
			for _, e := range m.Events {
				rl.o.Deliver(e)
			}
		}
	}
}

// beat says "listen" every heartbeat while this replica has watchers.
func (rl *Relay) beat() {
	t := time.NewTicker(heartbeat)
	defer t.Stop()
	for {
		select {
		case <-rl.ctx.Done():
			return
		case <-t.C:
			if rl.watched.Load() > 0 {
				rl.say(rl.ctx, message{Type: "listen"})
			}
		}
	}
}

// send publishes the queued events in batches until Close.
func (rl *Relay) send() {
	batch := make([]json.RawMessage, 0, batchMax)
	timer := time.NewTimer(batchWait)
	timer.Stop()
	flush := func() {
		if len(batch) == 0 {
			return
		}
		if rl.say(rl.ctx, message{Type: "events", Events: batch}) == 0 {
			for range batch {
				rl.o.Dropped()
			}
		}
		batch = batch[:0]
	}
	for {
		select {
		case <-rl.ctx.Done():
			return
		case ev := <-rl.queue:
			if len(batch) == 0 {
				timer.Reset(batchWait)
			}
			if batch = append(batch, ev); len(batch) == batchMax {
				timer.Stop()
				flush()
			}
		case <-timer.C:
			flush()
		}
	}
}
