package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/builtin"
	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/gateway"
)

// This file holds the resilience benchmarks of issue 5.
//
// -mode parallel: toolgate with the builtin sleep tool and toolgate_batch.
// Each round measures one sleep call (T1), parallelCalls concurrent sleep
// calls from one session (T8c: until the last returns) and one
// toolgate_batch of parallelCalls sleep calls (T8b). Parallel calls should
// take about as long as one: T8c/T1 and T8b/T1 ≈ 1.
//
// -mode flaky: a REST tool (GET, idempotent, retried) against a local
// backend that answers 503 to a seeded-random share of requests, and the
// same run against a backend that never fails, for the p99 retries add.

// sleepMS is how long every sleep call of parallel mode sleeps.
const sleepMS = 100

// parallelCalls is how many sleep calls run at once in parallel mode.
const parallelCalls = 8

// parallelTarget is the largest T8/T1 ratio parallel mode accepts.
const parallelTarget = 1.5

// parallelConfig is toolgate's configuration in parallel mode: the sleep
// builtin and toolgate_batch; the concurrency limits are the defaults
// (max_parallel 64, max_parallel_per_session 16), which parallelCalls
// concurrent calls, or one batch of them, stay within.
const parallelConfig = `
builtin: [sleep]
batch_tool: true
`

// runParallel is -mode parallel: a gateway, one session, a warm-up round,
// then p.rounds measured rounds and the report.
func runParallel(ctx context.Context, p params, stdout, stderr io.Writer) error {
	tg, err := startToolgateSleep()
	if err != nil {
		return err
	}
	defer tg.close()
	s, err := connect(ctx, tg)
	if err != nil {
		return err
	}
	defer s.Close()

	if _, err := parallelRound(ctx, s); err != nil { // warm-up: connections, schema caches
		return fmt.Errorf("warming up: %w", err)
	}
	rounds := make([]parallelResult, 0, p.rounds)
	for r := range p.rounds {
		res, err := parallelRound(ctx, s)
		if err != nil {
			return fmt.Errorf("round %d: %w", r+1, err)
		}
		fmt.Fprintf(stderr, "round %d  T1 %6.1fms  T%dc %6.1fms  T%db %6.1fms  ratios %.3f %.3f\n", r+1,
			ms(res.t1), parallelCalls, ms(res.concurrent), parallelCalls, ms(res.batch), res.concurrentRatio(), res.batchRatio())
		rounds = append(rounds, res)
	}
	if missed := reportParallel(stdout, p, rounds); missed {
		return fmt.Errorf("a round's ratio is %.1f or more", parallelTarget)
	}
	return nil
}

// startToolgateSleep serves a gateway built from parallelConfig, with the
// builtin tools registered as cmd/toolgate registers them.
func startToolgateSleep() (*target, error) {
	cfg, err := config.Parse("bench-parallel.yaml", []byte(parallelConfig), &config.Options{Builtins: builtin.Names()})
	if err != nil {
		return nil, fmt.Errorf("parsing the parallel config: %w", err)
	}
	g, err := gateway.New(cfg, gateway.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return nil, fmt.Errorf("building gateway: %w", err)
	}
	if err := builtin.Register(g, cfg.Builtin, nil); err != nil {
		g.Close()
		return nil, fmt.Errorf("registering builtin tools: %w", err)
	}
	base, stop, err := serve(g.Handler())
	if err != nil {
		g.Close()
		return nil, fmt.Errorf("starting toolgate: %w", err)
	}
	hc := newHTTPClient()
	return &target{name: "toolgate", url: base + "/mcp", client: hc, close: func() {
		hc.CloseIdleConnections()
		stop()
		g.Close()
	}}, nil
}

// parallelResult is one round of parallel mode.
type parallelResult struct {
	t1         time.Duration // one sleep call
	concurrent time.Duration // parallelCalls concurrent sleep calls, until the last returned
	batch      time.Duration // one toolgate_batch of parallelCalls sleep calls
}

func (r parallelResult) concurrentRatio() float64 { return float64(r.concurrent) / float64(r.t1) }
func (r parallelResult) batchRatio() float64      { return float64(r.batch) / float64(r.t1) }

