package rest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/internal/httpheader"
	"github.com/toolgate/toolgate/internal/telemetry"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

// maxRedirects is how many redirects one attempt follows.
const maxRedirects = 5

// Options configure an [Executor]. The zero value works; nil hooks are not
// called.
type Options struct {
	// Logger receives one Debug line per retry, with the URL redacted (no
	// query, no userinfo, secrets replaced) and the keys tool, attempt,
	// class, url and duration (the wait). Nil discards.
	Logger *slog.Logger
	// Transport makes the HTTP requests of every tool. Nil means one
	// *http.Transport tuned for many hosts and calls: 512 idle
	// connections, 256 per host, kept 90s, HTTP/2 when the server offers
	// it, 10s to dial and 10s for the TLS handshake, proxies from the
	// environment. Tests pass an in-memory RoundTripper.
	Transport http.RoundTripper
	// OnResponse, when not nil, is called once per HTTP attempt that got
	// a response, with the tool's name and the status code (the gateway
	// counts toolgate_http_requests_total{tool,code}).
	OnResponse func(tool string, code int)
	// OnRetry, when not nil, is called once per retry, with the tool's
	// name and the class of the failure retried (the gateway counts
	// toolgate_retries_total{tool,error_class}).
	OnRetry func(tool string, class retry.Class)
	// Rand returns values in [0, 1) for backoff jitter; it must be safe
	// for concurrent use. Nil means math/rand/v2's Float64. Tests fix it.
	Rand func() float64
}

// Executor compiles REST tools and runs their calls: each call is one HTTP
// request (retried as its [executors.Call.Retry] allows) whose response
// becomes the result. All its tools share one http.Client and its
// connection pool. An Executor is safe for concurrent use; its owner calls
// [Executor.Close]. It keeps no list of tools: [Executor.Add] hands back
// the executor of each.
type Executor struct {
	client     *http.Client // shared by every tool and call
	closeIdle  func()       // the transport's CloseIdleConnections, or nil
	logger     *slog.Logger
	onResponse func(string, int)
	onRetry    func(string, retry.Class)
	rand       func() float64
}

// New returns an executor with no tools. opts may be nil.
func New(opts *Options) *Executor {
	var o Options
	if opts != nil {
		o = *opts
	}
	e := &Executor{
		logger:     o.Logger,
		onResponse: o.OnResponse,
		onRetry:    o.OnRetry,
		rand:       o.Rand,
	}
	if e.logger == nil {
		e.logger = slog.New(slog.DiscardHandler)
	}
	if e.rand == nil {
		e.rand = rand.Float64
	}
	rt := o.Transport
	if rt == nil {
		rt = newTransport()
	}
	if ci, ok := rt.(interface{ CloseIdleConnections() }); ok {
		e.closeIdle = ci.CloseIdleConnections
	}
	// go-retryablehttp calls HTTPClient.CloseIdleConnections after every
	// call that fails; on the shared client that would empty the pool of
	// every tool. Hiding the method leaves that to Close.
	e.client = &http.Client{Transport: poolKeeper{rt}, CheckRedirect: checkRedirect}
	return e
}

