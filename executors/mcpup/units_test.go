package mcpup

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/retry"
)

func TestBackoff(t *testing.T) {
	tests := []struct {
		attempt int
		want    time.Duration
	}{
		{1, 500 * time.Millisecond},
		{2, time.Second},
		{3, 2 * time.Second},
		{6, 16 * time.Second},
		{7, 30 * time.Second},
		{100, 30 * time.Second},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.attempt), func(t *testing.T) {
			if got := backoff(tc.attempt); got != tc.want {
				t.Errorf("backoff(%d) = %v, want %v", tc.attempt, got, tc.want)
			}
		})
	}
}

func TestLineLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLineLimiter(3)
		var got []string
		for range 5 {
			ok, d := l.allow(time.Now())
			got = append(got, fmt.Sprintf("%v/%d", ok, d))
		}
		time.Sleep(time.Second)
		ok, d := l.allow(time.Now())
		got = append(got, fmt.Sprintf("%v/%d", ok, d))
		l.allow(time.Now())
		l.allow(time.Now())
		l.allow(time.Now()) // dropped
		got = append(got, fmt.Sprintf("flush %d", l.flush()), fmt.Sprintf("flush %d", l.flush()))
		want := []string{"true/0", "true/0", "true/0", "false/0", "false/0", "true/2", "flush 1", "flush 0"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("allow sequence (-want +got):\n%s", diff)
		}
	})
}

// newTestConn returns a conn with nothing behind it, for the runner.
func newTestConn(u *upstream) *conn {
	return newConn(u.m.ctx, u, "")
}

// bareUpstream is an upstream "up" of a Manager with no upstreams, closed
// when t ends, for runner tests that dial test connections.
func bareUpstream(t *testing.T) *upstream {
	t.Helper()
	m, err := New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return &upstream{m: m, cfg: Upstream{Name: "up"}, redactor: strings.NewReplacer()}
}

func TestRunnerBackoffAndRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := bareUpstream(t)

		var (
			mu       sync.Mutex
			events   []string
			dials    = make(chan *conn, 10)
			start    = time.Now()
			failures = 3
		)
		record := func(e string) {
			mu.Lock()
			events = append(events, fmt.Sprintf("%v %s", time.Since(start).Round(time.Millisecond), e))
			mu.Unlock()
		}
		r := &runner{
			name:   "up",
			logger: slog.New(slog.DiscardHandler),
			report: true,
			dial: func(context.Context) (*conn, error) {
				if failures > 0 {
					failures--
					record("dial failed")
					return nil, errors.New("refused")
				}
				record("dial ok")
				c := newTestConn(u)
				dials <- c
				return c, nil
			},
			list:    func(context.Context, *conn) error { record("listed"); return nil },
			state:   func(up bool) { record(fmt.Sprintf("state %v", up)) },
			restart: func() { record("restart") },
		}
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		wg.Go(func() { r.run(ctx, nil) })

		c := <-dials
		synctest.Wait()
		if r.current() != c {
			t.Errorf("current() is not the live connection")
		}
		time.Sleep(10 * time.Second) // up for 10s: not stable
		c.markDead(errors.New("crashed"))
		synctest.Wait()
		if r.current() != nil {
			t.Errorf("current() = a dead connection")
		}
		c = <-dials
		c.listChanged <- struct{}{}
		synctest.Wait()
		// Listed again once relistGap has passed since the listing on
		// connect (pace.go).
		time.Sleep(relistGap)
		synctest.Wait()
		cancel()
		wg.Wait()

		want := []string{
			"0s dial failed", "0s state false",
			"500ms restart", "500ms dial failed",
			"1.5s restart", "1.5s dial failed",
			"3.5s restart", "3.5s dial ok", "3.5s listed", "3.5s state true",
			"13.5s state false",
			"17.5s restart", "17.5s dial ok", "17.5s listed", "17.5s state true", "19.5s listed",
		}
		mu.Lock()
		defer mu.Unlock()
		if diff := cmp.Diff(want, events); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
	})
}

// An unavailable error's RetryAfter covers the wait for the next
// connection attempt and what connecting took last time, so that a retry
// lands after the restart rather than in the middle of it.
func TestReconnectIn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := bareUpstream(t)
		dials := make(chan *conn, 2)
		r := &runner{
			name:   "up",
			logger: slog.New(slog.DiscardHandler),
			dial: func(context.Context) (*conn, error) {
				time.Sleep(2 * time.Second) // the upstream takes 2s to start
				c := newTestConn(u)
				dials <- c
				return c, nil
			},
			list:    func(context.Context, *conn) error { return nil },
			state:   func(bool) {},
			restart: func() {},
		}
		if got := r.reconnectIn(); got != reconnectMargin {
			t.Errorf("reconnectIn before any attempt = %v, want %v", got, reconnectMargin)
		}
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		wg.Go(func() { r.run(ctx, nil) })
		time.Sleep(time.Second)
		synctest.Wait()
		if got := r.reconnectIn(); got != reconnectMargin {
			t.Errorf("reconnectIn 1s into the first attempt = %v, want %v (nothing measured yet)", got, reconnectMargin)
		}
		c := <-dials
		c.markDead(errors.New("crashed"))
		synctest.Wait() // backing off 500ms before the next attempt
		if got, want := r.reconnectIn(), backoff(1)+2*time.Second+reconnectMargin; got != want {
			t.Errorf("reconnectIn while backing off = %v, want %v", got, want)
		}
		time.Sleep(backoff(1) + 1500*time.Millisecond)
		synctest.Wait() // 1.5s into the 2s attempt
		if got, want := r.reconnectIn(), 500*time.Millisecond+reconnectMargin; got != want {
			t.Errorf("reconnectIn 1.5s into an attempt = %v, want %v", got, want)
		}
		<-dials
		cancel()
		wg.Wait()
	})
}

