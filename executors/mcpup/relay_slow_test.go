package mcpup

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// pipeListener is a net.Listener whose connections are in-memory pipes
// made by its dial: what lets an HTTP server and client talk inside a
// synctest bubble, where fake time only passes while every goroutine is
// blocked on something of the bubble's.
type pipeListener struct {
	conns     chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	srv, cli := net.Pipe()
	select {
	case l.conns <- srv:
		return cli, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// An upstream over streamable HTTP (mcp-go's server) whose tool elicits
// gets an answer the human gives after 45 seconds, past the 30 seconds
// mcp-go's client transport would give toolgate's handler, and the call
// completes with it; in fake time. The request comes on the call's own
// event stream, which mcpup reads (httpcall.go), and so does its answer.
func TestSlowElicitationOverStreamableHTTP(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := startPipe(t, &fakeUpstream{h: newTestServer(t)}, nil)
		call, cancel := context.WithTimeout(WithPeer(t.Context(), &slowPeer{delay: 45 * time.Second}), 5*time.Minute)
		defer cancel()
		start := time.Now()
		res, err := callIn(call, t, m, "t", "fs__ask", `{}`, nil)
		took := time.Since(start)
		if err != nil {
			t.Fatalf("tools/call after %v: %v", took, err)
		}
		if got := text(t, res); got != `accept {"name":"Ada"}` {
			t.Errorf("tools/call after %v = %q, want the tool to have the answer", took, got)
		}
		if took != 45*time.Second {
			t.Errorf("tools/call took %v, want 45s: the time the human took", took)
		}
	})
}

// servePipe serves h over a pipeListener until t ends and returns the
// listener, whose dial an upstream's HTTP transport dials with: for tests
// in a synctest bubble.
func servePipe(t *testing.T, h http.Handler) *pipeListener {
	t.Helper()
	l := newPipeListener()
	hs := &http.Server{Handler: h}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(l) }()
	t.Cleanup(func() {
		_ = hs.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serving: %v", err)
		}
	})
	return l
}

// startPipe starts a Manager for a streamable HTTP upstream "fs" served by
// h over in-memory pipes, for tests in a synctest bubble, and waits until
// it is up.
func startPipe(t *testing.T, h http.Handler, opts *Options) (*testManager, *recorder) {
	t.Helper()
	l := servePipe(t, h)
	rec := newRecorder()
	m := startWith(t, rec.options(t, opts), func(m *Manager) { m.ups[0].httpTransport.DialContext = l.dial },
		Upstream{Name: "fs", Transport: TransportStreamableHTTP, URL: "http://pipe/mcp"})
	rec.waitTools(t)
	rec.waitState(t, true)
	return m, rec
}
