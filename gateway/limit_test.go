package gateway

import (
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/internal/callslot"
	"github.com/toolgate/toolgate/registry"
)

// waitLimit bounds every wait in these tests; reaching it is a failure.
const waitLimit = 10 * time.Second

// gate is a tool whose calls block until released. It counts the calls
// inside it and closes all when want are inside at once: a barrier that
// proves calls run concurrently without looking at a clock.
type gate struct {
	want    int
	release chan struct{}
	all     chan struct{}

	mu     sync.Mutex
	inside int
	peak   int
	closed bool // all is closed
}

func newGate(want int) *gate {
	return &gate{want: want, release: make(chan struct{}), all: make(chan struct{})}
}

func (gt *gate) call(ctx context.Context, _ map[string]any) (executors.Result, error) {
	gt.mu.Lock()
	gt.inside++
	gt.peak = max(gt.peak, gt.inside)
	if gt.inside == gt.want && !gt.closed {
		gt.closed = true
		close(gt.all)
	}
	gt.mu.Unlock()
	defer func() {
		gt.mu.Lock()
		gt.inside--
		gt.mu.Unlock()
	}()
	select {
	case <-gt.release:
		return executors.Text("released"), nil
	case <-ctx.Done():
		return executors.Result{}, ctx.Err()
	}
}

func (gt *gate) waitAll(t *testing.T) {
	t.Helper()
	select {
	case <-gt.all:
	case <-time.After(waitLimit):
		gt.mu.Lock()
		defer gt.mu.Unlock()
		t.Fatalf("only %d of %d calls got inside the gate together", gt.inside, gt.want)
	}
}

func (gt *gate) peakSeen() int {
	gt.mu.Lock()
	defer gt.mu.Unlock()
	return gt.peak
}

func addGate(t *testing.T, g *Gateway, name string, gt *gate) {
	t.Helper()
	if err := g.RegisterStateless(registry.Tool{Name: name, Description: "blocks until released"}, gt.call); err != nil {
		t.Fatal(err)
	}
}

// waitQueued waits until n calls wait for a slot, global or their key's.
func waitQueued(t *testing.T, g *Gateway, n int) {
	t.Helper()
	waitWaiting(t, g, -1, n)
}

// waitWaiting waits until global calls wait for a global slot and keys
// for their key's slot (global -1: keys counts all waiting calls). The
// limiter has no hook for this; the loop yields instead of sleeping and is
// bounded.
func waitWaiting(t *testing.T, g *Gateway, global, keys int) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		st := g.limiter.Load().Stats()
		gw, kw := st.Waiting, st.WaitingForGroups
		if global < 0 && gw+kw == keys || gw == global && kw == keys {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls wait for a global slot and %d for their session's, want %d and %d", gw, kw, global, keys)
		}
		runtime.Gosched()
	}
}

type callResult struct {
	res *Result
	err error
}

// goCall starts g.Call in a goroutine; the channel yields its result.
// echo gets arguments that pass its schema.
func goCall(ctx context.Context, g *Gateway, tool string, meta map[string]any) <-chan callResult {
	ch := make(chan callResult, 1)
	var args json.RawMessage
	if tool == "echo" {
		args = json.RawMessage(`{"text":"x"}`)
	}
	go func() {
		res, err := g.Call(ctx, tool, args, meta)
		ch <- callResult{res, err}
	}()
	return ch
}

func recv(t *testing.T, ch <-chan callResult) *Result {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("Call: %v", r.err)
		}
		return r.res
	case <-time.After(waitLimit):
		t.Fatal("the call did not return")
	}
	return nil
}

func TestParallelCalls(t *testing.T) {
	const n = 8
	g, _ := newGateway(t, nil)
	gt := newGate(n)
	addGate(t, g, "gate", gt)
	var chs []<-chan callResult
	for range n {
		chs = append(chs, goCall(t.Context(), g, "gate", nil))
	}
	gt.waitAll(t) // all n calls in flight together
	close(gt.release)
	for _, ch := range chs {
		if res := recv(t, ch); res.IsError {
			t.Errorf("call failed: %s", resultText(t, res))
		}
	}
}

