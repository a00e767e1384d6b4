package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/builtin"
	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/gateway"
)

// -mode fairshare: one principal's share of the call slots (issue 31,
// docs/limits.md). Two gateways in one run, both with static-token auth
// (alice, bob) and the builtin calc and sleep: "one pool", where
// defaults.max_parallel_per_principal equals max_parallel (a principal may
// take every slot: the behaviour before the share), and "fair share", the
// default (half of max_parallel). For each:
//
//   - load: -n calc calls (default 10,000) at -c 64 sessions of alice's,
//     through auth; the throughput, the errors (must be 0), and the
//     goroutines before and after (must come back);
//   - fairness: bob's calc p99 over fairCalls sequential calls, alone, then
//     while alice keeps floodSessions × floodPerSession sleep calls of
//     sleepMS in flight (twice max_parallel); the ratio of the two p99s
//     must stay under fairTarget with the share.
const modeFairShare = "fairshare"

const (
	fairCalls       = 500
	floodSessions   = 8
	floodPerSession = 16
	fairTarget      = 2.0
)

// fairConfig is the gateway's configuration; %d is
// max_parallel_per_principal.
const fairConfig = `
builtin: [calc, sleep]
guards:
  loop: {action: "off"}
defaults:
  max_parallel: 64
  max_parallel_per_principal: %d
auth:
  tokens:
    - {name: alice, token: alice-token-0123456789abcdef}
    - {name: bob, token: bob-token-0123456789abcdef}
    - {name: ops, token: ops-token-0123456789abcdef}
  admins: [ops]
`

// fairResult is one gateway's measurements.
type fairResult struct {
	name                string
	load                runResult
	goroutines, after   int
	bobAlone, bobLoaded time.Duration // p99s
}

func runFairShare(ctx context.Context, p params, stdout, stderr io.Writer) error {
	n, c := p.n, 64
	if len(p.levels) > 0 {
		c = p.levels[0]
	}
	var results []fairResult
	base := runtime.NumGoroutine()
	for _, v := range []struct {
		name  string
		share int
	}{{"one pool (share = max_parallel)", 64}, {"fair share (default: half)", 0}} {
		settleGoroutines(base) // the previous gateway's connections and sessions have ended
		r, err := fairRun(ctx, v.name, v.share, n, c, stderr)
		if err != nil {
			return fmt.Errorf("%s: %w", v.name, err)
		}
		results = append(results, r)
	}
	fmt.Fprintf(stdout, "| gateway | calc at C=%d through auth | errors | goroutines before → after | bob p99 alone | bob p99 while alice floods | ratio |\n|---|---|---|---|---|---|---|\n", c)
	bad := ""
	for _, r := range results {
		ratio := float64(r.bobLoaded) / float64(r.bobAlone)
		fmt.Fprintf(stdout, "| %s | %.0f calls/s | %d | %d → %d | %.2f ms | %.2f ms | %.2f× |\n",
			r.name, r.load.throughput, r.load.errors, r.goroutines, r.after, ms(r.bobAlone), ms(r.bobLoaded), ratio)
		if r.load.errors > 0 || r.after > r.goroutines {
			bad = fmt.Sprintf("%s: %d errors, goroutines %d → %d", r.name, r.load.errors, r.goroutines, r.after)
		}
	}
	if last := results[len(results)-1]; float64(last.bobLoaded) > fairTarget*float64(last.bobAlone) {
		bad = fmt.Sprintf("with the share, bob's p99 while alice floods is %.1f× his p99 alone, over %.0f×", float64(last.bobLoaded)/float64(last.bobAlone), fairTarget)
	}
	if bad != "" {
		return fmt.Errorf("%s", bad)
	}
	return nil
}

