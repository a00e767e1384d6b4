package tests

// The routing matrix of issue 26: three replicas behind each balancer
// (HAProxy with the shipped config, nginx with the shipped config, and
// plain round robin leaning on cluster.peers forwarding) × each flow that
// needs its requests on the replica owning its state, 30 times each, all
// of which must work; and plain round robin in front of lone toolgates,
// which must not, so that docs/scaling.md stays honest.

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// Bounds of the matrix.
const (
	lbIterations = 30               // runs of each flow behind each balancer
	flowTimeout  = 20 * time.Second // one run of one flow, every request in it
	updateWait   = 5 * time.Second  // for a resource update, once subscribed
	touchEvery   = time.Second      // the update is made again this often
)

// lbFlow is a flow of the matrix. run does it once, the i-th time, through
// the balancer at base (row names the balancer, to keep each row's names
// apart), and says what went wrong.
type lbFlow struct {
	name     string
	parallel int // runs at once
	run      func(ctx context.Context, base, row string, i int) error
}

// lbFlows are the matrix's flows.
var lbFlows = []lbFlow{
	// A 2025 session: the scratchpad of the session's thread, put then get.
	{"session", 6, sessionFlow},
	// A 2026-07-28 call of server-everything's elicitation tool: its
	// input_required answer, then the retry carrying the requestState.
	// One at a time: on one replica, an upstream that asks while calls
	// of several clients are in flight cannot tell whose to ask (issue
	// 26, requirement 7).
	{"input_required", 1, elicitationFlow},
	// A 2026-07-28 thread handle: put from one client, get with the
	// handle from another, which sends it as Mcp-Param-Toolgate-Thread.
	{"thread handle", 6, handleFlow},
	// A 2026-07-28 _meta named thread: put from one client, get from
	// another.
	{"named thread", 6, namedThreadFlow},
	// A 2025 session with its GET stream: resources/subscribe, then an
	// update of the resource reaches it.
	{"subscribe", 6, subscribeFlow},
}

