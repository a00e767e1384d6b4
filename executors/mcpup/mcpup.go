package mcpup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/executors"
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
	// Transport is "stdio", "sse" or "streamable-http". Required.
	Transport string

	// Command is the program a stdio upstream runs (required for stdio).
	// It is started directly, not through a shell, in its own process
	// group, with Args as its arguments, the gateway's environment plus
	// Env, and Cwd as its working directory (empty: the gateway's).
	// Each process also gets [InstanceDirVar]: a private directory of its
	// own, removed once the process has ended; [InstanceDirRef] in Args
	// and Env values is replaced with that directory's path.
	Command string
	Args    []string
	Env     map[string]string
	Cwd     string

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
	// Idempotent, when not nil, says whether the upstream's tools are
	// idempotent (safe to retry). Nil means: per tool, from its
	// annotations (idempotentHint or readOnlyHint set to true).
	Idempotent *bool
	// Secrets are values that must never appear in results, errors or
	// logs: mcpup replaces them with "[redacted]" in every message it
	// builds. Header values and the URL's query and password are treated
	// as secrets too.
	Secrets []string
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
	// "upstream:<name>". An error it returns is logged. It is called from
	// the upstream's supervisor goroutine, never concurrently for one
	// upstream.
	OnTools func(upstream string, tools []registry.Tool) error
	// OnState, when not nil, is called when an upstream comes up or goes
	// down (and once when its first connection attempt fails). For a
	// thread-isolated upstream, up means its tools have been listed.
	OnState func(upstream string, up bool)
	// OnRestart, when not nil, is called before every connection attempt
	// of an upstream but its first: reconnections after a loss, retries
	// after a failure, and restarts of thread-isolated instances.
	OnRestart func(upstream string)
}

// Manager connects to a fixed set of upstream MCP servers and runs calls of
// their tools. It is safe for concurrent use. Its creator must call
// [Manager.Close], which ends every connection and reaps every process.
type Manager struct {
	// Fixed at creation.
	logger    *slog.Logger
	pool      *threadctx.Pool
	onTools   func(string, []registry.Tool) error
	onState   func(string, bool)
	onRestart func(string)
	ups       []*upstream
	byName    map[string]*upstream
	ctx       context.Context // root of every goroutine m owns; cancelled by Close
	cancel    context.CancelFunc
	wg        sync.WaitGroup // the supervisors started by Start
	startOnce sync.Once
	closeOnce sync.Once
	seq       atomic.Uint64 // request IDs and progress tokens

	// mu guards closed, tools and threads. It is never held across I/O or
	// a callback.
	mu      sync.Mutex
	closed  bool
	tools   map[string]toolRef           // prefixed name → upstream tool, from the last listings
	threads map[*threadInstance]struct{} // live thread-isolated instances
}

var _ executors.Executor = (*Manager)(nil)

