// Package tests holds toolgate's end-to-end tests. TestMain builds the
// toolgate and toolgate-agent binaries once; the tests then drive them as
// their users do: mcp-go's clients over streamable HTTP, legacy SSE and
// stdio, raw HTTP for the exchanges a well-behaved client never sends,
// Prometheus scrapes of /metrics, signals, and the command line.
//
// The tests talk only to 127.0.0.1 and to processes they start themselves.
// Nothing here imports a toolgate package but internal/prereq, which finds
// the programs the tests run (or skips, under CI=true fails, a test that
// lacks one): the binaries' behaviour is the contract under test.
package tests

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
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Bounds on waiting for the binary. Every wait in this package is bounded.
const (
	listenTimeout = 15 * time.Second // serve must log "listening" within this
	stopTimeout   = 10 * time.Second // after SIGTERM, before SIGKILL
	pollTimeout   = 10 * time.Second // for a metric to reach a value
	callTimeout   = 30 * time.Second // one MCP exchange or CLI run
	pollInterval  = 20 * time.Millisecond
)

// toolgateBin and toolgateAgentBin are the paths of the binaries TestMain
// builds, side by side. They are set once, before any test runs, and only
// read afterwards.
var toolgateBin, toolgateAgentBin string

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

// runMain builds the binary into a temporary directory, runs the tests,
// removes the directory and, when the tests passed, checks that they left
// no goroutine behind.
func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "toolgate-e2e-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "creating a directory for the toolgate binary: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	// Built with the race detector: a race inside the server makes it exit
	// with a non-zero code, which the servers' cleanups check. toolgate-agent
	// lands next to toolgate, where `toolgate agent` looks for it first.
	// With the Makefile's build tags, as what ships is built.
	build := exec.Command("go", "build", "-race", "-tags", releaseTags, "-o", dir+string(filepath.Separator), "./cmd/toolgate", "./cmd/toolgate-agent")
	build.Dir = ".." // the module root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building toolgate and toolgate-agent (go build -race -tags %s -o %s/ ./cmd/toolgate ./cmd/toolgate-agent): %v\n%s", releaseTags, dir, err, out)
		return 1
	}
	toolgateBin = filepath.Join(dir, "toolgate")
	toolgateAgentBin = filepath.Join(dir, "toolgate-agent")

	code := m.Run()
	if code == 0 {
		// Keep-alive connections of the default transport (mcp-go's clients
		// use it) have reader goroutines that are not leaks.
		if tr, ok := http.DefaultTransport.(*http.Transport); ok {
			tr.CloseIdleConnections()
		}
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: the tests leaked goroutines: %v\n", err)
			return 1
		}
	}
	return code
}

// baseConfig is a configuration with every demonstration tool and the
// legacy SSE transport on. serve's --listen flag picks the address.
const baseConfig = `
server:
  sse: true
builtin: [calc, clock_now, scratchpad, sleep]
`

// writeConfig writes yaml to a file in a fresh temporary directory and
// returns its path.
func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "toolgate.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatalf("writing the config: %v", err)
	}
	return path
}

// server is one `toolgate serve` process started by [startServe].
type server struct {
	// URL is the server's base URL, http://127.0.0.1:PORT.
	URL string
	// ConfigPath is the configuration file the process was started with;
	// stdio clients started against the same file see the same tools.
	ConfigPath string

	cmd    *exec.Cmd
	exited chan struct{} // closed once stderr is drained and the process reaped

	mu     sync.Mutex
	stderr strings.Builder // everything the process wrote to stderr; guarded by mu
	killed bool            // Kill was called; guarded by mu
}

// startServe starts `toolgate serve` on a free port of 127.0.0.1 with yaml
// as its configuration and JSON logs, and waits (at most listenTimeout) for
// its "listening" log line. t.Cleanup stops it with SIGTERM (SIGKILL after
// stopTimeout) and reports an exit code other than 0.
func startServe(t *testing.T, yaml string) *server {
	t.Helper()
	return startServeWithin(t, yaml, listenTimeout)
}

// startServeWithin is startServe waiting up to within for the "listening"
// line, for configurations that take long to load (large OpenAPI specs
// under -race).
func startServeWithin(t *testing.T, yaml string, within time.Duration) *server {
	t.Helper()
	return startServeAt(t, yaml, "127.0.0.1:0", within)
}