func TestLimits(t *testing.T) {
	t.Run("per session", func(t *testing.T) {
		g, _ := newGateway(t, func(c *config.Config) { c.Defaults.MaxParallelPerSession = 2 })
		gt := newGate(2)
		addGate(t, g, "gate", gt)
		thread := map[string]any{ThreadMetaKey: "one"}
		a, b := goCall(t.Context(), g, "gate", thread), goCall(t.Context(), g, "gate", thread)
		gt.waitAll(t)
		c := goCall(t.Context(), g, "gate", thread)
		waitQueued(t, g, 1)
		// Another thread is not held up by this one's limit.
		other := goCall(t.Context(), g, "echo", map[string]any{ThreadMetaKey: "two"})
		if res := recv(t, other); res.IsError {
			t.Fatalf("a call in another thread failed: %s", resultText(t, res))
		}
		close(gt.release)
		for _, ch := range []<-chan callResult{a, b, c} {
			if res := recv(t, ch); res.IsError {
				t.Errorf("call failed: %s", resultText(t, res))
			}
		}
		if p := gt.peakSeen(); p != 2 {
			t.Errorf("peak calls in one thread = %d, want 2", p)
		}
	})

	t.Run("queue full", func(t *testing.T) {
		g, _ := newGateway(t, func(c *config.Config) {
			c.Defaults.MaxParallel, c.Defaults.MaxParallelPerSession, c.Defaults.MaxQueue = 1, 1, 1
		})
		gt := newGate(1)
		addGate(t, g, "gate", gt)
		running := goCall(t.Context(), g, "gate", nil)
		gt.waitAll(t)
		queued := goCall(t.Context(), g, "echo", nil)
		waitQueued(t, g, 1)
		res, err := g.Call(t.Context(), "echo", json.RawMessage(`{"text":"x"}`), nil)
		if err != nil {
			t.Fatal(err)
		}
		text := resultText(t, res)
		if errorClass(res) != "rate_limited" || !strings.Contains(text, "defaults.max_parallel") || !strings.Contains(text, "defaults.max_queue") {
			t.Errorf("call past a full queue = %q (class %q), want rate_limited naming both limits", text, errorClass(res))
		}
		close(gt.release)
		recv(t, running)
		if res := recv(t, queued); res.IsError {
			t.Errorf("queued call = %q, want it to run once a slot was free", resultText(t, res))
		}
	})

	// One session flooding calls past its own limit waits in its own
	// queue: other sessions still queue for, and get, global slots.
	t.Run("a flooding session leaves the queue to others", func(t *testing.T) {
		g, _ := newGateway(t, func(c *config.Config) {
			c.Defaults.MaxParallel, c.Defaults.MaxParallelPerSession, c.Defaults.MaxQueue = 2, 1, 2
		})
		ga, gb := newGate(1), newGate(1)
		addGate(t, g, "gate_a", ga)
		addGate(t, g, "gate_b", gb)
		a, b := map[string]any{ThreadMetaKey: "A"}, map[string]any{ThreadMetaKey: "B"}
		a1 := goCall(t.Context(), g, "gate_a", a)
		ga.waitAll(t) // A runs its limit of 1
		a2 := goCall(t.Context(), g, "gate_a", a)
		waitWaiting(t, g, 0, 1) // and queues half of max_queue more on it
		res, err := g.Call(t.Context(), "gate_a", nil, a)
		if err != nil {
			t.Fatal(err)
		}
		if text := resultText(t, res); errorClass(res) != "rate_limited" || !strings.Contains(text, "defaults.max_parallel_per_session") {
			t.Errorf("A's call past its own queue = %q (class %q), want rate_limited naming the session limit", text, errorClass(res))
		}
		b1 := goCall(t.Context(), g, "gate_b", b)
		gb.waitAll(t) // B runs its limit: every global slot is taken
		b2 := goCall(t.Context(), g, "echo", b)
		waitWaiting(t, g, 0, 2) // b2 waits for B's slot: the sessions' queues are full (max_queue 2)
		d := map[string]any{ThreadMetaKey: "D"}
		d1 := goCall(t.Context(), g, "echo", d)
		waitWaiting(t, g, 1, 2) // D's first call still waits for a global slot
		if got := g.limiter.Load().Stats().Queued(); got != 3 {
			t.Errorf("Stats().Queued() = %d, want 3 (toolgate_queue_length)", got)
		}
		res, err = g.Call(t.Context(), "echo", json.RawMessage(`{"text":"x"}`), d)
		if err != nil {
			t.Fatal(err)
		}
		if text := resultText(t, res); errorClass(res) != "rate_limited" || !strings.Contains(text, "sessions at their limit already wait") {
			t.Errorf("D's second call with the sessions' queues full = %q (class %q), want rate_limited saying why", text, errorClass(res))
		}
		close(gb.release)
		for name, ch := range map[string]<-chan callResult{"b1": b1, "b2": b2, "d1": d1} {
			if res := recv(t, ch); res.IsError {
				t.Errorf("%s = %q, want it to run while A floods", name, resultText(t, res))
			}
		}
		close(ga.release)
		for _, ch := range []<-chan callResult{a1, a2} {
			if res := recv(t, ch); res.IsError {
				t.Errorf("A's call = %q, want it to run in turn", resultText(t, res))
			}
		}
	})

	t.Run("cancelled while queued", func(t *testing.T) {
		g, _ := newGateway(t, func(c *config.Config) { c.Defaults.MaxParallel, c.Defaults.MaxParallelPerSession = 1, 1 })
		gt := newGate(1)
		addGate(t, g, "gate", gt)
		running := goCall(t.Context(), g, "gate", nil)
		gt.waitAll(t)
		ctx, cancel := context.WithCancel(t.Context())
		queued := goCall(ctx, g, "gate", nil)
		waitQueued(t, g, 1)
		cancel()
		if res := recv(t, queued); errorClass(res) != "cancelled" || !strings.Contains(resultText(t, res), "waited for a free slot") {
			t.Errorf("cancelled queued call = %q (class %q), want cancelled", resultText(t, res), errorClass(res))
		}
		waitQueued(t, g, 0)
		close(gt.release)
		recv(t, running)
	})
}

