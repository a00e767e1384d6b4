package executors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
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
	// Plan returns how calls of a tool are retried and the backend they go
	// to (its circuit breaker and retry budget). Nil means no retries and
	// no backend.
	Plan func(t *registry.Tool) retry.Plan
	// OnRetry, when not nil, is told of every retry the Dispatcher makes,
	// with the class of the failure retried.
	OnRetry func(tool string, class retry.Class)
}

// AttemptsMetaKey is the result _meta key holding how many attempts a call
// took, set when it took more than one.
const AttemptsMetaKey = "toolgate/attempts"

// Dispatcher sends each call to the executor of its tool's kind, under the
// call's deadline. Executors are set with [Dispatcher.Handle] while building;
// after that a Dispatcher is safe for concurrent use.
type Dispatcher struct {
	executors      map[registry.Kind]Executor
	defaultTimeout time.Duration
	logger         *slog.Logger
	plan           func(*registry.Tool) retry.Plan
	onRetry        func(string, retry.Class)
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
		d.plan, d.onRetry = opts.Plan, opts.OnRetry
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
// is the one place the per-call deadline is set: it covers every attempt
// and every wait between them. Failures are retried as the tool's
// [DispatcherOptions.Plan] says (by the executor itself when it is
// [SelfRetrying]). A panic in the executor (embedder code included) is
// recovered, logged with its stack, and returned as an error of class
// internal. Errors that are not already a *retry.Error are classified: the
// call's own deadline becomes timeout, the caller's cancellation becomes
// cancelled.
func (d *Dispatcher) Dispatch(ctx context.Context, call Call) (Result, error) {
	e := d.executors[call.Tool.Kind]
	if e == nil {
		return Result{}, retry.Errorf(retry.Internal, "no executor for tools of kind %q", call.Tool.Kind)
	}
	timeout := d.Timeout(call.Tool)
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var plan retry.Plan
	if d.plan != nil {
		plan = d.plan(call.Tool)
	}
	if sr, ok := e.(SelfRetrying); ok && sr.RetriesItself() {
		call.Retry = plan
		res, err := d.attempt(ctx, cctx, e, call, timeout)
		return res, err
	}
	if plan.Backend == nil && (!plan.Idempotent || plan.Policy.Attempts == 1) {
		// Nothing to retry and no breaker: the common in-process case. A
		// failure of a class the policy retries still says why it was not.
		res, err := d.attempt(ctx, cctx, e, call, timeout)
		if err != nil && d.plan != nil {
			_, _, reason := plan.Decide(cctx, 1, err)
			err = retry.Annotate(err, reason)
		}
		return res, err
	}
	var res Result
	var lastClass retry.Class
	attempts, err := retry.Run(cctx, plan, func(actx context.Context, n int) error {
		if n > 1 && d.onRetry != nil {
			d.onRetry(call.Tool.Name, lastClass)
		}
		r, err := d.attempt(ctx, actx, e, call, timeout)
		if err != nil {
			lastClass = retry.Classify(err)
			return err
		}
		res = r
		return nil
	})
	if err != nil {
		return Result{}, d.classify(ctx, cctx, call, timeout, err)
	}
	if attempts > 1 {
		res.Meta = maps.Clone(res.Meta)
		if res.Meta == nil {
			res.Meta = map[string]any{}
		}
		res.Meta[AttemptsMetaKey] = attempts
	}
	return res, nil
}

// attempt makes one Execute call under cctx (the call's deadline; ctx is
// the caller's), recovering a panic and classifying the error.
func (d *Dispatcher) attempt(ctx, cctx context.Context, e Executor, call Call, timeout time.Duration) (res Result, err error) {
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
	return Result{}, d.classify(ctx, cctx, call, timeout, err)
}

// classify makes err a *retry.Error: one already is; otherwise the
// caller's cancellation or deadline (ctx), or the call's own deadline
// (cctx), decide, and anything else is left to [retry.Classify].
func (d *Dispatcher) classify(ctx, cctx context.Context, call Call, timeout time.Duration, err error) error {
	if _, ok := errors.AsType[*retry.Error](err); ok {
		return err
	}
	switch {
	case ctx.Err() != nil:
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) && !errors.Is(cause, context.DeadlineExceeded) {
			return retry.Wrap(retry.Cancelled, "", cause)
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return retry.Errorf(retry.Timeout, "the client's deadline passed before tool %q finished", call.Tool.Name)
		}
		return retry.Errorf(retry.Cancelled, "the call to %q was cancelled by the client", call.Tool.Name)
	case errors.Is(cctx.Err(), context.DeadlineExceeded):
		return retry.Errorf(retry.Timeout, "tool %q did not finish within %s", call.Tool.Name, timeout)
	}
	return err
}
