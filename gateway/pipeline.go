package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/gateway/internal/handles"
	"github.com/toolgate/toolgate/gateway/internal/threadname"
	"github.com/toolgate/toolgate/internal/callslot"
	"github.com/toolgate/toolgate/internal/canonjson"
	"github.com/toolgate/toolgate/internal/telemetry"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
	"github.com/toolgate/toolgate/schemas"
	"github.com/toolgate/toolgate/threadctx"
)

// ThreadMetaKey is the _meta key by which a call names its thread
// explicitly. Calls naming the same thread share stateful instances, across
// sessions.
const ThreadMetaKey = threadctx.MetaKey

// ErrorClassMetaKey is the _meta key of an error result that carries its
// [retry.Class].
const ErrorClassMetaKey = "toolgate/error_class"

// RetryAfterMetaKey is the _meta key of an error result that says, in
// milliseconds, when calling again may succeed.
const RetryAfterMetaKey = "toolgate/retry_after_ms"

const shutdownCancelWait = 2 * time.Second

// errShutdown is the cause given to calls cancelled because toolgate is
// stopping.
var errShutdown = retry.Errorf(retry.Cancelled, "toolgate shut down before the call finished; call again once it is back")

// The call pipeline is one chain of steps, each a small function with one
// job, built once by buildChain and run for every call, whichever way it
// arrives (an MCP transport, [Gateway.Call], a call of toolgate_batch):
//
//	resolve   the tool by name, with repair: before the chain, in
//	          handle (calls from the MCP front come resolved: the front
//	          answers unknown names itself, serveFront runs the chain)
//	record    the call's ID; metrics, one log line per call (info) and
//	          lifecycle events with a debug line each (events.go,
//	          gateway/internal/events); calls in flight
//	track     refuse calls while shutting down; cancel them when the
//	          shutdown grace runs out
//	validate  arguments against the tool's input schema; violations are a
//	          validation result listing each, and the tool is never called
//	thread    the thread the call runs in, decided once
//	permit    the principal's tool permissions and rate limit (auth.go);
//	          nothing for calls without a principal
//	guard     the loop guard: a thread repeating one call, with one
//	          result, past guards.loop.threshold is blocked, warned or
//	          asked (guard.go, internal/loopguard)
//	hooks     the configured hooks: deny_args and webhooks before the call,
//	          webhooks, redact and truncate after it (hooks.go,
//	          gateway/internal/hooks)
//	(use)     middleware added with [Gateway.Use]
//	cache     a read-only tool's result from its source's result cache,
//	          or kept there once it succeeds (cache.go)
//	limit     a slot under the concurrency limits (internal/callshare)
//	dispatch  the tool's executor, bound at registration, under its
//	          deadline and retry plan (executors.Dispatcher)
//	map       the executor's result or error → [Result]

// step is one link of the chain.
type step func(next Handler) Handler

// buildChain composes the steps around dispatch.
func (g *Gateway) buildChain(use []Middleware) Handler {
	// With middleware in place the executors get Args re-encoded, never
	// the client's raw bytes: a middleware may have changed Args.
	h := g.cacheStep(len(use) == 0, g.limit(g.dispatchStep(len(use) == 0)))
	for i := len(use) - 1; i >= 0; i-- {
		h = use[i](h)
	}
	if len(use) > 0 {
		h = settle(h)
	}
	steps := []step{
		g.record,
		g.track,
		g.permit, // first: a tool the principal may not use shows nothing of itself, its schema neither
		g.validate,
		g.thread,
		g.guard,
		g.hooks,
	}
	for i := len(steps) - 1; i >= 0; i-- {
		h = steps[i](h)
	}
	return h
}

// handle resolves c's tool, unless its route is set (a call of
// toolgate_batch, or of a catalog's meta-tool, that found it), and runs c
// through the chain. The MCP front's calls come resolved: serveFront runs
// the chain itself.
func (g *Gateway) handle(ctx context.Context, c *Call) (*Result, error) {
	if c.route == nil {
		r, err := g.lookup(c.Name)
		if err != nil {
			return nil, err
		}
		c.route = r
	}
	c.Tool = c.route.tool
	return (*g.chain.Load())(ctx, c)
}

