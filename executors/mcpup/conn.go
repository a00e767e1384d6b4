package mcpup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/internal/oauthclient"
	"github.com/toolgate/toolgate/internal/telemetry"
	"github.com/toolgate/toolgate/retry"
)

// cancelNotifyTimeout bounds sending notifications/cancelled, which is
// best effort.
const cancelNotifyTimeout = 2 * time.Second

// errClosed is why a connection closed by its owner is dead.
var errClosed = errors.New("connection closed")

// conn is one connection to an upstream: an initialized mcp-go client over
// a transport, and for stdio the process behind it. Requests go straight
// through the transport with mcpup's own string IDs, so that results and
// schemas stay raw and cancellation can name the request; a tools/call to
// a streamable HTTP upstream goes through mcpup's own POST (httpcall.go).
type conn struct {
	u *upstream
	// life is the connection's lifetime: the transport's, and that of the
	// requests mcpup sends itself. stop, which close calls, ends it.
	life   context.Context
	stop   context.CancelFunc
	thread string         // thread label for logs; "" when shared
	client *client.Client // nil until dial got that far
	tr     transport.Interface
	proc   *process     // nil for HTTP upstreams
	http   *httpSession // a streamable HTTP upstream's, once initialized; nil for others

	dead        chan struct{} // closed by markDead
	deadOnce    sync.Once
	deadErr     error         // why it died; written before dead is closed
	listChanged chan struct{} // 1-buffered: the upstream's tool list changed

	// mu guards closing and, with it, additions to cancels.
	mu      sync.Mutex
	closing bool
	cancels sync.WaitGroup // goroutines sending notifications/cancelled

	// routesMu guards routes.
	routesMu sync.Mutex
	routes   map[string]*progressRoute // progress token → call

	// peersMu guards peers, waits and outlived.
	peersMu sync.Mutex
	peers   map[string]inflight      // request ID → the peer it is made for (relay.go)
	waits   map[*peerRef]*clientWait // calls waiting for their clients' answers (relay.go)
	asking  askCounts                // each call's requests in flight to its client (askcap.go)
	// outlived are the sessions with calls in flight that outlived a call
	// of another session (relay.go, trackPeer): a message that names no
	// call may be that call's, sent late, and is not theirs.
	outlived map[string]bool

	catalogChanged chan struct{} // 1-buffered: the upstream's resources or prompts changed

	closeOnce sync.Once
}

// progressRoute delivers one call's progress notifications.
type progressRoute struct {
	// mu is held while fn runs and when the call ends, so fn never runs
	// after Execute has returned (executors.Call.Progress may only be
	// used until then). It guards done.
	mu   sync.Mutex
	done bool
	fn   func(progress, total float64, message string)
}

// newConn returns a connection of u's for thread that lives at most as
// long as lifetime.
func newConn(lifetime context.Context, u *upstream, thread string) *conn {
	life, stop := context.WithCancel(lifetime)
	return &conn{
		u:           u,
		life:        life,
		stop:        stop,
		thread:      thread,
		dead:        make(chan struct{}),
		listChanged: make(chan struct{}, 1),
		routes:      make(map[string]*progressRoute),
		peers:       make(map[string]inflight),
		waits:       make(map[*peerRef]*clientWait),
		outlived:    make(map[string]bool),

		catalogChanged: make(chan struct{}, 1),
	}
}

// markDead records that the connection is unusable, for the first reason
// given.
func (c *conn) markDead(err error) {
	c.deadOnce.Do(func() {
		c.deadErr = err
		close(c.dead)
	})
}

func (c *conn) isDead() bool {
	select {
	case <-c.dead:
		return true
	default:
		return false
	}
}

// lostReason says why the connection died, preferring the process's exit
// status when there is one. Only valid once dead is closed.
func (c *conn) lostReason() string {
	if r := c.exitReason(); r != "" {
		return r
	}
	if c.deadErr == nil {
		return "unknown"
	}
	return c.u.redact(c.deadErr.Error())
}

