package mcpup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/internal/oauthclient"
	"github.com/toolgate/toolgate/internal/redact"
	"github.com/toolgate/toolgate/internal/telemetry"
	"github.com/toolgate/toolgate/retry"
)

// sseResponseTimeout replaces the SSE transport's own 60s cap on waiting
// for a response: the dispatcher's per-call deadline is the one that counts.
const sseResponseTimeout = 24 * time.Hour

// minSecretLen is the shortest header value treated as a secret: redacting
// "1" or "on" everywhere would garble messages and protect nothing.
const minSecretLen = 6

// upstream is one configured upstream: its settings, what its connections
// share, and its supervisor (for a thread-isolated upstream, its probe).
type upstream struct {
	m               *Manager
	cfg             Upstream
	thread          bool
	startupTimeout  time.Duration
	redactor        *strings.Replacer
	httpTransport   *http.Transport     // nil for stdio
	via             *httpVia            // the clients of its connections (a per-principal one's own: principal.go); nil for stdio
	limit           *limitTransport     // caps what the upstream sends; nil for stdio
	oauth           *oauthclient.Client // obtains and refreshes its token; nil without oauth
	perPrincipal    bool                // a connection per principal, each with its own token (principal.go)
	principalsMu    sync.Mutex
	principals      map[string]*principalConn // by principal name, with perPrincipal
	maxMessageBytes int64                     // the cap on one message from the upstream
	tag             string                    // marks the errors the line guard makes up (see tooLargeLine)
	lines           *lineLimiter              // stderr lines, across all its processes
	logs            *lineLimiter              // log notifications, limited apart so that chatty stderr cannot hide them
	runner          *runner

	renamesMu sync.Mutex
	renames   map[string]string // a tool's own name → its name in toolgate, for the tools renamed (tools.go)
}

func newUpstream(m *Manager, cfg Upstream) *upstream {
	cfg.Args = slices.Clone(cfg.Args)
	cfg.Env = maps.Clone(cfg.Env)
	cfg.Headers = maps.Clone(cfg.Headers)
	cfg.Include = slices.Clone(cfg.Include)
	cfg.Exclude = slices.Clone(cfg.Exclude)
	cfg.Secrets = slices.Clone(cfg.Secrets)
	if cfg.Prefix != nil {
		p := *cfg.Prefix
		cfg.Prefix = &p
	}
	u := &upstream{
		renames:         map[string]string{},
		m:               m,
		cfg:             cfg,
		thread:          cfg.Isolation == IsolationThread,
		startupTimeout:  cfg.StartupTimeout,
		maxMessageBytes: cfg.MaxMessageBytes,
		tag:             newTag(),
		redactor:        newRedactor(cfg),
		lines:           newLineLimiter(stderrLinesPerSecond),
		logs:            newLineLimiter(stderrLinesPerSecond),
	}
	if u.startupTimeout == 0 {
		u.startupTimeout = DefaultStartupTimeout
	}
	if u.maxMessageBytes == 0 {
		u.maxMessageBytes = DefaultMaxMessageBytes
	}
	if cfg.Transport != TransportStdio {
		u.httpTransport = newHTTPTransport(m.maxParallel)
		var base http.RoundTripper = u.httpTransport
		if cfg.OAuth != nil {
			base = u.newOAuth(*cfg.OAuth)
		}
		u.limit = &limitTransport{base: base, upstream: cfg.Name, max: u.maxMessageBytes}
		u.via = u.newVia(base)
	}
	if u.oauth != nil && u.oauth.PerPrincipal() {
		u.perPrincipal, u.principals = true, map[string]*principalConn{}
	}
	u.runner = &runner{
		name:    cfg.Name,
		logger:  m.logger,
		report:  true,
		probe:   u.thread || u.perPrincipal,
		dial:    u.dialShared,
		list:    u.importTools,
		catalog: u.listCatalog,
		state:   func(up bool) { u.reportState(up) },
		restart: func() { u.reportRestart() },
	}
	if m.onRelist != nil {
		u.runner.onRelist = func(listed bool) { m.onRelist(cfg.Name, listed) }
	}
	return u
}

// httpVia are the HTTP clients of an HTTP upstream's connection.
type httpVia struct {
	mcp  *http.Client // mcp-go's transports', through the upstream's limit
	call *http.Client // mcpup's own requests' (httpcall.go), straight on base
}