// record counts the call, times it and logs it.
func (g *Gateway) record(next Handler) Handler {
	return func(ctx context.Context, c *Call) (*Result, error) {
		start := time.Now()
		if c.Thread == "" {
			// Known before the thread step for explicit threads, so
			// that pending carries it; a problem with _meta is the
			// thread step's to report.
			c.Thread, _ = threadname.Named(c.Meta, c.Principal)
		}
		g.callPending(ctx, c)
		g.metrics.CallStarted()
		defer g.metrics.CallEnded()
		var span telemetry.Span
		if g.tracer != nil { // not even the span's name when tracing is off
			ctx, span = g.tracer.Start(ctx, "execute_tool "+c.Tool.Name, telemetry.Internal)
		}
		defer span.End()
		res, err := next(ctx, c)
		d := time.Since(start)
		outcome, class := "ok", ""
		switch {
		case err != nil:
			outcome, class = "error", string(retry.Classify(err))
		case res.IsError:
			outcome, class = "error", string(resultClass(res))
		}
		g.metrics.Observe(c.Tool, outcome, class, d)
		endpoint := ""
		if c.ident != nil && c.ident.Endpoint != "" {
			endpoint = c.ident.Endpoint
			g.metrics.EndpointCall(endpoint, outcome)
		}
		if span.Recording() {
			traceCall(span, c, outcome, class)
		}
		if g.logger.Enabled(ctx, slog.LevelInfo) {
			attrs := []slog.Attr{
				slog.String("tool", c.Tool.Name), slog.String("kind", string(c.Tool.Kind)), slog.String("thread", threadLabel(c.Thread)),
				slog.Float64("duration_ms", durationMS(d)), slog.String("outcome", outcome), slog.String("class", class),
				slog.String("call_id", c.ID), slog.Int("attempts", c.attempts),
			}
			if c.cache != "" {
				attrs = append(attrs, slog.String("cache", c.cache))
			}
			if c.Principal != "" {
				// Who made the call: the audit trail needs it once there
				// is authentication.
				attrs = append(attrs, slog.String("principal", c.Principal))
			}
			if endpoint != "" {
				attrs = append(attrs, slog.String("endpoint", endpoint))
			}
			if id := telemetry.TraceID(ctx); id != "" {
				attrs = append(attrs, slog.String("trace_id", id))
			}
			g.logger.LogAttrs(ctx, slog.LevelInfo, "tool call", attrs...)
		}
		g.callEnded(ctx, c, res, err, class, d)
		return res, err
	}
}

// traceCall describes the call on its span, as OpenTelemetry's GenAI
// conventions name a tool's execution; never its arguments.
func traceCall(span telemetry.Span, c *Call, outcome, class string) {
	span.Str("gen_ai.operation.name", "execute_tool")
	span.Str("gen_ai.tool.name", c.Tool.Name)
	span.Str("gen_ai.tool.call.id", c.ID)
	span.Str("toolgate.tool.kind", string(c.Tool.Kind))
	span.Str("toolgate.outcome", outcome)
	span.Int("toolgate.attempts", c.attempts)
	if c.Principal != "" {
		span.Str("toolgate.principal", c.Principal)
	}
	if class != "" {
		span.Fail(class, "the tool call failed: "+class)
	}
}

// track registers the call with the shutdown tracker, which cancels its
// context with errShutdown when the shutdown grace runs out.
func (g *Gateway) track(next Handler) Handler {
	return func(ctx context.Context, c *Call) (*Result, error) {
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		id, ok := g.calls.Enter(cancel)
		if !ok {
			return errorResult(retry.Errorf(retry.Unavailable, "toolgate is shutting down and takes no new calls; call again once it is back")), nil
		}
		defer g.calls.Leave(id)
		return next(ctx, c)
	}
}

// validate checks that the arguments are an object that passes the tool's
// input schema. Absent or null arguments are {}.
func (g *Gateway) validate(next Handler) Handler {
	return func(ctx context.Context, c *Call) (*Result, error) {
		if !c.decoded && len(c.Raw) > 0 {
			if err := json.Unmarshal(c.Raw, &c.input); err != nil {
				return errorResult(retry.Errorf(retry.Validation, "arguments are not valid JSON: %v", err)), nil
			}
			// JSON readers disagree on a repeated name: what the hooks
			// and the schema check here would not be what runs.
			if at, name, dup := canonjson.DuplicateKey(c.Raw); dup {
				return errorResult(retry.Errorf(retry.Validation, "arguments name %q twice in the object at %q: send each name once", name, "#"+at)), nil
			}
		}
		switch a := c.input.(type) {
		case nil:
			c.Args = map[string]any{}
		case map[string]any:
			c.Args = a
		default:
			return errorResult(retry.Errorf(retry.Validation, "arguments must be a JSON object, got %s; send {} for no arguments", jsonKind(c.input))), nil
		}
		if err := checkArgs(c.Tool, c.Args); err != nil {
			return errorResult(err), nil
		}
		return next(ctx, c)
	}
}

