package executors

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
	"github.com/toolgate/toolgate/threadctx"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type fakeExecutor func(ctx context.Context, call Call) (Result, error)

func (f fakeExecutor) Execute(ctx context.Context, call Call) (Result, error) { return f(ctx, call) }

func TestDispatch(t *testing.T) {
	block := fakeExecutor(func(ctx context.Context, _ Call) (Result, error) {
		<-ctx.Done()
		return Result{}, ctx.Err()
	})
	tests := []struct {
		name      string
		exec      Executor
		tool      registry.Tool
		ctx       func(t *testing.T) context.Context
		wantClass retry.Class
	}{
		{name: "ok", exec: fakeExecutor(func(context.Context, Call) (Result, error) { return Text("hi"), nil })},
		{name: "classified error kept", exec: fakeExecutor(func(context.Context, Call) (Result, error) {
			return Result{}, retry.Errorf(retry.NotFound, "gone")
		}), wantClass: retry.NotFound},
		{name: "tool timeout", exec: block, tool: registry.Tool{Timeout: time.Millisecond}, wantClass: retry.Timeout},
		{name: "caller cancelled", exec: block, wantClass: retry.Cancelled, ctx: func(t *testing.T) context.Context {
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			return ctx
		}},
		{name: "caller deadline", exec: block, wantClass: retry.Timeout, ctx: func(t *testing.T) context.Context {
			ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
			t.Cleanup(cancel)
			return ctx
		}},
		{name: "cancel cause kept", exec: block, wantClass: retry.Cancelled, ctx: func(t *testing.T) context.Context {
			ctx, cancel := context.WithCancelCause(t.Context())
			cancel(retry.Errorf(retry.Cancelled, "shutting down"))
			return ctx
		}},
		{name: "panic", exec: fakeExecutor(func(context.Context, Call) (Result, error) { panic("boom") }), wantClass: retry.Internal},
		{name: "no executor", exec: nil, wantClass: retry.Internal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDispatcher(&DispatcherOptions{DefaultTimeout: time.Minute})
			tool := tc.tool
			tool.Name, tool.Kind = "t", registry.Stateless
			ctx := t.Context()
			if tc.ctx != nil {
				ctx = tc.ctx(t)
			}
			_, err := d.Dispatch(ctx, tc.exec, Call{Tool: &tool, Thread: "x"})
			if got := retry.Classify(err); got != tc.wantClass {
				t.Errorf("Dispatch error = %v (class %q), want class %q", err, got, tc.wantClass)
			}
		})
	}
}

func TestStatefulExecutor(t *testing.T) {
	pool := threadctx.NewPool(&threadctx.Options{MaxInstances: 1})
	defer pool.Close()
	var created atomic.Int64
	s := NewStateful(pool).Bind("t", Factory{New: func(_ context.Context, thread string) (Instance, error) {
		created.Add(1)
		return fakeInstance(thread), nil
	}})
	tool := &registry.Tool{Name: "t", Kind: registry.Stateful}
	res, err := s.Execute(t.Context(), Call{Tool: tool, Thread: "a"})
	if err != nil || res.Content[0].Text != "a" {
		t.Fatalf("Execute in thread a = %v, %v", res, err)
	}
	if _, err := s.Execute(t.Context(), Call{Tool: tool, Thread: "a"}); err != nil || created.Load() != 1 {
		t.Fatalf("second call in thread a: err %v, instances created %d, want 1", err, created.Load())
	}
	// The cap is 1 and thread a's instance is idle: it is evicted for b.
	if res, err := s.Execute(t.Context(), Call{Tool: tool, Thread: "b"}); err != nil || res.Content[0].Text != "b" {
		t.Fatalf("Execute in thread b = %v, %v", res, err)
	}
	pool.Close()
	if _, err := s.Execute(t.Context(), Call{Tool: tool, Thread: "c"}); retry.Classify(err) != retry.Cancelled {
		t.Errorf("Execute on a closed pool: %v, want cancelled", err)
	}
}

type fakeInstance string

func (f fakeInstance) Call(context.Context, map[string]any) (Result, error) {
	return Text(string(f)), nil
}