// newVia returns the clients of u's connections whose requests go through
// base (u's HTTP transport, or the OAuth transport on it).
func (u *upstream) newVia(base http.RoundTripper) *httpVia {
	return &httpVia{
		mcp:  &http.Client{Transport: &limitTransport{base: base, upstream: u.cfg.Name, max: u.maxMessageBytes}},
		call: &http.Client{Transport: base},
	}
}

// dialShared opens the upstream's shared connection (for thread-isolated
// and per-principal upstreams, the probe's, which lists the tools).
func (u *upstream) dialShared(lifetime context.Context) (*conn, error) {
	if u.perPrincipal {
		return u.dialLister(lifetime)
	}
	return u.dial(lifetime, lifetime, "")
}

// newRedactor returns the replacer that hides cfg's secrets in messages
// and logs, in every encoding toolgate gives them ([redact.NewReplacer]),
// and the Basic credentials net/http sends for a URL with userinfo; nil
// when there are none.
func newRedactor(cfg Upstream) *strings.Replacer {
	var secrets []string
	secrets = append(secrets, cfg.Secrets...)
	for _, v := range cfg.Headers {
		if len(v) >= minSecretLen {
			secrets = append(secrets, v)
		}
	}
	var basic []string
	if pu, err := url.Parse(cfg.URL); err == nil && cfg.URL != "" {
		if pw, ok := pu.User.Password(); ok {
			secrets = append(secrets, pw)
		}
		if pu.RawQuery != "" {
			secrets = append(secrets, pu.RawQuery)
		}
		basic = redact.BasicAuth(pu.User)
	}
	return redact.NewReplacer(secrets, basic...)
}

// redact hides the upstream's secrets in s.
func (u *upstream) redact(s string) string {
	if u.oauth != nil {
		s = u.oauth.Redact(s) // the tokens of the moment, which no static list holds
	}
	if u.redactor == nil {
		return s
	}
	return u.redactor.Replace(s)
}

// errorf returns a *retry.Error of class c whose message, formatted from
// format and args, has the upstream's secrets hidden. cause is kept for
// errors.Is but not shown.
func (u *upstream) errorf(c retry.Class, cause error, format string, args ...any) *retry.Error {
	return &retry.Error{Class: c, Msg: u.redact(fmt.Sprintf(format, args...)), Err: cause}
}

// wanted reports whether the upstream's filters import the tool orig.
func (u *upstream) wanted(orig string) bool {
	return u.cfg.filter().Match(orig)
}

// downError is the fail-fast error of a call while r has no connection.
//
// Its RetryAfter is when the upstream may be back (the next connection
// attempt, plus a margin), so that a retry of an idempotent call waits for
// the restart rather than failing again at once.
func (u *upstream) downError(r *runner) *retry.Error {
	var e *retry.Error
	if r.wasUp() {
		e = retry.Errorf(retry.Unavailable, "upstream %q is restarting; retry in a moment", u.cfg.Name)
	} else {
		e = retry.Errorf(retry.Unavailable, "upstream %q is not connected yet; retry in a moment", u.cfg.Name)
	}
	e.RetryAfter = r.reconnectIn()
	return e
}

func (u *upstream) reportState(up bool) {
	if up {
		u.m.logger.Info("upstream up", "upstream", u.cfg.Name)
	}
	if u.m.onState != nil {
		u.m.onState(u.cfg.Name, up)
	}
}

func (u *upstream) reportRestart() {
	if u.m.onRestart != nil {
		u.m.onRestart(u.cfg.Name)
	}
}

// dial opens one connection: it starts the process or opens the HTTP
// session, then initializes it, within the startup timeout and start's
// lifetime. The connection itself lives until it is closed or lifetime
// ends. thread is the label of the thread the connection serves ("" for a
// shared one).
func (u *upstream) dial(lifetime, start context.Context, thread string) (*conn, error) {
	return u.dialVia(lifetime, start, thread, u.via)
}

