package mcpfront

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/internal/canonjson"
	"github.com/toolgate/toolgate/internal/principal"
)

// Multi-round-trip requests (SEP-2322): asking a 2026-07-28 client
// (docs/protocol-2026.md, "Asking a 2026-07-28 client").
//
// The revision has no server-to-client requests. A server that needs an
// answer from the client — an upstream's sampling/createMessage,
// elicitation/create or roots/list during a call, the loop guard's
// question — answers the call with resultType "input_required", carrying
// the requests (inputRequests, keyed) and an opaque requestState; the
// client answers them and sends the same call again with inputResponses
// and the state.
//
// An upstream cannot be re-run from the top with the answers, as mcp-go's
// own handlers are: its call is in flight, and its request waits for an
// answer. So a 2026-07-28 tools/call whose client declared sampling,
// elicitation or roots runs detached from its HTTP request, as a
// [continuation]: the request waits for the call's result or its first
// request to the client, whichever comes first. A result is the answer. A
// request makes the answer input_required, and the call stays pending,
// waiting for the retry; the retry's inputResponses answer the waiting
// requests, and the retry waits in its turn, for the result or the next
// requests.
//
// The requestState names the continuation and the round, and is bound to
// the principal by a MAC under a key drawn at start: unguessable (a
// 128-bit random ID), unforgeable, and of no use to another principal. A
// retry must name the same tool and arguments. A continuation waits
// [mrtrWait] for its retry, then is cancelled (the upstream's waiting
// requests get an error, and its call is cancelled); at most
// [mrtrMaxPerPrincipal] wait per principal and [mrtrMax] in all, past
// which the upstream's request gets an error at once, as if the client
// had refused, and the call goes on.

const (
	// mrtrWait is how long a continuation waits for its retry.
	mrtrWait = 60 * time.Second
	// mrtrMaxPerPrincipal and mrtrMax bound the continuations waiting for
	// a retry: per principal (everyone is one principal without
	// authentication) and in all.
	mrtrMaxPerPrincipal = 64
	mrtrMax             = 1024
	// mrtrMaxAsks bounds the requests to the client one call has
	// unanswered at once.
	mrtrMaxAsks = 16
	// statePrefix begins every requestState toolgate issues; the
	// instance name and the sealed part follow, dot-separated.
	statePrefix = "tg1."
	// stateIDLen and stateMACLen size the sealed part: the
	// continuation's ID, the round (4 bytes) and the MAC.
	stateIDLen  = 16
	stateMACLen = 16
)

// mrtrLimits are the bounds of the continuations, fixed at creation
// (tests lower them).
type mrtrLimits struct {
	wait            time.Duration
	maxPerPrincipal int
	max             int
}

// mrtr holds a front's continuations. Build it with newMRTR; it is safe
// for concurrent use.
type mrtr struct {
	key      [32]byte   // fixed at creation
	instance string     // fixed at creation: names this front in every requestState
	limits   mrtrLimits // fixed before the first call
	seq      atomic.Uint64

	mu           sync.Mutex // guards waiting, perPrincipal and closed
	waiting      map[[stateIDLen]byte]*continuation
	perPrincipal map[string]int
	closed       bool

	calls sync.WaitGroup // the detached calls' goroutines
}

func newMRTR() *mrtr {
	m := &mrtr{
		limits:       mrtrLimits{wait: mrtrWait, maxPerPrincipal: mrtrMaxPerPrincipal, max: mrtrMax},
		waiting:      map[[stateIDLen]byte]*continuation{},
		perPrincipal: map[string]int{},
	}
	_, _ = rand.Read(m.key[:]) // crypto/rand.Read never fails (Go 1.24+)
	var inst [8]byte
	_, _ = rand.Read(inst[:])
	m.instance = hex.EncodeToString(inst[:])
	return m
}

// binding is what a continuation continues: the method, the name and a
// hash of the arguments (argsSum) of the request that started it. A retry
// must bind alike.
type binding struct {
	method, name string
	args         [32]byte
}