// parallelRound measures T1, T8c and T8b once each, in that order, on s.
func parallelRound(ctx context.Context, s *client.Client) (parallelResult, error) {
	var res parallelResult
	t0 := time.Now()
	if err := callSleep(ctx, s); err != nil {
		return res, err
	}
	res.t1 = time.Since(t0)

	errs := make([]error, parallelCalls)
	var wg sync.WaitGroup
	t0 = time.Now()
	for i := range parallelCalls {
		wg.Go(func() { errs[i] = callSleep(ctx, s) })
	}
	wg.Wait()
	res.concurrent = time.Since(t0)
	if err := errors.Join(errs...); err != nil {
		return res, err
	}

	t0 = time.Now()
	if err := callSleepBatch(ctx, s); err != nil {
		return res, err
	}
	res.batch = time.Since(t0)
	return res, nil
}

// callSleep makes one sleep call of sleepMS and checks its result.
func callSleep(ctx context.Context, c *client.Client) error {
	var req mcp.CallToolRequest
	req.Params.Name = "sleep"
	req.Params.Arguments = map[string]any{"ms": sleepMS}
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return fmt.Errorf("calling sleep: %w", err)
	}
	if res.IsError {
		return fmt.Errorf("calling sleep: error result %q", firstText(res))
	}
	return nil
}