func TestRPCError(t *testing.T) {
	m, err := New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	u := &upstream{m: m, cfg: Upstream{Name: "up", Secrets: []string{"hunter2"}}}
	u.redactor = newRedactor(u.cfg)
	tests := []struct {
		name string
		code int
		msg  string
		want retry.Class
	}{
		{name: "method not found", code: mcp.METHOD_NOT_FOUND, msg: "Method not found", want: retry.NotFound},
		{name: "mcp-go unknown tool", code: mcp.INVALID_PARAMS, msg: "tool 'x' not found: tool not found", want: retry.NotFound},
		{name: "ts unknown tool", code: mcp.INVALID_PARAMS, msg: "MCP error -32602: Tool x not found", want: retry.NotFound},
		{name: "unknown tool wording", code: mcp.INVALID_PARAMS, msg: "Unknown tool: x", want: retry.NotFound},
		{name: "invalid params", code: mcp.INVALID_PARAMS, msg: "expected string at /a", want: retry.Validation},
		{name: "internal", code: mcp.INTERNAL_ERROR, msg: "boom with hunter2", want: retry.Execution},
		{name: "custom", code: -32000, msg: "nope", want: retry.Execution},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := u.rpcError("x", tc.code, tc.msg)
			if err.Class != tc.want {
				t.Errorf("rpcError(%d, %q) class = %s, want %s", tc.code, tc.msg, err.Class, tc.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q leaks a secret", err)
			}
		})
	}
}

func TestClassifyTransport(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		stdio      bool
		want       retry.Class
		wantBroken bool
	}{
		{name: "closed", err: transport.ErrTransportClosed, want: retry.Unavailable, wantBroken: true},
		{name: "session ended", err: fmt.Errorf("failed to send request: %w", transport.ErrSessionTerminated), want: retry.Unavailable, wantBroken: true},
		{name: "stdio broken pipe", err: fmt.Errorf("failed to write request: %w", syscall.EPIPE), stdio: true, want: retry.Unavailable, wantBroken: true},
		{name: "stdio backlog", err: fmt.Errorf("writing to the upstream's stdin: %w", errStdinBacklog), stdio: true, want: retry.Unavailable},
		{name: "refused", err: fmt.Errorf("failed to send request: %w", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}), want: retry.Network, wantBroken: true},
		{name: "status 503", err: errors.New("request failed with status 503: busy"), want: retry.Unavailable},
		{name: "unauthorized", err: &transport.AuthorizationRequiredError{}, want: retry.Permission},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, broken := classifyTransport(tc.err, tc.stdio)
			if got != tc.want || broken != tc.wantBroken {
				t.Errorf("classifyTransport(%v) = %s, %v; want %s, %v", tc.err, got, broken, tc.want, tc.wantBroken)
			}
		})
	}
}

