package tests

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// readinessPath is gateway.ReadinessPath, as a balancer is configured
// with it.
const readinessPath = "/healthz/ready"

// drainConfig is a replica of a cluster with a drain delay of delay and
// the sleep tool.
func drainConfig(delay time.Duration) string {
	return fmt.Sprintf(`server:
  shutdown_grace: 10s
cluster:
  replica_id: r1
  secret: drain-test-secret-0123456789abcdef-0123456789
  drain_delay: %s
builtin: [sleep, calc]
`, delay)
}

// readiness probes base's readiness endpoint, on a connection of its own
// as a balancer's health check opens, and returns the status and body; a
// connection error is returned as it is.
func readiness(ctx context.Context, base string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+readinessPath, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := newHTTPClient().Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// post2026 sends a 2026-07-28 tools/call of name with args (JSON) and
// returns the reply's body; it may run on a goroutine of the test's.
func post2026(ctx context.Context, base, name, args string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + name + `","arguments":` + args +
		`,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"drain","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/mcp", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", name)
	resp, err := newHTTPClient().Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
	}
	return string(b), err
}

// streamEnd is how a stream ended: what it carried, and the error that
// ended the read (nil for a clean end).
type streamEnd struct {
	body string
	err  error
}

// streamRequest sends a request opening an event stream (body empty for
// none) with header set, on a connection of its own, and returns the
// channel that receives how the stream ended.
func streamRequest(t *testing.T, method, url, body string, header map[string]string) <-chan streamEnd {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := newHTTPClient().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("%s %s: HTTP %d %s, want an event stream", method, url, resp.StatusCode, b)
	}
	ended := make(chan streamEnd, 1)
	go func() {
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		ended <- streamEnd{string(b), err}
	}()
	return ended
}

// TestDrainVisibleToBalancers: a replica of a cluster, on SIGTERM with a
// 2.5 s call in flight, reports not ready at once (503 on the readiness
// endpoint, which needs no token) while it still serves new requests for
// cluster.drain_delay; then its port refuses connections, a session's GET
// stream and a 2026-07-28 subscriptions/listen stream end cleanly while
// the calls still run (their clients reconnect elsewhere), the calls
// complete, and the process exits 0.
func TestDrainVisibleToBalancers(t *testing.T) {
	const delay = time.Second
	srv := startServe(t, drainConfig(delay))
	if code, body, err := readiness(t.Context(), srv.URL); err != nil || code != http.StatusOK || body != "ready\n" {
		t.Fatalf("readiness before SIGTERM = %d %q, %v; want 200 ready", code, body, err)
	}

	// A session's GET stream and a 2026-07-28 subscriptions/listen
	// stream, open until the drain ends them.
	sess := openRawSession(t, srv.URL)
	get := streamRequest(t, http.MethodGet, sess.URL, "", map[string]string{
		"Mcp-Session-Id": sess.ID, "Mcp-Protocol-Version": protocolVersion})
	listen := streamRequest(t, http.MethodPost, srv.URL+"/mcp",
		`{"jsonrpc":"2.0","id":"sub-1","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},`+
			`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"drain","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`,
		map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "subscriptions/listen"})

	type reply struct {
		body string
		err  error
	}
	inFlight := make(chan reply, 1)
	go func() {
		b, err := post2026(t.Context(), srv.URL, "sleep", `{"ms":2500}`)
		inFlight <- reply{b, err}
	}()
	// A longer call too: the sessions end once every call has, so a GET
	// stream still open when the 2.5 s call returns was not ended by the
	// drain.
	longer := make(chan reply, 1)
	go func() {
		b, err := post2026(t.Context(), srv.URL, "sleep", `{"ms":4000}`)
		longer <- reply{b, err}
	}()
	waitMetric(t, srv.URL, "toolgate_tool_calls_in_flight", nil, 2)

	srv.Signal(t, syscall.SIGTERM)
	// 503 at once (the signal arrives asynchronously: poll), while a new
	// request, on a connection of its own, is still served.
	pollUntil(t, pollTimeout, "readiness to turn 503", func() (bool, string) {
		code, body, err := readiness(t.Context(), srv.URL)
		if err != nil {
			t.Fatalf("readiness after SIGTERM: %v; want 503 while the listener still accepts", err)
		}
		return code == http.StatusServiceUnavailable && body == "draining\n", fmt.Sprintf("readiness = %d %q", code, body)
	})
	if body, err := post2026(t.Context(), srv.URL, "calc", `{"expression":"6*7"}`); err != nil || !strings.Contains(body, "42") {
		t.Errorf("a new call while not ready = %q, %v; want it served (the balancer may not have noticed yet)", body, err)
	}
	for name, ended := range map[string]<-chan streamEnd{"GET": get, "subscriptions/listen": listen} {
		select {
		case e := <-ended:
			t.Errorf("the %s stream ended (%v) during the drain delay; want it open until the listener closes", name, e.err)
		default:
		}
	}

	// Then the listener closes: the port refuses connections.
	host := strings.TrimPrefix(srv.URL, "http://")
	pollUntil(t, delay+pollTimeout, "the port to refuse connections", func() (bool, string) {
		conn, err := net.DialTimeout("tcp", host, time.Second)
		if err == nil {
			conn.Close()
			return false, "the port still accepts connections"
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dialling %s after the drain delay: %v; want connection refused", host, err)
		}
		return true, ""
	})

	// Both streams end as the listener closes, before the calls in
	// flight return: cleanly, the listen stream with its request's result.
	var done reply
	returned := false
	for name, ended := range map[string]<-chan streamEnd{"GET": get, "subscriptions/listen": listen} {
		var e streamEnd
		select {
		case e = <-ended:
		case done = <-inFlight:
			returned = true
			t.Errorf("the call in flight returned before the %s stream ended; want the stream ended when the listener closed", name)
			e = <-ended
		}
		if e.err != nil {
			t.Errorf("the %s stream ended with %v, want a clean end", name, e.err)
		}
		if name == "subscriptions/listen" {
			last := e.body[strings.LastIndex(e.body, "data: ")+1:]
			if !strings.Contains(e.body, "notifications/subscriptions/acknowledged") || !strings.Contains(last, `"id":"sub-1","result"`) {
				t.Errorf("the listen stream read %q; want its acknowledgement, then its request's result last", e.body)
			}
		}
	}
	if !returned {
		done = <-inFlight
	}
	if done.err != nil || !strings.Contains(done.body, "slept 2500 ms") {
		t.Errorf("the call in flight = %q, %v; want it completed", done.body, done.err)
	}
	if done = <-longer; done.err != nil || !strings.Contains(done.body, "slept 4000 ms") {
		t.Errorf("the longer call in flight = %q, %v; want it completed", done.body, done.err)
	}
	if code := srv.Wait(t, 10*time.Second+exitMargin); code != 0 {
		t.Errorf("toolgate serve exited with code %d after SIGTERM, want 0", code)
	}
	if !bytes.Contains([]byte(srv.Stderr()), []byte(`"drain_delay":"1s"`)) {
		t.Errorf("stderr does not log the drain delay")
	}
}

