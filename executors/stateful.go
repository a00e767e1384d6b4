package executors

import (
	"context"
	"errors"
	"sync"

	"github.com/toolgate/toolgate/retry"
	"github.com/toolgate/toolgate/threadctx"
)

// Stateful runs stateful tools: each call goes to the calling thread's
// instance of the tool, created lazily by the tool's [Factory] and kept in a
// [threadctx.Pool]. It is safe for concurrent use.
type Stateful struct {
	pool *threadctx.Pool

	mu        sync.RWMutex
	factories map[string]Factory // guarded by mu
}

var _ Executor = (*Stateful)(nil)

// NewStateful returns an executor keeping instances in pool. The caller
// owns pool and closes it.
func NewStateful(pool *threadctx.Pool) *Stateful {
	return &Stateful{pool: pool, factories: map[string]Factory{}}
}

// Set makes f the factory of the tool called name.
func (s *Stateful) Set(name string, f Factory) {
	s.mu.Lock()
	s.factories[name] = f
	s.mu.Unlock()
}

// Delete forgets the tool called name. Live instances stay until their
// thread ends.
func (s *Stateful) Delete(name string) {
	s.mu.Lock()
	delete(s.factories, name)
	s.mu.Unlock()
}

// Execute acquires the thread's instance (creating it on first use; waiting
// for it when instances are not concurrent) and calls it.
func (s *Stateful) Execute(ctx context.Context, call Call) (Result, error) {
	s.mu.RLock()
	f, ok := s.factories[call.Tool.Name]
	s.mu.RUnlock()
	if !ok {
		return Result{}, retry.Errorf(retry.NotFound, "stateful tool %q has no factory", call.Tool.Name)
	}
	thread := call.Thread
	lease, err := s.pool.Acquire(ctx, thread, call.Tool.Name, threadctx.Spec{
		New:        func(ctx context.Context) (any, error) { return f.New(ctx, thread) },
		Concurrent: f.Concurrent,
	})
	if err != nil {
		return Result{}, PoolError(err)
	}
	defer lease.Release()
	inst, ok := lease.Value().(Instance)
	if !ok || inst == nil {
		return Result{}, retry.Errorf(retry.Internal, "factory of %q returned no instance", call.Tool.Name)
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
