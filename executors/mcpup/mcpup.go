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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/internal/httpheader"
	"github.com/toolgate/toolgate/internal/mcppeer"
	"github.com/toolgate/toolgate/internal/oauthclient"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
	"github.com/toolgate/toolgate/threadctx"
)

// The transports an [Upstream] can use.
const (
	TransportStdio          = "stdio"
	TransportSSE            = "sse"
	TransportStreamableHTTP = "streamable-http"
)

// The isolation modes of an [Upstream].
const (
	IsolationShared = "shared" // one connection for every thread (the default)
	IsolationThread = "thread" // one connection (one process) per thread
)

// DefaultStartupTimeout bounds connecting to an upstream and initializing
// it when [Upstream.StartupTimeout] is zero.
const DefaultStartupTimeout = 20 * time.Second

// Separator joins an upstream's name and a tool's name: fs__read_file.
const Separator = "__"

// MaxPrefixLen is the longest [Upstream.Prefix]: the longest name with
// its separator.
const MaxPrefixLen = registry.MaxPrefixLen + len(Separator)

// InstanceDirVar is the environment variable that names a stdio
// upstream process's private directory, and InstanceDirRef how Args and
// Env values refer to it: a marker framed by NUL bytes, which no process
// argument or environment value can otherwise hold.
const (
	InstanceDirVar = "TOOLGATE_INSTANCE_DIR"
	InstanceDirRef = "\x00" + InstanceDirVar + "\x00"
)

// ErrInvalidUpstream is wrapped by every error [New] returns for a
// malformed [Upstream].
var ErrInvalidUpstream = errors.New("invalid upstream")

// Upstream describes one upstream MCP server. gateway builds it from the
// configuration; mcpup never reads configuration itself.
type Upstream struct {
	// Name prefixes the upstream's tools: they appear as Name__<tool>. It
	// must be a valid tool name without "__". Required and unique.
	Name string
	// Prefix, when not nil, replaces Name+"__" before the upstream's tool
	// and prompt names: "" serves them under their own names, "fs_" as
	// fs_<tool>. A non-empty one is 1 to [MaxPrefixLen] characters from
	// A-Z a-z 0-9 _ . -.
	Prefix *string
	// Transport is "stdio", "sse" or "streamable-http". Required.
	Transport string

	// Command is the program a stdio upstream runs (required for stdio).
	// It is started directly, not through a shell, in its own process
	// group, with Args as its arguments, Cwd as its working directory
	// (empty: the gateway's), and an environment of its own: from the
	// gateway's, only HOME, LANG, LOGNAME, PATH, SHELL, TERM, TMPDIR and
	// USER (those the official MCP SDKs pass, plus LANG and TMPDIR), or
	// all of it when InheritEnv is set; then Env, which wins over both.
	// Each process also gets [InstanceDirVar]: a private directory of its
	// own, removed once the process has ended; [InstanceDirRef] in Args
	// and Env values is replaced with that directory's path.
	Command    string
	Args       []string
	Env        map[string]string
	Cwd        string
	InheritEnv bool

	// URL is the endpoint of an sse or streamable-http upstream (required
	// for those): the SSE stream or the MCP endpoint. Headers are sent
	// with every request. Neither is ever logged.
	URL     string
	Headers map[string]string

	// Isolation is "shared" (empty means shared) or "thread": one
	// connection, and for stdio one process, per thread, started on the
	// thread's first call and closed when the thread ends. Thread
	// isolation needs [Options.Pool].
	Isolation string
	// Include and Exclude are path.Match globs over the upstream's own
	// tool names. A tool is imported when it matches some Include pattern
	// (or Include is empty) and no Exclude pattern.
	Include, Exclude []string
	// Timeout bounds one call; it becomes [registry.Tool.Timeout]. Zero
	// means the dispatcher's default.
	Timeout time.Duration
	// StartupTimeout bounds connecting and initializing. Zero means
	// [DefaultStartupTimeout].
	StartupTimeout time.Duration
	// MaxMessageBytes caps one message from the upstream (stdio: a line;
	// HTTP: a response body, or an event of an event stream). A response
	// over it fails its call with class execution, and the upstream keeps
	// running; memory stays bounded by it, as the rest of such a message
	// is read and discarded, never kept. Zero means
	// [DefaultMaxMessageBytes]; else at least [MinMaxMessageBytes].
	MaxMessageBytes int64
	// Idempotent, when not nil, says whether the upstream's tools are
	// idempotent (safe to retry). Nil means: per tool, from its
	// annotations (idempotentHint or readOnlyHint set to true).
	Idempotent *bool
	// Secrets are values that must never appear in results, errors or
	// logs: mcpup replaces them, raw, query- or path-escaped or in base64,
	// with "[redacted]" in every message it builds and in the stderr lines
	// it logs. Header values and the URL's query and password are treated
	// as secrets too, and so is the base64 of the URL's user:password (the
	// Basic credentials net/http sends).
	Secrets []string
	// OAuth, when not nil, makes mcpup an OAuth 2.1 client of an sse or
	// streamable-http upstream: its requests carry the token
	// [oauthclient.Client] obtains and refreshes. Upstream, ServerURL and
	// Base are set by mcpup (the upstream's name, URL and HTTP transport).
	OAuth *oauthclient.Config
}