// argsSum hashes arguments as sent, in canonical form: the same JSON
// value hashes alike however it is spaced or its keys ordered. Absent and
// null arguments are {}.
func argsSum(raw json.RawMessage) [32]byte {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	if c, err := canonjson.JSON(raw); err == nil {
		raw = c
	}
	return sha256.Sum256(raw)
}

// outcome is what a detached call returned.
type outcome struct {
	res any // *mcp.CallToolResult for tools/call
	err error
}

// continuation is one detached call of a 2026-07-28 client, from its
// start until its result has been answered, it expired or it was
// cancelled.
type continuation struct {
	m         *mrtr
	id        [stateIDLen]byte
	principal string
	bind      binding
	cancel    context.CancelFunc // ends the call
	done      chan struct{}      // closed by the call's goroutine once out is set
	out       outcome
	wake      chan struct{} // capacity 1: a request to the client was added

	mu         sync.Mutex // guards the fields below
	asks       []*ask     // the call's requests to the client not yet answered, oldest first
	n          int        // requests made, for their keys
	round      uint32     // of the last requestState issued
	awaiting   bool       // an input_required went out and its retry has not come
	registered bool       // in m.waiting (counted against the bounds)
	timer      *time.Timer
	over       bool // the call returned, expired or was abandoned: nothing more is asked
}

// ask is one request of the call to the client.
type ask struct {
	key   string
	req   mcp.InputRequest
	sent  bool             // in an input_required that went out
	reply chan inputAnswer // capacity 1; receives exactly one answer
}

type inputAnswer struct {
	res json.RawMessage
	err error
}

// start runs run detached from ctx's cancellation (keeping its values),
// until it returns, the continuation expires or is abandoned, or root
// ends. ok is false when the front is closing: nothing was started.
func (m *mrtr) start(ctx, root context.Context, principalName string, bind binding, run func(context.Context, *continuation) outcome) (c *continuation, ok bool) {
	c = &continuation{m: m, principal: principalName, bind: bind, done: make(chan struct{}), wake: make(chan struct{}, 1)}
	_, _ = rand.Read(c.id[:])
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, false
	}
	m.calls.Add(1) // before Close's Wait: closed is set under mu first
	m.mu.Unlock()
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.cancel = cancel
	stop := context.AfterFunc(root, cancel)
	go func() {
		defer m.calls.Done()
		defer stop()
		defer cancel()
		c.finish(runRecovered(cctx, c, run))
	}()
	return c, true
}

// runRecovered runs run, turning a panic into an error: the tool
// handler's recovery (Front.handler) covers its own goroutine, not this
// one.
func runRecovered(ctx context.Context, c *continuation, run func(context.Context, *continuation) outcome) (out outcome) {
	defer func() {
		if p := recover(); p != nil {
			out = outcome{err: fmt.Errorf("the call panicked: %v", p)}
		}
	}()
	return run(ctx, c)
}

// finish records the call's outcome. A continuation awaiting its retry
// stays registered for the retry to take the result (or to expire).
func (c *continuation) finish(out outcome) {
	c.out = out
	c.mu.Lock()
	c.over = true
	asks := c.asks
	c.asks = nil
	keep := c.awaiting
	c.mu.Unlock()
	for _, a := range asks { // none: the call waited for them
		a.reply <- inputAnswer{err: &RPCError{Code: mcp.INTERNAL_ERROR, Msg: fmt.Sprintf("%s: the call is over", a.req.Method)}}
	}
	close(c.done)
	if !keep {
		c.m.forget(c)
	}
}

// await waits, for the request whose ctx it is (the call's first or a
// retry), for the call's outcome or its next requests to the client (in,
// with the requestState of the round). The client going away abandons
// the call: it is cancelled, as a 2025 session's call is when its POST
// ends.
func (c *continuation) await(ctx context.Context) (res any, in *mcp.MultiRoundTripResult, err error) {
	for {
		select {
		case <-c.done:
			c.m.forget(c)
			return c.out.res, nil, c.out.err
		case <-c.wake:
			if in := c.inputRequired(); in != nil {
				return nil, in, nil
			}
		case <-ctx.Done():
			c.end(fmt.Sprintf("the client went away while %s %q ran", c.bind.method, c.bind.name))
			return nil, nil, ctx.Err()
		}
	}
}