// fairRun measures one gateway whose principal share is share.
func fairRun(ctx context.Context, name string, share, n, c int, stderr io.Writer) (fairResult, error) {
	r := fairResult{name: name}
	cfg, err := config.Parse("bench-fairshare.yaml", fmt.Appendf(nil, fairConfig, share), &config.Options{Builtins: builtin.Names()})
	if err != nil {
		return r, fmt.Errorf("parsing the config: %w", err)
	}
	g, err := gateway.New(cfg, gateway.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return r, fmt.Errorf("building gateway: %w", err)
	}
	defer g.Close()
	if err := builtin.Register(g, cfg.Builtin, nil); err != nil {
		return r, fmt.Errorf("registering builtin tools: %w", err)
	}
	base, stop, err := serve(g.Handler())
	if err != nil {
		return r, fmt.Errorf("starting toolgate: %w", err)
	}
	defer stop()
	hc := newHTTPClient()
	defer hc.CloseIdleConnections()
	alice := &target{name: "alice", url: base + "/mcp", client: hc, call: callCalc}

	r.goroutines = runtime.NumGoroutine()
	fmt.Fprintf(stderr, "%s: %d calc at C=%d as alice\n", name, n, c)
	alice.token = "alice-token-0123456789abcdef"
	if r.load, err = measure(ctx, alice, c, n, c*10); err != nil {
		return r, err
	}
	hc.CloseIdleConnections()
	r.after = settleGoroutines(r.goroutines)

	bob := &target{name: "bob", url: base + "/mcp", client: hc, token: "bob-token-0123456789abcdef"}
	bs, err := bob.open(ctx)
	if err != nil {
		return r, err
	}
	defer bs.Close()
	for range 20 { // warm-up: the connection, the caches
		if err := callCalc(ctx, bs); err != nil {
			return r, fmt.Errorf("bob's calc: %w", err)
		}
	}
	if r.bobAlone, err = bobP99(ctx, bs); err != nil {
		return r, err
	}
	fmt.Fprintf(stderr, "%s: bob alone p99 %.2f ms; alice floods\n", name, ms(r.bobAlone))
	floodCtx, endFlood := context.WithCancel(ctx)
	var flood sync.WaitGroup
	defer flood.Wait()
	defer endFlood()
	alice.token = "alice-token-0123456789abcdef"
	sessions, closeAll, err := connectN(ctx, alice, floodSessions)
	defer closeAll()
	if err != nil {
		return r, err
	}
	for _, s := range sessions {
		for range floodPerSession {
			flood.Go(func() {
				for floodCtx.Err() == nil {
					_ = callSleep(floodCtx, s)
				}
			})
		}
	}
	if err := waitSaturated(ctx, base, hc); err != nil {
		return r, err
	}
	if r.bobLoaded, err = bobP99(ctx, bs); err != nil {
		return r, err
	}
	return r, nil
}

// waitSaturated waits until at least 64 of alice's calls wait for a slot
// (her flood has taken hold: max_parallel run, the rest queue), reading
// toolgate_queue_length as an admin.
func waitSaturated(ctx context.Context, base string, hc *http.Client) error {
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer ops-token-0123456789abcdef")
		resp, err := hc.Do(req)
		if err != nil {
			return fmt.Errorf("reading /metrics: %w", err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("reading /metrics: %w", err)
		}
		for line := range strings.Lines(string(body)) {
			if v, ok := strings.CutPrefix(line, "toolgate_queue_length "); ok {
				if n, _ := strconv.ParseFloat(strings.TrimSpace(v), 64); n >= 64 {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond): // polling a load generator's state, not a test's synchronisation
		}
	}
}

// bobP99 is the p99 of fairCalls sequential calc calls on s.
func bobP99(ctx context.Context, s *client.Client) (time.Duration, error) {
	lat := make([]time.Duration, 0, fairCalls)
	for range fairCalls {
		t0 := time.Now()
		if err := callCalc(ctx, s); err != nil {
			return 0, fmt.Errorf("bob's calc: %w", err)
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	return percentile(lat, 0.99), nil
}

// settleGoroutines waits up to 30s for the goroutines to come back to at
// most start (the sessions' and connections' goroutines end after their
// close), and returns how many there are.
func settleGoroutines(start int) int {
	deadline := time.Now().Add(30 * time.Second)
	for runtime.NumGoroutine() > start && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	return runtime.NumGoroutine()
}

// callCalc calls calc with 6*7 and checks the answer.
func callCalc(ctx context.Context, c *client.Client) error {
	var req mcp.CallToolRequest
	req.Params.Name = "calc"
	req.Params.Arguments = map[string]any{"expression": "6*7"}
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return err
	}
	if res.IsError || len(res.Content) != 1 {
		return fmt.Errorf("calc: unexpected result %+v", res.Content)
	}
	if tc, ok := mcp.AsTextContent(res.Content[0]); !ok || tc.Text != "42" {
		return fmt.Errorf("calc: unexpected result %+v", res.Content)
	}
	return nil
}

// authTransport is the streamable HTTP transport of a target, with its
// bearer token when it has one.
func authTransport(t *target) (*transport.StreamableHTTP, error) {
	opts := []transport.StreamableHTTPCOption{
		transport.WithHTTPBasicClient(t.client),
		transport.WithHTTPLogger(slog.New(slog.DiscardHandler)),
	}
	if t.token != "" {
		opts = append(opts, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + t.token}))
	}
	return transport.NewStreamableHTTP(t.url, opts...)
}