func newTransport() *http.Transport {
	return &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   10 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          512,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// poolKeeper is a RoundTripper without CloseIdleConnections. Each request
// of a traced call is a client span, its trace context sent in headers.
type poolKeeper struct{ rt http.RoundTripper }

func (p poolKeeper) RoundTrip(r *http.Request) (*http.Response, error) {
	return telemetry.RoundTrip(p.rt, r)
}

// Add validates and compiles s, and returns the registry definition of its
// tool (kind REST, the given or derived input schema, and annotations:
// read-only for GET and HEAD, idempotent as the spec says, open world) and
// the executor of its calls, which makes its requests through e. The
// caller registers both; dropping the executor forgets the tool. An
// invalid spec gets an error listing every problem, each with what to
// write instead.
func (e *Executor) Add(s Spec) (registry.Tool, executors.Executor, error) {
	t, def, err := compile(s)
	if err != nil {
		return registry.Tool{}, nil, err
	}
	return def, &toolExecutor{e: e, t: t}, nil
}

// Close closes the idle connections of the shared transport. Calls in
// flight finish; later calls open new connections. Close may be called
// more than once.
func (e *Executor) Close() {
	if e.closeIdle != nil {
		e.closeIdle()
	}
}

// toolExecutor runs the calls of one compiled tool.
type toolExecutor struct {
	e *Executor
	t *tool
}

var _ executors.SelfRetrying = (*toolExecutor)(nil)

// Execute makes call's HTTP request and maps the response to a result. It
// retries as call.Retry says ([retry.Plan.Decide] makes every decision;
// the zero Plan retries nothing): go-retryablehttp runs the loop, its
// CheckRetry asks Decide, its Backoff waits what Decide chose and its
// PrepareRetry admits each retry through the backend's breaker. A result
// that took more than one attempt carries [executors.AttemptsMetaKey].
// ctx carries the call's deadline: no retry starts past it, and
// cancelling ctx aborts the request in flight. Every failure is a
// *retry.Error whose message names the method, the URL without its query,
// and the attempts.
func (x *toolExecutor) Execute(ctx context.Context, call executors.Call) (executors.Result, error) {
	e, t := x.e, x.t
	req, err := t.request(ctx, call.Args)
	if err != nil {
		return executors.Result{}, err
	}
	plan := call.Retry
	if plan.Subject == "" && plan.Tool == "" {
		plan.Subject = t.subject
	}
	if plan.Rand == nil {
		plan.Rand = e.rand
	}
	permit, err := plan.Backend.Admit(1)
	if err != nil {
		return executors.Result{}, err // its breaker is open
	}
	c := &callState{e: e, t: t, u: req.URL, plan: plan, permit: permit, onAttempt: call.OnAttempt}
	// Every admitted attempt is recorded by checkRetry, unless something
	// panics first (a hook, the transport) or go-retryablehttp gives up
	// between PrepareRetry and the attempt: releasing the permit then
	// keeps a probe from holding the breaker half-open for good. After
	// Record, Release does nothing.
	defer c.permit.Release()
	c.rc = retryablehttp.Client{
		HTTPClient: e.client,
		Logger:     nil, // its messages hold whole URLs, query strings included
		// CheckRetry alone decides (through Decide); RetryMax must not end
		// the loop after it has granted a retry.
		RetryMax:       math.MaxInt,
		CheckRetry:     c.checkRetry,
		Backoff:        c.backoff,
		ErrorHandler:   passthrough,
		RequestLogHook: c.onRequest,
		PrepareRetry:   c.prepareRetry,
	}
	resp, err := c.rc.Do(req)
	if resp != nil {
		resp.Body.Close() // checkRetry has read what it keeps
	}
	if err != nil {
		return executors.Result{}, c.failure(ctx, err)
	}
	if c.status < 200 || c.status > 299 {
		return executors.Result{}, retry.Annotate(c.statusError(), c.reason)
	}
	return c.result(), nil
}

// RetriesItself reports true: go-retryablehttp runs the retry loop, asking
// [executors.Call.Retry] for every decision (see [executors.SelfRetrying]).
func (x *toolExecutor) RetriesItself() bool { return true }

// passthrough is the ErrorHandler: it keeps go-retryablehttp from
// building its "giving up" error, which holds the whole URL.
func passthrough(resp *http.Response, err error, _ int) (*http.Response, error) {
	return resp, err
}

// hostsKey is the context key of the hostSet a request's redirects may
// reach; the shared client's CheckRedirect reads it.
type hostsKey struct{}

// checkRedirect allows a redirect to an allowed host, without a downgrade
// from https to http, and at most maxRedirects of them.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > maxRedirects {
		return &redirectError{tooMany: true}
	}
	hosts, _ := req.Context().Value(hostsKey{}).(hostSet)
	switch {
	case req.URL.Scheme != "http" && req.URL.Scheme != "https":
		return &redirectError{host: req.URL.Host, why: fmt.Sprintf("its scheme %q is not http or https", req.URL.Scheme)}
	case via[len(via)-1].URL.Scheme == "https" && req.URL.Scheme == "http":
		return &redirectError{host: req.URL.Host, why: "it downgrades https to http"}
	case !hosts.allows(req.URL):
		return &redirectError{host: req.URL.Host, why: "the host is not in the tool's allowed_hosts"}
	}
	return nil
}

// redirectError is a redirect the executor refused to follow.
type redirectError struct {
	host    string
	why     string
	tooMany bool
}

func (e *redirectError) Error() string {
	if e.tooMany {
		return fmt.Sprintf("stopped after %d redirects", maxRedirects)
	}
	return fmt.Sprintf("refused a redirect to %s: %s", e.host, e.why)
}

