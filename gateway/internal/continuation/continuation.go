// Package continuation holds the calls of 2026-07-28 clients that wait for
// their client's answers (multi-round-trip requests, SEP-2322): each runs
// detached from the HTTP request that started it, as a [Continuation], and
// a retry names it by its requestState, sealed to the principal. The MCP
// front (gateway/internal/mcpfront) starts and resumes them; this package
// knows nothing of HTTP or sessions.
package continuation

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/gateway/internal/replica"
	"github.com/toolgate/toolgate/internal/mcppeer"
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
// [Continuation]: the request waits for the call's result or its first
// request to the client, whichever comes first. A result is the answer. A
// request makes the answer input_required, and the call stays pending,
// waiting for the retry; the retry's inputResponses answer the waiting
// requests, and the retry waits in its turn, for the result or the next
// requests.
//
// The requestState names the replica holding the call (an instance name
// drawn at start for a lone toolgate), the Continuation and the round, and
// is bound to both and to the principal by a MAC under the replica's key
// (package replica: drawn at start, or derived from the cluster secret, so
// any replica of the cluster can check it and see whose call it is):
// unguessable (a 128-bit random ID), unforgeable, and of no use to another
// principal. A
// retry must name the same tool and arguments. A Continuation waits
// [defaultWait] for its retry, then is cancelled (the upstream's waiting
// requests get an error, and its call is cancelled); at most
// [defaultMaxPerPrincipal] wait per principal and [defaultMax] in all, past
// which the upstream's request gets an error at once, as if the client
// had refused, and the call goes on.

const (
	// defaultWait is how long a Continuation waits for its retry.
	defaultWait = 60 * time.Second
	// defaultMaxPerPrincipal and defaultMax bound the continuations waiting for
	// a retry: per principal (everyone is one principal without
	// authentication) and in all.
	defaultMaxPerPrincipal = 64
	defaultMax             = 1024
	// maxAsks bounds the requests to the client one call has
	// unanswered at once.
	maxAsks = 16
	// statePrefix begins every requestState toolgate issues; the
	// instance name and the sealed part follow, dot-separated.
	statePrefix = "tg1."
	// stateIDLen and stateMACLen size the sealed part: the
	// Continuation's ID, the round (4 bytes) and the MAC.
	stateIDLen  = 16
	stateMACLen = 16
)

// Limits are the bounds of the continuations, fixed at creation
// (tests lower them).
type Limits struct {
	// Wait is how long a continuation waits for its retry.
	Wait time.Duration
	// MaxPerPrincipal and Max bound the continuations waiting for a
	// retry: per principal and in all.
	MaxPerPrincipal, Max int
}

// Registry holds a front's continuations. Build it with New; it is safe
// for concurrent use.
type Registry struct {
	keys     [][replica.KeyLen]byte // fixed at creation: the first seals, any opens
	instance string                 // fixed at creation: names this front (its replica) in every requestState
	Limits   Limits                 // fixed before the first call

	mu           sync.Mutex // guards waiting, perPrincipal and closed
	waiting      map[[stateIDLen]byte]*Continuation
	perPrincipal map[string]int
	closed       bool

	calls sync.WaitGroup // the detached calls' goroutines
}

// New returns an empty registry of replica self: its requestStates name
// self (a random instance name when self is alone) and are sealed with
// self's keys, so that every replica of its cluster can open them and
// tell which replica holds their call.
func New(self *replica.Self) *Registry {
	m := &Registry{
		Limits:       Limits{Wait: defaultWait, MaxPerPrincipal: defaultMaxPerPrincipal, Max: defaultMax},
		keys:         self.Keys("requestState"),
		instance:     self.ID,
		waiting:      map[[stateIDLen]byte]*Continuation{},
		perPrincipal: map[string]int{},
	}
	if m.instance == "" {
		var inst [8]byte
		_, _ = rand.Read(inst[:]) // crypto/rand.Read never fails (Go 1.24+)
		m.instance = hex.EncodeToString(inst[:])
	}
	return m
}

// Binding is what a Continuation continues: the method, the name and a
// hash of the arguments (canonjson.RawSum) of the request that started it. A retry
// must bind alike.
type Binding struct {
	Method, Name string
	Args         [32]byte
}