// callSleepBatch makes one toolgate_batch of parallelCalls sleep calls and
// checks that every one succeeded.
func callSleepBatch(ctx context.Context, c *client.Client) error {
	calls := make([]any, parallelCalls)
	for i := range calls {
		calls[i] = map[string]any{"tool": "sleep", "arguments": map[string]any{"ms": sleepMS}}
	}
	var req mcp.CallToolRequest
	req.Params.Name = gateway.BatchToolName
	req.Params.Arguments = map[string]any{"calls": calls}
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return fmt.Errorf("calling %s: %w", gateway.BatchToolName, err)
	}
	if res.IsError || len(res.Content) == 0 {
		return fmt.Errorf("calling %s: unexpected result %+v", gateway.BatchToolName, res.Content)
	}
	tc, ok := mcp.AsTextContent(res.Content[0])
	if !ok {
		return fmt.Errorf("calling %s: unexpected result %+v", gateway.BatchToolName, res.Content)
	}
	var out struct {
		OK     int `json:"ok"`
		Failed int `json:"failed"`
	}
	if err := json.Unmarshal([]byte(tc.Text), &out); err != nil {
		return fmt.Errorf("calling %s: decoding the result: %w", gateway.BatchToolName, err)
	}
	if out.OK != parallelCalls || out.Failed != 0 {
		return fmt.Errorf("calling %s: %d ok and %d failed, want %d ok", gateway.BatchToolName, out.OK, out.Failed, parallelCalls)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// reportParallel writes parallel mode's tables and reports whether a
// round's ratio reached parallelTarget.
func reportParallel(w io.Writer, p params, rounds []parallelResult) (missed bool) {
	writeMachine(w)
	fmt.Fprintf(w, "Tool: builtin sleep {\"ms\":%d} on toolgate (batch_tool: true, default limits max_parallel 64, "+
		"max_parallel_per_session 16), one mcp-go streamable HTTP session on 127.0.0.1, same process. "+
		"Per round: T1 = one call; T%[2]dc = %[2]d concurrent calls from the session, until the last returned; "+
		"T%[2]db = one toolgate_batch of %[2]d sleep calls. %[3]d rounds after one warm-up round.\n\n",
		sleepMS, parallelCalls, p.rounds)
	fmt.Fprintf(w, "| round | T1 ms | T%[1]dc ms | T%[1]db ms | T%[1]dc/T1 | T%[1]db/T1 |\n", parallelCalls)
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|")
	for i, r := range rounds {
		fmt.Fprintf(w, "| %d | %.1f | %.1f | %.1f | %.3f | %.3f |\n", i+1, ms(r.t1), ms(r.concurrent), ms(r.batch),
			r.concurrentRatio(), r.batchRatio())
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "| ratio | median | max | target: every round < %.1f |\n", parallelTarget)
	fmt.Fprintln(w, "|---|---:|---:|---|")
	for _, m := range []struct {
		name  string
		ratio func(parallelResult) float64
	}{
		{fmt.Sprintf("T%dc/T1 (concurrent calls)", parallelCalls), parallelResult.concurrentRatio},
		{fmt.Sprintf("T%db/T1 (toolgate_batch)", parallelCalls), parallelResult.batchRatio},
	} {
		rs := make([]float64, len(rounds))
		for i, r := range rounds {
			rs[i] = m.ratio(r)
		}
		slices.Sort(rs)
		med, top := rs[len(rs)/2], rs[len(rs)-1]
		met := top < parallelTarget
		missed = missed || !met
		fmt.Fprintf(w, "| %s | %.3f | %.3f | %s |\n", m.name, med, top, yesNo(met))
	}
	return missed
}

// writeMachine writes the machine line every report starts with.
func writeMachine(w io.Writer) {
	fmt.Fprintf(w, "Machine: %s/%s, %d CPUs (GOMAXPROCS %d), %s.\n\n", runtime.GOOS, runtime.GOARCH,
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version())
}

// flakyConfig is toolgate's configuration in flaky mode; %s is the
// backend's base URL. Retries: 3 attempts, the first retry after at most
// 5ms (full jitter); the retry budget and circuit breaker keep their
// defaults (20% of first attempts plus 10 per 10s; 5 consecutive failures).
const flakyConfig = `
builtin: []
defaults:
  retry:
    attempts: 3
    initial_backoff: 5ms
rest:
  - name: get_item
    description: Returns one item.
    method: GET
    idempotent: true
    url: %s/item/{id}
`

// Failure models of the flaky backend.
const (
	// failNone never fails: the baseline.
	failNone = "none"
	// failTransient fails the first request for an item with the failure
	// rate, chosen by the seeded RNG, and answers every later request for
	// it: a failure that a retry cures. Each call asks for its own item.
	failTransient = "transient"
	// failIndependent fails every request, retries included, with the
	// failure rate, so a call fails after 3 attempts with probability
	// rate³ (1.25e-4 at 5%).
	failIndependent = "independent"
)

// flakyBackend is the REST server of flaky mode: GET /item/{id} answers
// itemBody(id), or 503 as its failure model decides.
type flakyBackend struct {
	model string
	rate  float64

	mu       sync.Mutex      // guards the fields below
	rng      *rand.Rand      // draws the failures, in request order
	seen     map[string]bool // failTransient: items requested before
	requests int             // requests answered
	failed   int             // of which 503
}

func newFlakyBackend(model string, rate float64, seed uint64) *flakyBackend {
	return &flakyBackend{model: model, rate: rate, rng: rand.New(rand.NewPCG(seed, seed)), seen: make(map[string]bool)}
}

// ServeHTTP answers GET /item/{id}.
func (b *flakyBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	b.mu.Lock()
	b.requests++
	fail := false
	switch b.model {
	case failTransient:
		if !b.seen[id] {
			b.seen[id] = true
			fail = b.rng.Float64() < b.rate
		}
	case failIndependent:
		fail = b.rng.Float64() < b.rate
	}
	if fail {
		b.failed++
	}
	b.mu.Unlock()
	if fail {
		http.Error(w, "try again", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(itemBody(id))
}

// counts returns the requests answered so far and how many were 503.
func (b *flakyBackend) counts() (requests, failed int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.requests, b.failed
}

// flakyRun is one run of flaky mode: n calls at c sessions against one
// backend.
type flakyRun struct {
	round   int
	model   string
	rate    float64
	c       int
	calls   int
	failed  int    // calls that returned an error or an error result
	example string // one failure's text, when failed > 0

	lat        []time.Duration // sorted
	throughput float64

	requests  int     // backend requests seen during the measured calls
	rejected  int     // of which answered 503
	retries   float64 // toolgate_retries_total, measured calls
	exhausted float64 // toolgate_retry_budget_exhausted_total, measured calls
}

func (r flakyRun) label() string {
	if r.model == failNone {
		return "0% (baseline)"
	}
	return fmt.Sprintf("%g%% %s", r.rate*100, r.model)
}

// expectsAll reports whether every call of r must succeed: the baseline
// and the transient model (the scenario). The independent model
// lets a call fail all its attempts.
func (r flakyRun) expectsAll() bool { return r.model != failIndependent }

// runFlaky is -mode flaky: for every concurrency level and round, one run
// against each failure model, each with its own backend and gateway, then
// the report.
func runFlaky(ctx context.Context, p params, stdout, stderr io.Writer) error {
	models := []string{failNone, failTransient, failIndependent}
	var runs []flakyRun
	for _, c := range p.levels {
		for r := range p.rounds {
			for k := range models {
				m := models[k]
				if r%2 == 1 { // alternate the order, as sweep does
					m = models[len(models)-1-k]
				}
				rate := p.failRate
				if m == failNone {
					rate = 0
				}
				run, err := measureFlaky(ctx, p, m, rate, c)
				if err != nil {
					return fmt.Errorf("measuring %s at c=%d: %w", m, c, err)
				}
				run.round = r + 1
				fmt.Fprintf(stderr, "c=%d round %d %-16s %6.0f calls/s  ok %d/%d  requests %d (503: %d)  retries %.0f  "+
					"budget exhausted %.0f  p50 %6.0fµs  p99 %6.0fµs\n", c, r+1, run.label(), run.throughput,
					run.calls-run.failed, run.calls, run.requests, run.rejected, run.retries, run.exhausted,
					us(percentile(run.lat, 0.5)), us(percentile(run.lat, 0.99)))
				if run.example != "" {
					fmt.Fprintf(stderr, "  a failed call: %s\n", run.example)
				}
				runs = append(runs, run)
			}
		}
	}
	reportFlaky(stdout, p, runs)
	var problems []string
	for _, r := range runs {
		if r.expectsAll() && r.failed > 0 {
			problems = append(problems, fmt.Sprintf("%d calls failed against %s at c=%d", r.failed, r.label(), r.c))
		}
		if r.exhausted > 0 {
			problems = append(problems, fmt.Sprintf("the retry budget ran out %.0f times against %s at c=%d", r.exhausted, r.label(), r.c))
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// measureFlaky starts a backend with the given model and a gateway in
// front of it, opens c sessions, warms them up (p.warmup calls, at least
// one per session), then makes p.n calls spread over the sessions, each
// for its own item, and reads what the backend and toolgate's metrics saw
// during those calls.
func measureFlaky(ctx context.Context, p params, model string, rate float64, c int) (flakyRun, error) {
	run := flakyRun{model: model, rate: rate, c: c, calls: p.n}
	backend := newFlakyBackend(model, rate, p.seed)
	mux := http.NewServeMux()
	mux.Handle("GET /item/{id}", backend)
	api, stopAPI, err := serve(mux)
	if err != nil {
		return run, fmt.Errorf("starting the REST server: %w", err)
	}
	defer stopAPI() // after toolgate, which closes its connections to it
	cfg, err := config.Parse("bench-flaky.yaml", fmt.Appendf(nil, flakyConfig, api), nil)
	if err != nil {
		return run, fmt.Errorf("parsing the flaky config: %w", err)
	}
	g, err := gateway.New(cfg, gateway.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return run, fmt.Errorf("building gateway: %w", err)
	}
	defer g.Close()
	base, stop, err := serve(g.Handler())
	if err != nil {
		return run, fmt.Errorf("starting toolgate: %w", err)
	}
	defer stop()
	hc := newHTTPClient()
	defer hc.CloseIdleConnections() // before stop: see serve
	tg := &target{name: "toolgate", url: base + "/mcp", client: hc}

	sessions, closeAll, err := connectN(ctx, tg, c)
	defer closeAll()
	if err != nil {
		return run, err
	}

	var next atomic.Int64 // numbers the items, so each call asks for its own
	call := func(ctx context.Context, s *client.Client) error {
		return callItemID(ctx, s, "i"+strconv.FormatInt(next.Add(1), 10))
	}
	_ = spread(ctx, sessions, max(p.warmup, c), call) // warm-up failures are not counted
	if err := ctx.Err(); err != nil {
		return run, err
	}

	req0, rej0 := backend.counts()
	m0, err := scrape(ctx, hc, base+"/metrics")
	if err != nil {
		return run, err
	}
	lat := make([][]time.Duration, c)
	failed := make([]int, c)
	examples := make([]string, c)
	var wg sync.WaitGroup
	start := time.Now()
	for i, s := range sessions {
		calls := p.n / c
		if i < p.n%c {
			calls++
		}
		lat[i] = make([]time.Duration, 0, calls)
		wg.Go(func() {
			for range calls {
				t0 := time.Now()
				err := call(ctx, s)
				lat[i] = append(lat[i], time.Since(t0))
				if err != nil {
					failed[i]++
					examples[i] = err.Error()
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return run, err
	}
	req1, rej1 := backend.counts()
	m1, err := scrape(ctx, hc, base+"/metrics")
	if err != nil {
		return run, err
	}

	run.lat = slices.Concat(lat...)
	slices.Sort(run.lat)
	run.throughput = float64(len(run.lat)) / elapsed.Seconds()
	for i, f := range failed {
		run.failed += f
		if examples[i] != "" {
			run.example = examples[i]
		}
	}
	run.requests, run.rejected = req1-req0, rej1-rej0
	run.retries = m1[metricRetries] - m0[metricRetries]
	run.exhausted = m1[metricExhausted] - m0[metricExhausted]
	return run, nil
}

// callItemID makes one get_item call for id and checks that its first
// content is the item's JSON as text.
func callItemID(ctx context.Context, c *client.Client, id string) error {
	var req mcp.CallToolRequest
	req.Params.Name = "get_item"
	req.Params.Arguments = map[string]any{"id": id}
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return err
	}
	if res.IsError || len(res.Content) == 0 {
		return fmt.Errorf("calling get_item: error result %q", firstText(res))
	}
	want := strings.TrimSpace(string(itemBody(id)))
	if tc, ok := mcp.AsTextContent(res.Content[0]); !ok || strings.TrimSpace(tc.Text) != want {
		return fmt.Errorf("calling get_item: unexpected result %+v", res.Content)
	}
	return nil
}

// firstText returns the text of res's first content, or "" when it has
// none.
func firstText(res *mcp.CallToolResult) string {
	if len(res.Content) == 0 {
		return ""
	}
	if tc, ok := mcp.AsTextContent(res.Content[0]); ok {
		return tc.Text
	}
	return ""
}

// The toolgate counters flaky mode reads.
const (
	metricRetries   = "toolgate_retries_total"
	metricExhausted = "toolgate_retry_budget_exhausted_total"
)

// scrape reads url's Prometheus text exposition and returns the sum over
// all label sets of metricRetries and metricExhausted (absent counters,
// which have no series yet, are 0).
func scrape(ctx context.Context, hc *http.Client, url string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("scraping metrics: %w", err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scraping metrics: HTTP %d", resp.StatusCode)
	}
	sums := map[string]float64{metricRetries: 0, metricExhausted: 0}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, rest := line, ""
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		if strings.HasPrefix(rest, "{") {
			rest = rest[strings.LastIndexByte(rest, '}')+1:]
		}
		f := strings.Fields(rest)
		if _, want := sums[name]; !want || len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return nil, fmt.Errorf("scraping metrics: %q: %w", line, err)
		}
		sums[name] += v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("scraping metrics: %w", err)
	}
	return sums, nil
}

// reportFlaky writes flaky mode's tables: outcomes and retries, then
// latency with the p99 the failures add over the baseline of the same
// round and concurrency level.
func reportFlaky(w io.Writer, p params, runs []flakyRun) {
	writeMachine(w)
	fmt.Fprintf(w, "Tool get_item: a REST tool (GET /item/{id}, idempotent) on toolgate, over streamable HTTP from C mcp-go "+
		"sessions on 127.0.0.1, same process; every call asks for its own item. Retries: defaults.retry attempts 3, "+
		"initial_backoff 5ms (full jitter), retry budget and circuit breaker at their defaults (20%% of first attempts + 10 per 10s; "+
		"5 consecutive failures). Backend: net/http on 127.0.0.1 answering 503 as drawn by a PCG RNG seeded %d: "+
		"baseline never; transient: the first request for %g%% of items, their retries succeed; independent: %g%% of all "+
		"requests, retries included (a call then fails 3 attempts with probability %.2g). A fresh backend and gateway per run; "+
		"%d calls per run after %d warm-up calls (at least one per session).\n\n", p.seed, p.failRate*100, p.failRate*100,
		p.failRate*p.failRate*p.failRate, p.n, p.warmup)
	fmt.Fprintln(w, "| sessions | round | backend | calls | succeeded | success | backend requests | 503 answered | retries (backend) | "+
		"toolgate_retries_total | budget exhausted |")
	fmt.Fprintln(w, "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range runs {
		ok := r.calls - r.failed
		fmt.Fprintf(w, "| %d | %d | %s | %d | %d | %s | %d | %d | %d | %.0f | %.0f |\n", r.c, r.round, r.label(), r.calls, ok,
			successRate(ok, r.calls), r.requests, r.rejected, r.requests-r.calls, r.retries, r.exhausted)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| sessions | round | backend | calls/s | p50 µs | p95 µs | p99 µs | max µs | p99 − baseline p99 (µs) |")
	fmt.Fprintln(w, "|---:|---:|---|---:|---:|---:|---:|---:|---:|")
	for _, r := range runs {
		added := "—"
		if r.model != failNone {
			if b, ok := baselineOf(runs, r); ok {
				added = fmt.Sprintf("%+.0f", us(percentile(r.lat, 0.99))-us(percentile(b.lat, 0.99)))
			}
		}
		fmt.Fprintf(w, "| %d | %d | %s | %.0f | %.0f | %.0f | %.0f | %.0f | %s |\n", r.c, r.round, r.label(), r.throughput,
			us(percentile(r.lat, 0.50)), us(percentile(r.lat, 0.95)), us(percentile(r.lat, 0.99)), us(percentile(r.lat, 1)), added)
	}
	writeFlakySummary(w, p, runs)
}

// writeFlakySummary writes, per concurrency level and failing model, the
// success rate over all rounds and the median (and range) over rounds of
// the p99 added over the same round's baseline.
func writeFlakySummary(w io.Writer, p params, runs []flakyRun) {
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Summary over %d round(s):\n\n", p.rounds)
	fmt.Fprintln(w, "| sessions | backend | calls | success | retries / calls | budget exhausted | added p99 µs, median | min | max |")
	fmt.Fprintln(w, "|---:|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, c := range p.levels {
		for _, m := range []string{failTransient, failIndependent} {
			var calls, ok, retries int
			var exhausted float64
			var added []float64
			for _, r := range runs {
				if r.c != c || r.model != m {
					continue
				}
				calls += r.calls
				ok += r.calls - r.failed
				retries += r.requests - r.calls
				exhausted += r.exhausted
				if b, found := baselineOf(runs, r); found {
					added = append(added, us(percentile(r.lat, 0.99))-us(percentile(b.lat, 0.99)))
				}
			}
			if calls == 0 || len(added) == 0 {
				continue
			}
			slices.Sort(added)
			fmt.Fprintf(w, "| %d | %s | %d | %s | %.2f%% | %.0f | %+.0f | %+.0f | %+.0f |\n", c,
				flakyRun{model: m, rate: p.failRate}.label(), calls, successRate(ok, calls), 100*float64(retries)/float64(calls),
				exhausted, added[len(added)/2], added[0], added[len(added)-1])
		}
	}
}

// baselineOf returns the baseline run of r's round and concurrency level.
func baselineOf(runs []flakyRun, r flakyRun) (flakyRun, bool) {
	i := slices.IndexFunc(runs, func(b flakyRun) bool { return b.model == failNone && b.round == r.round && b.c == r.c })
	if i < 0 {
		return flakyRun{}, false
	}
	return runs[i], true
}

// successRate formats ok/n as a percentage, with enough digits that one
// failure in 10 000 calls does not round to 100%.
func successRate(ok, n int) string {
	if n == 0 {
		return "—"
	}
	if ok == n {
		return "100%"
	}
	return strconv.FormatFloat(100*float64(ok)/float64(n), 'f', 3, 64) + "%"
}