// TestNoClusterNoDrainDelay: without a cluster section SIGTERM closes the
// listener at once, as it always did: before the call in flight returns.
func TestNoClusterNoDrainDelay(t *testing.T) {
	srv := startServe(t, "server:\n  shutdown_grace: 10s\nbuiltin: [sleep]\n")
	inFlight := make(chan error, 1)
	go func() {
		_, err := post2026(t.Context(), srv.URL, "sleep", `{"ms":2500}`)
		inFlight <- err
	}()
	waitMetric(t, srv.URL, "toolgate_tool_calls_in_flight", nil, 1)
	srv.Signal(t, syscall.SIGTERM)
	host := strings.TrimPrefix(srv.URL, "http://")
	pollUntil(t, pollTimeout, "the port to refuse connections", func() (bool, string) {
		conn, err := net.DialTimeout("tcp", host, time.Second)
		if err == nil {
			conn.Close()
			return false, "the port still accepts connections"
		}
		return true, ""
	})
	select {
	case err := <-inFlight:
		t.Errorf("the call in flight returned (%v) before the listener closed; want the listener closed at once", err)
	default:
	}
	if err := <-inFlight; err != nil {
		t.Errorf("the call in flight: %v; want it completed", err)
	}
	if code := srv.Wait(t, 10*time.Second+exitMargin); code != 0 {
		t.Errorf("toolgate serve exited with code %d after SIGTERM, want 0", code)
	}
}

// TestSecondSignalDuringDrainDelay: a second signal during the drain
// delay stops serve at once, as during the grace: exit 128 + its number,
// long before the delay would have ended.
func TestSecondSignalDuringDrainDelay(t *testing.T) {
	p := startToolgate(t, "serve", "--config", writeConfig(t, drainConfig(time.Minute)), "--listen", "127.0.0.1:0", "--log-format", "json")
	logged := func(what, s string) {
		t.Helper()
		pollUntil(t, listenTimeout, what, func() (bool, string) {
			return strings.Contains(p.stderr.String(), s), fmt.Sprintf("no %s in the log yet", s)
		})
	}
	logged("toolgate serve to listen", `"msg":"listening"`)
	signalProcess(t, "toolgate serve", p.cmd, syscall.SIGTERM)
	logged("the drain delay to begin", `"drain_delay":"1m0s"`)
	signalProcess(t, "toolgate serve", p.cmd, syscall.SIGINT)
	if code := waitExit(t, "toolgate serve", p.cmd, p.exited, exitMargin); code != 128+int(syscall.SIGINT) {
		t.Errorf("toolgate serve exited with code %d after a second signal, want %d", code, 128+int(syscall.SIGINT))
	}
	if !strings.Contains(p.stderr.String(), "toolgate: second signal") {
		t.Errorf("stderr does not say that a second signal stopped toolgate")
	}
}