// request builds the request of one call. Argument problems are
// validation errors; the call is not made.
func (t *tool) request(ctx context.Context, args map[string]any) (*retryablehttp.Request, error) {
	invalid := func(err error) error {
		return &retry.Error{Class: retry.Validation, Msg: t.redact(err.Error())}
	}
	var pquery, cookies []string
	var pheader http.Header
	if len(t.params) > 0 {
		var err error
		if args, pquery, pheader, cookies, err = t.applyParams(args); err != nil {
			return nil, invalid(err)
		}
	}
	rawURL, err := t.url.expand(args)
	if err != nil {
		return nil, invalid(err)
	}
	if len(pquery) > 0 {
		sep := "?"
		if strings.Contains(rawURL, "?") {
			sep = "&"
		}
		rawURL += sep + strings.Join(pquery, "&")
	}
	header := make(http.Header, len(t.headers)+3)
	for _, h := range t.headers {
		v, _, ok := h.value.expand(args, nil)
		if !ok {
			continue // an optional header whose argument is absent
		}
		if !httpheader.ValidValue(v) {
			return nil, invalid(&controlCharError{header: h.name})
		}
		header[h.name] = []string{v}
	}
	var body any // nil: no body
	if t.body != nil {
		if v, ok := t.body.expand(args); ok {
			b, err := marshalJSON(v)
			if err != nil {
				return nil, invalid(fmt.Errorf("encoding the request body: %v", err))
			}
			body = b
			if t.jsonCT {
				header.Set("Content-Type", "application/json")
			}
		}
	}
	for k, vs := range pheader {
		header[k] = vs
	}
	if len(cookies) > 0 {
		if c := header.Get("Cookie"); c != "" {
			cookies = append([]string{c}, cookies...)
		}
		header.Set("Cookie", strings.Join(cookies, "; "))
	}
	if t.payload != nil {
		b, ct, ok, err := encodePayload(t.payload, args)
		if err != nil {
			return nil, invalid(err)
		}
		if ok {
			body = b
			header.Set("Content-Type", ct)
		}
	}
	if header.Get("User-Agent") == "" {
		header["User-Agent"] = defaultUserAgent
	}
	if header.Get("Accept") == "" {
		header["Accept"] = defaultAccept
	}
	req, err := retryablehttp.NewRequestWithContext(context.WithValue(ctx, hostsKey{}, t.hosts), t.method, rawURL, body)
	if err != nil {
		// The URL was checked by Add and arguments are escaped.
		return nil, retry.Errorf(retry.Internal, "building the %s request of tool %q: %v", t.method, t.name, t.redact(stripURLErr(err).Error()))
	}
	req.Header = header
	return req, nil
}

// The default User-Agent and Accept values, shared by every request: nothing
// writes into a header's value slice (net/http clones a header before it
// changes one), and an append to one of these copies it (capacity 1).
var (
	defaultUserAgent = []string{"toolgate"}[:1:1]
	defaultAccept    = []string{"application/json, */*;q=0.8"}[:1:1]
)

// callState follows one call through go-retryablehttp's loop. Its hooks
// run one at a time on the calling goroutine. It decides nothing itself:
// it turns each attempt's outcome into the error [retry.Plan.Decide]
// judges, and keeps what the hooks after CheckRetry and the final error
// need.
type callState struct {
	e  *Executor
	t  *tool
	u  *url.URL
	rc retryablehttp.Client // the call's loop, its hooks bound to this callState (one allocation for both)

	onAttempt func(n int) // the call's OnAttempt, or nil

	plan    retry.Plan    // the call's, with its Subject and Rand filled in
	permit  retry.Permit  // the admission of the attempt in progress
	attempt int           // the attempt in progress, from 1
	wait    time.Duration // Decide's wait before the next retry
	reason  string        // Decide's reason for not retrying, for the error
	last    error         // the last attempt's failure (attemptError), for Decide and OnRetry
	lastErr error         // the last attempt's transport error, or its success body's read error; else nil
	refused error         // the breaker's refusal of a retry (PrepareRetry's error)

	// The last response, filled in by capture: the final one, or the
	// last one retried, for a retry the breaker refuses.
	status    int
	header    http.Header
	body      []byte // at most the cap
	truncated bool   // the body had more than body
	size      int64  // the body's true size when truncated
	sizeKnown bool   // size is exact, not a lower bound
}