// inputRequired makes the requests not yet sent the next round's, or
// returns nil when there are none or the bounds refuse the continuation
// (the requests then get the refusal).
func (c *continuation) inputRequired() *mcp.MultiRoundTripResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	reqs := mcp.InputRequests{}
	for _, a := range c.asks {
		if !a.sent {
			reqs[a.key] = a.req
		}
	}
	if len(reqs) == 0 || c.over {
		return nil
	}
	if !c.registered {
		if err := c.m.register(c); err != nil {
			keep := c.asks[:0]
			for _, a := range c.asks {
				if a.sent {
					keep = append(keep, a)
				} else {
					a.reply <- inputAnswer{err: err}
				}
			}
			clear(c.asks[len(keep):])
			c.asks = keep
			return nil
		}
		c.registered = true
	}
	for _, a := range c.asks {
		a.sent = true
	}
	c.round++
	c.awaiting = true
	round := c.round
	c.timer = time.AfterFunc(c.m.limits.wait, func() { c.expire(round) })
	return &mcp.MultiRoundTripResult{InputRequests: reqs, RequestState: c.m.state(c.principal, c.id, round)}
}

// expire ends the continuation if it still awaits the retry of round.
func (c *continuation) expire(round uint32) {
	c.mu.Lock()
	stale := !c.awaiting || c.round != round
	c.mu.Unlock()
	if !stale {
		c.end(fmt.Sprintf("the client did not answer within %s (no retry of %s %q with inputResponses and the requestState)", c.m.limits.wait, c.bind.method, c.bind.name))
	}
}

// end cancels the call and answers its waiting requests with why.
func (c *continuation) end(why string) {
	c.mu.Lock()
	c.over, c.awaiting = true, false
	asks := c.asks
	c.asks = nil
	if c.timer != nil {
		c.timer.Stop()
	}
	c.mu.Unlock()
	for _, a := range asks {
		a.reply <- inputAnswer{err: &RPCError{Code: mcp.INTERNAL_ERROR, Msg: fmt.Sprintf("%s: %s; the call was cancelled", a.req.Method, why)}}
	}
	c.m.forget(c)
	c.cancel()
}

// ask adds a request to the client and waits for its answer, the
// continuation's end or ctx's.
func (c *continuation) ask(ctx context.Context, req mcp.InputRequest) (json.RawMessage, error) {
	c.mu.Lock()
	if c.over {
		c.mu.Unlock()
		return nil, &RPCError{Code: mcp.INTERNAL_ERROR, Msg: fmt.Sprintf("%s: the call is over", req.Method)}
	}
	if len(c.asks) >= mrtrMaxAsks {
		c.mu.Unlock()
		return nil, &RPCError{Code: mcp.INTERNAL_ERROR, Msg: fmt.Sprintf("%s: the call has %d requests to its client unanswered, the most toolgate holds", req.Method, mrtrMaxAsks)}
	}
	c.n++
	a := &ask{key: askKey(req.Method, c.n), req: req, reply: make(chan inputAnswer, 1)}
	c.asks = append(c.asks, a)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	select {
	case ans := <-a.reply:
		return ans.res, ans.err
	case <-ctx.Done():
		select {
		case ans := <-a.reply: // ended: the answer says why, before the cancellation
			return ans.res, ans.err
		default:
		}
		c.drop(a)
		return nil, ctx.Err()
	}
}

// drop forgets a request whose asker gave up; its answer, if one comes,
// is not needed.
func (c *continuation) drop(a *ask) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, x := range c.asks {
		if x == a {
			c.asks = append(c.asks[:i], c.asks[i+1:]...)
			return
		}
	}
}

// askKey is the inputRequests key of the call's nth request.
func askKey(method mcp.MCPMethod, n int) string {
	name, _, _ := strings.Cut(string(method), "/")
	return name + "-" + strconv.Itoa(n)
}