// toolRef is where a prefixed tool name leads.
type toolRef struct {
	u    *upstream
	orig string // the upstream's own name for the tool
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
	var errs []error
	seen := make(map[string]bool)
	for i, up := range ups {
		if up.Name != "" && seen[up.Name] {
			errs = append(errs, fmt.Errorf("upstream %q: %w: the name is used twice; give every upstream its own name", up.Name, ErrInvalidUpstream))
		}
		seen[up.Name] = true
		for _, err := range validate(up, o.Pool != nil) {
			label := fmt.Sprintf("upstream %q", up.Name)
			if up.Name == "" {
				label = fmt.Sprintf("upstream #%d", i+1)
			}
			errs = append(errs, fmt.Errorf("%s: %w: %s", label, ErrInvalidUpstream, err))
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
		byName:    make(map[string]*upstream, len(ups)),
		ctx:       ctx,
		cancel:    cancel,
		tools:     make(map[string]toolRef),
		threads:   make(map[*threadInstance]struct{}),
	}
	for _, cfg := range ups {
		u := newUpstream(m, cfg)
		m.ups = append(m.ups, u)
		m.byName[u.cfg.Name] = u
	}
	return m, nil
}

// validate returns what is wrong with up, as phrases for [New].
func validate(up Upstream, havePool bool) []string {
	var errs []string
	switch {
	case up.Name == "":
		errs = append(errs, "the name is empty; name the upstream (its tools appear as <name>__<tool>)")
	case strings.Contains(up.Name, Separator):
		errs = append(errs, fmt.Sprintf("the name contains %q, which separates it from tool names; use a name without it", Separator))
	case registry.ValidateName(up.Name) != nil:
		errs = append(errs, "the name is not a valid tool name prefix; use 1 to 60 characters from A-Z a-z 0-9 _ . -")
	}
	switch up.Transport {
	case TransportStdio:
		if up.Command == "" {
			errs = append(errs, "transport stdio needs a command")
		}
	case TransportSSE, TransportStreamableHTTP:
		if up.URL == "" {
			errs = append(errs, fmt.Sprintf("transport %s needs a url", up.Transport))
			break
		}
		u, err := url.Parse(up.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, "the url is not an absolute http:// or https:// URL")
		}
	default:
		errs = append(errs, fmt.Sprintf("unknown transport %q; use stdio, sse or streamable-http", up.Transport))
	}
	switch up.Isolation {
	case "", IsolationShared:
	case IsolationThread:
		if !havePool {
			errs = append(errs, "isolation thread needs a thread pool (Options.Pool)")
		}
	default:
		errs = append(errs, fmt.Sprintf("unknown isolation %q; use shared or thread", up.Isolation))
	}
	for _, p := range append(append([]string(nil), up.Include...), up.Exclude...) {
		if _, err := path.Match(p, ""); err != nil {
			errs = append(errs, fmt.Sprintf("tool pattern %q is not a valid glob", p))
		}
	}
	if up.Timeout < 0 {
		errs = append(errs, "the timeout is negative")
	}
	if up.StartupTimeout < 0 {
		errs = append(errs, "the startup timeout is negative")
	}
	return errs
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

// Execute calls the upstream tool call.Tool names. The arguments are
// forwarded as the client sent them (absent or null become {}); when
// call.Progress is set, the upstream's progress notifications are routed
// to it; when ctx ends, the upstream is sent notifications/cancelled. The
// upstream's result is returned unchanged in [executors.Result.Passthrough].
//
// Failures are *retry.Error: not_found for a tool no upstream serves (or
// the upstream does not know), validation for arguments the upstream
// rejected, execution for other JSON-RPC errors, unavailable while the
// upstream is down or restarting (at once, without waiting), network for
// transport failures, and cancelled or timeout when ctx ends.
func (m *Manager) Execute(ctx context.Context, call executors.Call) (executors.Result, error) {
	if call.Tool == nil {
		return executors.Result{}, retry.Errorf(retry.Internal, "calling upstream tool: the call names no tool")
	}
	u, orig, ok := m.resolve(call.Tool.Name)
	if !ok {
		return executors.Result{}, retry.Errorf(retry.NotFound, "no upstream serves tool %q", call.Tool.Name)
	}
	if err := ctx.Err(); err != nil {
		return executors.Result{}, ctxError(u.cfg.Name, orig, err)
	}
	if m.isClosed() {
		return executors.Result{}, retry.Errorf(retry.Unavailable, "upstream %q is shut down", u.cfg.Name)
	}
	if u.thread {
		return m.executeInThread(ctx, u, orig, call)
	}
	c := u.runner.current()
	if c == nil {
		return executors.Result{}, u.downError(u.runner)
	}
	return c.call(ctx, orig, call)
}

// resolve finds the upstream and original name of a prefixed tool name:
// from the last listings, or else by its prefix (a tool an upstream added
// since, or one a thread's own instance serves), subject to the
// upstream's filters.
func (m *Manager) resolve(name string) (*upstream, string, bool) {
	m.mu.Lock()
	ref, ok := m.tools[name]
	m.mu.Unlock()
	if ok {
		return ref.u, ref.orig, true
	}
	prefix, orig, ok := strings.Cut(name, Separator)
	if !ok || orig == "" {
		return nil, "", false
	}
	u, ok := m.byName[prefix]
	if !ok || !u.wanted(orig) {
		return nil, "", false
	}
	return u, orig, true
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
		threads := make([]*threadInstance, 0, len(m.threads))
		for t := range m.threads {
			threads = append(threads, t)
		}
		m.mu.Unlock()

		m.cancel()
		var wg sync.WaitGroup
		for _, t := range threads {
			wg.Go(func() { _ = t.Close() })
		}
		m.wg.Wait()
		wg.Wait()
		for _, u := range m.ups {
			if u.httpTransport != nil {
				u.httpTransport.CloseIdleConnections()
			}
		}
	})
	return nil
}

func (m *Manager) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

// setTools records the tools of u's latest listing for [Manager.resolve].
func (m *Manager) setTools(u *upstream, names map[string]string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, ref := range m.tools {
		if ref.u == u {
			delete(m.tools, name)
		}
	}
	for name, orig := range names {
		m.tools[name] = toolRef{u: u, orig: orig}
	}
}

// nextID returns a fresh number for request IDs and progress tokens.
func (m *Manager) nextID() uint64 { return m.seq.Add(1) }

// newHTTPTransport returns the tuned transport one HTTP upstream uses for
// all its connections: many idle connections per host, since one upstream
// takes every call of every thread.
func newHTTPTransport() *http.Transport {
	var t *http.Transport
	if dt, ok := http.DefaultTransport.(*http.Transport); ok {
		t = dt.Clone()
	} else {
		t = &http.Transport{Proxy: http.ProxyFromEnvironment}
	}
	t.MaxIdleConns = 256
	t.MaxIdleConnsPerHost = 64
	t.IdleConnTimeout = 90 * time.Second
	t.ForceAttemptHTTP2 = true
	return t
}
