package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"strings"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// -eras: one toolgate, the echo tool, and two kinds of client in the same
// run, alternating as the sweep alternates targets; then the same pair
// again with the calls made as fixed bytes over net/http ("raw"), whose
// cost is the same for both. "2025-11-25" is an
// mcp-go client pinned to the newest revision with sessions (initialize,
// Mcp-Session-Id), and "2026-07-28", mcp-go's client as it comes, which
// negotiates 2026-07-28 through server/discover and sends every request
// without a session, its version and capabilities in _meta and
// Mcp-Method/Mcp-Name headers. The ratio table is 2026-07-28 over
// 2025-11-25 (docs/benchmarks.md, "Both protocol eras").
//
//	go run ./bench -eras -n 20000 -c 1,16,64 -rounds 3

// runEras measures toolgate's echo tool from clients of both eras.
func runEras(ctx context.Context, p params, stdout, stderr io.Writer) error {
	tg, err := startToolgate()
	if err != nil {
		return err
	}
	defer tg.close()
	legacy := *tg
	legacy.name = mcp.ProtocolVersion20251125
	legacy.close = func() {}
	modern := *tg
	modern.name = mcp.ProtocolVersion20260728
	modern.close = func() {}
	modern.dial = connectModern
	fmt.Fprintln(stdout, "mcp-go's client for each revision (what a Go client sees; the 2026-07-28 client does more per call):")
	fmt.Fprintln(stdout)
	if err := sweepAndReport(ctx, p, []*target{&legacy, &modern}, stdout, stderr, reportEras); err != nil {
		return err
	}
	// The same calls as fixed bytes over net/http: the client's cost is
	// the same for both revisions, so the difference is toolgate's.
	rawLegacy, rawModern := legacy, modern
	rawLegacy.name, rawModern.name = "raw "+legacy.name, "raw "+modern.name
	rawLegacy.call = rawCall(tg, legacyEcho, nil)
	rawModern.call = rawCall(tg, modernEcho, map[string]string{
		mcp.HeaderProtocolVersion: mcp.ProtocolVersion20260728, mcp.HeaderMethod: "tools/call", mcp.HeaderName: "echo"})
	fmt.Fprintln(stdout)
	fmt.Fprintln(stdout, "The same calls as fixed request bodies POSTed with net/http (the client costs the same for both revisions):")
	fmt.Fprintln(stdout)
	return sweepAndReport(ctx, p, []*target{&rawLegacy, &rawModern}, stdout, stderr, reportEras)
}

// The echo call's bodies: a 2025-11-25 request, and the 2026-07-28 one
// mcp-go's client sends (its _meta: version, client identity, capabilities).
const (
	legacyEcho = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + echoText + `"}}}`
	modernEcho = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + echoText + `"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"toolgate-bench","version":"1.0.0"},` +
		`"io.modelcontextprotocol/clientCapabilities":{}}}}`
)

// rawCall returns a call that POSTs body to t with headers, in the
// session of the client it is given (none for 2026-07-28), and checks
// that the answer is the echo.
func rawCall(t *target, body string, headers map[string]string) func(context.Context, *client.Client) error {
	return func(ctx context.Context, c *client.Client) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, strings.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid := c.GetSessionId(); sid != "" {
			req.Header.Set(mcp.HeaderSessionID, sid)
			req.Header.Set(mcp.HeaderProtocolVersion, mcp.ProtocolVersion20251125)
		}
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := t.client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(`"text":"`+echoText+`"`)) || bytes.Contains(b, []byte(`"isError":true`)) {
			return fmt.Errorf("raw echo: HTTP %d %s", resp.StatusCode, b)
		}
		return nil
	}
}

// connectModern opens one mcp-go client to t that negotiated 2026-07-28
// (no session: each call is a request of its own).
func connectModern(ctx context.Context, t *target) (*client.Client, error) {
	tr, err := transport.NewStreamableHTTP(t.url,
		transport.WithHTTPBasicClient(t.client),
		transport.WithHTTPLogger(slog.New(slog.DiscardHandler)),
	)
	if err != nil {
		return nil, fmt.Errorf("creating transport: %w", err)
	}
	c := client.NewClient(tr)
	if err := c.Start(ctx); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("starting client: %w", err)
	}
	var req mcp.InitializeRequest
	req.Params.ClientInfo = mcp.Implementation{Name: "toolgate-bench", Version: "1.0.0"}
	if _, err := c.Initialize(ctx, req); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("negotiating: %w", err)
	}
	if v := c.ProtocolVersion(); v != mcp.ProtocolVersion20260728 {
		_ = c.Close()
		return nil, fmt.Errorf("negotiated %q, want %s", v, mcp.ProtocolVersion20260728)
	}
	return c, nil
}

// reportEras writes the -eras tables.
func reportEras(w io.Writer, p params, targets []*target, results [][][]runResult) int {
	fmt.Fprintf(w, "Machine: %s/%s, %d CPUs (GOMAXPROCS %d), %s. ", runtime.GOOS, runtime.GOARCH,
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version())
	fmt.Fprintf(w, "One toolgate serving echo; clients of each revision (\"sessions\" counts clients: a "+
		"2026-07-28 client has no session). %d calls per run after %d warm-up calls, %d rounds, median "+
		"round by throughput; client and server in one process over loopback HTTP.\n\n", p.n, p.warmup, p.rounds)
	return writeTables(w, p, targets, results)
}
