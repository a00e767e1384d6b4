package eventrelay

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"go.uber.org/goleak"

	"github.com/toolgate/toolgate/internal/cluster/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// replica is one relay and what it was delivered.
type replica struct {
	*Relay
	mu  sync.Mutex
	got []string
}

func (r *replica) delivered() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

func startReplica(t *testing.T, m *miniredis.Miniredis, id string) *replica {
	t.Helper()
	s, err := store.Open(t.Context(), "redis://"+m.Addr(), &store.Options{Probe: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{}
	r.Relay = New(s, Options{Self: id, Deliver: func(e json.RawMessage) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.got = append(r.got, string(e))
	}})
	r.Start()
	t.Cleanup(func() {
		r.Close()
		_ = s.Close()
	})
	return r
}

// waitFor polls cond until it holds, failing the test after 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, not ordering
	}
}

// subscribers waits until n relays are subscribed to the channel.
func subscribers(t *testing.T, m *miniredis.Miniredis, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d subscribers", n), func() bool { return m.PubSubNumSub(Channel)[Channel] == n })
}

// Nobody watches: no replica is asked for its events. Once a watcher's
// Watch returns, every other replica relays, in order, and a replica
// without watchers is delivered nothing.
func TestWatchHandshake(t *testing.T) {
	m := miniredis.RunT(t)
	a, b, c := startReplica(t, m, "a"), startReplica(t, m, "b"), startReplica(t, m, "c")
	subscribers(t, m, 3)
	for _, r := range []*replica{a, b, c} {
		if r.Wanted() {
			t.Fatalf("%s: Wanted() before anyone watches", r.o.Self)
		}
	}
	b.Watch(t.Context())
	// No waiting here: Watch returned once a and c said they relay.
	if !a.Wanted() || !c.Wanted() {
		t.Fatalf("after b's Watch: a.Wanted() = %v, c.Wanted() = %v, want both", a.Wanted(), c.Wanted())
	}
	if b.Wanted() {
		t.Errorf("b.Wanted(): nobody else watches")
	}
	for i := range 100 {
		a.Send(json.RawMessage(fmt.Sprintf(`{"id":"a-%d"}`, i)))
	}
	c.Send(json.RawMessage(`{"id":"c-0"}`))
	waitFor(t, "101 events at b", func() bool { return len(b.delivered()) == 101 })
	var fromA []string
	for _, e := range b.delivered() {
		if e != `{"id":"c-0"}` {
			fromA = append(fromA, e)
		}
	}
	for i, e := range fromA {
		if want := fmt.Sprintf(`{"id":"a-%d"}`, i); e != want {
			t.Fatalf("b's event %d from a = %s, want %s: out of order", i, e, want)
		}
	}
	if got := a.delivered(); len(got) != 0 {
		t.Errorf("a has no watcher, yet was delivered %v", got)
	}
}

// A replica that starts while another has watchers learns of them from
// its hello.
func TestLateReplicaLearnsListeners(t *testing.T) {
	m := miniredis.RunT(t)
	a := startReplica(t, m, "a")
	subscribers(t, m, 1)
	a.Watch(t.Context())
	b := startReplica(t, m, "b")
	waitFor(t, "b to relay for a", b.Wanted)
	b.Send(json.RawMessage(`{"id":"b-1"}`))
	waitFor(t, "b's event at a", func() bool { return len(a.delivered()) == 1 })
}

// A watcher that leaves stops the deliveries to its replica.
func TestUnwatch(t *testing.T) {
	m := miniredis.RunT(t)
	a, b, c := startReplica(t, m, "a"), startReplica(t, m, "b"), startReplica(t, m, "c")
	subscribers(t, m, 3)
	b.Watch(t.Context())
	c.Watch(t.Context())
	b.Unwatch()
	a.Send(json.RawMessage(`{"id":"a-1"}`))
	waitFor(t, "a's event at c", func() bool { return len(c.delivered()) == 1 })
	// A watcher on a: its handshake reaches b after a's event did, and b
	// handles messages in order, so b has handled the event once a's
	// Watch returns.
	a.Watch(t.Context())
	if got := b.delivered(); len(got) != 0 {
		t.Errorf("b has no watcher left, yet was delivered %v", got)
	}
}

// Send never waits: past the queue, events are dropped and counted.
func TestSendNeverWaits(t *testing.T) {
	var dropped atomic.Int64
	r := New(nil, Options{Self: "a", Dropped: func() { dropped.Add(1) }})
	defer r.Close()
	for range queueMax + 10 {
		r.Send(json.RawMessage(`{}`))
	}
	if got := dropped.Load(); got != 10 {
		t.Errorf("dropped %d, want 10", got)
	}
}

// With Redis gone, a watcher's Watch returns (nobody acks), and events
// sent are dropped and counted, not queued for ever.
func TestRedisDown(t *testing.T) {
	m := miniredis.RunT(t)
	var dropped atomic.Int64
	s, err := store.Open(t.Context(), "redis://"+m.Addr(), &store.Options{Probe: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := New(s, Options{Self: "a", Deliver: func(json.RawMessage) {}, Dropped: func() { dropped.Add(1) }})
	r.Start()
	defer r.Close()
	subscribers(t, m, 1)
	m.Close()
	r.Watch(t.Context())
	r.Send(json.RawMessage(`{}`))
	waitFor(t, "the event to be dropped", func() bool { return dropped.Load() == 1 })
}
