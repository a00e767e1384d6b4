package executors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

// DefaultTimeout bounds a call whose tool sets no timeout and whose
// dispatcher was given none.
const DefaultTimeout = 30 * time.Second

// DispatcherOptions configure a [Dispatcher]. The zero value works.
type DispatcherOptions struct {
	// DefaultTimeout bounds a call whose tool has no Timeout. Zero means
	// [DefaultTimeout].
	DefaultTimeout time.Duration
	// Logger receives the stack of a recovered panic. Nil discards.
	Logger *slog.Logger
}

// Dispatcher sends each call to the executor of its tool's kind, under the
// call's deadline. Executors are set with [Dispatcher.Handle] while building;
// after that a Dispatcher is safe for concurrent use.
type Dispatcher struct {
	executors      map[registry.Kind]Executor
	defaultTimeout time.Duration
	logger         *slog.Logger
}

// NewDispatcher returns a dispatcher with no executors. opts may be nil.
func NewDispatcher(opts *DispatcherOptions) *Dispatcher {
	d := &Dispatcher{executors: map[registry.Kind]Executor{}, defaultTimeout: DefaultTimeout, logger: slog.New(slog.DiscardHandler)}
	if opts != nil {
		if opts.DefaultTimeout > 0 {
			d.defaultTimeout = opts.DefaultTimeout
		}
		if opts.Logger != nil {
			d.logger = opts.Logger
		}
	}
	return d
}

// Handle makes e the executor of tools of kind k. It must not be called
// concurrently with Dispatch.
func (d *Dispatcher) Handle(k registry.Kind, e Executor) { d.executors[k] = e }

// Timeout returns the deadline a call of t runs under.
func (d *Dispatcher) Timeout(t *registry.Tool) time.Duration {
	if t.Timeout > 0 {
		return t.Timeout
	}
	return d.defaultTimeout
}

// Dispatch runs call on its kind's executor within the tool's timeout. This
// is the one place the per-call deadline is set. A panic in the executor
// (embedder code included) is recovered, logged with its stack, and
// returned as an error of class internal. Errors that are not already a
// *retry.Error are classified: the call's own deadline becomes timeout,
// the caller's cancellation becomes cancelled.
func (d *Dispatcher) Dispatch(ctx context.Context, call Call) (res Result, err error) {
	e := d.executors[call.Tool.Kind]
	if e == nil {
		return Result{}, retry.Errorf(retry.Internal, "no executor for tools of kind %q", call.Tool.Kind)
	}
	timeout := d.Timeout(call.Tool)
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			d.logger.Error("tool panicked", "tool", call.Tool.Name, "kind", string(call.Tool.Kind), "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			res, err = Result{}, retry.Errorf(retry.Internal, "tool %q failed unexpectedly (panic); the gateway logged the details", call.Tool.Name)
		}
	}()
	res, err = e.Execute(cctx, call)
	if err == nil {
		return res, nil
	}
	if _, ok := errors.AsType[*retry.Error](err); ok {
		return Result{}, err
	}
	switch {
	case ctx.Err() != nil:
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) && !errors.Is(cause, context.DeadlineExceeded) {
			return Result{}, retry.Wrap(retry.Cancelled, "", cause)
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return Result{}, retry.Errorf(retry.Timeout, "the client's deadline passed before tool %q finished", call.Tool.Name)
		}
		return Result{}, retry.Errorf(retry.Cancelled, "the call to %q was cancelled by the client", call.Tool.Name)
	case errors.Is(cctx.Err(), context.DeadlineExceeded):
		return Result{}, retry.Errorf(retry.Timeout, "tool %q did not finish within %s", call.Tool.Name, timeout)
	}
	return Result{}, err
}
