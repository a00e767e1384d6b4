package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/internal/cli"
	"github.com/toolgate/toolgate/internal/gcfloor"
	"github.com/toolgate/toolgate/registry"
)

// listenEnv names the environment variable that gives serve's listen
// address when --listen does not (a container image sets it).
const listenEnv = "TOOLGATE_LISTEN"

// parseNoArgs parses the flags of a command that takes no positional
// argument, refusing any.
func parseNoArgs(fs *flag.FlagSet, args []string) error {
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	return cli.MaxArgs(fs, 0, "")
}

func cmdServe(ctx context.Context, again <-chan os.Signal, args []string, stderr io.Writer) (err error) {
	fs, c := cli.NewFlags("serve", stderr)
	listen := fs.String("listen", os.Getenv(listenEnv), "listen `address` host:port, overriding server.listen (port 0 picks a free port); default $"+listenEnv+" when set")
	insecure := fs.Bool("insecure-no-auth", false, "listen beyond loopback without authentication (no auth section): any client that reaches the port may call every tool")
	pidFile := fs.String("pid-file", "", "write the process ID to `file` (removed at exit), for toolgate reload --pid-file")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	cfg, logger, g, err := cli.Build(c, stderr)
	if err != nil {
		return err
	}
	gc := newCloser(ctx, g, again, cfg.Server.ShutdownGrace.D())
	defer gc.closeInto(&err)
	if err := cli.WritePID(*pidFile); err != nil {
		return err
	}
	defer cli.RemovePID(*pidFile)
	addr := cfg.Server.Listen
	if *listen != "" {
		addr = *listen
	}
	if !cfg.Auth.Enabled() && !loopbackListen(addr) {
		if !*insecure {
			return fmt.Errorf("refusing to listen on %s without authentication: configure auth (tokens or oauth) in the config, or start with --insecure-no-auth to let any client that reaches the port call every tool", addr)
		}
		logger.Warn("listening beyond loopback without authentication (--insecure-no-auth): any client that reaches the port may call every tool", "addr", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	g.StartUpstreams()
	go releaseImport(ctx, g)
	defer cli.StartReload(ctx, c, cfg, logger, g)()
	srv := &http.Server{
		Handler:           g.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		// No WriteTimeout: SSE and streamable-HTTP GET streams are long-lived.
	}
	url := "http://" + ln.Addr().String()
	attrs := []any{"addr", ln.Addr().String(), "mcp", url + cfg.Server.MCPPath, "config", cfg.Source, "tools", len(g.Tools())}
	if len(cfg.Endpoints) > 0 {
		eps := make([]string, len(cfg.Endpoints))
		for i, e := range cfg.Endpoints {
			eps[i] = url + config.EndpointPath(cfg.Server.MCPPath, e.Name)
		}
		attrs = append(attrs, "endpoints", eps)
	}
	logger.Info("listening", attrs...)
	releaseStartup()
	defer gcFloor()()
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	select {
	case err := <-serveErr:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	s := &serving{cfg: cfg, logger: logger, g: g, gc: gc, srv: srv, serveErr: serveErr, again: again}
	return s.stop(ctx)
}

// serving is a `toolgate serve` whose first signal has come: what its
// shutdown needs.
type serving struct {
	cfg      *config.Config
	logger   *slog.Logger
	g        *gateway.Gateway
	gc       *closer
	srv      *http.Server
	serveErr <-chan error     // Serve's return
	again    <-chan os.Signal // the signals after the first
}

// stop shuts serve down after its first signal (ctx is done). Without a
// cluster section, at once: the listener closes, calls in flight get
// server.shutdown_grace, then the gateway closes. A replica of a cluster
// first reports not ready (gateway.ReadinessPath answers 503) and serves
// on for cluster.drain_delay, so that the balancers take it out of
// rotation before its listener closes; when it closes, the long-lived
// streams end, so that their clients reconnect to another replica. A
// second signal stops it at once.
func (s *serving) stop(ctx context.Context) error {
	s.g.Unready()
	if k := s.cfg.Cluster; k != nil {
		s.logger.Info("draining: not ready, serving on until the balancers notice", "drain_delay", k.Drain().String())
		sig, err := linger(k.Drain(), s.again, s.serveErr)
		if err != nil {
			return fmt.Errorf("serving: %w", err)
		}
		if sig != nil {
			return s.abort(sig, callsCancelled, nil)
		}
		s.srv.RegisterOnShutdown(s.g.EndStreams) // run once the listener has closed
	}
	// The shutdown's waits end when it returns, after an abort too.
	base, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	sig, undone, httpDone := s.drain(base)
	if sig != nil {
		return s.abort(sig, undone, httpDone)
	}
	_ = s.srv.Close()
	<-s.serveErr
	s.logger.Info("stopped")
	return nil
}

// linger serves on for d, returning early with a second signal or with
// Serve's error.
func linger(d time.Duration, again <-chan os.Signal, serveErr <-chan error) (os.Signal, error) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil, nil
	case sig := <-again:
		return sig, nil
	case err := <-serveErr:
		return nil, err
	}
}

// drain closes the listener and drains the calls in flight within
// server.shutdown_grace, then closes the gateway and waits for the
// requests still open to write their results. A second signal ends it
// early: it is returned, with what it left undone and the channel of the
// server's Shutdown, when it may still return. ctx bounds the waits it
// leaves running (the caller cancels it once it has stopped).
func (s *serving) drain(ctx context.Context) (sig os.Signal, undone string, httpDone chan error) {
	grace := s.cfg.Server.ShutdownGrace.D()
	s.logger.Info("shutting down", "grace", grace.String())
	deadline := time.Now().Add(grace)
	// Stop accepting connections now. Shutdown returns once no connection
	// is active: the long-lived streams end when the gateway's Close ends
	// the sessions, but a request whose body never completes would hold it
	// forever, so it is bounded below.
	httpDone = make(chan error, 1)
	go func() { httpDone <- s.srv.Shutdown(ctx) }()
	// The calls drain within the grace; then the gateway closes, which the
	// closer bounds by the grace too (upstreams still running at its end
	// are killed).
	gctx, gcancel := context.WithDeadline(ctx, deadline)
	s.gc.deadline = deadline
	gDone := make(chan error, 1)
	go func() {
		defer gcancel()
		gDone <- s.g.Drain(gctx)
	}()
	select {
	case err := <-gDone:
		if err != nil {
			s.logger.Warn("shutdown grace ran out; calls were cancelled")
		}
	case sig = <-s.again:
		return sig, callsCancelled, httpDone
	}
	// Requests still open get the rest of the grace, and at least
	// resultWait after the drain to write the results of calls cancelled
	// at its end; the close is bounded alike.
	resultsBy := s.gc.waitEnd(time.Now())
	if sig = s.gc.close(); sig != nil {
		return sig, upstreamsKilled, httpDone
	}
	timer := time.NewTimer(max(time.Until(resultsBy), 0))
	defer timer.Stop()
	select {
	case <-httpDone:
	case <-timer.C:
		select {
		case <-httpDone:
		default:
			s.logger.Warn("requests still open after the shutdown grace; closing their connections")
		}
	case sig = <-s.again:
		return sig, callsCancelled, httpDone
	}
	return nil, "", nil
}

// abort stops at once after a second signal, sig, which left undone
// undone: calls in flight are cancelled and the upstreams killed, and
// their results get resultWait to reach the clients (through the server,
// whose Shutdown returns on httpDone, when not nil).
func (s *serving) abort(sig os.Signal, undone string, httpDone <-chan error) error {
	s.logger.Warn("signal during shutdown; cancelling calls in flight and stopping now", "signal", sig.String())
	s.gc.abort()
	waitResults(s.gc.abortedAt.Add(resultWait), s.gc.closed, httpDone)
	_ = s.srv.Close()
	<-s.serveErr
	return cli.SignalExit(sig, undone)
}

// loopbackListen reports whether a listen address binds only loopback:
// localhost or a loopback IP. An empty host is every interface.
func loopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && host != "" && config.IsLoopbackHost(host)
}

