package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/internal/syncbuf"
)

// exitMargin is how much longer than server.shutdown_grace a process may
// take to exit after SIGTERM: a correctness bound, kept loose.
const exitMargin = 3 * time.Second

// signalStdio is a `toolgate stdio` whose client keeps stdin open until the
// test ends, as Claude Desktop does.
type signalStdio struct {
	config string // the configuration file's path
	cmd    *exec.Cmd
	stdin  *os.File // the client's end; closed by the cleanup only
	lines  chan string
	exited chan struct{} // closed once the process has been reaped
	stderr syncbuf.Buffer
}

func (s *signalStdio) Stderr() string { return s.stderr.String() }

// startSignalStdio starts `toolgate stdio` with yaml as its configuration
// and debug logs, on pipes the test owns, so that stdout can be read to its
// end after the process has exited.
func startSignalStdio(t *testing.T, yaml string) *signalStdio {
	t.Helper()
	s := &signalStdio{lines: make(chan string, 64), exited: make(chan struct{})}
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	s.stdin = inW
	s.config = writeConfig(t, yaml)
	s.cmd = exec.Command(toolgateBin, "stdio", "--config", s.config, "--log-level", "debug")
	s.cmd.Stdin, s.cmd.Stdout, s.cmd.Stderr = inR, outW, &s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting toolgate stdio: %v", err)
	}
	inR.Close()
	outW.Close()
	go func() {
		defer close(s.lines)
		defer outR.Close()
		br := bufio.NewReader(outR)
		for {
			line, err := br.ReadString('\n')
			if line != "" {
				s.lines <- line
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		_ = s.cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		<-s.exited
		s.stdin.Close()
		for range s.lines { // ends at EOF, once the process has gone
		}
		if t.Failed() {
			t.Logf("toolgate stdio stderr:\n%s", s.Stderr())
		}
	})
	return s
}

func (s *signalStdio) send(t *testing.T, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if _, err := io.WriteString(s.stdin, l+"\n"); err != nil {
			t.Fatalf("writing to toolgate stdio: %v", err)
		}
	}
}

// response reads stdout until the response with id arrives, at most for d.
func (s *signalStdio) response(t *testing.T, id string, d time.Duration) rpcResponse {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case line, ok := <-s.lines:
			if !ok {
				t.Fatalf("stdout ended before the response to id %s", id)
			}
			var r rpcResponse
			if json.Unmarshal([]byte(line), &r) == nil && string(r.ID) == id {
				return r
			}
		case <-timer.C:
			t.Fatalf("no response to id %s within %v", id, d)
		}
	}
}

// notification reads stdout until a notification of method arrives, at
// most for d.
func (s *signalStdio) notification(t *testing.T, method string, d time.Duration) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case line, ok := <-s.lines:
			if !ok {
				t.Fatalf("stdout ended before a %s notification", method)
			}
			var n struct {
				Method string `json:"method"`
			}
			if json.Unmarshal([]byte(line), &n) == nil && n.Method == method {
				return
			}
		case <-timer.C:
			t.Fatalf("no %s notification within %v", method, d)
		}
	}
}

// waitStderr waits until stderr holds substr.
func (s *signalStdio) waitStderr(t *testing.T, substr string) {
	t.Helper()
	deadline := time.Now().Add(pollTimeout)
	for !strings.Contains(s.Stderr(), substr) {
		if time.Now().After(deadline) {
			t.Fatalf("toolgate stdio did not log %q within %v", substr, pollTimeout)
		}
		time.Sleep(pollInterval)
	}
}

func (s *signalStdio) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	signalProcess(t, "toolgate stdio", s.cmd, sig)
}

// wait waits at most d for the process to exit and returns its exit code.
func (s *signalStdio) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	return waitExit(t, "toolgate stdio", s.cmd, s.exited, d)
}

// startSleep initializes the session and starts a sleep call of ms with id
// 2, returning once the call is running.
func (s *signalStdio) startSleep(t *testing.T, ms int) {
	t.Helper()
	s.send(t, stdioInitialize)
	s.response(t, "1", callTimeout)
	s.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":%d}}}`, ms))
	s.waitStderr(t, "tool call arguments") // logged at debug once the call runs
}

