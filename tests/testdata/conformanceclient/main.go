// Command conformanceclient runs toolgate's upstream side as the client of
// a client scenario of the official MCP conformance suite: the suite starts
// its test server and runs `conformanceclient URL` with the scenario in
// MCP_CONFORMANCE_SCENARIO; this writes a configuration whose one upstream
// is that server (streamable HTTP, no prefix) and runs the toolgate binary
// named by TOOLGATE_BIN against it: `toolgate tools` (initialize and list)
// or `toolgate call` for the scenarios that call a tool.
//
// A scenario whose server asks its client something during a call
// (elicitation-sep1034-client-defaults) needs an MCP client in front of
// toolgate to relay the question to: for it, this starts `toolgate serve`
// on 127.0.0.1 and calls the tool through it with an mcp-go client that
// declares elicitation and accepts every form as it is, filling in
// nothing (content {}), so that what the server checks is toolgate's own
// handling of the form's defaults.
//
// It exits 0 when the call (or listing) succeeds. It is built by the
// tests, never shipped.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

const (
	// serveTimeout bounds a scenario run through `toolgate serve`: its
	// start, the upstream coming up, and the call.
	serveTimeout = 60 * time.Second
	// readyPoll is how often /readyz is asked whether the upstream is up.
	readyPoll = 50 * time.Millisecond
	// stopTimeout bounds the wait for `toolgate serve` to exit after
	// SIGTERM; it is killed then.
	stopTimeout = 15 * time.Second
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: conformanceclient URL (with MCP_CONFORMANCE_SCENARIO and TOOLGATE_BIN set)")
		os.Exit(2)
	}
	bin := os.Getenv("TOOLGATE_BIN")
	if bin == "" {
		fmt.Fprintln(os.Stderr, "conformanceclient: TOOLGATE_BIN is not set")
		os.Exit(2)
	}
	os.Exit(run(bin, os.Args[1], os.Getenv("MCP_CONFORMANCE_SCENARIO")))
}

// run runs scenario against the suite's server at url with the toolgate
// binary bin and returns the exit code.
func run(bin, url, scenario string) int {
	dir, err := os.MkdirTemp("", "conformanceclient-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformanceclient:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	cfg := filepath.Join(dir, "toolgate.yaml")
	yaml := fmt.Sprintf("upstreams:\n  - name: server\n    prefix: \"\"\n    transport: streamable-http\n    url: %q\n    startup_timeout: 10s\n", url)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "conformanceclient:", err)
		return 1
	}
	args := []string{"tools", "--config", cfg}
	switch scenario {
	case "tools_call":
		args = []string{"call", "--config", cfg, "add_numbers", `{"a":5,"b":3}`}
	case "elicitation-sep1034-client-defaults":
		if err := callThroughServe(bin, cfg, "test_client_elicitation_defaults"); err != nil {
			fmt.Fprintln(os.Stderr, "conformanceclient:", err)
			return 1
		}
		return 0
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "conformanceclient: toolgate", args[0]+":", err)
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			return ee.ExitCode()
		}
		return 1
	}
	return 0
}

// callThroughServe starts `toolgate serve` with the configuration cfg,
// waits until its upstream is up, calls tool (no arguments) through it
// with an mcp-go client that accepts elicitations, prints the result, and
// stops the server.
func callThroughServe(bin, cfg, tool string) (err error) {
	ctx, cancel := context.WithTimeout(context.Background(), serveTimeout)
	defer cancel()
	cmd := exec.Command(bin, "serve", "--config", cfg, "--listen", "127.0.0.1:0", "--log-format", "json")
	pipe, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting toolgate serve: %w", err)
	}
	listening := make(chan listenLine, 1)
	s := &served{cmd: cmd, exited: make(chan struct{})}
	go func() {
		copyLog(pipe, listening)
		s.err = cmd.Wait()
		close(s.exited)
	}()
	defer func() {
		if stopErr := s.stop(); stopErr != nil && err == nil {
			err = stopErr
		}
	}()

	var l listenLine
	select {
	case l = <-listening:
	case <-s.exited:
		return fmt.Errorf("toolgate serve exited before logging \"listening\": %v", s.err)
	case <-ctx.Done():
		return fmt.Errorf("toolgate serve logged no \"listening\" line: %w", ctx.Err())
	}
	if err := waitReady(ctx, "http://"+l.Addr+"/readyz"); err != nil {
		return err
	}

	tr, err := transport.NewStreamableHTTP(l.MCP)
	if err != nil {
		return err
	}
	c := client.NewClient(tr, client.WithElicitationHandler(acceptAsIs{}), client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	defer c.Close()
	if err := c.Start(ctx); err != nil {
		return fmt.Errorf("starting the client: %w", err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	init.Params.ClientInfo = mcp.Implementation{Name: "toolgate-conformance-client", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = map[string]any{}
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return fmt.Errorf("calling %s: %w", tool, err)
	}
	for _, ct := range res.Content {
		if t, ok := ct.(mcp.TextContent); ok {
			fmt.Println(t.Text)
		}
	}
	if res.IsError {
		return fmt.Errorf("calling %s: the result is an error", tool)
	}
	return nil
}

// acceptAsIs answers every elicitation with action accept and empty
// content: a client whose user accepted the form as it was shown, and
// which leaves the defaults to the server side (toolgate).
type acceptAsIs struct{}

func (acceptAsIs) Elicit(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{
		Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{},
	}}, nil
}

// listenLine is toolgate serve's JSON "listening" log record.
type listenLine struct {
	Msg  string `json:"msg"`
	Addr string `json:"addr"` // host:port
	MCP  string `json:"mcp"`  // the streamable HTTP endpoint's URL
}

// copyLog copies toolgate serve's log r to stderr until it ends, and sends
// its "listening" record on listening.
func copyLog(r io.Reader, listening chan<- listenLine) {
	br := bufio.NewReader(r)
	found := false
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			fmt.Fprint(os.Stderr, line)
			var l listenLine
			if !found && json.Unmarshal([]byte(line), &l) == nil && l.Msg == "listening" && l.Addr != "" && l.MCP != "" {
				found = true
				listening <- l
			}
		}
		if err != nil {
			return
		}
	}
}

// waitReady asks url (/readyz) until it says ready: every upstream is
// connected and its tools are registered.
func waitReady(ctx context.Context, url string) error {
	tick := time.NewTicker(readyPoll)
	defer tick.Stop()
	last := ""
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := http.DefaultClient.Do(req); err != nil {
			last = err.Error()
		} else {
			var ready struct{ Status string }
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK && json.Unmarshal(body, &ready) == nil && ready.Status == "ready" {
				return nil
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(body)))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for toolgate's upstream to come up (last /readyz: %s): %w", last, ctx.Err())
		case <-tick.C:
		}
	}
}

// served is a running `toolgate serve`.
type served struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once its log has ended and it is reaped
	err    error         // cmd.Wait's; read once exited is closed
}

// stop stops toolgate serve with SIGTERM, and kills it when it has not
// exited after stopTimeout. An exit other than 0 after SIGTERM is an
// error.
func (s *served) stop() error {
	select {
	case <-s.exited:
		return s.err
	default:
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stopping toolgate serve: %w", err)
	}
	timer := time.NewTimer(stopTimeout)
	defer timer.Stop()
	select {
	case <-s.exited:
		if s.err != nil {
			return fmt.Errorf("toolgate serve: %w", s.err)
		}
		return nil
	case <-timer.C:
		_ = s.cmd.Process.Kill()
		<-s.exited
		return fmt.Errorf("toolgate serve did not exit within %v of SIGTERM; killed", stopTimeout)
	}
}
