package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/registry"
)

// serveUpstreamFlag is the flag with which the bench runs itself as the
// stdio upstream of -mode upstream-stdio.
const serveUpstreamFlag = "serve-upstream-stdio"

// upstreamName is the upstream's name in toolgate's configuration, so its
// echo tool is up__echo there.
const upstreamName = "up"

// proxiedEcho is the name toolgate gives the upstream's echo tool.
const proxiedEcho = upstreamName + "__echo"

// stdioWorkers is the stdio upstream's tool-call worker pool (mcp-go's
// default is 5). It is the largest concurrency level the bench runs by
// default, so that neither target queues inside the upstream.
const stdioWorkers = 64

// upstreamStartup bounds starting toolgate's upstream connection and
// importing its tools.
const upstreamStartup = 20 * time.Second

// upstreamConfig is toolgate's configuration in the upstream modes: %s is
// the upstream entry's transport-specific keys, already indented.
const upstreamConfig = `
builtin: []
upstreams:
  - name: ` + upstreamName + `
%s`

// runUpstream is -mode upstream-http and -mode upstream-stdio: the
// upstream, the direct target calling it and toolgate proxying it, then
// the sweep and the report. Everything it starts is closed, and every child
// process reaped, before it returns.
func runUpstream(ctx context.Context, p params, stdout, stderr io.Writer) error {
	var (
		direct, tg *target
		err        error
	)
	switch p.mode {
	case modeUpstreamHTTP:
		direct, err = startDirectHTTP()
		if err != nil {
			return err
		}
		defer direct.close() // after toolgate, which closes its session to it
		tg, err = startToolgateUpstream(ctx, fmt.Sprintf("    transport: streamable-http\n    url: %s\n", strconv.Quote(direct.url)))
	case modeUpstreamStdio:
		var exe string
		exe, err = os.Executable()
		if err != nil {
			return fmt.Errorf("finding the bench's executable: %w", err)
		}
		args := childArgs(p)
		direct, err = startDirectStdio(ctx, exe, args)
		if err != nil {
			return err
		}
		defer direct.close()
		quoted := make([]string, len(args))
		for i, a := range args {
			quoted[i] = strconv.Quote(a)
		}
		tg, err = startToolgateUpstream(ctx, fmt.Sprintf("    transport: stdio\n    command: %s\n    args: [%s]\n",
			strconv.Quote(exe), strings.Join(quoted, ", ")))
	default:
		return fmt.Errorf("running the upstream benchmark: unknown mode %q", p.mode)
	}
	if err != nil {
		return err
	}
	defer tg.close()
	return sweepAndReport(ctx, p, []*target{direct, tg}, stdout, stderr, reportUpstream)
}

// childArgs are the arguments of the stdio upstream: serve, and give up
// no later than the parent does (it also exits when its stdin closes).
func childArgs(p params) []string {
	return []string{"-" + serveUpstreamFlag, "-timeout", p.timeout.String()}
}

// serveUpstreamStdio serves the echo tool over in and out until in closes
// or ctx ends. It is what the stdio upstream runs; out carries the
// protocol and nothing else.
func serveUpstreamStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	s := server.NewStdioServer(newEchoServer("upstream"))
	server.WithWorkerPoolSize(stdioWorkers)(s)
	// mcp-go's error logger writes to stderr by default, which the parent
	// discards; stdout stays clean.
	if err := s.Listen(ctx, in, out); err != nil && ctx.Err() == nil {
		return fmt.Errorf("serving the stdio upstream: %w", err)
	}
	return nil
}

// startDirectHTTP serves the echo tool from a stateful streamable HTTP
// mcp-go server on a loopback port: the upstream of upstream-http, and the
// target "direct", whose sessions call it without toolgate.
func startDirectHTTP() (*target, error) {
	t, err := serveBare(newEchoServer("upstream"), callEcho, nil)
	if err != nil {
		return nil, fmt.Errorf("starting the upstream: %w", err)
	}
	t.name = "direct"
	return t, nil
}

// startDirectStdio starts the bench as a stdio upstream (exe with args)
// and returns the target "direct": one initialized mcp-go stdio client
// that every caller shares, as toolgate shares its one connection to a
// shared upstream. close closes stdin and reaps the process (mcp-go's
// Stdio.Close escalates to SIGTERM and SIGKILL if it lingers).
func startDirectStdio(ctx context.Context, exe string, args []string) (*target, error) {
	discard := slog.New(slog.DiscardHandler)
	tr := transport.NewStdioWithOptions(exe, nil, args, transport.WithCommandLogger(discard))
	c := client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	if err := c.Start(ctx); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("starting the direct stdio upstream: %w", err)
	}
	startCtx, cancel := context.WithTimeout(ctx, upstreamStartup)
	defer cancel()
	var req mcp.InitializeRequest
	req.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	req.Params.ClientInfo = mcp.Implementation{Name: "toolgate-bench", Version: "1.0.0"}
	if _, err := c.Initialize(startCtx, req); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("initializing the direct stdio upstream: %w", err)
	}
	return &target{name: "direct", shared: c, call: callEcho, close: func() { _ = c.Close() }}, nil
}