// Options configures a [Manager]. The zero value works for upstreams that
// are not thread-isolated, and [New] accepts a nil *Options.
type Options struct {
	// Logger receives lifecycle records (Info), degraded states (Warn), the
	// upstreams' log notifications (at their mapped level) and the stderr
	// lines of stdio upstreams (Info, "upstream stderr", at most 20 lines a
	// second per upstream; a later "upstream stderr lines dropped" record
	// counts the rest). Nil means discard.
	Logger *slog.Logger
	// Pool holds the per-thread connections of thread-isolated upstreams.
	// Required when any upstream has isolation "thread"; the caller owns
	// it and closes it.
	Pool *threadctx.Pool
	// OnTools, when not nil, is called after every listing of an
	// upstream's tools (on connect and on notifications/tools/list_changed)
	// with the full, filtered, prefixed set, Kind [registry.MCP] and Source
	// "upstream:<name>". Each tool comes with its executor, bound to the
	// upstream and the tool's original name: it runs the tool's calls for
	// as long as the Manager is open, across reconnections (see
	// [Manager]). An error OnTools returns is logged. It is called from the
	// upstream's supervisor goroutine, never concurrently for one upstream.
	OnTools func(upstream string, tools []executors.Bound) error
	// OnState, when not nil, is called when an upstream comes up or goes
	// down (and once when its first connection attempt fails). For a
	// thread-isolated upstream, up means its tools have been listed.
	OnState func(upstream string, up bool)
	// OnRestart, when not nil, is called before every connection attempt
	// of an upstream but its first: reconnections after a loss, retries
	// after a failure, and restarts of thread-isolated instances.
	OnRestart func(upstream string)
	// OnCatalog, when not nil, is called after every listing of a shared
	// upstream's resources, templates and prompts (on connect and on their
	// list_changed) with all of them. It is called from the upstream's
	// supervisor goroutine, never concurrently for one upstream.
	OnCatalog func(upstream string, c *Catalog)
	// OnNotify, when not nil, is told of the notifications an upstream
	// sends that a client should get: notifications/resources/updated
	// (to nil: every client subscribed to the URI) and notifications/
	// message, its logger naming the upstream, to the client of the call
	// that caused it or, for a message no call caused, to nil (every
	// client). A message sent while calls of several clients were in
	// flight on a connection that cannot tell them apart is only logged.
	// It runs on the connection's read goroutine and must not block.
	OnNotify func(upstream, method string, params map[string]any, to mcppeer.Peer)
	// OnRelist, when not nil, is told of each notifications/tools/
	// list_changed, resources/list_changed and prompts/list_changed a
	// shared upstream sends: listed is true for one that makes toolgate
	// list again, false for one folded into a listing already pending.
	// Listings are paced: at most one every 2 s per kind, longer after
	// an expensive one. It must not block.
	OnRelist func(upstream string, listed bool)
	// MaxParallel is how many tool calls may run at once (the gateway's
	// max_parallel): each HTTP upstream keeps as many idle connections,
	// and a few more, so that as many calls at once reuse theirs rather
	// than dial. Zero means [DefaultMaxParallel].
	MaxParallel int
}

// DefaultMaxParallel is [Options.MaxParallel] when it is zero.
const DefaultMaxParallel = 64

