package executors

import (
	"context"
	"errors"

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
// waiting for it when instances are not concurrent) and calls it.
func (t *statefulTool) Execute(ctx context.Context, call Call) (Result, error) {
	thread, f := call.Thread, t.factory
	lease, err := t.pool.Acquire(ctx, thread, t.name, threadctx.Spec{
		New:        func(ctx context.Context) (any, error) { return f.New(ctx, thread) },
		Concurrent: f.Concurrent,
	})
	if err != nil {
		return Result{}, PoolError(err)
	}
	defer lease.Release()
	inst, ok := lease.Value().(Instance)
	if !ok || inst == nil {
		return Result{}, retry.Errorf(retry.Internal, "factory of %q returned no instance", t.name)
	}
	return inst.Call(ctx, call.Args)
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