// elicit asks the client's user through elicitation/create, as
// [Request.Elicit] does for a 2025 session.
func (c *continuation) elicit(ctx context.Context, message string, schema map[string]any) (string, map[string]any, error) {
	raw, err := c.ask(ctx, mcp.NewElicitationInputRequest(mcp.ElicitationParams{Message: message, RequestedSchema: schema}))
	if err != nil {
		return "", nil, err
	}
	return elicitationAnswer(raw)
}

// register counts c against the bounds, or says why not.
func (m *mrtr) register(c *continuation) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.closed:
		return &RPCError{Code: mcp.INTERNAL_ERROR, Msg: "toolgate is shutting down"}
	case len(m.waiting) >= m.limits.max:
		return &RPCError{Code: mcp.INTERNAL_ERROR, Msg: fmt.Sprintf(
			"toolgate already holds %d calls waiting for their clients' answers, the most it holds; the client was not asked", len(m.waiting))}
	case m.perPrincipal[c.principal] >= m.limits.maxPerPrincipal:
		return &RPCError{Code: mcp.INTERNAL_ERROR, Msg: fmt.Sprintf(
			"toolgate already holds %d calls of this client's principal waiting for its answers, the most it holds per principal; the client was not asked", m.perPrincipal[c.principal])}
	}
	m.waiting[c.id] = c
	m.perPrincipal[c.principal]++
	return nil
}

// forget uncounts c, if it is counted.
func (m *mrtr) forget(c *continuation) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.waiting[c.id] != c {
		return
	}
	delete(m.waiting, c.id)
	if m.perPrincipal[c.principal]--; m.perPrincipal[c.principal] <= 0 {
		delete(m.perPrincipal, c.principal)
	}
}

// close ends every continuation waiting for a retry, telling its
// requests why, then calls cancelRest (the front's root, whose end
// cancels the calls not waiting yet) and waits for every call to return.
func (m *mrtr) close(cancelRest func()) {
	m.mu.Lock()
	m.closed = true
	var cs []*continuation
	for _, c := range m.waiting {
		cs = append(cs, c)
	}
	m.mu.Unlock()
	for _, c := range cs {
		c.end("toolgate is shutting down")
	}
	cancelRest()
	m.calls.Wait()
}

// len returns how many continuations wait for a retry.
func (m *mrtr) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.waiting)
}

// state is the requestState of round of continuation id, for principal:
// statePrefix, the instance, a dot, and base64url of the ID, the round
// and their MAC.
func (m *mrtr) state(principalName string, id [stateIDLen]byte, round uint32) string {
	b := make([]byte, 0, stateIDLen+4+stateMACLen)
	b = append(b, id[:]...)
	b = binary.BigEndian.AppendUint32(b, round)
	b = append(b, m.mac(principalName, b)...)
	return statePrefix + m.instance + "." + base64.RawURLEncoding.EncodeToString(b)
}

// mac binds a state's ID and round to this front and principal.
func (m *mrtr) mac(principalName string, sealed []byte) []byte {
	h := hmac.New(sha256.New, m.key[:])
	h.Write([]byte(statePrefix + m.instance))
	h.Write([]byte{0})
	h.Write([]byte(principalName))
	h.Write([]byte{0})
	h.Write(sealed)
	return h.Sum(nil)[:stateMACLen]
}

// Refusals of a retry, answered with -32602 (400 over HTTP; -32603 where
// only mcp-go answers, over stdio).
const (
	stateUnknownMsg = "requestState is not one this toolgate issued to you: pass the requestState of the last input_required result unchanged, " +
		"or call the tool again without inputResponses and requestState"
	stateGoneMsg = "requestState names no call waiting for answers: it expired (toolgate waits %s for the retry, then cancels the call), " +
		"was answered already, or its call ended; call the tool again without inputResponses and requestState"
)

func stateRefused(format string, args ...any) error {
	return &RPCError{Code: mcp.INVALID_PARAMS, Msg: fmt.Sprintf(format, args...)}
}