// resultWait bounds how long serve and stdio wait, once calls have been
// cancelled, for their results to reach the clients.
const resultWait = time.Second

// waitResults waits, until by at most, until closed is closed and done
// has delivered (either may be nil, for nothing to wait for): after a
// second signal, for the gateway's Close and for the server to have
// written the results of the calls it cancelled.
func waitResults(by time.Time, closed <-chan struct{}, done <-chan error) {
	timer := time.NewTimer(max(time.Until(by), 0))
	defer timer.Stop()
	for closed != nil || done != nil {
		select {
		case <-closed:
			closed = nil
		case <-done:
			done = nil
		case <-timer.C:
			return
		}
	}
}

// What a second signal left undone, as its exit message says: during the
// drain, or while the gateway closes.
const (
	callsCancelled  = "calls in flight were cancelled"
	upstreamsKilled = "the upstreams' processes were killed"
)

func cmdStdio(ctx context.Context, again <-chan os.Signal, args []string, stdin io.Reader, stdout, stderr io.Writer) (err error) {
	fs, c := cli.NewFlags("stdio", stderr)
	pidFile := fs.String("pid-file", "", "write the process ID to `file` (removed at exit), for toolgate reload --pid-file")
	endpoint := fs.String("endpoint", "", "serve the configured endpoint `name` (config endpoints): its tools and instructions only")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	cfg, logger, g, err := cli.Build(c, stderr)
	if err != nil {
		return err
	}
	if *endpoint != "" && !slices.ContainsFunc(cfg.Endpoints, func(e config.Endpoint) bool { return e.Name == *endpoint }) {
		_ = g.Close()
		return cli.ExitError{Code: 2, Msg: fmt.Sprintf("--endpoint %q: %s has no endpoint by that name; add it to the endpoints section or drop --endpoint", *endpoint, cfg.Source)}
	}
	gc := newCloser(ctx, g, again, cfg.Server.ShutdownGrace.D())
	defer gc.closeInto(&err)
	if err := cli.WritePID(*pidFile); err != nil {
		return err
	}
	defer cli.RemovePID(*pidFile)
	g.StartUpstreams()
	defer cli.StartReload(ctx, c, cfg, logger, g)()
	logger.Info("serving stdio", "config", cfg.Source, "tools", len(g.Tools()))
	releaseStartup()
	defer gcFloor()()
	// ServeStdio drains and returns when ctx ends, even while the client
	// keeps stdin open (its reader is then left behind; the process exits).
	served := make(chan error, 1)
	go func() { served <- g.ServeStdioEndpoint(ctx, *endpoint, stdin, stdout) }()
	select {
	case err = <-served:
	case <-ctx.Done():
		gc.deadline = time.Now().Add(cfg.Server.ShutdownGrace.D()) // the close's too
		logger.Info("shutting down", "grace", cfg.Server.ShutdownGrace.D().String())
		select {
		case err = <-served:
		case sig := <-again:
			logger.Warn("signal during shutdown; cancelling calls in flight and stopping now", "signal", sig.String())
			gc.abort()
			waitResults(gc.abortedAt.Add(resultWait), gc.closed, served)
			return cli.SignalExit(sig, callsCancelled)
		}
	}
	// Closing waits for the upstreams' processes to exit; the closer kills
	// those still running at the grace's end, and a second signal kills
	// them at once.
	if sig := gc.close(); sig != nil {
		logger.Warn("signal during shutdown; killing the upstreams' processes and stopping now", "signal", sig.String())
		return cli.SignalExit(sig, upstreamsKilled)
	}
	if err != nil {
		return fmt.Errorf("serving stdio: %w", err)
	}
	return nil
}