// startServeAt is startServeWithin listening on listen, for replicas of a
// cluster, whose peers are named before they start.
func startServeAt(t *testing.T, yaml, listen string, within time.Duration) *server {
	t.Helper()
	s := &server{ConfigPath: writeConfig(t, yaml), exited: make(chan struct{})}
	s.cmd = exec.Command(toolgateBin, "serve", "--config", s.ConfigPath, "--listen", listen, "--log-format", "json")
	pipe, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatalf("creating the stderr pipe: %v", err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting toolgate serve: %v", err)
	}
	addr := make(chan string, 1)
	// The goroutine ends when the process has exited (its stderr reaches
	// EOF); the cleanup below waits for that.
	go s.readStderr(pipe, addr)
	t.Cleanup(func() {
		if code := s.Stop(t); code != 0 && !s.wasKilled() {
			t.Errorf("toolgate serve exited with code %d after SIGTERM, want 0", code)
		}
		if t.Failed() {
			t.Logf("toolgate serve stderr:\n%s", s.Stderr())
		}
	})

	timer := time.NewTimer(within)
	defer timer.Stop()
	select {
	case a := <-addr:
		s.URL = "http://" + a
	case <-s.exited:
		t.Fatalf("toolgate serve exited (code %d) before logging \"listening\"; stderr:\n%s", s.cmd.ProcessState.ExitCode(), s.Stderr())
	case <-timer.C:
		t.Fatalf("toolgate serve logged no \"listening\" line within %v; stderr:\n%s", within, s.Stderr())
	}
	return s
}

// readStderr keeps every line the process writes to stderr, sends the
// address of the first JSON "listening" line on addr, and reaps the process
// at EOF.
func (s *server) readStderr(r io.Reader, addr chan<- string) {
	br := bufio.NewReader(r)
	found := false
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			s.mu.Lock()
			s.stderr.WriteString(line)
			s.mu.Unlock()
			if !found {
				var rec struct {
					Msg  string `json:"msg"`
					Addr string `json:"addr"`
				}
				if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "listening" && rec.Addr != "" {
					found = true
					addr <- rec.Addr
				}
			}
		}
		if err != nil {
			break
		}
	}
	_ = s.cmd.Wait() // the exit status is read from cmd.ProcessState
	close(s.exited)
}

// Stderr returns what the process has written to stderr so far.
func (s *server) Stderr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr.String()
}

// Kill kills the process (SIGKILL, as a crash) and waits for it to be
// reaped; its exit code is then not checked.
func (s *server) Kill(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	s.killed = true
	s.mu.Unlock()
	s.Signal(t, syscall.SIGKILL)
	s.Wait(t, stopTimeout)
}

func (s *server) wasKilled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.killed
}

// Signal sends sig to the process.
func (s *server) Signal(t *testing.T, sig os.Signal) {
	t.Helper()
	signalProcess(t, "toolgate serve", s.cmd, sig)
}

// Wait waits at most d for the process to exit and returns its exit code.
func (s *server) Wait(t *testing.T, d time.Duration) int {
	t.Helper()
	return waitExit(t, "toolgate serve", s.cmd, s.exited, d)
}

// signalProcess sends sig to cmd's process, which what names.
func signalProcess(t *testing.T, what string, cmd *exec.Cmd, sig os.Signal) {
	t.Helper()
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatalf("sending %v to %s: %v", sig, what, err)
	}
}

// waitExit waits at most d for cmd's process, which what names, to exit
// (exited is closed once it is reaped) and returns its exit code.
func waitExit(t *testing.T, what string, cmd *exec.Cmd, exited <-chan struct{}, d time.Duration) int {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-exited:
		return cmd.ProcessState.ExitCode()
	case <-timer.C:
		t.Fatalf("%s did not exit within %v", what, d)
		return -1
	}
}

// Stop sends SIGTERM unless the process has already exited, waits for it
// (killing it after stopTimeout), and returns its exit code. Once Stop has
// returned, Stderr holds everything the process ever wrote. Stop may be
// called more than once.
func (s *server) Stop(t *testing.T) int {
	t.Helper()
	select {
	case <-s.exited:
		return s.cmd.ProcessState.ExitCode()
	default:
	}
	stopProcess(t, "toolgate serve", s.cmd, s.exited)
	return s.cmd.ProcessState.ExitCode()
}

// stopProcess sends SIGTERM to cmd's process, which what names, and waits
// until it is reaped (exited is closed), killing it after stopTimeout.
func stopProcess(t *testing.T, what string, cmd *exec.Cmd, exited <-chan struct{}) {
	t.Helper()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	timer := time.NewTimer(stopTimeout)
	defer timer.Stop()
	select {
	case <-exited:
	case <-timer.C:
		t.Errorf("%s did not exit within %v of SIGTERM; killing it", what, stopTimeout)
		_ = cmd.Process.Kill()
		<-exited
	}
}

// newHTTPClient returns a client for raw requests. Keep-alives are off so
// that no connection (and no goroutine) outlives a request.
func newHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: callTimeout}
}

// scrape returns the text of base's /metrics.
func scrape(t *testing.T, base string) string {
	t.Helper()
	return scrapeWith(t, base, "")
}

// scrapeWith is scrape sending token, when not empty, as the bearer token
// (with authentication on, /metrics is for auth.admins).
func scrapeWith(t *testing.T, base, token string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		t.Fatalf("building the /metrics request: %v", err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := newHTTPClient().Do(req)
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading /metrics: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics = %d, want 200; body:\n%s", resp.StatusCode, body)
	}
	return string(body)
}

