package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/gateway"
)

// itemSchema is the input schema of get_item on both targets: the one
// toolgate derives from the URL's {id} placeholder.
const itemSchema = `{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`

// itemID is the id every measured get_item call asks for.
const itemID = "42"

// restConfig is toolgate's configuration in rest mode; %s is the REST
// server's base URL. The schema is derived: id, a required string.
const restConfig = `
builtin: []
rest:
  - name: get_item
    description: Returns one item.
    method: GET
    url: %s/item/{id}
`

// rssSessions is how many sessions make the calls whose effect on memory
// rest mode reports.
const rssSessions = 16

// itemBody is the REST server's answer to GET /item/{id}.
func itemBody(id string) []byte {
	return fmt.Appendf(nil, `{"id":%q,"name":"item %s","price":9.99,"in_stock":true}`, id, id)
}

// runREST is rest mode: the REST server, the two targets calling it, the
// memory measurement on toolgate (before the sweep, so that the call
// counts are the gateway's whole life), then the sweep and the report.
func runREST(ctx context.Context, p params, stdout, stderr io.Writer) error {
	api, stopAPI, err := startItemServer()
	if err != nil {
		return err
	}
	defer stopAPI() // after the targets, which close their connections to it
	bare, err := startBareREST(api)
	if err != nil {
		return err
	}
	defer bare.close()
	tg, err := startToolgateREST(api)
	if err != nil {
		return err
	}
	defer tg.close()
	targets := []*target{bare, tg}

	mem, err := measureMemory(ctx, tg, p.rssCalls, stderr)
	if err != nil {
		return fmt.Errorf("measuring toolgate's memory: %w", err)
	}
	results, err := sweep(ctx, p, targets, stderr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Tool get_item: every call is one HTTP GET /item/{id} to a local net/http server on 127.0.0.1, "+
		"which answers a %d-byte JSON object. bare: an mcp-go tool handler making the GET with one pooled http.Client "+
		"and returning the body as text; toolgate: a rest tool from config (structuredContent plus a text copy).\n\n",
		len(itemBody(itemID)))
	errs := report(stdout, p, targets, results)
	reportMemory(stdout, mem)
	if errs > 0 {
		return fmt.Errorf("%d calls failed", errs)
	}
	return nil
}

// startItemServer serves GET /item/{id} on a loopback port and returns
// its base URL.
func startItemServer() (string, func(), error) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /item/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(itemBody(r.PathValue("id")))
	})
	base, stop, err := serve(mux)
	if err != nil {
		return "", nil, fmt.Errorf("starting the REST server: %w", err)
	}
	return base, stop, nil
}

// startBareREST serves get_item from a bare mcp-go server whose handler
// makes the GET itself, through one pooled client.
func startBareREST(api string) (*target, error) {
	backend := &http.Client{
		Transport: &http.Transport{MaxIdleConns: 0, MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second},
		Timeout:   30 * time.Second,
	}
	s := server.NewMCPServer("bare", "1.0.0", server.WithToolCapabilities(true), server.WithLogger(slog.New(slog.DiscardHandler)))
	s.AddTool(mcp.NewToolWithRawSchema("get_item", "Returns one item.", json.RawMessage(itemSchema)),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			body, err := getItem(ctx, backend, api, req.GetString("id", ""))
			if err != nil {
				return mcp.NewToolResultError(err.Error()), nil
			}
			return mcp.NewToolResultText(string(body)), nil
		})
	return serveBare(s, callItem, backend.CloseIdleConnections)
}