func TestStdioSIGTERMWithStdinOpen(t *testing.T) {
	t.Run("drains", func(t *testing.T) {
		const grace = 5 * time.Second
		s := startSignalStdio(t, "server:\n  shutdown_grace: 5s\nbuiltin: [sleep]\n")
		s.startSleep(t, 2000)
		start := time.Now()
		s.signal(t, syscall.SIGTERM)
		wantOK(t, s.response(t, "2", grace+exitMargin).toolResult(t), "slept 2000 ms")
		if code := s.wait(t, grace+exitMargin); code != 0 {
			t.Errorf("toolgate stdio exited with code %d after SIGTERM, want 0", code)
		}
		t.Logf("exited %v after SIGTERM", time.Since(start))
	})

	t.Run("grace runs out", func(t *testing.T) {
		const grace = time.Second
		s := startSignalStdio(t, "server:\n  shutdown_grace: 1s\nbuiltin: [sleep]\n")
		s.startSleep(t, 30000)
		start := time.Now()
		s.signal(t, syscall.SIGTERM)
		wantError(t, s.response(t, "2", grace+exitMargin).toolResult(t), "cancelled")
		if code := s.wait(t, grace+exitMargin); code != 0 {
			t.Errorf("toolgate stdio exited with code %d after SIGTERM, want 0", code)
		}
		t.Logf("exited %v after SIGTERM", time.Since(start))
	})

	for _, second := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run("second "+second.String(), func(t *testing.T) {
			// A grace of 60 s: exiting within a few seconds is the second
			// signal's doing.
			s := startSignalStdio(t, "server:\n  shutdown_grace: 60s\nbuiltin: [sleep]\n")
			s.startSleep(t, 30000)
			s.signal(t, syscall.SIGTERM)
			// A call refused as unavailable shows that the drain has begun.
			// The signal arrives asynchronously, so probe until one is
			// refused (each probe a round trip; the arguments differ so the
			// loop guard never sees a repeat).
			refused := false
			for i := range 200 {
				id := strconv.Itoa(100 + i)
				s.send(t, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":`+strconv.Itoa(i%7)+`}}}`)
				if res := s.response(t, id, callTimeout).toolResult(t); res.IsError {
					wantError(t, res, "unavailable")
					refused = true
					break
				}
			}
			if !refused {
				t.Fatal("no call was refused after SIGTERM: the drain never began")
			}
			start := time.Now()
			s.signal(t, second)
			wantError(t, s.response(t, "2", exitMargin).toolResult(t), "cancelled")
			if code := s.wait(t, exitMargin); code != 128+int(second) {
				t.Errorf("toolgate stdio exited with code %d after a second signal, want %d", code, 128+int(second))
			}
			t.Logf("exited %v after the second signal", time.Since(start))
			if !strings.Contains(s.Stderr(), "toolgate: second signal") {
				t.Errorf("stderr does not say that a second signal stopped toolgate")
			}
		})
	}
}

