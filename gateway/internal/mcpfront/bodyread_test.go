package mcpfront

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/registry"
)

// firstRead signals on started when the handler first reads the body.
type firstRead struct {
	io.ReadCloser
	once    sync.Once
	started chan<- struct{}
}

func (r *firstRead) Read(p []byte) (int, error) {
	r.once.Do(func() { r.started <- struct{}{} })
	return r.ReadCloser.Read(p)
}

// serveCountingReads serves h and sends on started each time a request's
// body is first read.
func serveCountingReads(t *testing.T, h *harness, started chan<- struct{}) *httptest.Server {
	next := h.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = &firstRead{ReadCloser: r.Body, started: started}
		next.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// sendStalled opens a connection to srv and sends the headers of a POST to
// path announcing contentLength bytes, then only part, and stops.
func sendStalled(t *testing.T, srv *httptest.Server, path string, contentLength int) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	req := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: toolgate\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n{\"jsonrpc\"", path, contentLength)
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatalf("writing request: %v", err)
	}
	return conn
}

func heapObjectBytes() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestStalledBodiesBoundedMemory checks that a body announcing a large
// Content-Length and then stalling holds memory for what arrived, not for
// what it announced.
func TestStalledBodiesBoundedMemory(t *testing.T) {
	const (
		conns    = 50
		announce = 4 << 20
	)
	h, _ := newGateway(t, nil) // server.max_body_bytes 4 MiB: the announcement is allowed
	started := make(chan struct{}, conns)
	srv := serveCountingReads(t, h, started)

	before := heapObjectBytes()
	for i := range conns {
		path := "/mcp"
		if i%2 == 1 {
			path = "/message?sessionId=none"
		}
		sendStalled(t, srv, path, announce)
	}
	timeout := time.After(10 * time.Second)
	for range conns {
		select {
		case <-started:
		case <-timeout:
			t.Fatal("the handlers did not all start reading their bodies")
		}
	}
	after := heapObjectBytes()

	var growth int64
	if after > before {
		growth = int64(after - before)
	}
	// Today each stalled body costs its bufio buffers, its goroutine and at
	// most reqbody's chunk; reserving the announced size would cost 200 MiB.
	if limit := int64(conns * announce / 16); growth > limit {
		t.Errorf("%d stalled bodies grew the heap by %d bytes, want under %d (%d announced)", conns, growth, limit, conns*announce)
	}
	t.Logf("heap growth for %d stalled bodies: %d bytes", conns, growth)
}

// TestStalledBodyTimesOut checks that a body not received within
// server.read_timeout gets 408 naming the setting, and that the server
// closes the connection.
func TestStalledBodyTimesOut(t *testing.T) {
	for _, path := range []string{"/mcp", "/message?sessionId=none"} {
		t.Run(path, func(t *testing.T) {
			h, _ := newGateway(t, func(c *config.Config) { c.Server.ReadTimeout = config.Duration(200 * time.Millisecond) })
			srv := serveHTTP(t, h)
			conn := sendStalled(t, srv, path, 100)
			// A safety net for the old behaviour, which waited forever.
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))

			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("reading the response: %v", err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatalf("reading the response body: %v", err)
			}
			if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), "server.read_timeout") {
				t.Errorf("got HTTP %d: %s; want 408 naming server.read_timeout", resp.StatusCode, body)
			}
			if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
				t.Errorf("after the 408, reading the connection gave %v, want EOF (closed by the server)", err)
			}
		})
	}
}

// TestReadTimeoutSparesTheResponse checks that server.read_timeout bounds
// only the body: a call running longer than it, after its body was read,
// is neither cancelled nor cut.
func TestReadTimeoutSparesTheResponse(t *testing.T) {
	const readTimeout = 100 * time.Millisecond
	h, _ := newGateway(t, func(c *config.Config) { c.Server.ReadTimeout = config.Duration(readTimeout) })
	err := h.RegisterStateless(registry.Tool{Name: "slow", Description: "outlives the read timeout"},
		func(ctx context.Context, _ map[string]any) (executors.Result, error) {
			select {
			case <-ctx.Done():
				return executors.Result{}, fmt.Errorf("slow: %w", context.Cause(ctx))
			case <-time.After(4 * readTimeout):
				return executors.Text("done"), nil
			}
		})
	if err != nil {
		t.Fatalf("RegisterStateless: %v", err)
	}
	srv := serveHTTP(t, h)
	s := newVersionedSession(t, srv.URL+"/mcp", "2025-06-18", true)
	status, body, _ := s.post(t.Context(), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{}}}`)
	if status != http.StatusOK || !strings.Contains(string(body), `"done"`) {
		t.Errorf("slow call: HTTP %d: %s; want its result", status, body)
	}
}
