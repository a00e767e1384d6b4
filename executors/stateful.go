package executors

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/toolgate/toolgate/retry"
	"github.com/toolgate/toolgate/threadctx"
)

// Stateful runs stateful tools: each call goes to the calling thread's
// instance of the tool, created lazily by the tool's [Factory] and kept in a
// [threadctx.Pool]. It is safe for concurrent use.
type Stateful struct {
	pool *threadctx.Pool
}

// NewStateful returns a Stateful keeping instances in pool. The caller
// owns pool and closes it.
func NewStateful(pool *threadctx.Pool) *Stateful {
	return &Stateful{pool: pool}
}

// Bind returns the executor of the stateful tool called name, whose
// instances f creates. The pool keeps one instance per thread under name,
// so two tools bound under one name share instances. Instances live until
// their thread ends, also after the executor is dropped.
func (s *Stateful) Bind(name string, f Factory) Executor {
	return &statefulTool{pool: s.pool, name: name, factory: f}
}

// statefulTool is the executor of one stateful tool.
type statefulTool struct {
	pool    *threadctx.Pool
	name    string
	factory Factory
}

// Execute acquires call.Thread's instance (creating it on first use;
// waiting for it when instances are not concurrent) and calls it. When the
// instance replaces one the pool evicted, the result or error says so (see
// [EvictedMetaKey]).
func (t *statefulTool) Execute(ctx context.Context, call Call) (Result, error) {
	thread, f := call.Thread, t.factory
	lease, err := t.pool.Acquire(ctx, thread, t.name, threadctx.Spec{
		New:        func(ctx context.Context) (any, error) { return f.New(ctx, thread) },
		Concurrent: f.Concurrent,
		Bytes:      f.MaxBytes,
	})
	if err != nil {
		return Result{}, PoolError(err)
	}
	defer lease.Release()
	inst, ok := lease.Value().(Instance)
	if !ok || inst == nil {
		return Result{}, retry.Errorf(retry.Internal, "factory of %q returned no instance", t.name)
	}
	res, err := inst.Call(ctx, call.Args)
	if ev, ok := lease.Evicted(); ok {
		return withEvictionNotice(t.name, ev, res, err)
	}
	return res, err
}

// EvictedMetaKey is the result _meta key present when a stateful tool's call
// ran on a new instance because the thread's previous one was evicted. Its
// value names the limit that evicted it: "max_instances" or "idle_ttl".
const EvictedMetaKey = "toolgate/instance_evicted"

// withEvictionNotice tells the model that the call of tool ran on a new
// instance because the thread's previous one was evicted as ev says: a
// result gets a text block and [EvictedMetaKey], an error the notice
// appended to its message (its class kept).
func withEvictionNotice(tool string, ev threadctx.Eviction, res Result, err error) (Result, error) {
	notice := evictionNotice(tool, ev)
	if err != nil {
		return Result{}, retry.Annotate(err, "note: "+notice)
	}
	if res.Passthrough == nil {
		res.Content = append(slices.Clip(res.Content), Content{Type: TextContent, Text: "Note: " + notice + "."})
	}
	res.Meta = maps.Clone(res.Meta)
	if res.Meta == nil {
		res.Meta = map[string]any{}
	}
	res.Meta[EvictedMetaKey] = ev.Reason.String()
	return res, nil
}

// evictionNotice says that the thread's previous instance of tool was
// evicted as ev says and that its state is gone.
func evictionNotice(tool string, ev threadctx.Eviction) string {
	why := "evicted"
	switch ev.Reason {
	case threadctx.EvictedForRoom:
		why = fmt.Sprintf("evicted (threads.max_instances of %d reached)", ev.MaxInstances)
		switch {
		case ev.MaxProvisional > 0:
			why = fmt.Sprintf("evicted (its principal's cap of %d new threads whose handle never came back reached: a tenth of threads.max_instances)", ev.MaxProvisional)
		case ev.MaxBytes > 0:
			why = fmt.Sprintf("evicted (its principal's instances may hold %d bytes in all: threads.max_bytes_per_principal)", ev.MaxBytes)
		case ev.OwnerCap > 0:
			why = fmt.Sprintf("evicted (its principal's cap of %d instances reached: auth.max_instances, or an equal share of threads.max_instances)", ev.OwnerCap)
		}
	case threadctx.EvictedIdle:
		why = fmt.Sprintf("closed after being idle for threads.idle_ttl (%v)", ev.IdleTTL)
		if ev.Provisional {
			why = fmt.Sprintf("closed after being idle for %v (a new thread whose handle has not come back yet gets min(threads.idle_ttl, 2m))", ev.IdleTTL)
		}
	}
	return fmt.Sprintf("the previous instance of %q in this thread was %s and a new one was created; "+
		"its state from before is gone", tool, why)
}

// PoolError classifies an error of [threadctx.Pool.Acquire]. Both pool
// errors are toolgate's own state, not a backend's, so neither may count
// against a backend's circuit breaker: a full pool ([threadctx.ErrCapacity])
// is rate_limited (an instance frees when a call ends, so retrying helps), a
// closed pool ([threadctx.ErrClosed]) is cancelled (toolgate is shutting
// down). Other errors are returned as they are.
func PoolError(err error) error {
	switch {
	case errors.Is(err, threadctx.ErrCapacity):
		return retry.Wrap(retry.RateLimited, "", retry.NotBackend(err))
	case errors.Is(err, threadctx.ErrClosed):
		return retry.Wrap(retry.Cancelled, "toolgate is shutting down", retry.NotBackend(err))
	}
	return err
}