// resume checks a retry of principal: its state, that it binds as the
// call it continues did, and that answers answer every request that went
// out. With commit it then hands the answers to the waiting requests and
// returns the continuation for the retry to await; without, it changes
// nothing (the HTTP front's check before mcp-go).
func (m *mrtr) resume(principalName string, bind binding, state string, answers map[string]json.RawMessage, commit bool) (*continuation, error) {
	if state == "" {
		return nil, stateRefused("inputResponses without a requestState: toolgate asked nothing with this request; pass the requestState of the input_required result the answers are for")
	}
	rest, ok := strings.CutPrefix(state, statePrefix)
	inst, sealed, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 {
		return nil, stateRefused(stateUnknownMsg)
	}
	if inst != m.instance {
		return nil, stateRefused("requestState was issued by another toolgate instance (before a restart, or by another replica), whose call is not here; call the tool again without inputResponses and requestState")
	}
	b, err := base64.RawURLEncoding.DecodeString(sealed)
	if err != nil || len(b) != stateIDLen+4+stateMACLen || !hmac.Equal(b[stateIDLen+4:], m.mac(principalName, b[:stateIDLen+4])) {
		return nil, stateRefused(stateUnknownMsg)
	}
	var id [stateIDLen]byte
	copy(id[:], b)
	round := binary.BigEndian.Uint32(b[stateIDLen:])
	m.mu.Lock()
	c := m.waiting[id]
	m.mu.Unlock()
	if c == nil {
		return nil, stateRefused(stateGoneMsg, m.limits.wait)
	}
	switch {
	case c.bind.method != bind.method || c.bind.name != bind.name:
		return nil, stateRefused("requestState continues %s %q, not %s %q: send the retry with the same method, name and arguments as the request it continues",
			c.bind.method, c.bind.name, bind.method, bind.name)
	case c.bind.args != bind.args:
		return nil, stateRefused("the arguments differ from those of the %s %q this requestState continues: send the retry with the same arguments", c.bind.method, c.bind.name)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.awaiting || c.round != round {
		return nil, stateRefused(stateGoneMsg, m.limits.wait)
	}
	for _, a := range c.asks {
		if _, ok := answers[a.key]; a.sent && !ok {
			return nil, stateRefused("inputResponses has no answer to %q (%s), which the input_required result asked: answer every inputRequest", a.key, a.req.Method)
		}
	}
	if !commit {
		return c, nil
	}
	c.awaiting = false
	c.timer.Stop()
	keep := c.asks[:0]
	for _, a := range c.asks {
		if a.sent {
			a.reply <- inputAnswer{res: answers[a.key]}
		} else {
			keep = append(keep, a)
		}
	}
	clear(c.asks[len(keep):])
	c.asks = keep
	return c, nil
}

// mayAsk reports whether caps declares anything a call could ask of the
// client.
func mayAsk(caps *mcp.ClientCapabilities) bool {
	return caps != nil && (caps.Sampling != nil || caps.Elicitation != nil || caps.Roots != nil)
}

// undeclared returns the -32601 error for a request of method to a client
// that did not declare its capability (caps), or nil when it did; an
// unknown method is refused alike.
func undeclared(caps *mcp.ClientCapabilities, method string) error {
	var capability string
	var declared bool
	switch method {
	case string(mcp.MethodSamplingCreateMessage):
		capability, declared = "sampling", caps != nil && caps.Sampling != nil
	case string(mcp.MethodElicitationCreate):
		capability, declared = "elicitation", caps != nil && caps.Elicitation != nil
	case string(mcp.MethodListRoots):
		capability, declared = "roots", caps != nil && caps.Roots != nil
	default:
		return &RPCError{Code: mcp.METHOD_NOT_FOUND, Msg: fmt.Sprintf("%s is not relayed to clients", method)}
	}
	if declared {
		return nil
	}
	return &RPCError{Code: mcp.METHOD_NOT_FOUND, Msg: fmt.Sprintf("%s: the client that made this call did not declare the %s capability", method, capability)}
}

// modernPeer is a 2026-07-28 client as a [Peer] during one of its
// requests: its requests go out as input_required results of c, its
// notifications as the embedded peer sends them.
type modernPeer struct {
	peer
	caps *mcp.ClientCapabilities
	c    *continuation // nil: the request cannot ask (no capability declared, or neither a tools/call nor a prompts/get)
	call uint64        // unique among the front's requests
}

// Session is an ID of the request alone: the client has no session, and
// no two of its requests (nor two clients') may pass for one client when
// an upstream's message is attributed (executors/mcpup's soloPeer).
func (p modernPeer) Session() string { return "2026-07-28 request " + strconv.FormatUint(p.call, 10) }

func (p modernPeer) Request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	if err := undeclared(p.caps, method); err != nil {
		return nil, err
	}
	if p.c == nil {
		return nil, &RPCError{Code: mcp.METHOD_NOT_FOUND, Msg: method + ": the client speaks protocol 2026-07-28, which toolgate asks only during a tools/call or prompts/get (as an input_required result)"}
	}
	env, err := json.Marshal(struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params,omitempty"`
	}{method, params})
	var req mcp.InputRequest
	if err == nil {
		err = req.UnmarshalJSON(env)
	}
	if err != nil {
		return nil, &RPCError{Code: mcp.INVALID_PARAMS, Msg: fmt.Sprintf("%s: reading the params: %v", method, err)}
	}
	return p.c.ask(ctx, req)
}

