package mcpup

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/retry"
	"github.com/toolgate/toolgate/threadctx"
)

// threadInstance is one thread's own connection to a thread-isolated
// upstream (for stdio, its own process), kept in the thread pool under the
// key "upstream:<name>". Its supervisor restarts it if it dies; the pool
// calls Close when the thread ends or idles out, which kills and reaps the
// process.
type threadInstance struct {
	m         *Manager
	r         *runner
	stop      context.CancelFunc
	wg        sync.WaitGroup // the supervisor
	closeOnce sync.Once
}

// poolKey is the thread pool key of u's per-thread instances.
func (u *upstream) poolKey() string { return "upstream:" + u.cfg.Name }

// executeInThread runs the call on the calling thread's instance of u,
// starting it on the thread's first call.
func (m *Manager) executeInThread(ctx context.Context, u *upstream, orig string, call executors.Call) (executors.Result, error) {
	thread := call.Thread
	lease, err := m.pool.Acquire(ctx, thread, u.poolKey(), threadctx.Spec{
		New:        func(ctx context.Context) (any, error) { return m.newThreadInstance(ctx, u, thread) },
		Concurrent: true,
	})
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return executors.Result{}, ctxError(u.cfg.Name, orig, ctx.Err())
	case errors.Is(err, threadctx.ErrCapacity), errors.Is(err, threadctx.ErrClosed):
		return executors.Result{}, executors.PoolError(err)
	default:
		if _, ok := errors.AsType[*retry.Error](err); ok {
			return executors.Result{}, err
		}
		return executors.Result{}, retry.Wrap(retry.Unavailable, "", err)
	}
	defer lease.Release()
	inst, ok := lease.Value().(*threadInstance)
	if !ok {
		return executors.Result{}, retry.Errorf(retry.Internal, "thread instance of upstream %q has the wrong type", u.cfg.Name)
	}
	c := inst.r.current()
	if c == nil {
		return executors.Result{}, u.downError(inst.r)
	}
	return c.call(ctx, orig, call)
}

// newThreadInstance dials u for thread within ctx (and the startup
// timeout) and starts supervising the connection.
func (m *Manager) newThreadInstance(ctx context.Context, u *upstream, thread string) (*threadInstance, error) {
	if m.isClosed() {
		return nil, retry.Errorf(retry.Unavailable, "upstream %q is shut down", u.cfg.Name)
	}
	label := threadLabel(thread)
	// The instance lives until the pool closes it or the manager closes.
	life, stop := context.WithCancel(m.ctx)
	began := time.Now()
	c, err := u.dial(life, ctx, label)
	if err != nil {
		stop()
		return nil, err
	}
	t := &threadInstance{
		m:    m,
		stop: stop,
		r: &runner{
			name:    u.cfg.Name,
			thread:  label,
			logger:  m.logger,
			dial:    func(lifetime context.Context) (*conn, error) { return u.dial(lifetime, lifetime, label) },
			restart: u.reportRestart,
			// What starting the process took: the first estimate of a restart.
			dialTook: min(time.Since(began), maxDialEstimate),
		},
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		stop()
		c.close()
		return nil, retry.Errorf(retry.Unavailable, "upstream %q is shut down", u.cfg.Name)
	}
	m.threads[t] = struct{}{}
	m.mu.Unlock()
	t.r.markUp(c) // before the lease is handed out, not when run gets to it
	m.logger.Info("upstream thread instance started", "upstream", u.cfg.Name, "thread", label)
	t.wg.Go(func() { t.r.run(life, c) })
	return t, nil
}

// Close stops the instance's supervisor, which closes the connection and
// kills and reaps its process. It is safe to call more than once and
// returns nil.
func (t *threadInstance) Close() error {
	t.closeOnce.Do(func() {
		t.stop()
		t.wg.Wait()
		t.m.mu.Lock()
		delete(t.m.threads, t)
		t.m.mu.Unlock()
	})
	return nil
}