// closer closes a command's gateway, once, in the background, so that the
// command can wait for it with limits: Close waits up to 4 s for a stdio
// upstream that ignores its stdin closing and SIGTERM, and up to 5 s for
// an HTTP upstream to answer its session's DELETE (mcp-go's timeout).
type closer struct {
	g         *gateway.Gateway
	ctx       context.Context  // ends at the first signal
	again     <-chan os.Signal // the signals after it
	grace     time.Duration    // server.shutdown_grace
	start     func()           // begins Close, once
	closed    chan struct{}    // closed when Close has returned
	deadline  time.Time        // the grace's end, once a signal has started it
	abortedAt time.Time        // when a second signal killed the upstreams
	stopped   bool             // close has returned, or abort was called; the command's goroutine only
}

func newCloser(ctx context.Context, g *gateway.Gateway, again <-chan os.Signal, grace time.Duration) *closer {
	c := &closer{g: g, ctx: ctx, again: again, grace: grace, closed: make(chan struct{})}
	c.start = sync.OnceFunc(func() {
		go func() {
			defer close(c.closed)
			g.Close()
		}()
	})
	return c
}

// close closes the gateway and waits for it. Once a signal has come,
// before the close or during it, the grace bounds the wait: upstream
// processes still running at its end are killed, and resultWait later
// (or after the close's start, when that is later) the command stops
// waiting, for an HTTP upstream's DELETE say. A second signal kills them
// at once and is returned, after at most resultWait more. Later calls
// return at once.
func (c *closer) close() os.Signal {
	if c.stopped {
		return nil
	}
	c.stopped = true
	c.start()
	select {
	case <-c.closed:
		return nil
	default:
	}
	var kill, late <-chan time.Time
	signalled := c.ctx.Done()
	if c.deadline.IsZero() && c.ctx.Err() != nil {
		c.deadline = time.Now().Add(c.grace)
	}
	var timers []*time.Timer
	defer func() {
		for _, t := range timers {
			t.Stop()
		}
	}()
	begun := time.Now()
	startGrace := func() {
		signalled = nil
		k := time.NewTimer(time.Until(c.deadline))
		l := time.NewTimer(time.Until(c.waitEnd(begun)))
		timers = append(timers, k, l)
		kill, late = k.C, l.C
	}
	if !c.deadline.IsZero() {
		startGrace()
	}
	for {
		select {
		case <-c.closed:
			return nil
		case <-signalled: // a first signal while closing: the grace starts now
			c.deadline = time.Now().Add(c.grace)
			startGrace()
		case <-kill:
			c.g.KillUpstreams()
			kill = nil
		case <-late:
			if kill != nil { // both fell due: the kill first
				c.g.KillUpstreams()
			}
			return nil
		case sig := <-c.again:
			c.abortedAt = time.Now()
			c.g.KillUpstreams()
			waitResults(c.abortedAt.Add(resultWait), c.closed, nil)
			return sig
		}
	}
}