// getItem is the bare target's REST call.
func getItem(ctx context.Context, hc *http.Client, api, id string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, api+"/item/"+url.PathEscape(id), nil)
	if err != nil {
		return nil, fmt.Errorf("building the request: %w", err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("getting item %q: %w", id, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading item %q: %w", id, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("getting item %q: HTTP %d", id, resp.StatusCode)
	}
	return body, nil
}

// startToolgateREST serves get_item from a gateway built from restConfig.
func startToolgateREST(api string) (*target, error) {
	cfg, err := config.Parse("bench-rest.yaml", fmt.Appendf(nil, restConfig, api), nil)
	if err != nil {
		return nil, fmt.Errorf("parsing the rest config: %w", err)
	}
	g, err := gateway.New(cfg, gateway.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return nil, fmt.Errorf("building gateway: %w", err)
	}
	base, stop, err := serve(g.Handler())
	if err != nil {
		g.Close()
		return nil, fmt.Errorf("starting toolgate: %w", err)
	}
	hc := newHTTPClient()
	return &target{name: "toolgate", url: base + "/mcp", client: hc, call: callItem, close: func() {
		hc.CloseIdleConnections()
		stop()
		g.Close()
	}}, nil
}

// callItem makes one get_item call and checks that its first content is
// the item's JSON as text.
func callItem(ctx context.Context, c *client.Client) error {
	var req mcp.CallToolRequest
	req.Params.Name = "get_item"
	req.Params.Arguments = map[string]any{"id": itemID}
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return err
	}
	if res.IsError || len(res.Content) == 0 {
		return fmt.Errorf("calling get_item: unexpected result %+v", res.Content)
	}
	want := strings.TrimSpace(string(itemBody(itemID)))
	if tc, ok := mcp.AsTextContent(res.Content[0]); !ok || strings.TrimSpace(tc.Text) != want {
		return fmt.Errorf("calling get_item: unexpected result %+v", res.Content)
	}
	return nil
}

// memPoint is the process's memory after some calls to toolgate.
type memPoint struct {
	calls    int
	rss      uint64 // resident set size, bytes; 0 when unknown
	liveHeap uint64 // bytes of live heap after a GC
}

// measureMemory opens rssSessions sessions to t and calls until the total
// reaches each of counts in turn (ascending), reading the process's RSS
// and live heap at each. Any failed call is an error.
func measureMemory(ctx context.Context, t *target, counts []int, stderr io.Writer) ([]memPoint, error) {
	sessions, closeAll, err := connectN(ctx, t, rssSessions)
	defer closeAll()
	if err != nil {
		return nil, err
	}
	var points []memPoint
	done := 0
	for _, n := range counts {
		if failed := spread(ctx, sessions, n-done, t.call); failed > 0 {
			return nil, fmt.Errorf("%d of %d calls failed", failed, n-done)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		done = n
		pt := memPoint{calls: n}
		rss, err := readRSS()
		if err != nil {
			fmt.Fprintf(stderr, "reading RSS: %v\n", err)
		}
		pt.rss = rss
		pt.liveHeap = liveHeap()
		fmt.Fprintf(stderr, "memory after %d toolgate calls: RSS %.1f MiB, live heap %.1f MiB\n", n, mib(pt.rss), mib(pt.liveHeap))
		points = append(points, pt)
	}
	return points, nil
}

// spread makes n calls over sessions, each session calling back to back
// from its own goroutine, and returns how many failed.
func spread(ctx context.Context, sessions []*client.Client, n int, call func(context.Context, *client.Client) error) int {
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed int // guarded by mu
	)
	for i, s := range sessions {
		calls := n / len(sessions)
		if i < n%len(sessions) {
			calls++
		}
		wg.Go(func() {
			bad := 0
			for range calls {
				if call(ctx, s) != nil {
					bad++
				}
			}
			mu.Lock()
			failed += bad
			mu.Unlock()
		})
	}
	wg.Wait()
	return failed
}

// readRSS returns the process's resident set size from /proc/self/statm
// (Linux only).
func readRSS() (uint64, error) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, fmt.Errorf("reading /proc/self/statm: %w", err)
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, errors.New("reading /proc/self/statm: fewer than 2 fields")
	}
	pages, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("reading /proc/self/statm: %w", err)
	}
	return pages * uint64(os.Getpagesize()), nil
}

// liveHeap runs a GC and returns the bytes of heap it found live.
func liveHeap() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// reportMemory writes the memory table and the ratio of the last RSS to
// the first.
func reportMemory(w io.Writer, points []memPoint) {
	if len(points) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Memory of the bench process (client, REST server and both targets) while %d sessions call toolgate "+
		"only, before the sweep; live heap read after a forced GC.\n\n", rssSessions)
	fmt.Fprintln(w, "| toolgate calls | RSS MiB | live heap MiB |")
	fmt.Fprintln(w, "|---:|---:|---:|")
	for _, pt := range points {
		fmt.Fprintf(w, "| %d | %.1f | %.1f |\n", pt.calls, mib(pt.rss), mib(pt.liveHeap))
	}
	first, last := points[0], points[len(points)-1]
	if len(points) > 1 && first.rss > 0 && last.rss > 0 {
		fmt.Fprintf(w, "\nRSS after %d calls / after %d calls: %.2f\n", last.calls, first.calls, float64(last.rss)/float64(first.rss))
	}
}
