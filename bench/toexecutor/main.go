// Command toexecutor is the probe from which bench/callpath -window counts
// the toolgate functions between a tools/call's arrival at the gateway's
// handler and its upstream's tool handler (issue 25): the front, the
// pipeline and the dispatcher, up to the executor, without the answer's
// way back. bench/toexecutor.sh builds and runs it; docs/benchmarks.md
// §16 gives its numbers.
//
// It uses only toolgate's public API (config.Parse, gateway.New, Handler,
// StartUpstreams, WaitUpstreams), so the script can build this same file
// against an older checkout (the baseline) and measure it the same
// way.
//
// In one process it runs an upstream MCP server over streamable HTTP (a
// bare mcp-go server with one echo tool, on 127.0.0.1), a gateway proxying
// it as up__echo (the loop guard off for it, as the calls repeat), and a
// plain HTTP client. era 2025 is a streamable-HTTP session (initialize,
// initialized, then the calls); era 2026 is 2026-07-28 requests with no
// session. Every call must come back as the upstream's echo, and the
// gateway handler's goroutine must be in an executor when the upstream's
// handler starts. Built with -cover -covermode=atomic and run with -out
// DIR, each measured call writes two snapshots of the coverage counters,
// each with its metadata:
//
//	DIR/call-NNN/sent   the client's, just before it sends the request
//	DIR/call-NNN/entry  the upstream tool handler's, when it starts
//
// and DIR/stack.txt is the handler's goroutine at the last call's entry,
// DIR/depth.txt its frames counted. The client takes its snapshot only
// once the previous request's handler has returned, so nothing of that
// call's answer falls into the next window.
//
//	toexecutor -era 2025 -calls 20 -out DIR
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/coverage"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/gateway"
)

// warmCalls are made before the measured ones.
const warmCalls = 3

const module = "github.com/toolgate/toolgate/"

func main() {
	era := flag.String("era", "2025", "2025 (a streamable-HTTP session) or 2026 (2026-07-28 requests)")
	calls := flag.Int("calls", 20, "measured calls")
	out := flag.String("out", "", "directory for the coverage snapshots (a binary built with -cover -covermode=atomic)")
	flag.Parse()
	if (*era != "2025" && *era != "2026") || *calls < 1 || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: toexecutor [-era 2025|2026] [-calls N] [-out DIR]")
		os.Exit(2)
	}
	if _, err := run(*era, *calls, *out); err != nil {
		fmt.Fprintln(os.Stderr, "toexecutor:", err)
		os.Exit(1)
	}
}

// run makes warmCalls then calls calls of up__echo in era, with snapshots
// under out when out is set, and returns the handler's goroutine at the
// last call's upstream entry.
func run(era string, calls int, out string) (string, error) {
	p := &probe{}
	c, stop, err := proxy(p)
	if err != nil {
		return "", err
	}
	defer stop()
	if era == "2025" {
		if err := c.openSession(); err != nil {
			return "", err
		}
	}
	var stack string
	for i := range warmCalls + calls {
		var dir string
		if i >= warmCalls && out != "" {
			dir = filepath.Join(out, fmt.Sprintf("call-%03d", i-warmCalls+1))
			if err := snapshot(filepath.Join(dir, "sent")); err != nil {
				return "", err
			}
		}
		p.arm(i >= warmCalls, dir)
		if err := c.call(era); err != nil {
			return "", fmt.Errorf("call %d: %w", i+1, err)
		}
		if stack, err = p.result(); err != nil {
			return "", fmt.Errorf("call %d: at the upstream's entry: %w", i+1, err)
		}
		if i >= warmCalls && stack == "" {
			return "", fmt.Errorf("call %d: no goroutine of the gateway's handler was in an executor when the upstream's handler started", i+1)
		}
	}
	if out == "" {
		return stack, nil
	}
	all, tg, exec := depth(stack)
	line := fmt.Sprintf("%d toolgate frames from the handler to the executor, %d in the executor, %d frames in all\n", tg-exec, exec, all)
	return stack, errors.Join(os.WriteFile(filepath.Join(out, "stack.txt"), []byte(stack), 0o644),
		os.WriteFile(filepath.Join(out, "depth.txt"), []byte(line), 0o644))
}

// proxy starts an upstream whose echo tool runs p first and a gateway
// proxying it as up__echo, and returns a client of the gateway and what
// stops them all.
func proxy(p *probe) (*client, func(), error) {
	up, stopUp := upstream(p)
	cfg, err := config.Parse("toexecutor.yaml", []byte(`
upstreams:
  - name: up
    transport: streamable-http
    url: `+up+`
guards:
  loop:
    tools:
      up__echo: "off"
`), nil)
	if err != nil {
		stopUp()
		return nil, nil, err
	}
	g, err := gateway.New(cfg, gateway.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		stopUp()
		return nil, nil, err
	}
	served := make(chan struct{}, 1)
	h := g.Handler()
	tg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { served <- struct{}{} }()
		h.ServeHTTP(w, r)
	}))
	hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	stop := func() {
		hc.CloseIdleConnections()
		tg.Close()
		g.Close()
		stopUp()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	g.StartUpstreams()
	if err := g.WaitUpstreams(ctx); err != nil {
		stop()
		return nil, nil, err
	}
	return &client{http: hc, url: tg.URL + "/mcp", served: served}, stop, nil
}