// open2025 returns an initialized 2025-11-25 client of base's MCP
// endpoint; Close it.
func open2025(ctx context.Context, base string, opts ...transport.StreamableHTTPCOption) (*client.Client, error) {
	// The transport logs each GET stream it opens, thousands in a run.
	opts = append(opts, transport.WithHTTPLogger(slog.New(slog.DiscardHandler)))
	tr, err := transport.NewStreamableHTTP(base+"/mcp", opts...)
	if err != nil {
		return nil, err
	}
	c := client.NewClient(tr, client.WithProtocolVersion(protocolVersion))
	if err := c.Start(ctx); err != nil {
		return nil, fmt.Errorf("starting: %w", err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = protocolVersion
	init.Params.ClientInfo = mcp.Implementation{Name: "toolgate-e2e-lb", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("initialize: %w", err)
	}
	return c, nil
}

// open2026 returns a client of base's MCP endpoint that negotiated
// 2026-07-28; Close it.
func open2026(ctx context.Context, base string, opts ...client.ClientOption) (*client.Client, error) {
	tr, err := transport.NewStreamableHTTP(base + "/mcp")
	if err != nil {
		return nil, err
	}
	c := client.NewClient(tr, opts...)
	if err := c.Start(ctx); err != nil {
		return nil, fmt.Errorf("starting: %w", err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "toolgate-e2e-lb-2026", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("negotiating: %w", err)
	}
	if v := c.ProtocolVersion(); v != mcp.ProtocolVersion20260728 {
		_ = c.Close()
		return nil, fmt.Errorf("negotiated %q, want %s", v, mcp.ProtocolVersion20260728)
	}
	return c, nil
}

// callText calls name with args (in thread, when not empty) and returns
// the result's text; an isError result is an error.
func callText(ctx context.Context, c *client.Client, name string, args any, thread string) (string, error) {
	res, err := c.CallTool(ctx, callRequest(name, args, thread))
	if err != nil {
		return "", fmt.Errorf("tools/call %s: %w", name, err)
	}
	if res.IsError {
		return "", fmt.Errorf("tools/call %s: isError: %s", name, resultText(res))
	}
	return resultText(res), nil
}

func sessionFlow(ctx context.Context, base, _ string, i int) error {
	c, err := open2025(ctx, base)
	if err != nil {
		return err
	}
	defer c.Close()
	want := fmt.Sprintf("note %d", i)
	if _, err := callText(ctx, c, "scratchpad", map[string]any{"op": "put", "key": "note", "value": want}, ""); err != nil {
		return err
	}
	got, err := callText(ctx, c, "scratchpad", map[string]any{"op": "get", "key": "note"}, "")
	if err == nil && got != want {
		err = fmt.Errorf("get = %q, want %q", got, want)
	}
	return err
}

func elicitationFlow(ctx context.Context, base, _ string, _ int) error {
	c, err := open2026(ctx, base, client.WithElicitationHandler(formFiller{}))
	if err != nil {
		return err
	}
	defer c.Close()
	got, err := callText(ctx, c, "ev__trigger-elicitation-request", map[string]any{}, "")
	if err == nil && !strings.Contains(got, "Ada Lovelace") {
		err = fmt.Errorf("trigger-elicitation-request = %q, want the client's answer in it", got)
	}
	return err
}

func namedThreadFlow(ctx context.Context, base, row string, i int) error {
	thread := fmt.Sprintf("lb-%s-%d", row, i)
	want := fmt.Sprintf("plan %d", i)
	put, err := open2026(ctx, base)
	if err != nil {
		return err
	}
	defer put.Close()
	if _, err := callText(ctx, put, "scratchpad", map[string]any{"op": "put", "key": "plan", "value": want}, thread); err != nil {
		return err
	}
	get, err := open2026(ctx, base)
	if err != nil {
		return err
	}
	defer get.Close()
	got, err := callText(ctx, get, "scratchpad", map[string]any{"op": "get", "key": "plan"}, thread)
	if err == nil && got != want {
		err = fmt.Errorf("get in thread %s = %q, want %q", thread, got, want)
	}
	return err
}

// handleFlow keeps a scratchpad across 2026-07-28 clients with a thread
// handle: one puts and gets the handle in its result, another gets with
// it. Both list the tools first, so that mcp-go sends the handle as the
// Mcp-Param-Toolgate-Thread header the balancers route on.
func handleFlow(ctx context.Context, base, _ string, i int) error {
	want := fmt.Sprintf("kept %d", i)
	var handle string
	for _, op := range []string{"put", "get"} {
		c, err := open2026(ctx, base)
		if err != nil {
			return err
		}
		defer c.Close()
		if _, err := c.ListTools(ctx, mcp.ListToolsRequest{}); err != nil {
			return fmt.Errorf("tools/list: %w", err)
		}
		args := map[string]any{"op": op, "key": "k"}
		if op == "put" {
			args["value"] = want
		} else {
			args["thread"] = handle
		}
		res, err := c.CallTool(ctx, callRequest("scratchpad", args, ""))
		switch {
		case err != nil:
			return fmt.Errorf("%s: %w", op, err)
		case res.IsError:
			return fmt.Errorf("%s: isError: %s", op, resultText(res))
		case op == "put":
			if handle = handleOf(res); handle == "" {
				return fmt.Errorf("put: no thread handle in the result (meta %v)", res.Meta)
			}
		case resultText(res) != want:
			return fmt.Errorf("get with handle %s = %q, want %q", handle, resultText(res), want)
		}
	}
	return nil
}

func subscribeFlow(ctx context.Context, base, _ string, i int) error {
	c, err := open2025(ctx, base, transport.WithContinuousListening())
	if err != nil {
		return err
	}
	defer c.Close()
	uri := fmt.Sprintf("test://lb/%d", i)
	updated := make(chan struct{})
	var once sync.Once
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationResourceUpdated) && n.Params.AdditionalFields["uri"] == uri {
			once.Do(func() { close(updated) })
		}
	})
	sub := mcp.SubscribeRequest{}
	sub.Params.URI = uri
	if err := c.Subscribe(ctx, sub); err != nil {
		return fmt.Errorf("resources/subscribe: %w", err)
	}
	// The update is made again each touchEvery until one reaches the
	// client: a notification that comes while the client's GET stream is
	// still connecting, or reconnecting, can be lost (no event store), and
	// that is the stream's weakness, not the balancer's. Seen once in
	// about 500 runs behind nginx on a loaded machine.
	deadline := time.NewTimer(updateWait)
	defer deadline.Stop()
	tick := time.NewTicker(touchEvery)
	defer tick.Stop()
	for {
		if _, err := callText(ctx, c, "w__touch", map[string]any{"uri": uri}, ""); err != nil {
			return err
		}
		select {
		case <-updated:
			return nil
		case <-tick.C:
		case <-deadline.C:
			return fmt.Errorf("no notifications/resources/updated for %s within %v of the first update", uri, updateWait)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// runFlow runs f lbIterations times through base, f.parallel at once, and
// returns each run's error.
func runFlow(t *testing.T, f lbFlow, base, row string) []error {
	errs := make([]error, lbIterations)
	sem := make(chan struct{}, f.parallel)
	var wg sync.WaitGroup
	for i := range lbIterations {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(t.Context(), flowTimeout)
			defer cancel()
			errs[i] = f.run(ctx, base, row, i)
		})
	}
	wg.Wait()
	return errs
}

// lbUpstreams is the upstreams section of every replica of the matrix:
// server-everything (its elicitation tool) over stdio, marked by m, and
// the updates upstream at url, over streamable HTTP.
func lbUpstreams(t *testing.T, m procMarker, url string) string {
	// A short grace: the calls that lone toolgates leave waiting for
	// answers that never come must not hold up their stop.
	return "server: {shutdown_grace: 1s}\nguards: {loop: {action: \"off\"}}\nbuiltin: [scratchpad]\nupstreams:\n" + everythingUpstream(t, m) +
		fmt.Sprintf("  - name: w\n    transport: streamable-http\n    url: %q\n", url)
}

// waitServing waits until every replica of c serves the matrix's tools
// and resources (its upstreams connect in the background).
func (c *cluster) waitServing(t *testing.T) {
	t.Helper()
	for _, r := range c.replicas {
		cl := connect(t, streamableHTTP, r)
		waitTools(t, cl, "scratchpad", "ev__trigger-elicitation-request", "w__touch")
		pollUntil(t, upstreamTimeout, "the updates upstream's resources on "+r.URL, func() (bool, string) {
			ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
			defer cancel()
			res, err := cl.ListResources(ctx, mcp.ListResourcesRequest{})
			if err != nil {
				return false, err.Error()
			}
			for _, r := range res.Resources {
				if r.URI == "test://lb/0" {
					return true, ""
				}
			}
			return false, fmt.Sprintf("%d resources, none test://lb/0", len(res.Resources))
		})
		_ = cl.Close()
	}
}

func TestClusterRoutingMatrix(t *testing.T) {
	needProgram(t, "haproxy", "haproxy")
	needProgram(t, "nginx", "nginx-light")
	m := newProcMarker(t)
	yaml := lbUpstreams(t, m, updatesUpstream(t, lbIterations))
	peered := startCluster(t, yaml, true)
	lone := startCluster(t, yaml, false)
	// Cleanups run last first: after the clients' and the balancers',
	// the replicas stop, then no upstream process may remain.
	t.Cleanup(func() {
		stopAll(t, append(peered.replicas, lone.replicas...))
		if left := m.pids(t); len(left) > 0 {
			t.Errorf("upstream processes %v outlived toolgate serve", left)
		}
	})
	peered.waitServing(t)
	lone.waitServing(t)

	rows := []struct {
		name string
		lb   *balancer
		c    *cluster
		// works: every run of every flow works; otherwise some must fail.
		works bool
		// pinned are the flows whose every request the balancer sends to
		// the owner: the replicas forward none of them.
		pinned []string
		// forwarded are the flows that work only because the replicas
		// forward.
		forwarded []string
	}{
		{"haproxy", startHAProxy(t, "../examples/cluster/haproxy.cfg", peered.addrs), peered, true,
			[]string{"session", "input_required", "thread handle", "subscribe"}, nil},
		{"nginx-map", startNginx(t, peered.addrs), peered, true,
			[]string{"session", "thread handle", "subscribe"}, nil},
		{"roundrobin+peers", startHAProxy(t, "testdata/lb/haproxy-roundrobin.cfg", peered.addrs), peered, true,
			nil, []string{"session", "thread handle", "subscribe"}},
		{"roundrobin-no-cluster", startHAProxy(t, "testdata/lb/haproxy-roundrobin.cfg", lone.addrs), lone, false, nil, nil},
	}
	var table strings.Builder
	for _, row := range rows {
		for _, f := range lbFlows {
			t.Run(row.name+"/"+f.name, func(t *testing.T) {
				before := row.c.forwards(t)
				start := time.Now()
				errs := runFlow(t, f, row.lb.URL, row.name)
				forwards := row.c.forwards(t) - before
				failed := 0
				var first error
				for _, err := range errs {
					if err != nil {
						failed++
						first = cmp.Or(first, err)
					}
				}
				fmt.Fprintf(&table, "%-22s %-15s %2d/%d ok  %3.0f forwards  %v\n", row.name, f.name, lbIterations-failed, lbIterations, forwards, time.Since(start).Round(time.Millisecond))
				switch {
				case row.works && failed > 0:
					t.Errorf("%d/%d runs failed; the first: %v", failed, lbIterations, first)
				case !row.works && failed == 0:
					t.Errorf("all %d runs worked, want failures: docs/scaling.md says plain round robin without a cluster section breaks this flow", lbIterations)
				}
				if slices.Contains(row.pinned, f.name) && forwards != 0 {
					t.Errorf("the replicas forwarded %v requests, want 0: %s sends each to its owner", forwards, row.name)
				}
				if slices.Contains(row.forwarded, f.name) && forwards == 0 {
					t.Errorf("the replicas forwarded no request: is %s pinning after all?", row.name)
				}
			})
		}
	}
	t.Logf("routing matrix (%d runs each):\n%s", lbIterations, table.String())
}