// waitEnd is when a close that began at begun stops waiting, once the
// grace's end (c.deadline) is known: resultWait after that end, or after
// begun when that is later.
func (c *closer) waitEnd(begun time.Time) time.Time {
	end := c.deadline
	if begun.After(end) {
		end = begun
	}
	return end.Add(resultWait)
}

// closeInto is a command's deferred close: a second signal during it
// makes *errp the signal's exit.
func (c *closer) closeInto(errp *error) {
	if sig := c.close(); sig != nil {
		*errp = cli.SignalExit(sig, upstreamsKilled)
	}
}

// abort kills the gateway's upstream processes (and any it would start)
// and begins closing it; the caller waits on c.closed until resultWait
// after c.abortedAt at most, and a later close returns at once.
func (c *closer) abort() {
	c.stopped = true
	if c.abortedAt.IsZero() {
		c.abortedAt = time.Now()
	}
	c.g.KillUpstreams()
	c.start()
}

func cmdValidate(args []string, stdout, stderr io.Writer) error {
	fs, c := cli.NewFlags("validate", stderr)
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	cfg, tools, err := cli.Check(c.Config)
	if err != nil {
		return cli.Invalid(err)
	}
	fmt.Fprintf(stdout, "%s: valid (%d tools)\n", cfg.Source, tools)
	return nil
}