func TestArguments(t *testing.T) {
	tests := []struct {
		name    string
		call    executors.Call
		want    string
		wantErr bool
	}{
		{name: "raw", call: executors.Call{Raw: json.RawMessage(` {"b":1,"a":2} `), Args: map[string]any{"x": 1}}, want: `{"b":1,"a":2}`},
		{name: "nil", call: executors.Call{}, want: `{}`},
		{name: "null", call: executors.Call{Raw: json.RawMessage(`null`)}, want: `{}`},
		{name: "args only", call: executors.Call{Args: map[string]any{"x": 1}}, want: `{"x":1}`},
		{name: "invalid", call: executors.Call{Raw: json.RawMessage(`{`)}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := arguments(tc.call)
			if (err != nil) != tc.wantErr {
				t.Fatalf("arguments() error = %v, wantErr %v", err, tc.wantErr)
			}
			if !tc.wantErr && string(got) != tc.want {
				t.Errorf("arguments() = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestLineGuard(t *testing.T) {
	tests := []struct {
		name        string
		in          string
		want        string
		wantGarbage string
	}{
		{name: "json lines", in: "{\"a\":1}\n\n[1]\n", want: "{\"a\":1}\n\n[1]\n"},
		{name: "garbage stops", in: "{\"a\":1}\nnot json\n{\"b\":2}\n", want: "{\"a\":1}\n", wantGarbage: "not json"},
		{name: "partial last line", in: "{\"a\":1}\n{\"b\"", want: "{\"a\":1}\n{\"b\""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var garbage string
			ended := 0
			g := &lineGuard{
				br:        bufio.NewReader(strings.NewReader(tc.in)),
				onGarbage: func(l []byte) { garbage = string(l) },
				onEnd:     func() { ended++ },
				done:      make(chan struct{}),
			}
			got, err := readLines(g)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want || garbage != tc.wantGarbage {
				t.Errorf("read %q, garbage %q; want %q, %q", got, garbage, tc.want, tc.wantGarbage)
			}
			wantEnded := 1
			if tc.wantGarbage != "" {
				wantEnded = 0
			}
			if ended != wantEnded {
				t.Errorf("onEnd called %d times, want %d", ended, wantEnded)
			}
			select {
			case <-g.done:
			default:
				t.Error("done not closed at the end")
			}
		})
	}
}

func TestRedactor(t *testing.T) {
	r := newRedactor(Upstream{
		URL:     "https://user:pa55word@example.test/mcp?key=abcdef",
		Headers: map[string]string{"Authorization": "Bearer tok-123456", "X-Short": "1"},
		Secrets: []string{"envsecret"},
	})
	in := `Post "https://user:pa55word@example.test/mcp?key=abcdef": Bearer tok-123456 envsecret 1`
	want := `Post "https://user:[redacted]@example.test/mcp?[redacted]": [redacted] [redacted] 1`
	if got := r.Replace(in); got != want {
		t.Errorf("redacted = %q, want %q", got, want)
	}
}

func TestMCPLevel(t *testing.T) {
	tests := map[string]slog.Level{
		"debug": slog.LevelDebug, "info": slog.LevelInfo, "notice": slog.LevelInfo,
		"warning": slog.LevelWarn, "error": slog.LevelError, "critical": slog.LevelError,
		"alert": slog.LevelError, "emergency": slog.LevelError, "weird": slog.LevelInfo,
	}
	for in, want := range tests {
		if got := mcpLevel(in); got != want {
			t.Errorf("mcpLevel(%q) = %v, want %v", in, got, want)
		}
	}
}

// TestLogMessageRedacted pins down that an upstream's log notification is
// logged with its secrets hidden in every string, keys included, and that
// the notification itself is left as it came.
func TestLogMessageRedacted(t *testing.T) {
	logs := newLogCapture()
	m, err := New(nil, &Options{Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	u := newUpstream(m, Upstream{Name: "up", Secrets: []string{"hunter2"}})
	data := map[string]any{"msg": "token hunter2", "hunter2": []any{"x hunter2", 1.0, nil}}
	u.logMessage("", map[string]any{"level": "error", "logger": "l-hunter2", "data": data})

	r := logs.waitFor(t, "upstream log")
	var got any
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "data" {
			got = a.Value.Any()
		}
		return true
	})
	want := map[string]any{"msg": "token [redacted]", "[redacted]": []any{"x [redacted]", 1.0, nil}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("logged data (-want +got):\n%s", diff)
	}
	if got := attr(r, "logger"); got != "l-[redacted]" {
		t.Errorf("logged logger = %q, want %q", got, "l-[redacted]")
	}
	if data["msg"] != "token hunter2" {
		t.Errorf("the notification was modified: %v", data)
	}
}

func TestIsErrorResult(t *testing.T) {
	tests := []struct {
		res  string
		want bool
	}{
		{`{"content":[]}`, false},
		{`{"content":[],"isError":true}`, true},
		{`{"isError" : true,"content":[]}`, true},
		{`{"content":[],"isError":false}`, false},
		{`{"content":[{"type":"text","text":"isError"}]}`, false},
		{`{"content":[{"type":"text","text":"\"isError\":true"}]}`, false},
		{`{"content":[],"ISERROR":true}`, false},
		{`{"structuredContent":{"isError":true},"content":[]}`, false},
	}
	for _, tc := range tests {
		if got := isErrorResult([]byte(tc.res)); got != tc.want {
			t.Errorf("isErrorResult(%s) = %v, want %v", tc.res, got, tc.want)
		}
	}
}

// An HTTP upstream's transport keeps idle connections for as many calls
// as may run at once, and speaks HTTP/1.1 only, also to a server over TLS
// that offers HTTP/2.
func TestHTTPTransport(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.Proto)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	tr := newHTTPTransport(100)
	defer tr.CloseIdleConnections()
	if tr.MaxIdleConnsPerHost < 100 {
		t.Errorf("MaxIdleConnsPerHost = %d, want at least 100", tr.MaxIdleConnsPerHost)
	}
	tr.TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if b, _ := io.ReadAll(resp.Body); string(b) != "HTTP/1.1" {
		t.Errorf("the server saw %s, want HTTP/1.1", b)
	}
}