// metricValue returns the value of the sample of name whose label set is
// exactly labels (nil or empty for a sample without labels), from text in
// the Prometheus text exposition format. ok is false when there is no such
// sample.
func metricValue(text, name string, labels map[string]string) (v float64, ok bool) {
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		got := map[string]string{}
		if strings.HasPrefix(rest, "{") {
			var err error
			if got, rest, err = parseLabels(rest); err != nil {
				continue
			}
		} else if !strings.HasPrefix(rest, " ") {
			continue // a longer name with name as its prefix
		}
		if len(got) != len(labels) {
			continue
		}
		match := true
		for k, want := range labels {
			if g, present := got[k]; !present || g != want {
				match = false
				break
			}
		}
		if !match {
			continue
		}
		fields := strings.Fields(rest) // value [timestamp]
		if len(fields) == 0 {
			continue
		}
		f, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		return f, true
	}
	return 0, false
}

// parseLabels parses `{k="v",...}` at the start of s and returns the labels
// and what follows the closing brace.
func parseLabels(s string) (map[string]string, string, error) {
	labels := map[string]string{}
	s = s[1:] // "{"
	for {
		s = strings.TrimLeft(s, " ,")
		if strings.HasPrefix(s, "}") {
			return labels, s[1:], nil
		}
		eq := strings.IndexByte(s, '=')
		if eq <= 0 || len(s) < eq+2 || s[eq+1] != '"' {
			return nil, "", errors.New("malformed label")
		}
		key := s[:eq]
		s = s[eq+2:]
		var val strings.Builder
		closed := false
		for i := 0; i < len(s); i++ {
			c := s[i]
			if c == '\\' && i+1 < len(s) {
				i++
				switch s[i] {
				case 'n':
					val.WriteByte('\n')
				default:
					val.WriteByte(s[i])
				}
				continue
			}
			if c == '"' {
				s = s[i+1:]
				closed = true
				break
			}
			val.WriteByte(c)
		}
		if !closed {
			return nil, "", errors.New("unterminated label value")
		}
		labels[key] = val.String()
	}
}

// metricOrZero is metricValue with an absent sample read as 0, as
// Prometheus does for a counter that has not been created yet.
func metricOrZero(text, name string, labels map[string]string) float64 {
	v, _ := metricValue(text, name, labels)
	return v
}

// waitMetric scrapes base until the sample of name with labels equals want
// (an absent sample counts as 0), failing after pollTimeout.
func waitMetric(t *testing.T, base, name string, labels map[string]string, want float64) {
	t.Helper()
	deadline := time.Now().Add(pollTimeout)
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for {
		text := scrape(t, base)
		got := metricOrZero(text, name, labels)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s%s = %v after %v, want %v", name, fmtLabels(labels), got, pollTimeout, want)
		}
		select {
		case <-ticker.C:
		case <-t.Context().Done():
			t.Fatalf("waiting for %s%s: %v", name, fmtLabels(labels), t.Context().Err())
		}
	}
}

// fmtLabels formats labels as Prometheus does, for messages.
func fmtLabels(labels map[string]string) string {
	if len(labels) == 0 {
		return ""
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%q", k, labels[k]))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func TestMetricValue(t *testing.T) {
	const text = `# HELP toolgate_tool_calls_total Tool calls.
# TYPE toolgate_tool_calls_total counter
toolgate_tool_calls_total{error_class="",kind="stateless",outcome="ok",tool="calc"} 3
toolgate_tool_calls_total{error_class="execution",kind="stateless",outcome="error",tool="calc"} 1
toolgate_tool_calls_in_flight 0
toolgate_tool_calls_in_flight_extra 7
toolgate_thread_instances{tool="a \"b\"\\c"} 2 1700000000
`
	tests := []struct {
		name   string
		metric string
		labels map[string]string
		want   float64
		wantOK bool
	}{
		{"exact labels", "toolgate_tool_calls_total", map[string]string{"tool": "calc", "kind": "stateless", "outcome": "ok", "error_class": ""}, 3, true},
		{"other label values", "toolgate_tool_calls_total", map[string]string{"tool": "calc", "kind": "stateless", "outcome": "error", "error_class": "execution"}, 1, true},
		{"subset of labels does not match", "toolgate_tool_calls_total", map[string]string{"tool": "calc"}, 0, false},
		{"no labels", "toolgate_tool_calls_in_flight", nil, 0, true},
		{"longer name", "toolgate_tool_calls_in_flight_extra", nil, 7, true},
		{"escapes and timestamp", "toolgate_thread_instances", map[string]string{"tool": `a "b"\c`}, 2, true},
		{"absent", "toolgate_sessions", nil, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := metricValue(text, tc.metric, tc.labels)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("metricValue(%s%s) = %v, %v, want %v, %v", tc.metric, fmtLabels(tc.labels), got, ok, tc.want, tc.wantOK)
			}
		})
	}
}