// upstream serves a bare mcp-go server over streamable HTTP whose echo
// tool runs p.entry first, and returns its URL and what stops it.
func upstream(p *probe) (string, func()) {
	s := server.NewMCPServer("upstream", "1")
	s.AddTool(mcp.NewToolWithRawSchema("echo", "echo",
		[]byte(`{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}`)),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			p.entry()
			return mcp.NewToolResultText(req.GetString("message", "")), nil
		})
	h := server.NewStreamableHTTPServer(s)
	srv := httptest.NewServer(h)
	return srv.URL, func() {
		_ = h.Shutdown(context.Background())
		srv.Close()
	}
}

// probe is what the upstream's tool handler does on entry for a measured
// call: find the gateway handler's goroutine, and with a directory, write
// the snapshot.
type probe struct {
	state atomic.Pointer[probeState]
}

type probeState struct {
	measured bool
	dir      string // "": no snapshot
	stack    string
	err      error
}

func (p *probe) arm(measured bool, dir string) {
	p.state.Store(&probeState{measured: measured, dir: dir})
}

func (p *probe) entry() {
	s := *p.state.Load()
	if !s.measured {
		return
	}
	if s.dir != "" {
		s.err = snapshot(filepath.Join(s.dir, "entry"))
	}
	s.stack = handlerStack()
	p.state.Store(&s)
}

func (p *probe) result() (string, error) {
	s := p.state.Load()
	return s.stack, s.err
}

// snapshot writes the process's coverage counters and metadata to dir.
func snapshot(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := coverage.WriteMetaDir(dir); err != nil {
		return fmt.Errorf("%w: build with -cover -covermode=atomic (bench/toexecutor.sh)", err)
	}
	return coverage.WriteCountersDir(dir)
}

// handlerStack is the stack of the goroutine serving the call now in an
// executor: the one with a net/http server frame and an executors frame,
// or failing that (a call run on a goroutine of its own) one with a
// gateway frame and an executors frame.
func handlerStack() string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var fallback string
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if !strings.Contains(g, module+"executors") {
			continue
		}
		if strings.Contains(g, "net/http.serverHandler.ServeHTTP") {
			return g
		}
		if fallback == "" && strings.Contains(g, module+"gateway") {
			fallback = g
		}
	}
	return fallback
}

// depth counts a goroutine's frames: all of them, those whose function is
// in a toolgate package (bench's left out), and of those the executor's:
// the frames from the first in an executors subpackage (an executor kind)
// inward.
func depth(stack string) (all, toolgate, executor int) {
	var funcs []string
	for i, line := range strings.Split(stack, "\n") {
		if i == 0 || line == "" || strings.HasPrefix(line, "\t") || strings.HasPrefix(line, "created by ") {
			continue
		}
		if j := strings.LastIndexByte(line, '('); j > 0 {
			line = line[:j]
		}
		funcs = append(funcs, line)
	}
	in := false
	for i := len(funcs) - 1; i >= 0; i-- { // outermost first
		fn := funcs[i]
		in = in || strings.HasPrefix(fn, module+"executors/")
		if strings.HasPrefix(fn, module) && !strings.HasPrefix(fn, module+"bench/") {
			toolgate++
			if in {
				executor++
			}
		}
	}
	return len(funcs), toolgate, executor
}

// client sends the calls as a plain HTTP client would, and waits for the
// gateway's handler to return after each.
type client struct {
	http    *http.Client
	url     string
	session string
	served  chan struct{}
}

const (
	callParams = `"name":"up__echo","arguments":{"message":"hello"}`
	modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"toexecutor","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
)

func (c *client) openSession() error {
	hdr, err := c.post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"toexecutor","version":"1"}}}`, nil)
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	if c.session = hdr.Get("Mcp-Session-Id"); c.session == "" {
		return errors.New("initialize: no Mcp-Session-Id")
	}
	if _, err := c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, c.sessionHeaders()); err != nil {
		return fmt.Errorf("notifications/initialized: %w", err)
	}
	return nil
}

func (c *client) sessionHeaders() map[string]string {
	return map[string]string{"Mcp-Session-Id": c.session, "MCP-Protocol-Version": "2025-11-25"}
}

// call makes one tools/call of up__echo, which must come back as the
// upstream's echo.
func (c *client) call(era string) error {
	body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{` + callParams + `}}`
	hdr := c.sessionHeaders()
	if era == "2026" {
		body = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{` + callParams + `,` + modernMeta + `}}`
		hdr = map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "up__echo"}
	}
	_, err := c.post(body, hdr)
	return err
}

// post sends one message, reads the whole answer and waits until the
// handler that served it has returned. The answer must be 202, or 200
// without an error; a tools/call's must hold the echo.
func (c *client) post(body string, hdr map[string]string) (http.Header, error) {
	req, err := http.NewRequest(http.MethodPost, c.url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	<-c.served
	switch {
	case err != nil:
		return nil, err
	case resp.StatusCode == http.StatusAccepted:
	case resp.StatusCode != http.StatusOK, bytes.Contains(b, []byte(`"error":`)), bytes.Contains(b, []byte(`"isError":true`)):
		return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
	case strings.Contains(body, `"tools/call"`) && !bytes.Contains(b, []byte(`"text":"hello"`)):
		return nil, fmt.Errorf("not the upstream's echo: %s", b)
	}
	return resp.Header, nil
}