// cmdReload checks the configuration as a reload will, and when it is
// valid sends SIGHUP to the running toolgate whose process ID --pid or
// the file --pid-file (as serve and stdio write it) gives. An invalid
// configuration is reported here, and no signal is sent.
func cmdReload(args []string, stdout, stderr io.Writer) error {
	fs, c := cli.NewFlags("reload", stderr)
	pidFile := fs.String("pid-file", "", "`file` holding the process ID of the toolgate to reload, as serve --pid-file wrote it")
	pid := fs.Int("pid", 0, "process `ID` of the toolgate to reload")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	target, err := cli.ReadPID(*pidFile, *pid)
	if err != nil {
		return cli.ExitError{Code: 2, Msg: err.Error()}
	}
	cfg, tools, err := cli.Check(c.Config)
	if err != nil {
		return cli.Invalid(err)
	}
	if err := syscall.Kill(target, syscall.SIGHUP); err != nil {
		return cli.ExitError{Code: 1, Msg: fmt.Sprintf("signalling process %d: %v", target, err)}
	}
	fmt.Fprintf(stdout, "%s: valid (%d tools); sent SIGHUP to process %d\n", cfg.Source, tools, target)
	return nil
}

func cmdTools(ctx context.Context, again <-chan os.Signal, args []string, stdout, stderr io.Writer) (err error) {
	fs, c := cli.NewFlags("tools", stderr)
	asJSON := fs.Bool("json", false, "print the tools as JSON")
	skipped := fs.Bool("skipped", false, "list the OpenAPI operations that made no tool, with the reason, instead of the tools")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	cfg, _, g, err := cli.Build(c, stderr, gateway.WithOAuthBrowser(newBrowser(stderr, false)))
	if err != nil {
		return err
	}
	defer newCloser(ctx, g, again, cfg.Server.ShutdownGrace.D()).closeInto(&err)
	if *skipped {
		return printSkipped(g.SkippedOperations(), *asJSON, stdout)
	}
	if err := cli.WaitUpstreams(ctx, g, stderr); err != nil {
		return err
	}
	tools := g.Tools()
	if *asJSON {
		type row struct {
			Name        string          `json:"name"`
			Kind        registry.Kind   `json:"kind"`
			Source      string          `json:"source"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"inputSchema,omitempty"`
			// UpstreamName is the source's own name of a renamed tool.
			UpstreamName string `json:"upstreamName,omitempty"`
		}
		rows := make([]row, 0, len(tools))
		for _, t := range tools {
			rows = append(rows, row{t.Name, t.Kind, t.Source, t.Description, t.InputSchema, t.UpstreamName})
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tSOURCE\tDESCRIPTION")
	for _, t := range tools {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Name, t.Kind, t.Source, cli.FirstLine(t.Description, 70))
	}
	printRenamed(tw, tools)
	return tw.Flush()
}

// printRenamed adds the tools whose source names them otherwise (too
// long, or characters MCP does not allow) to the table, with that name.
func printRenamed(tw io.Writer, tools []*registry.Tool) {
	header := false
	for _, t := range tools {
		if t.UpstreamName == "" {
			continue
		}
		if !header {
			fmt.Fprintln(tw, "\nRENAMED\tSOURCE\tUPSTREAM NAME\t")
			header = true
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t\n", t.Name, t.Source, t.UpstreamName)
	}
}

// printSkipped writes the OpenAPI operations that made no tool, as a
// table or as JSON.
func printSkipped(ops []gateway.SkippedOperation, asJSON bool, stdout io.Writer) error {
	if asJSON {
		type row struct {
			Source    string `json:"source"`
			Operation string `json:"operation"`
			Tool      string `json:"tool"`
			Reason    string `json:"reason"`
		}
		rows := make([]row, 0, len(ops))
		for _, o := range ops {
			rows = append(rows, row{o.Source, o.Operation, o.Tool, o.Reason})
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SOURCE\tOPERATION\tTOOL\tREASON")
	for _, o := range ops {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", o.Source, o.Operation, o.Tool, o.Reason)
	}
	return tw.Flush()
}

func cmdCall(ctx context.Context, again <-chan os.Signal, args []string, stdout, stderr io.Writer) (err error) {
	fs, c := cli.NewFlags("call", stderr)
	thread := fs.String("thread", "", "run the call in this named `thread`")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: toolgate call [flags] NAME [JSON-ARGUMENTS]")
		fs.PrintDefaults()
	}
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if err := cli.MaxArgs(fs, 2, "a tool NAME and at most one JSON-ARGUMENTS object (quote it as one argument)"); err != nil {
		return err
	}
	if fs.NArg() < 1 {
		fs.Usage()
		return cli.ExitError{Code: 2, Msg: "no tool named: write its NAME, e.g. toolgate call calc '{\"expression\": \"1+2\"}'"}
	}
	var raw json.RawMessage
	if fs.NArg() == 2 {
		raw = json.RawMessage(fs.Arg(1))
		if !json.Valid(raw) {
			return cli.ExitError{Code: 2, Msg: "the arguments are not valid JSON; write an object like '{\"expression\": \"1+2\"}'"}
		}
	}
	cfg, _, g, err := cli.Build(c, stderr, gateway.WithOAuthBrowser(newBrowser(stderr, false)))
	if err != nil {
		return err
	}
	defer newCloser(ctx, g, again, cfg.Server.ShutdownGrace.D()).closeInto(&err)
	if err := cli.WaitUpstreams(ctx, g, stderr); err != nil {
		return err
	}
	var meta map[string]any
	if *thread != "" {
		meta = map[string]any{gateway.ThreadMetaKey: *thread}
	}
	res, err := g.Call(ctx, fs.Arg(0), raw, meta)
	if err != nil {
		if ctx.Err() != nil {
			return cli.ErrInterrupted
		}
		return cli.ExitError{Code: 1, Msg: err.Error()}
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil {
		return err
	}
	switch {
	case res.IsError && ctx.Err() != nil: // the signal cancelled the call: its result says so
		return cli.ErrInterrupted
	case res.IsError:
		return cli.ExitError{Code: 1}
	}
	return nil
}

// releaseStartup returns to the operating system the memory that start-up
// allocated and no longer needs (package initialisation, parsing the
// configuration, compiling schemas, building the gateway). Without it the
// runtime keeps those pages until its background scavenger gets to them,
// and a server that has not been called yet holds about a megabyte more
// than it uses. It costs one collection, once.
func releaseStartup() { debug.FreeOSMemory() }

// releaseImport releases, once every upstream has listed its tools, the
// memory importing them allocated and no longer needs (their definitions
// decoded, their schemas compiled to check them): with an upstream of
// 5,000 tools, some 20 MB the scavenger would return only slowly
// (docs/benchmarks.md, "Big lists"). It returns when ctx is done, if
// before.
func releaseImport(ctx context.Context, g *gateway.Gateway) {
	if g.WaitUpstreams(ctx) == nil {
		releaseStartup()
	}
}

// heapFloor is the smallest heap goal a serving toolgate lets the
// collector run at (internal/gcfloor has the measurements): 16 MiB
// instead of the runtime's 4, at most 12 MiB more memory under load.
const heapFloor = 16 << 20

// gcFloor starts the heap floor for a serving command, unless GOGC is set
// to a non-empty value in the environment: then the operator runs the
// collector (the runtime takes an empty GOGC as its default too). It
// returns the floor's stop.
func gcFloor() (stop func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	return gcfloor.Start(heapFloor).Stop
}