// checkArgs checks args against t's input schema; the error, of class
// validation, lists every violation. The hooks step checks arguments a
// webhook rewrote with it too.
func checkArgs(t *registry.Tool, args map[string]any) error {
	if vs := t.Validate(args); len(vs) > 0 {
		return retry.Errorf(retry.Validation, "%s", schemas.Format(vs))
	}
	return nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "an array"
	case string:
		return "a string"
	case float64, json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return fmt.Sprintf("%T", v)
}

// thread decides the call's thread, unless it came with one: the explicit
// _meta thread, else the MCP session's, else a fresh one-call thread whose
// instances are closed when the call ends. Explicit and session threads
// live in separate namespaces, so naming a thread can never reach into
// another session's instances.
//
// A thread handle passed to a stateful tool names the thread before all
// of these; a sessionless MCP call of such a tool that names none gets a
// new handle's thread instead of a one-call thread, and the handle in its
// result (handles.go). The instances of that thread are provisional in the
// pool (threadctx.WithProvisional) until a call passes the handle.
func (g *Gateway) thread(next Handler) Handler {
	return func(ctx context.Context, c *Call) (*Result, error) {
		c.sessionThread = threadname.Session(c.Session)
		if h, ok := g.takeHandle(c); ok && c.ident.Permits(c.Tool.Name) {
			thread, err := g.handles.Thread(c.Principal, h)
			if lost, ok := errors.AsType[*handles.ElsewhereError](err); ok {
				// Its replica could not be reached (or forward to):
				// a new thread, and the model told why.
				handle, thread := g.handles.Mint(c.Principal)
				c.Thread, c.oneShot = thread, false
				res, err := next(threadctx.WithProvisional(ctx, thread), c)
				return (*Result)(handles.WithLostHandle((*executors.Result)(res), c.Tool.Name, handle, lost.Owner)), err
			}
			if err != nil {
				return errorResult(err), nil
			}
			c.Thread, c.oneShot = thread, false
			return next(ctx, c)
		}
		// (A principal the tool is not permitted to gets the permit
		// step's answer, whatever handle it sent.)
		if c.Thread == "" {
			thread, oneShot, err := g.threadOf(c)
			if err != nil {
				return errorResult(err), nil
			}
			if oneShot && g.mintsHandle(c) {
				handle, thread := g.handles.Mint(c.Principal)
				c.Thread = thread
				// Provisional until the handle comes back: a client
				// looping handle-less calls must not hold an instance
				// (an upstream process) per call for threads.idle_ttl.
				res, err := next(threadctx.WithProvisional(ctx, thread), c)
				return withHandle(res, c.Tool.Name, handle), err
			}
			c.Thread, c.oneShot = thread, oneShot
			if oneShot {
				defer g.pool.CloseThread(thread)
			}
		}
		return next(ctx, c)
	}
}

func (g *Gateway) threadOf(c *Call) (id string, oneShot bool, err error) {
	if id, err = threadname.Named(c.Meta, c.Principal); err != nil || id != "" {
		return id, false, err
	}
	if c.sessionThread != "" {
		return c.sessionThread, false, nil
	}
	return g.oneShot.Next(), true, nil
}

// threadLabel is how a thread appears in logs and events
// ([threadctx.Label]).
func threadLabel(thread string) string { return threadctx.Label(thread) }