// dialVia is dial with the HTTP clients via (nil for stdio).
func (u *upstream) dialVia(lifetime, start context.Context, thread string, via *httpVia) (*conn, error) {
	ctx, cancel := context.WithTimeout(start, u.startupTimeout)
	defer cancel()
	c := newConn(lifetime, u, thread)
	// Until the connection is up, its lifetime is bounded by the startup
	// context too: the SSE transport waits for its endpoint on it.
	unbind := context.AfterFunc(ctx, c.stop)

	fail := func(err error) (*conn, error) {
		unbind()
		c.close()
		if na, ok := errors.AsType[*oauthclient.NeedsAuthError](err); ok {
			return nil, u.needsAuth(na, err)
		}
		reason := err.Error()
		if r := c.exitReason(); r != "" {
			reason += " (" + r + ")"
		}
		if ctx.Err() != nil && start.Err() == nil {
			reason = fmt.Sprintf("no answer within %v: %s", u.startupTimeout, reason)
		}
		return nil, u.errorf(retry.Unavailable, err, "starting upstream %q: %s", u.cfg.Name, reason)
	}

	var (
		tr  transport.Interface
		err error
	)
	switch u.cfg.Transport {
	case TransportStdio:
		p, err := startProcess(u, thread, c)
		if err != nil {
			return fail(err)
		}
		c.proc = p
		tr = newStdioTransport(p.stdout, p.stdin)
	case TransportStreamableHTTP:
		tr, err = transport.NewStreamableHTTP(u.cfg.URL,
			transport.WithHTTPHeaders(maps.Clone(u.cfg.Headers)),
			transport.WithHTTPBasicClient(via.mcp),
			transport.WithContinuousListening(),                     // the GET stream carries list_changed
			transport.WithHTTPLogger(slog.New(slog.DiscardHandler)), // its records may hold URLs
			transport.WithHTTPHeaderFunc(traceHeaders),
		)
	case TransportSSE:
		tr, err = transport.NewSSE(u.cfg.URL,
			transport.WithHeaders(maps.Clone(u.cfg.Headers)),
			transport.WithHTTPClient(via.mcp),
			transport.WithSSELogger(slog.New(slog.DiscardHandler)),
			transport.WithEndpointTimeout(u.startupTimeout),
			transport.WithResponseTimeout(sseResponseTimeout),
			transport.WithHeaderFunc(traceHeaders),
		)
	default: // New rejects other transports
		err = fmt.Errorf("unknown transport %q", u.cfg.Transport)
	}
	if err != nil {
		return fail(err)
	}
	c.tr = tr
	c.client = client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	c.client.OnNotification(c.onNotification)
	c.client.OnConnectionLost(func(err error) { c.markDead(fmt.Errorf("connection lost: %w", err)) })
	if err := c.client.Start(c.life); err != nil {
		return fail(err)
	}
	// Start installed the client's own handler of the upstream's requests;
	// toolgate's relays them, raw, to the client whose call they serve
	// (relay.go). The legacy SSE transport cannot carry them.
	b, bidi := tr.(transport.BidirectionalInterface)
	if bidi {
		b.SetRequestHandler(c.onRequest)
	}
	_, err = c.client.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ProtocolVersion: mcp.ProtocolVersion20251125,
		ClientInfo:      mcp.Implementation{Name: "toolgate", Version: "1"},
		Capabilities:    relayCapabilities(tr),
	}})
	if err != nil {
		return fail(err)
	}
	if u.cfg.Transport == TransportStreamableHTTP {
		// The session mcp-go's client negotiated, for mcpup's own requests
		// (httpcall.go), which answer the upstream's requests too from now
		// on. Before, the transport answers them itself: none waits for a
		// client while there is no call. Setting the handler publishes
		// c.http to the transport's goroutines that run it.
		c.http = u.newHTTPSession(c.client.GetSessionId(), c.client.ProtocolVersion())
		c.http.client = via.call
		b.SetRequestHandler(c.onTransportRequest)
	}
	if !unbind() {
		return fail(ctx.Err())
	}
	return c, nil
}

// relayCapabilities are the client capabilities toolgate declares to an
// upstream: sampling, elicitation and roots, which it relays to the
// calling client, when the transport can carry the upstream's requests.
func relayCapabilities(tr transport.Interface) mcp.ClientCapabilities {
	if _, ok := tr.(transport.BidirectionalInterface); !ok {
		return mcp.ClientCapabilities{}
	}
	return mcp.ClientCapabilities{
		Sampling:    &mcp.SamplingCapability{},
		Elicitation: &mcp.ElicitationCapability{},
		Roots: &struct {
			ListChanged bool `json:"listChanged,omitempty"`
		}{},
	}
}

// traceHeaders are the W3C trace-context headers of ctx's span, for the
// requests mcp-go's HTTP transports send (resources/read, prompts/get,
// completion/complete; over SSE, tools/call too): none without a trace.
// tools/call over streamable HTTP sets its own (httpSession.post).
func traceHeaders(ctx context.Context) map[string]string {
	parent, state := telemetry.Meta(ctx)
	if parent == "" {
		return nil
	}
	h := map[string]string{"traceparent": parent}
	if state != "" {
		h["tracestate"] = state
	}
	return h
}