// modernCall runs a 2026-07-28 tools/call of x (p its params, r filled
// in but for Peer and Elicit): a retry resumes the continuation it names;
// a call whose client may be asked something runs as a continuation; any
// other runs here.
func (f *Front) modernCall(ctx context.Context, x *exchange, p *callParams, r *Request, call func(context.Context, *Request) *executors.Result) (*mcp.CallToolResult, error) {
	who := principal.NameOf(r.Identity)
	bind := func() binding { // only for a call that may wait: the common call hashes nothing
		return binding{method: string(mcp.MethodToolsCall), name: p.Name, args: argsSum(p.Arguments)}
	}
	if p.RequestState != "" || len(p.InputResponses) > 0 {
		c, err := f.mrtr.resumeWith(who, bind(), p.MultiRoundTripParams)
		if err != nil {
			return nil, err
		}
		return toolOutcome(c.await(ctx))
	}
	caps := x.info.ClientCapabilities
	mp := modernPeer{peer: peer{f: f, ctx: ctx}, caps: caps, call: f.mrtr.seq.Add(1)}
	r.Peer = mp
	run := func(ctx context.Context) (*mcp.CallToolResult, error) {
		out, err := f.run(ctx, call, r, p.Name)
		if err != nil {
			return nil, err
		}
		return wireResult(out), nil
	}
	if !mayAsk(caps) {
		return run(ctx)
	}
	c, ok := f.mrtr.start(ctx, f.root, who, bind(), func(ctx context.Context, c *continuation) outcome {
		asking := mp // mp stays as it is: the closure copies it
		asking.c = c
		r.Peer = asking
		if caps.Elicitation != nil {
			r.Elicit = c.elicit
		}
		res, err := run(ctx)
		return outcome{res: res, err: err}
	})
	if !ok {
		return run(ctx)
	}
	return toolOutcome(c.await(ctx))
}