func TestShutdownDrainsQueue(t *testing.T) {
	t.Run("within grace", func(t *testing.T) {
		g, _ := newGateway(t, func(c *config.Config) { c.Defaults.MaxParallel, c.Defaults.MaxParallelPerSession = 1, 1 })
		gt := newGate(1)
		addGate(t, g, "gate", gt)
		running := goCall(t.Context(), g, "gate", nil)
		gt.waitAll(t)
		queued := goCall(t.Context(), g, "gate", nil)
		waitQueued(t, g, 1)
		done := make(chan error, 1)
		go func() { done <- g.Shutdown(t.Context()) }()
		// Draining has started: new calls are refused, queued ones are not.
		for !g.calls.IsDraining() {
			runtime.Gosched()
		}
		if res, _ := g.Call(t.Context(), "echo", json.RawMessage(`{"text":"x"}`), nil); errorClass(res) != "unavailable" {
			t.Errorf("call during shutdown = %q, want unavailable", resultText(t, res))
		}
		close(gt.release)
		for _, ch := range []<-chan callResult{running, queued} {
			if res := recv(t, ch); res.IsError {
				t.Errorf("call during drain = %q, want success", resultText(t, res))
			}
		}
		if err := <-done; err != nil {
			t.Errorf("Shutdown = %v, want nil", err)
		}
	})
	t.Run("grace runs out", func(t *testing.T) {
		g, _ := newGateway(t, func(c *config.Config) { c.Defaults.MaxParallel, c.Defaults.MaxParallelPerSession = 1, 1 })
		gt := newGate(1)
		addGate(t, g, "gate", gt)
		running := goCall(t.Context(), g, "gate", nil)
		gt.waitAll(t)
		queued := goCall(t.Context(), g, "gate", nil)
		waitQueued(t, g, 1)
		ctx, cancel := context.WithCancel(t.Context())
		cancel() // no grace at all
		if err := g.Shutdown(ctx); err == nil {
			t.Error("Shutdown with calls in flight and no grace = nil, want ctx's error")
		}
		for _, ch := range []<-chan callResult{running, queued} {
			res := recv(t, ch)
			if errorClass(res) != "cancelled" || !strings.Contains(resultText(t, res), "shut down") {
				t.Errorf("call cut by shutdown = %q (class %q), want cancelled saying toolgate shut down", resultText(t, res), errorClass(res))
			}
		}
	})
}