// limit runs the call in a slot under the concurrency limits. A session's
// calls share its per-session slots; so do the calls of an explicit
// thread, wherever they come from. One-call threads only count against the
// principal's share and the global limit; the embedding program's calls
// (no principal) and every call without authentication only against the
// global limit and their session's. While the call waits for its client
// (callslot.Park) it holds no slot. A tool that re-enters the pipeline (toolgate_batch) takes
// no slot itself: its calls take theirs.
func (g *Gateway) limit(next Handler) Handler {
	return func(ctx context.Context, c *Call) (*Result, error) {
		if c.route.reentrant {
			return next(ctx, c)
		}
		key := c.sessionThread
		if key == "" && !c.oneShot {
			key = c.Thread
		}
		qctx, span := telemetry.Child(ctx, "queue wait", telemetry.Internal)
		// The limiter of the limits in force: after a reload, calls that
		// started before it give their slots back to the one before.
		h, waited, err := g.limiter.Load().Acquire(qctx, key, c.Principal)
		if err != nil {
			err = queueError(ctx, c, err)
			span.Fail(string(retry.Classify(err)), "no free slot")
			span.End()
			return errorResult(err), nil
		}
		span.End()
		defer h.End()
		g.metrics.QueueWait(waited)
		return next(callslot.With(ctx, h), c)
	}
}

// queueError classifies a failure to get a slot: the limiter's own
// rate_limited error, or ctx ending while the call waited.
func queueError(ctx context.Context, c *Call, err error) error {
	if _, ok := errors.AsType[*retry.Error](err); ok {
		return err
	}
	if cause, ok := errors.AsType[*retry.Error](context.Cause(ctx)); ok {
		return cause // toolgate shutting down
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return retry.Errorf(retry.Timeout, "the client's deadline passed while the call to %q waited for a free slot (defaults.max_parallel)", c.Tool.Name)
	}
	return retry.Errorf(retry.Cancelled, "the call to %q was cancelled by the client while it waited for a free slot", c.Tool.Name)
}

// settle keeps the chain's promise around middleware: a tool failure is a
// result, never an error, and there is always a result.
func settle(next Handler) Handler {
	return func(ctx context.Context, c *Call) (*Result, error) {
		res, err := next(ctx, c)
		switch {
		case err != nil:
			return errorResult(err), nil
		case res == nil:
			return errorResult(retry.Errorf(retry.Internal, "a middleware returned no result for the call to %q", c.Tool.Name)), nil
		}
		return res, nil
	}
}

// dispatchStep returns the dispatch step: the call on its tool's executor,
// the outcome mapped. forwardRaw lets executors forward the client's raw
// argument bytes (only when nothing could have changed Args).
func (g *Gateway) dispatchStep(forwardRaw bool) Handler {
	return func(ctx context.Context, c *Call) (*Result, error) {
		raw := c.Raw
		if !forwardRaw {
			raw = nil
		}
		// Only the arguments' size: they may hold anything a model was
		// told, secrets included (STYLE 7.3: never log arguments).
		if g.logger.Enabled(ctx, slog.LevelDebug) { // threadLabel hashes: only when logged
			g.logger.LogAttrs(ctx, slog.LevelDebug, "tool call arguments", slog.String("tool", c.Tool.Name),
				slog.String("thread", threadLabel(c.Thread)), slog.Int("argument_bytes", len(c.Raw)))
		}
		r := c.route
		if r.reentrant {
			ctx = context.WithValue(ctx, callKey{}, c)
		}
		plan := *r.plan.Load() // shared by the tools of its source: the call's own copy names its tool
		plan.Tool = c.Tool.Name
		res, err := g.dispatcher.Dispatch(ctx, r.exec, executors.Call{
			Tool: c.Tool, Args: c.Args, Raw: raw, Thread: c.Thread, Progress: c.Progress, Retry: plan,
			OnAttempt: g.onAttempt(ctx, c),
		})
		if err != nil {
			return errorResult(err), nil
		}
		return (*Result)(&res), nil
	}
}

// callKey is the context key under which a re-entrant tool finds the Call
// it runs for.
type callKey struct{}

// callFrom returns the Call a re-entrant tool's executor runs for.
func callFrom(ctx context.Context) (*Call, bool) {
	c, ok := ctx.Value(callKey{}).(*Call)
	return c, ok
}

// errorResult turns a failure into the result the model sees: isError,
// text starting with the error's class, and the class in Class and _meta.
func errorResult(err error) *Result {
	class := retry.Classify(err)
	res := &Result{
		Content: []Content{{Type: executors.TextContent, Text: string(class) + ": " + err.Error()}},
		IsError: true,
		Class:   class,
		Meta:    map[string]any{ErrorClassMetaKey: string(class)},
	}
	if ra := retry.RetryAfterOf(err); ra > 0 {
		res.Meta[RetryAfterMetaKey] = ra.Milliseconds()
	}
	return res
}