// exitReason describes how the process exited, or "" if it has not (or
// there is none).
func (c *conn) exitReason() string {
	if c.proc == nil {
		return ""
	}
	return c.proc.exitReason()
}

// close ends the connection: it closes the client (stdio: closes stdin;
// streamable HTTP: DELETEs the session), ends the transport's context,
// shuts the process down and reaps it, and waits for the goroutines the
// connection started. Safe to call more than once.
func (c *conn) close() {
	c.closeOnce.Do(func() {
		c.markDead(errClosed)
		c.mu.Lock()
		c.closing = true
		c.mu.Unlock()
		if c.client != nil {
			_ = c.client.Close()
		}
		c.stop()
		if c.proc != nil {
			c.proc.shutdown()
		}
		c.cancels.Wait()
	})
}

// onNotification handles a notification from the upstream. It runs on the
// transport's read goroutine, so it never calls the client: a tool list
// change is handed to the supervisor.
func (c *conn) onNotification(n mcp.JSONRPCNotification) {
	switch n.Method {
	case string(mcp.MethodNotificationToolsListChanged):
		select {
		case c.listChanged <- struct{}{}:
		default: // a re-listing is already pending
			c.coalesced()
		}
	case string(mcp.MethodNotificationResourcesListChanged), string(mcp.MethodNotificationPromptsListChanged):
		select {
		case c.catalogChanged <- struct{}{}:
		default:
			c.coalesced()
		}
	case string(mcp.MethodNotificationResourceUpdated):
		if c.u.m.onNotify != nil {
			c.u.m.onNotify(c.u.cfg.Name, n.Method, maps.Clone(n.Params.AdditionalFields), nil)
		}
	case "notifications/progress":
		c.routeProgress(n.Params.AdditionalFields)
	case "notifications/message":
		c.u.logMessage(c.thread, n.Params.AdditionalFields)
		c.forwardLog(n.Params.AdditionalFields)
	}
}

// coalesced counts a list_changed folded into a listing already pending
// ([Options.OnRelist]); thread instances' are not counted.
func (c *conn) coalesced() {
	if c.thread == "" && c.u.m.onRelist != nil {
		c.u.m.onRelist(c.u.cfg.Name, false)
	}
}

func (c *conn) routeProgress(f map[string]any) {
	tok, ok := f["progressToken"].(string)
	if !ok {
		return
	}
	c.routesMu.Lock()
	r := c.routes[tok]
	c.routesMu.Unlock()
	if r == nil {
		return
	}
	progress, _ := f["progress"].(float64)
	total, _ := f["total"].(float64)
	msg, _ := f["message"].(string)
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.done {
		r.fn(progress, total, msg)
	}
}

// request sends one request with a fresh ID of mcpup's own and returns
// the response: a tools/call to a streamable HTTP upstream through
// mcpup's own POST (callHTTP), anything else through mcp-go's transport.
// When ctx ends first, it tells the upstream with notifications/cancelled
// (mcp-go does that only over stdio and only for its own requests) and
// returns ctx's error. A response over the upstream's message cap is a
// *tooLargeError.
func (c *conn) request(ctx context.Context, method string, params any) (*transport.JSONRPCResponse, error) {
	sid := "toolgate-" + strconv.FormatUint(c.u.m.nextID(), 10)
	id := mcp.NewRequestId(sid)
	defer c.trackPeer(ctx, sid)()
	if c.http != nil && method == string(mcp.MethodToolsCall) {
		resp, err := c.callHTTP(ctx, sid, params)
		if err != nil && ctx.Err() != nil {
			c.notifyCancelled(ctx, id)
			return nil, ctx.Err()
		}
		return resp, err
	}
	sendCtx, note := withTooLargeNote(ctx)
	resp, err := c.tr.SendRequest(sendCtx, transport.JSONRPCRequest{
		JSONRPC: mcp.JSONRPC_VERSION,
		ID:      id,
		Method:  method,
		Params:  params,
	})
	switch {
	case err != nil && ctx.Err() != nil:
		c.notifyCancelled(ctx, id)
		return nil, ctx.Err()
	case err != nil && note.n.Load() > 0:
		// mcp-go may have replaced the body's error with its own.
		return nil, &tooLargeError{upstream: c.u.cfg.Name, n: note.n.Load(), atLeast: true, max: c.u.maxMessageBytes}
	case err == nil:
		if e := c.u.tooLarge(resp); e != nil {
			return nil, e
		}
	}
	return resp, err
}