// onRequest runs before each attempt: i counts from 0.
func (c *callState) onRequest(_ retryablehttp.Logger, _ *http.Request, i int) {
	c.attempt = i + 1
	if c.onAttempt != nil {
		c.onAttempt(c.attempt)
	}
}

// checkRetry is go-retryablehttp's CheckRetry, called once per attempt
// (the request has no response handler, which would make the loop call
// it a second time on the attempt it does not retry). It records the
// attempt's outcome with the breaker, reads the response's body (which
// go-retryablehttp drains before a retry, and Execute closes otherwise),
// and asks [retry.Plan.Decide] once. A success whose body cannot be read
// is judged as that network error (the breaker has had the response's
// outcome), and when it is not retried, the read error ends the loop; an
// error response whose excerpt cannot be read is judged by its status.
func (c *callState) checkRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if resp != nil && c.e.onResponse != nil {
		c.e.onResponse(c.t.name, resp.StatusCode)
	}
	c.last = c.attemptError(ctx, resp, err)
	c.permit.Record(c.last)
	c.lastErr = err
	var bodyErr error
	if err == nil {
		if rerr := c.capture(resp); rerr != nil && c.last == nil {
			bodyErr = rerr
			c.last, c.lastErr = c.attemptError(ctx, nil, rerr), rerr
		}
	}
	var ok bool
	c.wait, ok, c.reason = c.plan.Decide(ctx, c.attempt, c.last)
	if retry.GaveUp(c.reason) {
		c.reason = "" // the error says "after N attempts" itself
	}
	if !ok && bodyErr != nil {
		return false, bodyErr
	}
	return ok, nil
}

// attemptError is one attempt's outcome as the breaker and
// [retry.Plan.Decide] see it: nil for a 2xx response, else a *retry.Error
// of the status's or the transport error's class, with the response's
// Retry-After. A transport error while ctx is done is ctx's doing, not
// the backend's: class timeout when the call's deadline passed (the
// backend was too slow, as [callState.failure] says too), cancelled when
// the caller gave up, which the breaker does not count. A failure another
// attempt cannot fix is marked [retry.Permanent] (see [permanent]), so
// that Decide does not retry it.
func (c *callState) attemptError(ctx context.Context, resp *http.Response, err error) error {
	if err == nil && resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return nil
	}
	what := c.t.method + " " + c.t.displayURL(c.u)
	if err != nil {
		class := transportClass(err)
		switch ctxErr := ctx.Err(); {
		case errors.Is(ctxErr, context.DeadlineExceeded):
			class = retry.Timeout
		case ctxErr != nil:
			class = retry.Cancelled
		}
		e := &retry.Error{Class: class, Msg: c.t.redact(fmt.Sprintf("%s failed: %v", what, stripURLErr(err))), Err: err}
		if permanent(0, err) {
			return retry.Permanent(e)
		}
		return e
	}
	e := &retry.Error{Class: statusClass(resp.StatusCode), Msg: fmt.Sprintf("%s returned %d %s", what, resp.StatusCode, http.StatusText(resp.StatusCode)), Status: resp.StatusCode}
	if h := resp.Header.Get("Retry-After"); h != "" {
		e.RetryAfter, _ = retry.ParseRetryAfter(h, time.Now())
	}
	if permanent(resp.StatusCode, nil) {
		return retry.Permanent(e)
	}
	return e
}

// permanent reports whether an attempt that got status code (0 for none)
// or the transport error err cannot succeed when repeated, whatever the
// retry policy's classes: every status but 408, 425, 429, 500, 502, 503
// and 504; a refused redirect; a certificate problem. Other transport
// errors (resets, refused connections, timeouts) may pass.
func permanent(code int, err error) bool {
	if err != nil {
		_, refused := errors.AsType[*redirectError](err)
		return refused || isCertError(err)
	}
	switch code {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests,
		http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return false
	}
	return true
}

// prepareRetry is go-retryablehttp's PrepareRetry, called after the wait
// and before the retry: the backend's breaker must admit it. Only an
// admitted retry is one: OnRetry hears of it and it is logged.
func (c *callState) prepareRetry(*http.Request) error {
	permit, err := c.plan.Backend.Admit(c.attempt + 1)
	if err != nil {
		c.refused = err
		return err
	}
	c.permit = permit
	class := retry.Classify(c.last)
	if c.e.onRetry != nil {
		c.e.onRetry(c.t.name, class)
	}
	c.e.logger.Debug("retrying request", "tool", c.t.name, "attempt", c.attempt, "class", string(class),
		"url", c.t.displayURL(c.u), "duration", c.wait)
	return nil
}

