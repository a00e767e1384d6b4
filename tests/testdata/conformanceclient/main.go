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
	"crypto/rand"
	"encoding/base64"
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
	if len(os.Args) == 3 && os.Args[1] == "browse" {
		os.Exit(browse(os.Args[2]))
	}
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
	env := os.Environ()
	if strings.HasPrefix(scenario, "auth/") {
		oauth, err := oauthSection(dir, scenario, os.Getenv("MCP_CONFORMANCE_CONTEXT"))
		if err != nil {
			fmt.Fprintln(os.Stderr, "conformanceclient:", err)
			return 1
		}
		yaml += oauth + fmt.Sprintf("token_store:\n  path: %q\n", filepath.Join(dir, "tokens.json"))
		self, err := os.Executable()
		if err != nil {
			fmt.Fprintln(os.Stderr, "conformanceclient:", err)
			return 1
		}
		key := make([]byte, 32)
		_, _ = rand.Read(key)
		env = append(env, "TOOLGATE_TOKEN_KEY="+base64.StdEncoding.EncodeToString(key), "BROWSER="+self+" browse")
	}
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "conformanceclient:", err)
		return 1
	}
	args := []string{"tools", "--config", cfg}
	switch {
	case scenario == "tools_call":
		args = []string{"call", "--config", cfg, "add_numbers", `{"a":5,"b":3}`}
	case scenario == "sse-retry":
		// The tool whose call's stream the server closes, to be resumed.
		args = []string{"call", "--config", cfg, "test_reconnection", `{}`}
	case strings.HasPrefix(scenario, "auth/"):
		args = []string{"call", "--config", cfg, "test-tool", `{}`}
	case scenario == "elicitation-sep1034-client-defaults":
		if err := callThroughServe(bin, cfg, "test_client_elicitation_defaults"); err != nil {
			fmt.Fprintln(os.Stderr, "conformanceclient:", err)
			return 1
		}
		return 0
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr, cmd.Env = os.Stdout, os.Stderr, env
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

// cimdURL is the Client ID Metadata Document URL auth/basic-cimd expects
// the client to use as its client_id.
const cimdURL = "https://conformance-test.local/client-metadata.json"

// oauthSection returns the upstream's oauth section for an auth scenario,
// from the credentials its context (MCP_CONFORMANCE_CONTEXT) gives:
// pre-registered client_id and client_secret, a private key for
// private_key_jwt (written to a file in dir), or an identity provider's
// ID token for the token exchange of cross-app access. Without any, the
// client registers itself (DCR, or CIMD for auth/basic-cimd).
func oauthSection(dir, scenario, contextJSON string) (string, error) {
	var c struct {
		ClientID         string `json:"client_id"`
		ClientSecret     string `json:"client_secret"`
		PrivateKeyPEM    string `json:"private_key_pem"`
		IdPClientID      string `json:"idp_client_id"`
		IdPIDToken       string `json:"idp_id_token"`
		IdPTokenEndpoint string `json:"idp_token_endpoint"`
	}
	if contextJSON != "" {
		if err := json.Unmarshal([]byte(contextJSON), &c); err != nil {
			return "", fmt.Errorf("MCP_CONFORMANCE_CONTEXT: %w", err)
		}
	}
	var b strings.Builder
	b.WriteString("    oauth:\n")
	line := func(k, v string) { fmt.Fprintf(&b, "      %s: %q\n", k, v) }
	switch {
	case c.IdPIDToken != "":
		line("grant", "token_exchange")
	case c.PrivateKeyPEM != "", c.ClientSecret != "" && scenario != "auth/pre-registration":
		line("grant", "client_credentials")
	default:
		line("grant", "authorization_code")
	}
	if c.ClientID != "" {
		line("client_id", c.ClientID)
	}
	if c.ClientSecret != "" {
		line("client_secret", c.ClientSecret)
	}
	if c.PrivateKeyPEM != "" {
		key := filepath.Join(dir, "client-key.pem")
		if err := os.WriteFile(key, []byte(c.PrivateKeyPEM), 0o600); err != nil {
			return "", err
		}
		line("private_key_file", key)
	}
	if scenario == "auth/basic-cimd" {
		line("client_metadata_url", cimdURL)
	}
	if c.IdPIDToken != "" {
		b.WriteString("      token_exchange:\n")
		fmt.Fprintf(&b, "        subject_token: %q\n        subject_token_type: %q\n        idp_token_endpoint: %q\n        idp_client_id: %q\n",
			c.IdPIDToken, "urn:ietf:params:oauth:token-type:id_token", c.IdPTokenEndpoint, c.IdPClientID)
	}
	return b.String(), nil
}

// browse is the scripted browser toolgate opens the authorization URL
// with ($BROWSER): it follows the authorization server's redirect to
// toolgate's loopback callback, as a person's browser would after they
// approve.
func browse(u string) int {
	ctx, cancel := context.WithTimeout(context.Background(), serveTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformanceclient browse:", err)
		return 1
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformanceclient browse:", err)
		return 1
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return 0
}
