package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
	"github.com/toolgate/toolgate/schemas"
	"github.com/toolgate/toolgate/threadctx"
)

// ThreadMetaKey is the _meta key by which a call names its thread
// explicitly. Calls naming the same thread share stateful instances, across
// sessions.
const ThreadMetaKey = "toolgate/thread"

// ErrorClassMetaKey is the _meta key of an error result that carries its
// [retry.Class].
const ErrorClassMetaKey = "toolgate/error_class"

const (
	maxThreadIDLen     = 256
	shutdownCancelWait = 2 * time.Second
)

// errShutdown is the cause given to calls cancelled because toolgate is
// stopping.
var errShutdown = retry.Errorf(retry.Cancelled, "toolgate shut down before the call finished; call again once it is back")

// The call pipeline. Its steps, in order:
//
//  1. resolve   exact name, else case/separator repair, else JSON-RPC -32602
//     with suggestions (preflight.go, before mcp-go sees the request)
//  2. permit    (inbound auth; a later issue)
//  3. validate  arguments against the input schema; violations are an
//     isError result listing every one, and the tool is never called
//  4. guard     (loop guard; a later issue)
//  5. dispatch  thread resolved, a slot under the concurrency limits
//     (limit.go), executor by kind, timeout, retries (executors)
//  6. map       toolgate's Result → MCP result (wire.go)
//  7. record    metrics and one log line per call

// handleToolCall is the mcp-go handler of every tool. It always returns a
// result and a nil error: a non-nil error would become a JSON-RPC internal
// error, and tool failures must reach the model as results.
func (g *Gateway) handleToolCall(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	t, ok := g.reg.Get(req.Params.Name)
	if !ok {
		// Removed between mcp-go's lookup and ours.
		return errorResult(retry.Errorf(retry.NotFound, "tool %q was just removed; call tools/list", req.Params.Name)), nil
	}
	sessThread := ""
	if s := server.ClientSessionFromContext(ctx); s != nil {
		if v, ok := g.sessions.Load(s.SessionID()); ok {
			sessThread = v.(string)
		} else if id := s.SessionID(); id != "" {
			sessThread = sessionThread(id)
		}
	}
	return g.run(ctx, t, req.Params.Arguments, req.Params.RawArguments, mcpMeta(req.Params.Meta), sessThread, "", g.progress(ctx, req.Params.Meta)), nil
}

// progress returns the function that reports a call's progress to its
// client, or nil when the client asked for none (no progressToken).
func (g *Gateway) progress(ctx context.Context, meta *mcp.Meta) func(progress, total float64, message string) {
	if meta == nil || meta.ProgressToken == nil {
		return nil
	}
	token := meta.ProgressToken
	return func(progress, total float64, message string) {
		params := map[string]any{"progressToken": token, "progress": progress}
		if total > 0 {
			params["total"] = total
		}
		if message != "" {
			params["message"] = message
		}
		// Best effort: mcp-go drops a notification when the session's queue
		// is full, and reports it through OnError hooks.
		_ = g.mcp.SendNotificationToClient(ctx, "notifications/progress", params)
	}
}

// Call runs one call through the whole pipeline, as if a client had sent
// it: name resolution (with repair when enabled), validation, dispatch.
// args is the JSON arguments object (nil or empty means {}). meta is the
// request's _meta (it may name a thread with [ThreadMetaKey]); without a
// thread the call runs in a fresh one-call thread. An unknown tool is
// returned as an error wrapping registry.ErrNotFound; every other failure is
// an isError result.
func (g *Gateway) Call(ctx context.Context, name string, args json.RawMessage, meta map[string]any) (*mcp.CallToolResult, error) {
	t, err := g.reg.Resolve(name, g.cfg.Guards.NameRepair)
	if err != nil {
		g.metrics.unknownTools.Inc()
		return nil, err
	}
	var decoded any
	if len(args) > 0 {
		if err := json.Unmarshal(args, &decoded); err != nil {
			return errorResult(retry.Errorf(retry.Validation, "arguments are not valid JSON: %v", err)), nil
		}
	}
	return g.run(ctx, t, decoded, args, meta, "", "", nil), nil
}