// notifyCancelled sends notifications/cancelled for id in the background,
// bounded by cancelNotifyTimeout; close waits for it.
func (c *conn) notifyCancelled(ctx context.Context, id mcp.RequestId) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing || c.isDead() {
		return
	}
	reason := "cancelled by the client"
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		reason = "timed out"
	}
	n := mcp.JSONRPCNotification{
		JSONRPC: mcp.JSONRPC_VERSION,
		Notification: mcp.Notification{
			Method: string(mcp.MethodNotificationCancelled),
			Params: mcp.NotificationParams{AdditionalFields: map[string]any{"requestId": id, "reason": reason}},
		},
	}
	ctx = context.WithoutCancel(ctx)
	c.cancels.Go(func() {
		ctx, cancel := context.WithTimeout(ctx, cancelNotifyTimeout)
		defer cancel()
		_ = c.tr.SendNotification(ctx, n)
	})
}

// callParams are the params of tools/call. Arguments are raw, so they reach
// the upstream without being decoded (key order and number precision are
// kept; encoding/json only compacts them).
type callParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Meta      *callMeta       `json:"_meta,omitempty"`
}

// callMeta is the _meta toolgate sends with a tools/call: its progress
// token, and the trace context of the call (the MCP trace-context
// proposal puts W3C traceparent and tracestate in _meta).
type callMeta struct {
	ProgressToken string `json:"progressToken,omitempty"`
	Traceparent   string `json:"traceparent,omitempty"`
	Tracestate    string `json:"tracestate,omitempty"`
}

// call runs the upstream tool orig for call; a traced call in the client
// span of its tools/call, the trace context passed on in _meta (and, over
// streamable HTTP, in headers: httpSession.post).
func (c *conn) call(ctx context.Context, orig string, call executors.Call) (executors.Result, error) {
	if !telemetry.Traced(ctx) {
		return c.send(ctx, orig, call, nil)
	}
	ctx, span := telemetry.Child(ctx, "tools/call "+orig, telemetry.Client)
	defer span.End()
	if span.Recording() {
		span.Str("mcp.method.name", string(mcp.MethodToolsCall))
		span.Str("gen_ai.operation.name", "execute_tool")
		span.Str("gen_ai.tool.name", orig)
		span.Str("toolgate.upstream", c.u.cfg.Name)
	}
	parent, state := telemetry.Meta(ctx)
	res, err := c.send(ctx, orig, call, &callMeta{Traceparent: parent, Tracestate: state})
	switch {
	case err != nil:
		span.Fail(string(retry.Classify(err)), "the upstream call failed")
	case res.IsError:
		span.Fail("tool_error", "the upstream tool answered isError")
	}
	return res, err
}