// startToolgateUpstream serves a gateway whose one upstream is described
// by entry (the keys after its name in upstreamConfig). It returns once the
// upstream is connected and its echo tool imported as up__echo.
func startToolgateUpstream(ctx context.Context, entry string) (*target, error) {
	cfg, err := config.Parse("bench-upstream.yaml", fmt.Appendf(nil, upstreamConfig, entry), nil)
	if err != nil {
		return nil, fmt.Errorf("parsing the upstream config: %w", err)
	}
	g, err := gateway.New(cfg, gateway.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return nil, fmt.Errorf("building gateway: %w", err)
	}
	g.StartUpstreams()
	if err := waitTool(ctx, g, proxiedEcho); err != nil {
		g.Close()
		return nil, err
	}
	base, stop, err := serve(g.Handler())
	if err != nil {
		g.Close()
		return nil, fmt.Errorf("starting toolgate: %w", err)
	}
	hc := newHTTPClient()
	return &target{name: "toolgate", url: base + "/mcp", client: hc, call: callProxiedEcho, close: func() {
		hc.CloseIdleConnections()
		stop()
		g.Close() // closes the upstream session, or stops and reaps the child
	}}, nil
}

// waitTool waits, at most upstreamStartup, until g's upstreams are up and
// g serves the tool name.
func waitTool(ctx context.Context, g *gateway.Gateway, name string) error {
	ctx, cancel := context.WithTimeout(ctx, upstreamStartup)
	defer cancel()
	if err := g.WaitUpstreams(ctx); err != nil {
		return fmt.Errorf("waiting for toolgate's upstream: %w", err)
	}
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if slices.ContainsFunc(g.Tools(), func(t *registry.Tool) bool { return t.Name == name }) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for toolgate to import %s: %w", name, ctx.Err())
		case <-t.C:
		}
	}
}

// callProxiedEcho makes one call of the upstream's echo tool through
// toolgate and checks its result.
func callProxiedEcho(ctx context.Context, c *client.Client) error {
	return callEchoNamed(ctx, c, proxiedEcho)
}

// reportUpstream writes the upstream modes' markdown: what was measured,
// then the tables, and returns the number of failed calls over all runs.
func reportUpstream(w io.Writer, p params, targets []*target, results [][][]runResult) int {
	fmt.Fprintf(w, "Machine: %s/%s, %d CPUs (GOMAXPROCS %d), %s. ", runtime.GOOS, runtime.GOARCH,
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version())
	fmt.Fprintf(w, "%d calls per run after %d warm-up calls, %d rounds alternating the order of the targets, "+
		"median round by throughput.\n\n", p.n, p.warmup, p.rounds)
	switch p.mode {
	case modeUpstreamHTTP:
		fmt.Fprintf(w, "Upstream: an mcp-go server with one echo tool, stateful streamable HTTP on 127.0.0.1, in the bench process. "+
			"direct: N mcp-go client sessions to the upstream. toolgate: N client sessions to toolgate (streamable HTTP, "+
			"same process), which forwards %s over its one shared streamable HTTP session to the same upstream.\n\n", proxiedEcho)
	case modeUpstreamStdio:
		fmt.Fprintf(w, "Upstream: an mcp-go stdio server with one echo tool (%d workers), a child process (this binary). "+
			"direct: N callers sharing one mcp-go stdio client to its own child. toolgate: N streamable HTTP client sessions "+
			"to toolgate (same process), which forwards %s to its own shared stdio child.\n\n", stdioWorkers, proxiedEcho)
	}
	failed := writeTables(w, p, targets, results)

	fmt.Fprintln(w)
	cpuNote := "the bench process: client, toolgate and upstream"
	if p.mode == modeUpstreamStdio {
		cpuNote = "the bench process: client and toolgate; the stdio children are not counted"
	}
	fmt.Fprintf(w, "CPU per call (user+sys of %s), median round; and the issue's target: "+
		"throughput toolgate/direct ≥ %.2f and p50 toolgate − direct < %d µs.\n\n",
		cpuNote, targetRatio, targetAddedP50.Microseconds())
	fmt.Fprintln(w, "| sessions | CPU µs/call direct | CPU µs/call toolgate | toolgate − direct (µs) | target met |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---|")
	for li, c := range p.levels {
		d, g := median(results[li][0]), median(results[li][1])
		met := g.throughput/d.throughput >= targetRatio && g.p50-d.p50 < targetAddedP50
		fmt.Fprintf(w, "| %d | %.0f | %.0f | %+.0f | %s |\n", c, us(d.cpu), us(g.cpu), us(g.cpu)-us(d.cpu), yesNo(met))
	}
	return failed
}

// The target for proxied calls over HTTP, against direct ones.
const (
	targetRatio    = 0.9
	targetAddedP50 = 150 * time.Microsecond
)

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