// One principal flooding toolgate runs at most its share of the slots
// (defaults.max_parallel_per_principal) and queues the rest on it: another
// principal's call finds a slot free and runs at once (issue 31: bob's
// calc waited 58.6 s behind alice's 64).
func TestPrincipalShare(t *testing.T) {
	g, _ := newGateway(t, func(c *config.Config) {
		c.Defaults.MaxParallel, c.Defaults.MaxParallelPerSession, c.Defaults.MaxParallelPerPrincipal, c.Defaults.MaxQueue = 4, 4, 2, 4
	})
	gt := newGate(2)
	addGate(t, g, "gate", gt)
	alice := WithPrincipal(t.Context(), "alice")
	var floods []<-chan callResult
	for range 4 {
		floods = append(floods, goCall(alice, g, "gate", nil))
	}
	gt.waitAll(t)
	waitWaiting(t, g, 0, 2) // alice's other two wait on her share, not for global slots
	res, err := g.Call(WithPrincipal(t.Context(), "bob"), "echo", json.RawMessage(`{"text":"x"}`), nil)
	if err != nil || res.IsError {
		t.Fatalf("bob's call while alice floods = %v, %v; want it to run at once", res, err)
	}
	res, err = g.Call(alice, "echo", json.RawMessage(`{"text":"x"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if text := resultText(t, res); errorClass(res) != "rate_limited" || !strings.Contains(text, "defaults.max_parallel_per_principal") {
		t.Errorf("alice's call past half the queue on her share = %q (class %q), want rate_limited naming the share", text, errorClass(res))
	}
	close(gt.release)
	for _, ch := range floods {
		if res := recv(t, ch); res.IsError {
			t.Errorf("alice's call = %q, want it to run in turn", resultText(t, res))
		}
	}
	if p := gt.peakSeen(); p != 2 {
		t.Errorf("peak calls of alice = %d, want her share of 2", p)
	}
}

// A call waiting for its client (callslot.Park) holds no slot: another
// call runs in it, and the parked call takes one again once resumed.
func TestParkedCallHoldsNoSlot(t *testing.T) {
	g, _ := newGateway(t, func(c *config.Config) {
		c.Defaults.MaxParallel, c.Defaults.MaxParallelPerSession = 1, 1
	})
	parked, answer := make(chan struct{}), make(chan struct{})
	err := g.RegisterStateless(registry.Tool{Name: "asker", Description: "waits for its client"}, func(ctx context.Context, _ map[string]any) (executors.Result, error) {
		resume := callslot.Park(ctx)
		close(parked)
		<-answer
		if err := resume(ctx); err != nil {
			return executors.Result{}, err
		}
		return executors.Text("answered"), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	asker := goCall(t.Context(), g, "asker", nil)
	<-parked
	res, err := g.Call(t.Context(), "echo", json.RawMessage(`{"text":"x"}`), nil)
	if err != nil || res.IsError {
		t.Fatalf("a call while the only slot's call waits for its client = %v, %v; want it to run", res, err)
	}
	gt := newGate(1)
	addGate(t, g, "gate", gt)
	running := goCall(t.Context(), g, "gate", nil)
	gt.waitAll(t)
	close(answer)
	waitQueued(t, g, 1) // the resumed call waits for the slot it gave back
	close(gt.release)
	for _, ch := range []<-chan callResult{running, asker} {
		if res := recv(t, ch); res.IsError {
			t.Errorf("call = %q, want success", resultText(t, res))
		}
	}
	if st := g.limiter.Load().Stats(); st.Queued() != 0 || st.Running != 0 {
		t.Errorf("after every call: %d waiting, %d slots taken; want 0 and 0", st.Queued(), st.Running)
	}
}