// modernPrompt gets a 2026-07-28 prompts/get as modernCall runs a
// tools/call: get forwards it to the prompt's source with the peer the
// source's requests to the client go to.
func (f *Front) modernPrompt(ctx context.Context, info *server.RequestProtocolInfo, req mcp.GetPromptRequest, get func(context.Context, Peer) (*mcp.GetPromptResult, error)) (*mcp.GetPromptResult, error) {
	who := principal.NameOf(f.identity(ctx))
	bind := binding{method: string(mcp.MethodPromptsGet), name: req.Params.Name, args: argsSum(mustJSON(req.Params.Arguments))}
	if req.Params.RequestState != "" || len(req.Params.InputResponses) > 0 {
		c, err := f.mrtr.resumeWith(who, bind, req.Params.MultiRoundTripParams)
		if err != nil {
			return nil, err
		}
		return promptOutcome(c.await(ctx))
	}
	p := modernPeer{peer: peer{f: f, ctx: ctx}, caps: info.ClientCapabilities, call: f.mrtr.seq.Add(1)}
	if !mayAsk(info.ClientCapabilities) {
		return get(ctx, p)
	}
	c, ok := f.mrtr.start(ctx, f.root, who, bind, func(ctx context.Context, c *continuation) outcome {
		asking := p
		asking.c = c
		res, err := get(ctx, asking)
		return outcome{res: res, err: err}
	})
	if !ok {
		return get(ctx, p)
	}
	return promptOutcome(c.await(ctx))
}

// promptOutcome is await's answer as a prompts/get result.
func promptOutcome(res any, in *mcp.MultiRoundTripResult, err error) (*mcp.GetPromptResult, error) {
	switch {
	case err != nil:
		return nil, err
	case in != nil:
		return &mcp.GetPromptResult{Result: mcp.Result{ResultType: mcp.ResultTypeInputRequired}, MultiRoundTripResult: *in}, nil
	}
	out, _ := res.(*mcp.GetPromptResult)
	if out == nil {
		return nil, fmt.Errorf("the prompt gave no result")
	}
	return out, nil
}

// resumeWith is resume, committing, of a retry's multi-round-trip params.
func (m *mrtr) resumeWith(principalName string, bind binding, mp mcp.MultiRoundTripParams) (*continuation, error) {
	answers := make(map[string]json.RawMessage, len(mp.InputResponses))
	for k, v := range mp.InputResponses {
		b, err := json.Marshal(v) // the client's bytes (mcp.InputResponse keeps them)
		if err != nil {
			return nil, fmt.Errorf("reading inputResponses %q: %w", k, err)
		}
		answers[k] = b
	}
	return m.resume(principalName, bind, mp.RequestState, answers, true)
}

// toolOutcome is await's answer as a tools/call result.
func toolOutcome(res any, in *mcp.MultiRoundTripResult, err error) (*mcp.CallToolResult, error) {
	switch {
	case err != nil:
		return nil, err
	case in != nil:
		return &mcp.CallToolResult{Result: mcp.Result{ResultType: mcp.ResultTypeInputRequired}, MultiRoundTripResult: *in}, nil
	}
	out, _ := res.(*mcp.CallToolResult)
	if out == nil {
		return nil, fmt.Errorf("the call gave no result")
	}
	return out, nil
}

// retryRefused checks a 2026-07-28 prompts/get of x that carries
// inputResponses or a requestState before mcp-go's dispatcher serves it,
// and writes the refusal (-32602, 400) when resume would refuse it: its
// prompt handler's error would reach the client as -32603. It reports
// whether it wrote one. (A tools/call's retry is the front's: call.go.)
func (f *Front) retryRefused(w http.ResponseWriter, x *exchange, m *message) bool {
	if !bytes.Contains(m.params, []byte(`"requestState"`)) && !bytes.Contains(m.params, []byte(`"inputResponses"`)) {
		return false
	}
	var p struct {
		Name           string                     `json:"name"`
		Arguments      json.RawMessage            `json:"arguments"`
		InputResponses map[string]json.RawMessage `json:"inputResponses"`
		RequestState   string                     `json:"requestState"`
	}
	if json.Unmarshal(m.params, &p) != nil || (p.RequestState == "" && len(p.InputResponses) == 0) {
		return false // mcp-go answers what it cannot read
	}
	bind := binding{method: string(mcp.MethodPromptsGet), name: p.Name, args: argsSum(p.Arguments)}
	if _, err := f.mrtr.resume(principal.NameOf(x.ident), bind, p.RequestState, p.InputResponses, false); err != nil {
		writeJSON(w, http.StatusBadRequest, rpcError(m.id, mcp.INVALID_PARAMS, err.Error(), nil))
		return true
	}
	return false
}