func TestServeSIGTERMWithHalfSentBody(t *testing.T) {
	const grace = 2 * time.Second
	srv := startServe(t, "server:\n  shutdown_grace: 2s\nbuiltin: [sleep]\n")
	host := strings.TrimPrefix(srv.URL, "http://")
	conn, err := net.DialTimeout("tcp", host, callTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(callTimeout)); err != nil {
		t.Fatal(err)
	}
	// With Expect: 100-continue, the server says "100 Continue" once the
	// handler reads the body: then the request is surely in flight.
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`
	fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n",
		host, 2*len(body))
	br := bufio.NewReader(conn)
	status, err := br.ReadString('\n')
	if err != nil || !strings.Contains(status, " 100 ") {
		t.Fatalf("POST /mcp with Expect: 100-continue: read %q, %v; want 100 Continue", status, err)
	}
	if _, err := io.WriteString(conn, body[:len(body)/2]); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	srv.Signal(t, syscall.SIGTERM)
	if code := srv.Wait(t, grace+exitMargin); code != 0 {
		t.Errorf("toolgate serve exited with code %d after SIGTERM, want 0", code)
	}
	t.Logf("exited %v after SIGTERM", time.Since(start))
}

// stubbornUpstream is the configuration of a stdio upstream that does not
// exit when its stdin closes, nor on SIGTERM: `toolgate stdio` in a shell
// that then loops, noting each SIGTERM in terms. The shell writes its pid
// to pidFile as it starts.
func stubbornUpstream(t *testing.T) (yaml, pidFile, terms string) {
	t.Helper()
	dir := t.TempDir()
	pidFile, terms = filepath.Join(dir, "pid"), filepath.Join(dir, "terms")
	script := `echo $$ > "$PIDFILE"; trap 'echo TERM >> "$TERMS"' TERM; "$TOOLGATE" stdio --config "$CONFIG"; while :; do sleep 1; done`
	yaml = fmt.Sprintf(`upstreams:
  - name: stub
    transport: stdio
    command: sh
    args: ["-c", %q]
    env: {PIDFILE: %q, TERMS: %q, TOOLGATE: %q, CONFIG: %q}
`, strings.ReplaceAll(script, "$", "$$"), pidFile, terms, toolgateBin, writeConfig(t, baseConfig))
	t.Cleanup(func() {
		if pid, err := readPid(pidFile); err == nil {
			_ = syscall.Kill(-pid, syscall.SIGKILL) // the upstream's own process group
		}
	})
	return yaml, pidFile, terms
}

// readPid reads the pid a process wrote to path.
func readPid(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// waitPid waits until a process has written its pid to path, failing at
// once if exited is closed first.
func waitPid(t *testing.T, path, what string, exited <-chan struct{}) int {
	t.Helper()
	var pid int
	pollUntil(t, callTimeout, what+" to start", func() (bool, string) {
		var err error
		if pid, err = readPid(path); err == nil {
			return true, ""
		}
		select {
		case <-exited:
			t.Fatalf("toolgate exited before %s started", what)
		default:
		}
		return false, fmt.Sprintf("no pid in %s: %v", path, err)
	})
	return pid
}

// waitDead waits until the process pid has exited: it is gone, or a zombie
// nobody has reaped yet.
func waitDead(t *testing.T, pid int, what string) {
	t.Helper()
	pollUntil(t, pollTimeout, what+" to be dead", func() (bool, string) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if errors.Is(err, fs.ErrNotExist) {
			return true, ""
		}
		stat := string(b)
		state := ""
		if i := strings.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
			state = stat[i+2 : i+3]
		}
		return state == "Z", fmt.Sprintf("process %d is still running (state %q)", pid, state)
	})
}

// TestSecondSignalKillsUpstreams: a second signal during shutdown stops
// serve and stdio at once, and kills a stdio upstream that closing would
// have waited for (its stdin closed, then SIGTERM after 2 s, then SIGKILL
// after 2 s more) rather than leave it running: the upstream runs in a
// process group of its own, which a terminal's Ctrl-C does not reach.
func TestSecondSignalKillsUpstreams(t *testing.T) {
	for _, command := range []string{"serve", "stdio"} {
		t.Run(command, func(t *testing.T) {
			yaml, pidFile, terms := stubbornUpstream(t)
			// A grace of 60 s: exiting within a few seconds is the second
			// signal's doing.
			args := []string{command, "--config", writeConfig(t, "server:\n  shutdown_grace: 60s\n"+yaml)}
			if command == "serve" {
				args = append(args, "--listen", "127.0.0.1:0")
			}
			p := startToolgate(t, args...)
			cmd, exited, stderr := p.cmd, p.exited, &p.stderr

			pid := waitPid(t, pidFile, "the upstream", exited)
			signalProcess(t, "toolgate "+command, cmd, syscall.SIGTERM)
			pollUntil(t, pollTimeout, "toolgate to start shutting down", func() (bool, string) {
				return strings.Contains(stderr.String(), "shutting down"), "no \"shutting down\" log line yet"
			})
			signalProcess(t, "toolgate "+command, cmd, syscall.SIGINT)
			if code := waitExit(t, "toolgate "+command, cmd, exited, exitMargin); code != 128+int(syscall.SIGINT) {
				t.Errorf("toolgate %s exited with code %d after a second signal, want %d", command, code, 128+int(syscall.SIGINT))
			}
			waitDead(t, pid, "the upstream")
			if b, _ := os.ReadFile(terms); len(b) > 0 {
				t.Errorf("toolgate %s sent its upstream SIGTERM: it waited for the upstream to close after the second signal", command)
			}
			if !strings.Contains(stderr.String(), "toolgate: second signal") {
				t.Errorf("stderr does not say that a second signal stopped toolgate")
			}
		})
	}
}

// slowDeleteUpstream starts an MCP server (mcp-go, streamable HTTP on
// 127.0.0.1) that never answers a DELETE, and returns the configuration of
// an upstream "slow" on it and a channel that receives once a DELETE has
// arrived. mcp-go's client gives a session's DELETE 5 s.
func slowDeleteUpstream(t *testing.T) (yaml string, deleting <-chan struct{}) {
	t.Helper()
	ch := make(chan struct{}, 1)
	s := mcpserver.NewMCPServer("slow-delete-upstream", "1", mcpserver.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("noop"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("ok"), nil
	})
	h := mcpserver.NewStreamableHTTPServer(s)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			select {
			case ch <- struct{}{}:
			default:
			}
			<-r.Context().Done() // never answered: toolgate gives up or goes
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)
	return fmt.Sprintf("upstreams:\n  - name: slow\n    transport: streamable-http\n    url: %q\n", up.URL+"/mcp"), ch
}

// TestSecondSignalStopsWaitingForAnUpstream: after a second signal, serve
// and stdio wait for their gateway's Close at most a moment, not for as
// long as Close waits for an HTTP upstream that does not answer its
// session's DELETE (mcp-go's client gives it 5 s).
func TestSecondSignalStopsWaitingForAnUpstream(t *testing.T) {
	for _, command := range []string{"serve", "stdio"} {
		t.Run(command, func(t *testing.T) {
			yaml, deleting := slowDeleteUpstream(t)
			args := []string{command, "--config", writeConfig(t, "server:\n  shutdown_grace: 60s\n"+yaml)}
			if command == "serve" {
				args = append(args, "--listen", "127.0.0.1:0")
			}
			p := startToolgate(t, append(args, "--log-level", "debug")...)
			cmd, exited, stderr := p.cmd, p.exited, &p.stderr

			pollUntil(t, callTimeout, "the upstream to be up", func() (bool, string) {
				return strings.Contains(stderr.String(), "upstream up"), "no \"upstream up\" log line yet"
			})
			signalProcess(t, "toolgate "+command, cmd, syscall.SIGTERM)
			select {
			case <-deleting: // Close is waiting for the upstream
			case <-time.After(callTimeout):
				t.Fatal("toolgate never ended its upstream session after SIGTERM")
			}
			signalProcess(t, "toolgate "+command, cmd, syscall.SIGINT)
			// resultWait (1 s) is the most it waits; mcp-go's DELETE would
			// hold it 5 s.
			if code := waitExit(t, "toolgate "+command, cmd, exited, exitMargin); code != 128+int(syscall.SIGINT) {
				t.Errorf("toolgate %s exited with code %d after a second signal, want %d", command, code, 128+int(syscall.SIGINT))
			}
		})
	}
}

// toolgateProc is a toolgate command started by [startToolgate].
type toolgateProc struct {
	cmd            *exec.Cmd
	stdin          *os.File      // the client's end; closing it is EOF for toolgate
	exited         chan struct{} // closed once the process has been reaped
	stdout, stderr syncbuf.Buffer
}

// startToolgate runs toolgate with args, its stdin a pipe the test keeps
// open (as a stdio client does) until it closes p.stdin, its stdout and
// stderr kept; it is killed, and its stderr shown if t failed, when t
// ends.
func startToolgate(t *testing.T, args ...string) *toolgateProc {
	t.Helper()
	return startProcess(t, exec.Command(toolgateBin, args...), "toolgate "+args[0])
}

// startProcess is startToolgate for any command; what names it in logs.
func startProcess(t *testing.T, cmd *exec.Cmd, what string) *toolgateProc {
	t.Helper()
	p := &toolgateProc{cmd: cmd, exited: make(chan struct{})}
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p.stdin = inW
	p.cmd.Stdin, p.cmd.Stdout, p.cmd.Stderr = inR, &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	inR.Close()
	go func() {
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
		inW.Close()
		if t.Failed() {
			t.Logf("%s stderr:\n%s", what, p.stderr.String())
		}
	})
	return p
}

// mutedUpstream is the configuration of a stdio upstream "stub" that never
// answers initialize, reads its stdin to the end, notes that in eofFile
// and stays, noting each SIGTERM in terms. It writes its pid to pidFile as
// it starts.
func mutedUpstream(t *testing.T) (yaml, pidFile, eofFile, terms string) {
	t.Helper()
	dir := t.TempDir()
	pidFile, eofFile, terms = filepath.Join(dir, "pid"), filepath.Join(dir, "eof"), filepath.Join(dir, "terms")
	script := `echo $$ > "$PIDFILE"; trap 'echo TERM >> "$TERMS"' TERM; cat > /dev/null; echo eof > "$EOFFILE"; while :; do sleep 1; done`
	yaml = fmt.Sprintf(`upstreams:
  - name: stub
    transport: stdio
    command: sh
    args: ["-c", %q]
    env: {PIDFILE: %q, EOFFILE: %q, TERMS: %q}
`, strings.ReplaceAll(script, "$", "$$"), pidFile, eofFile, terms)
	t.Cleanup(func() {
		if pid, err := readPid(pidFile); err == nil {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	})
	return yaml, pidFile, eofFile, terms
}

// waitFile waits until path exists.
func waitFile(t *testing.T, path, what string) {
	t.Helper()
	pollUntil(t, callTimeout, what, func() (bool, string) {
		_, err := os.Stat(path)
		return err == nil, fmt.Sprintf("no %s yet", path)
	})
}

// TestToolsAndCallStopOnSignals: `toolgate tools` and `toolgate call` wait
// up to 30 s for the upstreams to come up. A first signal ends the wait:
// the command closes its gateway and exits 130 ("interrupted"); a second,
// while the close waits for an upstream that ignores its stdin closing,
// kills the upstream and exits at once. Both signals were ignored until
// the wait had run out.
func TestToolsAndCallStopOnSignals(t *testing.T) {
	for _, command := range [][]string{{"tools"}, {"call", "stub__anything", "{}"}} {
		t.Run(command[0], func(t *testing.T) {
			yaml, pidFile, eofFile, terms := mutedUpstream(t)
			args := append([]string{command[0], "--config", writeConfig(t, yaml)}, command[1:]...)

			t.Run("one signal", func(t *testing.T) {
				_ = os.Remove(pidFile)
				p := startToolgate(t, args...)
				waitPid(t, pidFile, "the upstream", p.exited)
				signalProcess(t, "toolgate "+command[0], p.cmd, syscall.SIGINT)
				// Closing the upstream takes 4 s (stdin, SIGTERM, SIGKILL);
				// the wait it ends would have run for 30.
				if code := waitExit(t, "toolgate "+command[0], p.cmd, p.exited, 15*time.Second); code != 130 {
					t.Errorf("exit code %d after SIGINT, want 130", code)
				}
				if !strings.Contains(p.stderr.String(), "toolgate: interrupted") {
					t.Errorf("stderr does not say the command was interrupted")
				}
			})
			t.Run("two signals", func(t *testing.T) {
				for _, f := range []string{pidFile, eofFile, terms} {
					_ = os.Remove(f)
				}
				p := startToolgate(t, args...)
				pid := waitPid(t, pidFile, "the upstream", p.exited)
				signalProcess(t, "toolgate "+command[0], p.cmd, syscall.SIGINT)
				waitFile(t, eofFile, "the upstream's stdin to close")
				signalProcess(t, "toolgate "+command[0], p.cmd, syscall.SIGINT)
				if code := waitExit(t, "toolgate "+command[0], p.cmd, p.exited, exitMargin); code != 130 {
					t.Errorf("exit code %d after a second SIGINT, want 130", code)
				}
				waitDead(t, pid, "the upstream")
				if b, _ := os.ReadFile(terms); len(b) > 0 {
					t.Errorf("the upstream was sent SIGTERM: the command waited for it to close after the second signal")
				}
				if !strings.Contains(p.stderr.String(), "toolgate: second signal") {
					t.Errorf("stderr does not say that a second signal stopped toolgate")
				}
			})
		})
	}
}

// TestGraceBoundsUpstreamClose: after SIGTERM, serve and stdio exit by
// the end of server.shutdown_grace (and resultWait) even when an upstream
// takes longer to close: a stdio upstream that ignores its stdin closing
// and SIGTERM (a polite close takes 4 s) is killed at the grace's end; for
// an HTTP upstream that does not answer its session's DELETE (mcp-go
// waits 5 s) the command stops waiting.
func TestGraceBoundsUpstreamClose(t *testing.T) {
	const grace = time.Second
	// The race detector's runtime sleeps 1 s as a -race binary exits; not
	// here, where the exit's time is what is measured.
	t.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	for _, command := range []string{"serve", "stdio"} {
		for _, kind := range []string{"stdio upstream", "http upstream"} {
			t.Run(command+"/"+kind, func(t *testing.T) {
				var yaml, pidFile string
				if kind == "stdio upstream" {
					yaml, pidFile, _ = stubbornUpstream(t)
				} else {
					yaml, _ = slowDeleteUpstream(t)
				}
				args := []string{command, "--config", writeConfig(t, "server:\n  shutdown_grace: 1s\n"+yaml), "--log-level", "debug"}
				if command == "serve" {
					args = append(args, "--listen", "127.0.0.1:0")
				}
				p := startToolgate(t, args...)
				pid := 0
				if pidFile != "" {
					pid = waitPid(t, pidFile, "the upstream", p.exited)
				} else {
					pollUntil(t, callTimeout, "the upstream to be up", func() (bool, string) {
						return strings.Contains(p.stderr.String(), "upstream up"), "no \"upstream up\" log line yet"
					})
				}
				start := time.Now()
				signalProcess(t, "toolgate "+command, p.cmd, syscall.SIGTERM)
				// The close alone would end 4 or 5 s after SIGTERM; the
				// grace and resultWait make 2 s.
				if code := waitExit(t, "toolgate "+command, p.cmd, p.exited, grace+2500*time.Millisecond); code != 0 {
					t.Errorf("toolgate %s exited with code %d after SIGTERM, want 0", command, code)
				}
				t.Logf("exited %v after SIGTERM", time.Since(start))
				if pid != 0 {
					waitDead(t, pid, "the upstream")
				}
			})
		}
	}
}

// TestCallInterrupted: a signal during the call itself cancels it; the
// cancelled result is printed, and the exit is 130 as for any interrupted
// command (it was 1, an error result's).
func TestCallInterrupted(t *testing.T) {
	p := startToolgate(t, "call", "--config", writeConfig(t, "builtin: [sleep]\n"), "--log-level", "debug", "sleep", `{"ms": 30000}`)
	pollUntil(t, callTimeout, "the call to run", func() (bool, string) {
		return strings.Contains(p.stderr.String(), "tool call arguments"), "not logged yet"
	})
	signalProcess(t, "toolgate call", p.cmd, syscall.SIGINT)
	if code := waitExit(t, "toolgate call", p.cmd, p.exited, callTimeout); code != 130 {
		t.Errorf("exit code %d after SIGINT during the call, want 130", code)
	}
	if out := p.stdout.String(); !strings.Contains(out, "cancelled") {
		t.Errorf("stdout does not hold the cancelled result:\n%s", out)
	}
}

// TestStdioSignalWhileClosing: stdio closes its gateway once the client
// closes stdin, politely (an upstream that ignores its stdin closing and
// SIGTERM takes 4 s). A signal then starts the grace: the upstream is
// killed at its end, and toolgate exits. The signal was ignored.
func TestStdioSignalWhileClosing(t *testing.T) {
	t.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	const grace = 500 * time.Millisecond
	yaml, pidFile, eofFile, _ := mutedUpstream(t)
	p := startToolgate(t, "stdio", "--config", writeConfig(t, "server:\n  shutdown_grace: 500ms\n"+yaml))
	pid := waitPid(t, pidFile, "the upstream", p.exited)
	p.stdin.Close()
	waitFile(t, eofFile, "toolgate to close the upstream's stdin")
	start := time.Now()
	signalProcess(t, "toolgate stdio", p.cmd, syscall.SIGTERM)
	// Without the grace, the close ends 4 s after it began.
	if code := waitExit(t, "toolgate stdio", p.cmd, p.exited, grace+2*time.Second); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
	t.Logf("exited %v after SIGTERM", time.Since(start))
	waitDead(t, pid, "the upstream")
}
