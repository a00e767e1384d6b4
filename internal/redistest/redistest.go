// Package redistest starts a real redis-server for a test: in the
// foreground, on a free port of 127.0.0.1, with no persistence, stopped
// by its PID when the test ends. Tests of the cluster's Redis use it end
// to end; unit tests use miniredis instead. Without redis-server the test
// fails under CI=true (CI must have installed it: `make redis-server`) and
// is skipped, saying so, elsewhere (internal/prereq).
//
// It is imported by tests only, and imports no toolgate package but
// internal/prereq and internal/syncbuf.
package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/prereq"
	"github.com/toolgate/toolgate/internal/syncbuf"
)

// Bounds on waiting for the server: every wait here is bounded.
const (
	readyTimeout = 10 * time.Second
	stopTimeout  = 5 * time.Second
	// starts is how many ports are tried: a free port found by listening
	// may be taken by another process before redis-server binds it.
	starts = 3
)

// readyLine is what redis-server logs once it accepts connections.
const readyLine = "Ready to accept connections"

// Server is one redis-server process.
type Server struct {
	// Addr is its host:port, on 127.0.0.1.
	Addr   string
	cmd    *exec.Cmd
	log    *syncbuf.Buffer
	exited chan struct{} // closed once the process is reaped
}

// URL is the server's redis:// URL, database 0.
func (s *Server) URL() string { return "redis://" + s.Addr + "/0" }

// Log returns what the server has logged so far.
func (s *Server) Log() string { return s.log.String() }

// Exited is closed once the server's process has exited and been reaped
// (after a SHUTDOWN, say).
func (s *Server) Exited() <-chan struct{} { return s.exited }

// Start starts redis-server for t and waits until it accepts
// connections; t.Cleanup stops it (SIGTERM, SIGKILL after 5 s) unless it
// has exited already.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := prereq.Need(t, prereq.RedisServer)
	for i := 1; ; i++ {
		s, err := start(t, bin)
		if err == nil {
			return s
		}
		if i == starts || !errors.Is(err, errExited) {
			t.Fatalf("starting redis-server: %v\n%s", err, s.Log())
		}
		t.Logf("redis-server exited as it started (%v); trying another port. Its log:\n%s", err, s.Log())
	}
}

// errExited is why a server never became ready: it exited first (its
// port was taken, say).
var errExited = errors.New("redis-server exited before it was ready")

// start starts one redis-server on a port free a moment ago.
func start(t testing.TB, bin string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return &Server{log: &syncbuf.Buffer{}}, err
	}
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), log: &syncbuf.Buffer{}, exited: make(chan struct{})}
	s.cmd = exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--dir", t.TempDir(), "--logfile", "")
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		return s, err
	}
	s.cmd.Stderr = s.log
	if err := s.cmd.Start(); err != nil {
		return s, err
	}
	ready := make(chan struct{})
	go s.read(out, ready) // ends at EOF, when the process exits
	t.Cleanup(func() { s.stop(t) })
	select {
	case <-ready:
		return s, nil
	case <-s.exited:
		return s, fmt.Errorf("%w (%v)", errExited, s.cmd.ProcessState)
	case <-time.After(readyTimeout):
		return s, fmt.Errorf("no %q line within %s", readyLine, readyTimeout)
	}
}

// read keeps the server's log, closes ready at its ready line, and reaps
// the process at EOF.
func (s *Server) read(out io.Reader, ready chan<- struct{}) {
	sc := bufio.NewScanner(out)
	said := false
	for sc.Scan() {
		line := sc.Text()
		s.log.Write([]byte(line + "\n"))
		if !said && strings.Contains(line, readyLine) {
			said = true
			close(ready)
		}
	}
	_, _ = io.Copy(io.Discard, out)
	_ = s.cmd.Wait()
	close(s.exited)
}

// stop ends the server by its PID unless it has exited already.
func (s *Server) stop(t testing.TB) {
	select {
	case <-s.exited:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(stopTimeout):
		t.Errorf("redis-server (pid %d) did not exit within %s of SIGTERM; killing it", s.cmd.Process.Pid, stopTimeout)
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// freePort returns a port of 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