// backoff is go-retryablehttp's Backoff: the wait Decide chose.
func (c *callState) backoff(_, _ time.Duration, _ int, _ *http.Response) time.Duration {
	return c.wait
}

// failure turns the error of go-retryablehttp's loop into a *retry.Error.
func (c *callState) failure(ctx context.Context, err error) error {
	what := c.t.method + " " + c.t.displayURL(c.u)
	var class retry.Class
	var msg string
	switch ctxErr := ctx.Err(); {
	case errors.Is(ctxErr, context.DeadlineExceeded):
		class, msg = retry.Timeout, fmt.Sprintf("%s did not finish before the call's deadline (%s)", what, c.attempts())
	case ctxErr != nil:
		class, msg = retry.Cancelled, fmt.Sprintf("%s was cancelled (%s)", what, c.attempts())
		if cc := context.Cause(ctx); cc != nil && !errors.Is(cc, context.Canceled) {
			msg += ": " + cc.Error()
		}
	case c.refused != nil && errors.Is(err, c.refused):
		// The breaker refused the retry: the failure is the last
		// attempt's, reported as any failure that was not retried.
		why := "not retried: " + c.refused.Error()
		if c.lastErr == nil {
			return retry.Annotate(c.statusError(), why)
		}
		return c.transportFailure(c.lastErr, why)
	default:
		return c.transportFailure(err, c.reason)
	}
	return &retry.Error{Class: class, Msg: c.t.redact(msg), Err: stripURLErr(err)}
}

// transportFailure is the error of a call whose last attempt failed with
// the transport error err: "<METHOD> <URL> failed after N attempts:
// <cause>", annotated with reason, why it was not retried (may be empty).
func (c *callState) transportFailure(err error, reason string) error {
	cause := stripURLErr(err)
	if re, ok := errors.AsType[*redirectError](err); ok {
		cause = re
	}
	msg := fmt.Sprintf("%s %s failed %s: %v", c.t.method, c.t.displayURL(c.u), c.attempts(), cause)
	return retry.Annotate(&retry.Error{Class: transportClass(err), Msg: c.t.redact(msg), Err: cause}, reason)
}

// transportClass classifies an error of the transport (not of ctx).
func transportClass(err error) retry.Class {
	if re, ok := errors.AsType[*redirectError](err); ok {
		if re.tooMany {
			return retry.Execution
		}
		return retry.Permission
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return retry.Timeout
	}
	// Resets, refused connections, DNS failures, truncated responses and
	// TLS failures alike: the backend could not be reached properly.
	return retry.Network
}

// attempts returns "after N attempt(s)".
func (c *callState) attempts() string {
	if c.attempt == 1 {
		return "after 1 attempt"
	}
	return fmt.Sprintf("after %d attempts", c.attempt)
}

// capture keeps resp's status and header, and at most the tool's cap of a
// success body (measuring the rest), or an excerpt of an error body. It
// leaves the body open.
func (c *callState) capture(resp *http.Response) error {
	c.status, c.header = resp.StatusCode, resp.Header
	c.body, c.truncated, c.size, c.sizeKnown = nil, false, 0, false
	limit := int64(excerptBytes)
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		limit = c.t.maxBytes
	}
	hint := resp.ContentLength
	if resp.Request != nil && resp.Request.Method == http.MethodHead {
		hint = 0 // the length of the body a GET would get
	}
	body, err := ReadCapped(resp.Body, limit, hint)
	if err != nil {
		return err
	}
	c.body = body
	if int64(len(body)) < limit {
		return nil
	}
	var one [1]byte
	if n, _ := io.ReadFull(resp.Body, one[:]); n == 0 {
		return nil
	}
	c.truncated = true
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil // an excerpt needs no size
	}
	if resp.ContentLength > limit {
		c.size, c.sizeKnown = resp.ContentLength, true
		return nil
	}
	rest, err := io.Copy(io.Discard, resp.Body)
	c.size, c.sizeKnown = limit+1+rest, err == nil
	return nil
}