func TestStatelessExecutor(t *testing.T) {
	var s Executor = StatelessFunc(func(_ context.Context, args map[string]any) (Result, error) { return Text(args["x"].(string)), nil })
	tool := &registry.Tool{Name: "t"}
	if res, err := s.Execute(t.Context(), Call{Tool: tool, Args: map[string]any{"x": "y"}}); err != nil || res.Content[0].Text != "y" {
		t.Fatalf("Execute = %v, %v", res, err)
	}
}

func TestStructuredText(t *testing.T) {
	r := Structured(map[string]any{"a": 1}, "")
	if r.Content[0].Text != `{"a":1}` {
		t.Errorf("Structured text = %q, want the JSON copy", r.Content[0].Text)
	}
	if r := Structured(map[string]any{"a": 1}, "one"); r.Content[0].Text != "one" {
		t.Errorf("Structured text = %q, want one", r.Content[0].Text)
	}
}

// blockingInstance signals entered when a call starts and returns when
// release is closed.
type blockingInstance struct{ entered, release chan struct{} }

func (b blockingInstance) Call(context.Context, map[string]any) (Result, error) {
	b.entered <- struct{}{}
	<-b.release
	return Text("done"), nil
}

// A full thread pool is toolgate's own limit, not a backend failure: the
// call is rate_limited (retryable) and says which setting to raise.
func TestStatefulCapacityIsRateLimited(t *testing.T) {
	pool := threadctx.NewPool(&threadctx.Options{MaxInstances: 1})
	defer pool.Close()
	inst := blockingInstance{entered: make(chan struct{}), release: make(chan struct{})}
	s := NewStateful(pool).Bind("t", Factory{New: func(context.Context, string) (Instance, error) { return inst, nil }})
	tool := &registry.Tool{Name: "t", Kind: registry.Stateful}
	done := make(chan error, 1)
	go func() {
		_, err := s.Execute(t.Context(), Call{Tool: tool, Thread: "a"})
		done <- err
	}()
	<-inst.entered // thread a's instance is in use: none is idle
	_, err := s.Execute(t.Context(), Call{Tool: tool, Thread: "b"})
	if retry.Classify(err) != retry.RateLimited || !strings.Contains(err.Error(), "threads.max_instances") || !errors.Is(err, retry.ErrNotBackend) {
		t.Errorf("Execute with the pool full: %v (class %q), want rate_limited naming threads.max_instances, marked not the backend's", err, retry.Classify(err))
	}
	close(inst.release)
	if err := <-done; err != nil {
		t.Errorf("the call holding the instance: %v", err)
	}
}

// noteInstance is a stateful instance whose get fails with not_found until
// a put, as a scratchpad's would.
type noteInstance struct{ note string }

func (n *noteInstance) Call(_ context.Context, args map[string]any) (Result, error) {
	if v, ok := args["put"].(string); ok {
		n.note = v
		return Result{Content: []Content{{Type: TextContent, Text: "stored"}}, Meta: map[string]any{"mine": 1}}, nil
	}
	if n.note == "" {
		return Result{}, retry.Errorf(retry.NotFound, "no note")
	}
	return Text(n.note), nil
}

// A call that runs on a new instance because the thread's previous one was
// evicted says so, in its result or its error, and only that call does.
func TestStatefulEvictionNotice(t *testing.T) {
	pool := threadctx.NewPool(&threadctx.Options{MaxInstances: 1})
	defer pool.Close()
	s := NewStateful(pool).Bind("notes", Factory{New: func(context.Context, string) (Instance, error) { return &noteInstance{}, nil }})
	tool := &registry.Tool{Name: "notes", Kind: registry.Stateful}
	exec := func(thread string, args map[string]any) (Result, error) {
		t.Helper()
		return s.Execute(t.Context(), Call{Tool: tool, Thread: thread, Args: args})
	}
	const notice = `the previous instance of "notes" in this thread was evicted (threads.max_instances of 1 reached) and a new one was created; its state from before is gone`

	if _, err := exec("victim", map[string]any{"put": "plan"}); err != nil {
		t.Fatal(err)
	}
	if _, err := exec("other", map[string]any{"put": "x"}); err != nil { // evicts victim's
		t.Fatal(err)
	}
	// The victim's get fails on the new, empty instance, and says why.
	_, err := exec("victim", nil)
	if retry.Classify(err) != retry.NotFound || err.Error() != "no note; note: "+notice {
		t.Errorf("get after eviction: %v (class %q), want not_found with the notice", err, retry.Classify(err))
	}
	if _, err := exec("victim", nil); err == nil || strings.Contains(err.Error(), "evicted") {
		t.Errorf("second get after eviction: %v, want not_found without the notice", err)
	}

	// other's instance was evicted by victim's last calls: its put succeeds
	// on a new one, with a text block and _meta saying so.
	res, err := exec("other", map[string]any{"put": "y"})
	if err != nil {
		t.Fatal(err)
	}
	want := Result{
		Content: []Content{{Type: TextContent, Text: "stored"}, {Type: TextContent, Text: "Note: " + notice + "."}},
		Meta:    map[string]any{"mine": 1, EvictedMetaKey: "max_instances"},
	}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("put after eviction (-want +got):\n%s", diff)
	}
	if res, err := exec("other", nil); err != nil || len(res.Content) != 1 || res.Meta != nil {
		t.Errorf("get after the replacement = %+v, %v; want the note alone", res, err)
	}
}