// run is pipeline steps 3 to 7 for a resolved tool. sessThread is the
// thread of the caller's session, or "" without one; thread, when not
// empty, is the thread to run in (see execute).
func (g *Gateway) run(ctx context.Context, t *registry.Tool, args any, raw json.RawMessage, meta map[string]any, sessThread, thread string, progress func(float64, float64, string)) *mcp.CallToolResult {
	start := time.Now()
	g.metrics.inFlight.Inc()
	defer g.metrics.inFlight.Dec()
	// The call's context is cancelled with errShutdown, through the
	// tracker, when the shutdown grace runs out.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	id, ok := g.calls.enter(cancel)
	if !ok {
		err := retry.Errorf(retry.Unavailable, "toolgate is shutting down and takes no new calls; call again once it is back")
		g.record(ctx, t, "", start, executors.Result{}, err)
		return errorResult(err)
	}
	defer g.calls.leave(id)

	res, thread, err := g.execute(ctx, t, args, raw, meta, sessThread, thread, progress)
	g.record(ctx, t, thread, start, res, err)
	if err != nil {
		return errorResult(err)
	}
	return wireResult(res)
}

// execute is pipeline steps 3 to 5. thread, when not empty, is the thread
// the call runs in, already resolved (the calls of a toolgate_batch run in
// the batch's); otherwise meta and sessThread decide.
func (g *Gateway) execute(ctx context.Context, t *registry.Tool, args any, raw json.RawMessage, meta map[string]any, sessThread, thread string, progress func(float64, float64, string)) (executors.Result, string, error) {
	argMap, err := checkArgs(t, args)
	if err != nil {
		return executors.Result{}, "", err
	}
	explicit := thread != ""
	if !explicit {
		var oneShot bool
		if thread, oneShot, err = g.thread(meta, sessThread); err != nil {
			return executors.Result{}, "", err
		}
		explicit = !oneShot
		if oneShot {
			defer g.pool.CloseThread(thread)
		}
	}
	if g.logger.Enabled(ctx, slog.LevelDebug) {
		g.logger.Debug("tool call arguments", "tool", t.Name, "thread", threadLabel(thread), "arguments", string(raw))
	}
	if t == g.batchTool {
		// The batch takes no slot itself: its calls take theirs.
		res, err := g.runBatch(ctx, argMap, sessThread, thread, progress)
		return res, thread, err
	}
	// A session's calls share its per-session slots; so do the calls of an
	// explicit thread, wherever they come from. One-call threads only
	// count against the global limit.
	key := sessThread
	if key == "" && explicit {
		key = thread
	}
	slot, waited, err := g.limiter.acquire(ctx, key)
	if err != nil {
		return executors.Result{}, thread, queueError(ctx, t, err)
	}
	defer g.limiter.release(key, slot)
	g.metrics.queueWait.Observe(waited.Seconds())
	res, err := g.dispatcher.Dispatch(threadctx.WithThread(ctx, thread), executors.Call{Tool: t, Args: argMap, Raw: raw, Thread: thread, Progress: progress})
	return res, thread, err
}

// queueError classifies a failure to get a slot: the limiter's own
// rate_limited error, or ctx ending while the call waited.
func queueError(ctx context.Context, t *registry.Tool, err error) error {
	if _, ok := errors.AsType[*retry.Error](err); ok {
		return err
	}
	if cause, ok := errors.AsType[*retry.Error](context.Cause(ctx)); ok {
		return cause // toolgate shutting down
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return retry.Errorf(retry.Timeout, "the client's deadline passed while the call to %q waited for a free slot (defaults.max_parallel)", t.Name)
	}
	return retry.Errorf(retry.Cancelled, "the call to %q was cancelled by the client while it waited for a free slot", t.Name)
}