// Outcome is what a detached call returned.
type Outcome struct {
	Res any // *mcp.CallToolResult for tools/call
	Err error
}

// Continuation is one detached call of a 2026-07-28 client, from its
// start until its result has been answered, it expired or it was
// cancelled.
type Continuation struct {
	m         *Registry
	id        [stateIDLen]byte
	principal string
	bind      Binding
	cancel    context.CancelFunc // ends the call
	done      chan struct{}      // closed by the call's goroutine once out is set
	out       Outcome
	wake      chan struct{} // capacity 1: a request to the client was added

	mu         sync.Mutex // guards the fields below
	asks       []*ask     // the call's requests to the client not yet answered, oldest first
	n          int        // requests made, for their keys
	round      uint32     // of the last requestState issued
	awaiting   bool       // an input_required went out and its retry has not come
	registered bool       // in m.waiting (counted against the bounds)
	timer      *time.Timer
	over       bool // the call returned, expired or was abandoned: nothing more is asked
	// sealed is the answer of a call that asked a sealed question
	// (AskSealed): its outcome is not seen.
	sealed *mcp.MultiRoundTripResult
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
// until it returns, the Continuation expires or is abandoned, or root
// ends. ok is false when the front is closing: nothing was started.
func (m *Registry) Start(ctx, root context.Context, principalName string, bind Binding, run func(context.Context, *Continuation) Outcome) (c *Continuation, ok bool) {
	c = &Continuation{m: m, principal: principalName, bind: bind, done: make(chan struct{}), wake: make(chan struct{}, 1)}
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
func runRecovered(ctx context.Context, c *Continuation, run func(context.Context, *Continuation) Outcome) (out Outcome) {
	defer func() {
		if p := recover(); p != nil {
			out = Outcome{Err: fmt.Errorf("the call panicked: %v", p)}
		}
	}()
	return run(ctx, c)
}

// finish records the call's Outcome. A Continuation awaiting its retry
// stays registered for the retry to take the result (or to expire).
func (c *Continuation) finish(out Outcome) {
	c.out = out
	c.mu.Lock()
	c.over = true
	asks := c.asks
	c.asks = nil
	keep := c.awaiting
	c.mu.Unlock()
	for _, a := range asks { // none: the call waited for them
		a.reply <- inputAnswer{err: &mcppeer.RPCError{Code: mcp.INTERNAL_ERROR, Message: fmt.Sprintf("%s: the call is over", a.req.Method)}}
	}
	close(c.done)
	if !keep {
		c.m.forget(c)
	}
}

// await waits, for the request whose ctx it is (the call's first or a
// retry), for the call's Outcome or its next requests to the client (in,
// with the requestState of the round). The client going away abandons
// the call: it is cancelled, as a 2025 session's call is when its POST
// ends.
func (c *Continuation) Await(ctx context.Context) (res any, in *mcp.MultiRoundTripResult, err error) {
	for {
		select {
		case <-c.done:
			c.m.forget(c)
			if in := c.sealedOutcome(); in != nil {
				return nil, in, nil
			}
			return c.out.Res, nil, c.out.Err
		case <-c.wake:
			if in := c.sealedOutcome(); in != nil {
				return nil, in, nil
			}
			if in := c.inputRequired(); in != nil {
				return nil, in, nil
			}
		case <-ctx.Done():
			c.end(fmt.Sprintf("the client went away while %s %q ran", c.bind.Method, c.bind.Name))
			return nil, nil, ctx.Err()
		}
	}
}

// inputRequired makes the requests not yet sent the next round's, or
// returns nil when there are none or the bounds refuse the Continuation
// (the requests then get the refusal).
func (c *Continuation) inputRequired() *mcp.MultiRoundTripResult {
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
	c.timer = time.AfterFunc(c.m.Limits.Wait, func() { c.expire(round) })
	return &mcp.MultiRoundTripResult{InputRequests: reqs, RequestState: c.m.state(c.principal, c.id, round)}
}

// expire ends the Continuation if it still awaits the retry of round.
func (c *Continuation) expire(round uint32) {
	c.mu.Lock()
	stale := !c.awaiting || c.round != round
	c.mu.Unlock()
	if !stale {
		c.end(fmt.Sprintf("the client did not answer within %s (no retry of %s %q with inputResponses and the requestState)", c.m.Limits.Wait, c.bind.Method, c.bind.Name))
	}
}

// end cancels the call and answers its waiting requests with why.
func (c *Continuation) end(why string) {
	c.mu.Lock()
	c.over, c.awaiting = true, false
	asks := c.asks
	c.asks = nil
	if c.timer != nil {
		c.timer.Stop()
	}
	c.mu.Unlock()
	for _, a := range asks {
		a.reply <- inputAnswer{err: &mcppeer.RPCError{Code: mcp.INTERNAL_ERROR, Message: fmt.Sprintf("%s: %s; the call was cancelled", a.req.Method, why)}}
	}
	c.m.forget(c)
	c.cancel()
}

// ask adds a request to the client and waits for its answer, the
// Continuation's end or ctx's.
func (c *Continuation) Ask(ctx context.Context, req mcp.InputRequest) (json.RawMessage, error) {
	c.mu.Lock()
	if c.over {
		c.mu.Unlock()
		return nil, &mcppeer.RPCError{Code: mcp.INTERNAL_ERROR, Message: fmt.Sprintf("%s: the call is over", req.Method)}
	}
	if len(c.asks) >= maxAsks {
		c.mu.Unlock()
		return nil, &mcppeer.RPCError{Code: mcp.INTERNAL_ERROR, Message: fmt.Sprintf("%s: the call has %d requests to its client unanswered, the most toolgate holds", req.Method, maxAsks)}
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
func (c *Continuation) drop(a *ask) {
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

// register counts c against the bounds, or says why not.
func (m *Registry) register(c *Continuation) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.closed:
		return &mcppeer.RPCError{Code: mcp.INTERNAL_ERROR, Message: "toolgate is shutting down"}
	case len(m.waiting) >= m.Limits.Max:
		return &mcppeer.RPCError{Code: mcp.INTERNAL_ERROR, Message: fmt.Sprintf(
			"toolgate already holds %d calls waiting for their clients' answers, the most it holds; the client was not asked", len(m.waiting))}
	case m.perPrincipal[c.principal] >= m.Limits.MaxPerPrincipal:
		return &mcppeer.RPCError{Code: mcp.INTERNAL_ERROR, Message: fmt.Sprintf(
			"toolgate already holds %d calls of this client's principal waiting for its answers, the most it holds per principal; the client was not asked", m.perPrincipal[c.principal])}
	}
	m.waiting[c.id] = c
	m.perPrincipal[c.principal]++
	return nil
}

// forget uncounts c, if it is counted.
func (m *Registry) forget(c *Continuation) {
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

// close ends every Continuation waiting for a retry, telling its
// requests why, then calls cancelRest (the front's root, whose end
// cancels the calls not waiting yet) and waits for every call to return.
func (m *Registry) Close(cancelRest func()) {
	m.mu.Lock()
	m.closed = true
	var cs []*Continuation
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

// Instance is the name of this registry in every requestState it issues.
func (m *Registry) Instance() string { return m.instance }

// StatePrefix begins every requestState.
const StatePrefix = statePrefix

// Len returns how many continuations wait for a retry.
func (m *Registry) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.waiting)
}

// state is the requestState of round of Continuation id, for principal:
// statePrefix, the instance, a dot, and base64url of the ID, the round
// and their MAC.
func (m *Registry) state(principalName string, id [stateIDLen]byte, round uint32) string {
	b := make([]byte, 0, stateIDLen+4+stateMACLen)
	b = append(b, id[:]...)
	b = binary.BigEndian.AppendUint32(b, round)
	b = append(b, mac(m.keys[0], m.instance, principalName, b)...)
	return statePrefix + m.instance + "." + base64.RawURLEncoding.EncodeToString(b)
}

// mac binds a state's ID and round to the front (replica) that issued it
// and the principal, under key.
func mac(key [replica.KeyLen]byte, instance, principalName string, sealed []byte) []byte {
	h := hmac.New(sha256.New, key[:])
	h.Write([]byte(statePrefix + instance))
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

// stateElsewhereMsg refuses a requestState another instance issued: a
// toolgate before a restart, or a replica that is gone or that the
// request could not be forwarded to.
const stateElsewhereMsg = "requestState was issued by another toolgate instance (before a restart, or by another replica), whose call is not here; call the tool again without inputResponses and requestState"

// open checks that state is a requestState of principal that a replica of
// this cluster issued (sealed with one of m's keys), and returns that
// replica's instance name and the sealed ID and round.
func (m *Registry) open(principalName, state string) (instance string, sealed []byte, err error) {
	rest, ok := strings.CutPrefix(state, statePrefix)
	inst, enc, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 {
		return "", nil, stateRefused(stateUnknownMsg)
	}
	refused := stateRefused(stateUnknownMsg)
	if inst != m.instance {
		// Most likely this toolgate before a restart, or another cluster.
		refused = stateRefused(stateElsewhereMsg)
	}
	b, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil || len(b) != stateIDLen+4+stateMACLen {
		return "", nil, refused
	}
	for _, k := range m.keys {
		if hmac.Equal(b[stateIDLen+4:], mac(k, inst, principalName, b[:stateIDLen+4])) {
			return inst, b, nil
		}
	}
	return "", nil, refused
}

// Owner returns the instance (the replica, in a cluster) that holds the
// call a requestState of principal continues, after checking its seal;
// an error when state is not one a replica of this cluster issued to
// principal. The front forwards a retry to that replica.
func (m *Registry) Owner(principalName, state string) (string, error) {
	inst, _, err := m.open(principalName, state)
	return inst, err
}

func stateRefused(format string, args ...any) error {
	return &mcppeer.RPCError{Code: mcp.INVALID_PARAMS, Message: fmt.Sprintf(format, args...)}
}

// resume checks a retry of principal: its state, that it binds as the
// call it continues did, and that answers answer every request that went
// out. With commit it then hands the answers to the waiting requests and
// returns the Continuation for the retry to await; without, it changes
// nothing (the front's check of a prompts/get retry before mcp-go dispatches it).
func (m *Registry) Resume(principalName string, bind Binding, state string, answers map[string]json.RawMessage, commit bool) (*Continuation, error) {
	if state == "" {
		return nil, stateRefused("inputResponses without a requestState: toolgate asked nothing with this request; pass the requestState of the input_required result the answers are for")
	}
	inst, b, err := m.open(principalName, state)
	if err != nil {
		return nil, err
	}
	if inst != m.instance {
		return nil, stateRefused(stateElsewhereMsg)
	}
	var id [stateIDLen]byte
	copy(id[:], b)
	round := binary.BigEndian.Uint32(b[stateIDLen:])
	m.mu.Lock()
	c := m.waiting[id]
	m.mu.Unlock()
	if c == nil {
		return nil, stateRefused(stateGoneMsg, m.Limits.Wait)
	}
	switch {
	case c.bind.Method != bind.Method || c.bind.Name != bind.Name:
		return nil, stateRefused("requestState continues %s %q, not %s %q: send the retry with the same method, name and arguments as the request it continues",
			c.bind.Method, c.bind.Name, bind.Method, bind.Name)
	case c.bind.Args != bind.Args:
		return nil, stateRefused("the arguments differ from those of the %s %q this requestState continues: send the retry with the same arguments", c.bind.Method, c.bind.Name)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.awaiting || c.round != round {
		return nil, stateRefused(stateGoneMsg, m.Limits.Wait)
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

// ResumeWith is Resume, committing, of a retry's multi-round-trip params.
func (m *Registry) ResumeWith(principalName string, bind Binding, mp mcp.MultiRoundTripParams) (*Continuation, error) {
	answers := make(map[string]json.RawMessage, len(mp.InputResponses))
	for k, v := range mp.InputResponses {
		b, err := json.Marshal(v) // the client's bytes (mcp.InputResponse keeps them)
		if err != nil {
			return nil, fmt.Errorf("reading inputResponses %q: %w", k, err)
		}
		answers[k] = b
	}
	return m.Resume(principalName, bind, mp.RequestState, answers, true)
}