// Manager connects to a fixed set of upstream MCP servers; the executors it
// hands out through [Options.OnTools] run the calls of their tools. It is
// safe for concurrent use. Its creator must call [Manager.Close], which
// ends every connection and reaps every process.
type Manager struct {
	// Fixed at creation.
	logger    *slog.Logger
	pool      *threadctx.Pool
	onTools   func(string, []executors.Bound) error
	onState   func(string, bool)
	onRestart func(string)
	onCatalog func(string, *Catalog)
	onNotify  func(string, string, map[string]any, mcppeer.Peer)
	onRelist  func(string, bool)
	ups       []*upstream
	ctx       context.Context // root of every goroutine m owns; cancelled by Close
	cancel    context.CancelFunc
	wg        sync.WaitGroup // the supervisors started by Start
	startOnce sync.Once
	closeOnce sync.Once
	seq       atomic.Uint64 // request IDs and progress tokens

	maxParallel int // Options.MaxParallel, defaulted; also fixed at creation

	// mu guards closed and threads. It is never held across I/O or a
	// callback.
	mu      sync.Mutex
	closed  bool
	threads map[*threadInstance]struct{} // live thread-isolated instances
	procs   map[*process]struct{}        // stdio processes from start until shutdown has killed their group
	killed  bool                         // Kill was called: a process started later is killed at once
}

