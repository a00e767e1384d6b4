package executors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/internal/telemetry"
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
	// OnRetry, when not nil, is told of every retry the Dispatcher makes,
	// with the class of the failure retried. Retries a [SelfRetrying]
	// executor makes are its own to report.
	OnRetry func(tool string, class retry.Class)
}

// AttemptsMetaKey is the result _meta key holding the number of attempts a
// call made, the first included: Execute calls for the kinds the
// [Dispatcher] retries, HTTP requests sent for REST tools (a retry the
// breaker refused is not one). It means the same for every kind, and is
// set (an int) only on a successful result that took more than one
// attempt: absent means one. A failure says its attempts in its message.
const AttemptsMetaKey = "toolgate/attempts"

// Dispatcher runs calls on the executors they come with, under each call's
// deadline, retrying as the call's [Call.Retry] allows. It holds no
// executors and no tools: the caller binds each tool to its executor when
// it registers the tool. A Dispatcher is safe for concurrent use.
type Dispatcher struct {
	defaultTimeout atomic.Int64 // a time.Duration; changed by SetDefaultTimeout
	logger         *slog.Logger
	onRetry        func(string, retry.Class)
}

// NewDispatcher returns a dispatcher. opts may be nil.
func NewDispatcher(opts *DispatcherOptions) *Dispatcher {
	d := &Dispatcher{logger: slog.New(slog.DiscardHandler)}
	d.SetDefaultTimeout(0)
	if opts != nil {
		d.SetDefaultTimeout(opts.DefaultTimeout)
		if opts.Logger != nil {
			d.logger = opts.Logger
		}
		d.onRetry = opts.OnRetry
	}
	return d
}

// Timeout returns the deadline a call of t runs under.
func (d *Dispatcher) Timeout(t *registry.Tool) time.Duration {
	if t.Timeout > 0 {
		return t.Timeout
	}
	return time.Duration(d.defaultTimeout.Load())
}

// SetDefaultTimeout replaces [DispatcherOptions.DefaultTimeout] (zero or
// less means [DefaultTimeout]): the calls dispatched after it returns run
// under it, those already running keep the deadline they started with. It
// is safe to call while calls run (a configuration reload).
func (d *Dispatcher) SetDefaultTimeout(t time.Duration) {
	if t <= 0 {
		t = DefaultTimeout
	}
	d.defaultTimeout.Store(int64(t))
}

// Dispatch runs call on e, the executor bound to call.Tool, within the
// tool's timeout. This is the one place the per-call deadline is set: it
// covers every attempt and every wait between them. Failures are retried
// as call.Retry says, by [retry.Run] here, or by e itself when it is
// [SelfRetrying] (it then gets call.Retry; other executors see the zero
// Plan). A panic in the executor (embedder code included) is recovered,
// logged with its stack, and returned as an error of class internal.
// Errors that are not already a *retry.Error are classified: the call's
// own deadline becomes timeout, the caller's cancellation becomes
// cancelled. A nil e is an internal error.
func (d *Dispatcher) Dispatch(ctx context.Context, e Executor, call Call) (Result, error) {
	if e == nil {
		return Result{}, retry.Errorf(retry.Internal, "tool %q has no executor", call.Tool.Name)
	}
	timeout := d.Timeout(call.Tool)
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	plan := call.Retry
	if sr, ok := e.(SelfRetrying); ok && sr.RetriesItself() {
		// Its attempts are its own to trace (the REST executor's HTTP
		// requests).
		return d.attempt(ctx, cctx, e, call, timeout, 0)
	}
	call.Retry = retry.Plan{}
	if plan.Backend == nil && (!plan.Idempotent || plan.Policy.Attempts == 1) {
		// Nothing to retry and no breaker: the common in-process case. A
		// failure of a class the policy retries still says why it was not.
		if call.OnAttempt != nil {
			call.OnAttempt(1)
		}
		res, err := d.attempt(ctx, cctx, e, call, timeout, 1)
		if err != nil {
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
		if call.OnAttempt != nil {
			call.OnAttempt(n)
		}
		r, err := d.attempt(ctx, actx, e, call, timeout, n)
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
// the caller's), recovering a panic and classifying the error. n numbers
// the attempt, from 1, in its trace span; 0 records none.
func (d *Dispatcher) attempt(ctx, cctx context.Context, e Executor, call Call, timeout time.Duration, n int) (res Result, err error) {
	if n > 0 {
		var span telemetry.Span
		cctx, span = telemetry.Child(cctx, "attempt", telemetry.Internal)
		if span.Recording() {
			span.Int("toolgate.attempt", n)
			defer func() {
				if err != nil {
					span.Fail(string(retry.Classify(err)), "the attempt failed")
				}
				span.End()
			}()
		}
	}
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