// checkArgs is pipeline step 3: the arguments must be an object that passes
// the tool's input schema. Absent or null arguments are {}.
func checkArgs(t *registry.Tool, args any) (map[string]any, error) {
	var m map[string]any
	switch a := args.(type) {
	case nil:
		m = map[string]any{}
	case map[string]any:
		m = a
	default:
		return nil, retry.Errorf(retry.Validation, "arguments must be a JSON object, got %s; send {} for no arguments", jsonKind(args))
	}
	if vs := t.Validate(m); len(vs) > 0 {
		return nil, retry.Errorf(retry.Validation, "%s", schemas.Format(vs))
	}
	return m, nil
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

// thread picks the thread of a call: the explicit _meta thread, else the
// MCP session's, else a fresh one-call thread (oneShot). Explicit and
// session threads live in separate namespaces, so naming a thread can never
// reach into another session's instances.
func (g *Gateway) thread(meta map[string]any, sessThread string) (id string, oneShot bool, err error) {
	if v, ok := meta[ThreadMetaKey]; ok && v != nil {
		s, isStr := v.(string)
		switch {
		case !isStr:
			return "", false, retry.Errorf(retry.Validation, "_meta %q must be a string naming the thread", ThreadMetaKey)
		case s == "":
			// An empty name means "no explicit thread".
		case len(s) > maxThreadIDLen:
			return "", false, retry.Errorf(retry.Validation, "_meta %q is %d bytes long; use at most %d", ThreadMetaKey, len(s), maxThreadIDLen)
		default:
			return "t:" + s, false, nil
		}
	}
	if sessThread != "" {
		return sessThread, false, nil
	}
	return "c:" + strconv.FormatUint(g.oneShot.Add(1), 10), true, nil
}

func sessionThread(session string) string { return "s:" + session }

// threadLabel is how a thread appears in logs: a short hash, since session
// IDs grant access to a session and explicit thread names are the client's.
func threadLabel(thread string) string {
	if thread == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(thread))
	return hex.EncodeToString(sum[:6])
}

// record is pipeline step 7: metrics and one log line per call.
func (g *Gateway) record(ctx context.Context, t *registry.Tool, thread string, start time.Time, res executors.Result, err error) {
	d := time.Since(start)
	outcome, class := "ok", ""
	switch {
	case err != nil:
		outcome, class = "error", string(retry.Classify(err))
	case res.IsError:
		outcome, class = "error", string(retry.Execution)
	}
	g.metrics.observe(t, outcome, class, d)
	if g.logger.Enabled(ctx, slog.LevelInfo) {
		g.logger.LogAttrs(ctx, slog.LevelInfo, "tool call",
			slog.String("tool", t.Name), slog.String("kind", string(t.Kind)), slog.String("thread", threadLabel(thread)),
			slog.Duration("duration", d), slog.String("outcome", outcome), slog.String("class", class))
	}
}

// tracker counts calls in flight so that shutdown can wait for them, and
// holds their cancel functions so that it can stop them. Its zero value is
// ready to use.
type tracker struct {
	mu       sync.Mutex
	next     uint64                             // last call id; guarded by mu
	calls    map[uint64]context.CancelCauseFunc // calls in flight; guarded by mu
	stopping chan struct{}                      // closed when draining starts (no new calls); guarded by mu, made lazily
	zero     chan struct{}                      // closed when calls empties while draining; guarded by mu
}

// stoppingLocked returns the stopping channel, making it if needed.
func (t *tracker) stoppingLocked() chan struct{} {
	if t.stopping == nil {
		t.stopping = make(chan struct{})
	}
	return t.stopping
}

func (t *tracker) drainingLocked() bool {
	select {
	case <-t.stoppingLocked():
		return true
	default:
		return false
	}
}

// enter records a call whose context cancel cancels; ok is false when
// draining has started and the call must be refused.
func (t *tracker) enter(cancel context.CancelCauseFunc) (id uint64, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.drainingLocked() {
		return 0, false
	}
	if t.calls == nil {
		t.calls = map[uint64]context.CancelCauseFunc{}
	}
	t.next++
	t.calls[t.next] = cancel
	return t.next, true
}

func (t *tracker) leave(id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.calls, id)
	if len(t.calls) == 0 && t.zero != nil {
		close(t.zero)
		t.zero = nil
	}
}

func (t *tracker) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.calls)
}

// cancelAll cancels every call in flight with cause.
func (t *tracker) cancelAll(cause error) {
	t.mu.Lock()
	cancels := make([]context.CancelCauseFunc, 0, len(t.calls))
	for _, c := range t.calls {
		cancels = append(cancels, c)
	}
	t.mu.Unlock()
	for _, c := range cancels {
		c(cause)
	}
}

func (t *tracker) isDraining() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.drainingLocked()
}

// draining returns a channel closed once draining has started.
func (t *tracker) draining() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stoppingLocked()
}

func (t *tracker) startDraining() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.drainingLocked() {
		close(t.stopping)
	}
}

// drain refuses new calls and waits until none is in flight or ctx is done.
func (t *tracker) drain(ctx context.Context) error {
	t.mu.Lock()
	if !t.drainingLocked() {
		close(t.stopping)
	}
	if len(t.calls) == 0 {
		t.mu.Unlock()
		return nil
	}
	if t.zero == nil {
		t.zero = make(chan struct{})
	}
	ch := t.zero
	t.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