// TestDrainBehindHAProxy is issue 26's requirement 4: three replicas
// behind HAProxy with retries off (testdata/lb/haproxy-noretry.cfg) and a
// loop of 2026-07-28 calls through it; one replica gets SIGTERM with a
// 2.5 s call in flight. Its readiness turns 503 while its listener still
// accepts, the balancer takes it out of rotation within the drain delay,
// the call completes, and not one call of the loop fails, though the
// balancer retries none.
func TestDrainBehindHAProxy(t *testing.T) {
	needProgram(t, "haproxy", "haproxy")
	c := startClusterWith(t, "server: {shutdown_grace: 10s}\nguards: {loop: {action: \"off\"}}\nbuiltin: [calc, sleep]\n", true, "  drain_delay: 2s\n")
	t.Cleanup(func() { stopAll(t, c.replicas) })
	lb := startHAProxy(t, "testdata/lb/haproxy-noretry.cfg", c.addrs)

	var calls, failed atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var loop sync.WaitGroup
	for w := range 4 {
		loop.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				calls.Add(1)
				body, err := post2026(t.Context(), lb.URL, "calc", fmt.Sprintf(`{"expression":"%d+%d"}`, w, i))
				if err == nil && !strings.Contains(body, fmt.Sprint(w+i)) {
					err = fmt.Errorf("result %s", body)
				}
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			}
		})
	}
	// The loop reaches every replica before the drain.
	for i, r := range c.replicas {
		pollUntil(t, pollTimeout, fmt.Sprintf("the loop's calls on r%d", i+1), func() (bool, string) {
			n := metricSum(scrape(t, r.URL), "toolgate_tool_calls_total")
			return n > 0, fmt.Sprintf("%v calls", n)
		})
	}

	r1 := c.replicas[0]
	// r1's events of the sleep tool say when the call runs.
	evCtx, evCancel := context.WithTimeout(t.Context(), callTimeout)
	defer evCancel()
	evReq, _ := http.NewRequestWithContext(evCtx, http.MethodGet, r1.URL+"/events?tool=sleep", nil)
	evResp, err := newHTTPClient().Do(evReq)
	if err != nil {
		t.Fatal(err)
	}
	defer evResp.Body.Close()
	events := bufio.NewScanner(evResp.Body)
	for events.Scan() && events.Text() != ": subscribed" {
	}
	inFlight := make(chan error, 1)
	go func() {
		body, err := post2026(t.Context(), r1.URL, "sleep", `{"ms":2500}`)
		if err == nil && !strings.Contains(body, "slept 2500 ms") {
			err = fmt.Errorf("result %s", body)
		}
		inFlight <- err
	}()
	for events.Scan() && !strings.Contains(events.Text(), `"state":"running"`) {
	}
	if events.Err() != nil {
		t.Fatalf("waiting for the sleep call to run on r1: %v", events.Err())
	}
	evCancel()
	r1.Signal(t, syscall.SIGTERM)
	pollUntil(t, pollTimeout, "r1's readiness to turn 503", func() (bool, string) {
		code, _, err := readiness(t.Context(), r1.URL)
		if err != nil {
			t.Fatalf("r1's readiness after SIGTERM: %v; want 503 while its listener still accepts", err)
		}
		return code == http.StatusServiceUnavailable, fmt.Sprintf("readiness = %d", code)
	})
	if code := r1.Wait(t, 2*time.Second+10*time.Second+exitMargin); code != 0 {
		t.Errorf("r1 exited with code %d after SIGTERM, want 0", code)
	}
	if err := <-inFlight; err != nil {
		t.Errorf("the 2.5 s call in flight on r1: %v; want it completed", err)
	}
	// The loop goes on a while on the other two.
	after := calls.Load()
	pollUntil(t, pollTimeout, "the loop to go on without r1", func() (bool, string) {
		return calls.Load() > after+20, fmt.Sprintf("%d calls since r1 exited", calls.Load()-after)
	})
	close(stop)
	loop.Wait()
	t.Logf("%d calls through the balancer, %d failed", calls.Load(), failed.Load())
	if n := failed.Load(); n > 0 {
		t.Errorf("%d of %d calls failed through a balancer with retries off, want 0; the first: %v", n, calls.Load(), firstErr.Load())
	}
}