func TestStatefulIdleEvictionNotice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pool := threadctx.NewPool(&threadctx.Options{IdleTTL: time.Minute})
		defer pool.Close()
		s := NewStateful(pool).Bind("notes", Factory{New: func(context.Context, string) (Instance, error) { return &noteInstance{}, nil }})
		tool := &registry.Tool{Name: "notes", Kind: registry.Stateful}
		if _, err := s.Execute(t.Context(), Call{Tool: tool, Thread: "a", Args: map[string]any{"put": "plan"}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		_, err := s.Execute(t.Context(), Call{Tool: tool, Thread: "a"})
		const want = `no note; note: the previous instance of "notes" in this thread was closed after being idle for threads.idle_ttl (1m0s) and a new one was created; its state from before is gone`
		if err == nil || err.Error() != want {
			t.Errorf("get after the idle TTL: %v, want %q", err, want)
		}
	})
}

// TestSetDefaultTimeout checks that a call dispatched after
// SetDefaultTimeout runs under the new default while a call already
// running keeps the deadline it started with, and that a tool's own
// timeout still wins.
func TestSetDefaultTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := NewDispatcher(&DispatcherOptions{DefaultTimeout: time.Minute})
		if got := d.Timeout(&registry.Tool{}); got != time.Minute {
			t.Fatalf("Timeout = %v, want 1m", got)
		}
		started := make(chan struct{})
		var deadline time.Time
		first := StatelessFunc(func(ctx context.Context, _ map[string]any) (Result, error) {
			deadline, _ = ctx.Deadline()
			close(started)
			<-ctx.Done()
			return Result{}, ctx.Err()
		})
		var wg sync.WaitGroup
		var firstErr error
		wg.Go(func() { _, firstErr = d.Dispatch(t.Context(), first, Call{Tool: &registry.Tool{Name: "slow"}}) })
		<-started
		start := time.Now()
		d.SetDefaultTimeout(time.Second)
		if got := d.Timeout(&registry.Tool{}); got != time.Second {
			t.Errorf("Timeout after SetDefaultTimeout = %v, want 1s", got)
		}
		if got := d.Timeout(&registry.Tool{Timeout: time.Hour}); got != time.Hour {
			t.Errorf("Timeout of a tool with its own = %v, want 1h", got)
		}
		_, err := d.Dispatch(t.Context(), blockUntilDone(), Call{Tool: &registry.Tool{Name: "second"}})
		if retry.Classify(err) != retry.Timeout || time.Since(start) != time.Second {
			t.Errorf("second call: %v after %v, want a timeout after 1s", err, time.Since(start))
		}
		wg.Wait()
		if retry.Classify(firstErr) != retry.Timeout || !deadline.Equal(start.Add(time.Minute)) {
			t.Errorf("first call: %v with deadline %v, want a timeout at the 1m it started with (%v)", firstErr, deadline, start.Add(time.Minute))
		}
		d.SetDefaultTimeout(0)
		if got := d.Timeout(&registry.Tool{}); got != DefaultTimeout {
			t.Errorf("Timeout after SetDefaultTimeout(0) = %v, want %v", got, DefaultTimeout)
		}
	})
}

// blockUntilDone blocks until its call's deadline.
func blockUntilDone() StatelessFunc {
	return func(ctx context.Context, _ map[string]any) (Result, error) {
		<-ctx.Done()
		return Result{}, ctx.Err()
	}
}