// New validates ups and returns a Manager for them; it starts nothing (see
// [Manager.Start]). Every problem is reported at once, each wrapping
// [ErrInvalidUpstream]. opts may be nil.
func New(ups []Upstream, opts *Options) (*Manager, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxParallel <= 0 {
		o.MaxParallel = DefaultMaxParallel
	}
	var errs []error
	seen := make(map[string]bool)
	for i, up := range ups {
		if up.Name != "" && seen[up.Name] {
			errs = append(errs, fmt.Errorf("upstream %q: %w: the name is used twice; give every upstream its own name", up.Name, ErrInvalidUpstream))
		}
		seen[up.Name] = true
		label := fmt.Sprintf("upstream %q", up.Name)
		if up.Name == "" {
			label = fmt.Sprintf("upstream #%d", i+1)
		}
		if err := up.Validate(); err != nil {
			problems := []error{err}
			if j, ok := err.(interface{ Unwrap() []error }); ok {
				problems = j.Unwrap()
			}
			for _, e := range problems {
				errs = append(errs, fmt.Errorf("%s: %w: %w", label, ErrInvalidUpstream, e))
			}
		}
		if up.Isolation == IsolationThread && o.Pool == nil {
			errs = append(errs, fmt.Errorf("%s: %w: isolation thread needs a thread pool (Options.Pool)", label, ErrInvalidUpstream))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	// Close cancels this context; it is the root of every goroutine the
	// manager owns, not of any request.
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{
		logger:    o.Logger,
		pool:      o.Pool,
		onTools:   o.OnTools,
		onState:   o.OnState,
		onRestart: o.OnRestart,
		onCatalog: o.OnCatalog,
		onNotify:  o.OnNotify,
		onRelist:  o.OnRelist,
		ctx:       ctx,
		cancel:    cancel,
		threads:   make(map[*threadInstance]struct{}),

		maxParallel: o.MaxParallel,
	}
	for _, cfg := range ups {
		m.ups = append(m.ups, newUpstream(m, cfg))
	}
	return m, nil
}

// Validate reports every problem with u's settings, each a
// *[registry.FieldError] whose Field is the configuration key ("name",
// "url", "headers.X-Key", "env.PATH", "include[0]") and whose Msg never
// shows the value, joined with [errors.Join]; nil when u is valid. [New]
// runs it for every upstream (and also checks that thread isolation has a
// pool).
func (u Upstream) Validate() error {
	var errs []error
	bad := func(field, value, msg string) {
		errs = append(errs, &registry.FieldError{Field: field, Value: value, Msg: msg})
	}
	if u.Name == "" {
		bad("name", "", "is required; name the upstream, like fs (its tools are named fs__<tool>)")
	} else if err := registry.ValidatePrefix(u.Name); err != nil {
		errs = append(errs, err)
	}
	if u.Prefix != nil && *u.Prefix != "" {
		p := *u.Prefix
		if len(p) > MaxPrefixLen || registry.ValidateName(p) != nil {
			bad("prefix", p, fmt.Sprintf("must be empty or 1 to %d characters from A-Z a-z 0-9 _ . -, like fs_; leave it out for <name>__", MaxPrefixLen))
		}
	}
	stdioOnly := []struct {
		key string
		set bool
	}{{"command", u.Command != ""}, {"args", len(u.Args) > 0}, {"env", len(u.Env) > 0}, {"cwd", u.Cwd != ""}, {"inherit_env", u.InheritEnv}}
	httpOnly := []struct {
		key string
		set bool
	}{{"url", u.URL != ""}, {"headers", len(u.Headers) > 0}, {"oauth", u.OAuth != nil}}
	switch u.Transport {
	case TransportStdio:
		if u.Command == "" {
			bad("command", "", "is required for transport: stdio; write the program to start, like npx")
		}
		for _, f := range httpOnly {
			if f.set {
				bad(f.key, "", "is only for transport: sse or streamable-http; remove it, or change the transport")
			}
		}
		errs = append(errs, u.processProblems()...)
	case TransportSSE, TransportStreamableHTTP:
		if u.URL == "" {
			bad("url", "", fmt.Sprintf("is required for transport: %s; write the server's endpoint, like http://127.0.0.1:9000/mcp", u.Transport))
		} else if msg := urlProblem(u.URL); msg != "" {
			bad("url", u.URL, msg)
		}
		for _, f := range stdioOnly {
			if f.set {
				bad(f.key, "", "is only for transport: stdio; remove it, or change the transport")
			}
		}
		errs = append(errs, headerProblems(u.Headers)...)
	case "":
		bad("transport", "", "is required; write one of stdio, sse, streamable-http")
	default:
		bad("transport", u.Transport, "must be one of stdio, sse, streamable-http")
	}
	switch u.Isolation {
	case "", IsolationShared, IsolationThread:
	default:
		bad("isolation", u.Isolation, "must be one of shared, thread")
	}
	if err := u.filter().Validate(); err != nil {
		errs = append(errs, err)
	}
	if u.Timeout < 0 {
		bad("timeout", "", "must be positive, like 60s; leave it out to use the default")
	}
	if u.StartupTimeout < 0 {
		bad("startup_timeout", "", "must be positive, like 20s; leave it out for 20s")
	}
	if u.MaxMessageBytes != 0 && u.MaxMessageBytes < MinMaxMessageBytes {
		bad("max_message_bytes", strconv.FormatInt(u.MaxMessageBytes, 10), "must be at least 1024 (1 KiB), like 16777216; leave it out for 16 MiB")
	}
	return errors.Join(errs...)
}

// NamePrefix is what u's tool and prompt names are prefixed with:
// [Upstream.Prefix], or Name+"__" when it is nil.
func (u Upstream) NamePrefix() string {
	if u.Prefix != nil {
		return *u.Prefix
	}
	return u.Name + Separator
}

// filter is u's include/exclude filter over its own tool names.
func (u Upstream) filter() registry.Filter {
	return registry.Filter{Include: u.Include, Exclude: u.Exclude}
}

// processProblems checks what starts a stdio server: strings the
// operating system cannot pass to a process (NUL, other than framing
// [InstanceDirRef]) and environment names it cannot set. Values are never
// shown: they may be credentials.
func (u Upstream) processProblems() []error {
	var errs []error
	nul := func(field string) {
		errs = append(errs, &registry.FieldError{Field: field, Msg: "must not contain NUL"})
	}
	if strings.ContainsRune(u.Command, 0) {
		nul("command")
	}
	for i, a := range u.Args {
		if hasNUL(a) {
			nul(fmt.Sprintf("args[%d]", i))
		}
	}
	if strings.ContainsRune(u.Cwd, 0) {
		nul("cwd")
	}
	for _, name := range slices.Sorted(maps.Keys(u.Env)) {
		field := registry.FieldPath("env", name)
		switch {
		case name == "" || strings.ContainsAny(name, "=\x00"):
			errs = append(errs, &registry.FieldError{Field: field, Key: true, Value: name,
				Msg: "an environment variable name must not be empty or contain = or NUL, like NODE_ENV"})
		case hasNUL(u.Env[name]):
			nul(field)
		}
	}
	return errs
}

// hasNUL reports whether s, an args or env value, holds a NUL byte other
// than those framing [InstanceDirRef].
func hasNUL(s string) bool {
	return strings.ContainsRune(strings.ReplaceAll(s, InstanceDirRef, ""), 0)
}

// headerProblems checks the headers sent to an HTTP upstream by
// [httpheader.Check]'s rule, each problem a *[registry.FieldError] for
// field "headers.<name>" (a name given twice has a
// *[httpheader.DuplicateError] as its Err). Values are never shown.
func headerProblems(h map[string]string) []error {
	var errs []error
	for _, p := range httpheader.Check(h) {
		errs = append(errs, &registry.FieldError{Field: registry.FieldPath("headers", p.Name), Key: p.Key, Value: p.Value, Msg: p.Msg, Err: p.Err})
	}
	return errs
}

// urlProblem says what is wrong with an sse or streamable-http endpoint,
// without quoting it, or "".
func urlProblem(raw string) string {
	u, err := url.Parse(raw)
	switch {
	case err != nil || (!strings.EqualFold(u.Scheme, "http") && !strings.EqualFold(u.Scheme, "https")) || u.Opaque != "":
		return "must be an absolute http or https URL, like http://127.0.0.1:9000/mcp"
	case u.Hostname() == "":
		return "must name a host, like http://127.0.0.1:9000/mcp"
	case strings.HasSuffix(u.Host, ":"):
		return "the port must be a number from 0 to 65535"
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return "must not have a #fragment (it is never sent); remove it"
	}
	if p := u.Port(); p != "" {
		if _, err := strconv.ParseUint(p, 10, 16); err != nil {
			return "the port must be a number from 0 to 65535"
		}
	}
	return ""
}

// Start connects to every upstream in the background and returns at once.
// Shared upstreams get a supervisor each that keeps them connected; a
// thread-isolated upstream gets a probe instance that lists its tools and
// is then closed (its per-thread instances start on first use). Failures
// are logged, reported through [Options.OnState] and retried with backoff
// from 500ms doubling up to 30s. Calling Start again does nothing.
func (m *Manager) Start() {
	m.startOnce.Do(func() {
		m.mu.Lock()
		closed := m.closed
		m.mu.Unlock()
		if closed {
			return
		}
		for _, u := range m.ups {
			m.wg.Go(func() { u.runner.run(m.ctx, nil) })
		}
	})
}

// upstreamTool is the executor of one upstream tool: it runs each call on
// the upstream's current connection (for a thread-isolated upstream, the
// calling thread's own), under the upstream's own name for the tool.
type upstreamTool struct {
	u    *upstream
	orig string // the upstream's own name for the tool
}

var _ executors.Executor = (*upstreamTool)(nil)

// bind returns the executor of u's tool orig.
func (u *upstream) bind(orig string) executors.Executor { return &upstreamTool{u: u, orig: orig} }

// Execute calls the tool on its upstream. The arguments are forwarded as
// the client sent them (absent or null become {}); when call.Progress is
// set, the upstream's progress notifications are routed to it; when ctx
// ends, the upstream is sent notifications/cancelled. The upstream's
// result is returned unchanged in [executors.Result.Passthrough].
//
// Failures are *retry.Error: not_found for a tool the upstream no longer
// knows, validation for arguments the upstream rejected, execution for
// other JSON-RPC errors, unavailable while the upstream is down or
// restarting (at once, without waiting) or the Manager is closed, network
// for transport failures, and cancelled or timeout when ctx ends.
func (x *upstreamTool) Execute(ctx context.Context, call executors.Call) (executors.Result, error) {
	u, m := x.u, x.u.m
	if err := ctx.Err(); err != nil {
		return executors.Result{}, ctxError(u.cfg.Name, x.orig, err)
	}
	if m.isClosed() {
		return executors.Result{}, retry.Errorf(retry.Unavailable, "upstream %q is shut down", u.cfg.Name)
	}
	switch {
	case u.thread:
		return m.executeInThread(ctx, u, x.orig, call)
	case u.perPrincipal:
		return m.executeAsPrincipal(ctx, u, x.orig, call)
	}
	c := u.runner.current()
	if c == nil {
		return executors.Result{}, u.downError(u.runner)
	}
	return c.call(ctx, x.orig, call)
}

// Status reports, per upstream name, whether the upstream is up: connected
// for shared upstreams, tools listed for thread-isolated ones. The map is
// the caller's.
func (m *Manager) Status() map[string]bool {
	st := make(map[string]bool, len(m.ups))
	for _, u := range m.ups {
		st[u.cfg.Name] = u.runner.isUp()
	}
	return st
}

// Close stops every supervisor, closes every connection, including the
// thread-isolated instances still in the pool, and reaps every child
// process (stdin closed, then SIGTERM after 2s, then SIGKILL after 2s
// more, to the whole process group). Later calls fail with class
// unavailable. Close is safe to call more than once; it returns nil.
func (m *Manager) Close() error {
	m.closeOnce.Do(func() {
		m.mu.Lock()
		m.closed = true
		threads := slices.Collect(maps.Keys(m.threads))
		m.mu.Unlock()

		m.cancel()
		var wg sync.WaitGroup
		for _, t := range threads {
			wg.Go(func() { _ = t.Close() })
		}
		m.wg.Wait()
		wg.Wait()
		for _, u := range m.ups {
			if u.perPrincipal {
				u.closePrincipals()
			}
			if u.httpTransport != nil {
				u.httpTransport.CloseIdleConnections()
			}
		}
	})
	return nil
}

// Kill sends SIGKILL to the process group of every stdio upstream
// process m has started and not yet shut down, and returns how many it
// signalled; it does not wait for them to exit. It is for a program about
// to exit without closing m (a second signal during shutdown), and to cut
// short a [Manager.Close] that waits for processes to exit: each process
// runs in a process group of its own, which a terminal's Ctrl-C does not
// reach, so one that ignores its stdin closing and SIGTERM would outlive
// the program, or hold Close for its whole grace. A process m starts
// after Kill (a restart of one it killed) is killed as it starts.
func (m *Manager) Kill() int {
	m.mu.Lock()
	m.killed = true
	procs := slices.Collect(maps.Keys(m.procs))
	m.mu.Unlock()
	for _, p := range procs {
		// A group's number is not reused while any member lives, so
		// after the leader's exit this reaches what is left of it. A
		// group emptied before shutdown (the leader exited and nothing
		// was left) keeps its entry until then; its number comes round
		// again only after the whole PID space has.
		p.signal(syscall.SIGKILL)
	}
	return len(procs)
}

func (m *Manager) addProcess(p *process) {
	m.mu.Lock()
	if m.procs == nil {
		m.procs = make(map[*process]struct{})
	}
	m.procs[p] = struct{}{}
	killed := m.killed
	m.mu.Unlock()
	if killed {
		p.signal(syscall.SIGKILL)
	}
}

func (m *Manager) removeProcess(p *process) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.procs, p)
}