// send sends the tools/call of orig for call, with meta (nil for none) as
// its _meta, and reads the result.
func (c *conn) send(ctx context.Context, orig string, call executors.Call, meta *callMeta) (executors.Result, error) {
	name := c.u.cfg.Name
	args, err := arguments(call)
	if err != nil {
		return executors.Result{}, c.u.errorf(retry.Validation, err, "calling upstream %q tool %q: encoding arguments: %v", name, orig, err)
	}
	params := callParams{Name: orig, Arguments: args, Meta: meta}
	if call.Progress != nil {
		tok := "toolgate-progress-" + strconv.FormatUint(c.u.m.nextID(), 10)
		r := &progressRoute{fn: call.Progress}
		c.routesMu.Lock()
		c.routes[tok] = r
		c.routesMu.Unlock()
		defer func() {
			c.routesMu.Lock()
			delete(c.routes, tok)
			c.routesMu.Unlock()
			r.mu.Lock()
			r.done = true
			r.mu.Unlock()
		}()
		if params.Meta == nil {
			params.Meta = &callMeta{}
		}
		params.Meta.ProgressToken = tok
	}

	resp, err := c.request(ctx, string(mcp.MethodToolsCall), params)
	switch {
	case err != nil && ctx.Err() != nil:
		return executors.Result{}, ctxError(name, orig, ctx.Err())
	case err != nil:
		return executors.Result{}, c.transportError(fmt.Sprintf("calling upstream %q tool %q", name, orig), err)
	case resp.Error != nil && c.isDead():
		// Typically the upstream abandoning the call because we are
		// shutting it down (it sees stdin close).
		return executors.Result{}, c.u.errorf(retry.Unavailable, nil, "calling upstream %q tool %q: the connection closed during the call (%s)", name, orig, resp.Error.Message)
	case resp.Error != nil:
		return executors.Result{}, c.u.rpcError(orig, resp.Error.Code, resp.Error.Message)
	}
	res := bytes.TrimSpace(resp.Result)
	if len(res) == 0 || res[0] != '{' {
		return executors.Result{}, retry.Errorf(retry.Execution, "calling upstream %q tool %q: the upstream sent no result object", name, orig)
	}
	return executors.Result{Passthrough: resp.Result, IsError: isErrorResult(res)}, nil
}

var isErrorKey = []byte(`"isError"`)

// isErrorResult reports whether res, a tool result object, is a tool
// error, so that the pipeline counts and reports the call as the failure
// it is. Only isError is read: the result is forwarded as sent. A result
// that does not spell the key exactly (mcp-go and the TypeScript SDK leave
// it out when false) is only searched, not decoded; a key spelt in
// another case, which encoding/json would take, is no error to a client
// either.
func isErrorResult(res []byte) bool {
	if !bytes.Contains(res, isErrorKey) {
		return false
	}
	var head struct {
		IsError bool `json:"isError"`
	}
	_ = json.Unmarshal(res, &head)
	return head.IsError
}

// arguments returns the arguments to forward: the client's raw bytes, or
// {} when it sent none or null (TypeScript servers reject null).
func arguments(call executors.Call) (json.RawMessage, error) {
	if raw := bytes.TrimSpace(call.Raw); len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		if !json.Valid(raw) {
			return nil, errors.New("the arguments are not valid JSON")
		}
		return raw, nil
	}
	if len(call.Args) > 0 {
		return json.Marshal(call.Args)
	}
	return json.RawMessage("{}"), nil
}

// transportError classifies a failure to exchange a message with the
// upstream, and marks the connection dead when it is broken. A message
// over the cap is class execution and breaks nothing.
func (c *conn) transportError(op string, err error) *retry.Error {
	if na, ok := errors.AsType[*oauthclient.NeedsAuthError](err); ok {
		return c.u.needsAuth(na, err)
	}
	if _, ok := errors.AsType[*tooLargeError](err); ok {
		return c.u.errorf(retry.Execution, err, "%s: %v", op, err)
	}
	if c.isDead() {
		// A legacy SSE stream ended by a message over the cap.
		if tl, ok := errors.AsType[*tooLargeError](c.deadErr); ok {
			e := *tl
			e.dropped = true
			c.u.m.logger.Warn("upstream sent a message over max_message_bytes on its stream; reconnecting", "upstream", c.u.cfg.Name, "bytes", e.n)
			return c.u.errorf(retry.Execution, &e, "%s: %v", op, &e)
		}
	}
	class, broken := classifyTransport(err, c.proc != nil)
	if broken {
		c.markDead(err)
	}
	if class == retry.Unavailable && broken {
		e := c.u.errorf(class, err, "%s: the upstream connection broke (%v); it is restarting, retry in a moment", op, err)
		e.RetryAfter = minBackoff + reconnectMargin // the supervisor's first reconnection attempt
		return e
	}
	return c.u.errorf(class, err, "%s: %v", op, err)
}