func (m *Manager) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

// nextID returns a fresh number for request IDs and progress tokens.
func (m *Manager) nextID() uint64 { return m.seq.Add(1) }

// newHTTPTransport returns the transport one HTTP upstream uses for all
// its connections, for calls that may run parallel at once:
//
//   - HTTP/1.1 only, also over TLS, so that each request in flight has a
//     connection of its own: a stalled or long event stream (a call's,
//     the session's GET stream) holds up no other request. HTTP/2 would
//     put all of them on one connection, behind one write lock and one
//     flow-control window, and closing a body there can block (mcp-go's
//     transport cancels first for that reason).
//   - Keep-alive, with as many idle connections kept as calls may run at
//     once, plus one for the GET stream and a few for answers and
//     notifications, so that a burst of calls reuses them rather than
//     dialling (and leaving sockets in TIME_WAIT).
func newHTTPTransport(parallel int) *http.Transport {
	var t *http.Transport
	if dt, ok := http.DefaultTransport.(*http.Transport); ok {
		t = dt.Clone()
	} else {
		t = &http.Transport{Proxy: http.ProxyFromEnvironment}
	}
	t.ForceAttemptHTTP2 = false
	t.Protocols = new(http.Protocols)
	t.Protocols.SetHTTP1(true)
	t.MaxIdleConnsPerHost = parallel + 4
	t.MaxIdleConns = t.MaxIdleConnsPerHost
	t.IdleConnTimeout = 90 * time.Second
	return t
}
