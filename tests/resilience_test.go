package tests

// End-to-end tests of toolgate's resilience features through the binary:
// retries (REST and upstream MCP), the retry budget, circuit breakers,
// the concurrency limits and their queue, toolgate_batch, and a graceful
// shutdown with calls queued. The backends are fault-injecting doubles
// written for these tests: faultAPI, an in-process REST server, and
// testdata/faultupstream, an MCP server over stdio that dies mid-call.
//
// Concurrency is proven with barriers (the fault API holding a request,
// the in-flight and queue gauges), never with timing.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/mcp"
)

// faultAPI is a fault-injecting REST backend. Its behaviour is chosen by
// the request, so that every subtest uses keys of its own:
//
//   - /fail/{key}?times=k&status=s[&retry_after=v] answers status s (with
//     Retry-After v) to the first k requests for key, then 200 with
//     {"key": key, "request": n};
//   - /block/{key} holds the request until the client goes away or the
//     test calls unblock, then answers 200;
//   - anything else is 404.
type faultAPI struct {
	srv       *httptest.Server
	unblocked chan struct{}
	once      sync.Once

	mu   sync.Mutex
	reqs map[string][]time.Time // arrival times per key; guarded by mu
}

// startFaultAPI serves a faultAPI on a free port of 127.0.0.1 until the
// test ends.
func startFaultAPI(t *testing.T) *faultAPI {
	t.Helper()
	return startFaultAPIAt(t, "127.0.0.1:0")
}

// startFaultAPIAt serves a faultAPI on addr until the test ends.
func startFaultAPIAt(t *testing.T, addr string) *faultAPI {
	t.Helper()
	a := &faultAPI{unblocked: make(chan struct{}), reqs: map[string][]time.Time{}}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening on %s for the fault API: %v", addr, err)
	}
	a.srv = httptest.NewUnstartedServer(http.HandlerFunc(a.serveHTTP))
	a.srv.Listener.Close()
	a.srv.Listener = ln
	a.srv.Start()
	// Cleanups run last-registered first: held requests end before Close
	// waits for them.
	t.Cleanup(a.srv.Close)
	t.Cleanup(a.unblock)
	return a
}

// URL is the API's base URL, http://127.0.0.1:PORT.
func (a *faultAPI) URL() string { return a.srv.URL }

// unblock releases every held request, now and later.
func (a *faultAPI) unblock() { a.once.Do(func() { close(a.unblocked) }) }

// hits returns how many requests key has had.
func (a *faultAPI) hits(key string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.reqs[key])
}

// times returns when key's requests arrived.
func (a *faultAPI) times(key string) []time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]time.Time(nil), a.reqs[key]...)
}

func (a *faultAPI) serveHTTP(w http.ResponseWriter, r *http.Request) {
	route, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	a.mu.Lock()
	a.reqs[key] = append(a.reqs[key], time.Now())
	n := len(a.reqs[key])
	a.mu.Unlock()
	q := r.URL.Query()
	switch route {
	case "fail":
		times, _ := strconv.Atoi(q.Get("times"))
		if n <= times {
			status, err := strconv.Atoi(q.Get("status"))
			if err != nil {
				status = http.StatusServiceUnavailable
			}
			if ra := q.Get("retry_after"); ra != "" {
				w.Header().Set("Retry-After", ra)
			}
			writeJSON(w, status, map[string]any{"error": fmt.Sprintf("injected failure %d of %d", n, times)})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"key": key, "request": n})
	case "block":
		select {
		case <-r.Context().Done():
		case <-a.unblocked:
			writeJSON(w, http.StatusOK, map[string]any{"released": key})
		}
	default:
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "no route " + r.URL.Path})
	}
}

// freeAddr returns an address of 127.0.0.1 where nothing listens.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// readyCircuits returns the "circuits" of base's /readyz.
func readyCircuits(t *testing.T, base string) map[string]string {
	t.Helper()
	code, body := get(t, base+"/readyz")
	var ready struct {
		Circuits map[string]string `json:"circuits"`
	}
	if err := json.Unmarshal([]byte(body), &ready); err != nil || code != http.StatusOK {
		t.Fatalf("GET /readyz = %d %s (%v), want 200 with JSON", code, body, err)
	}
	return ready.Circuits
}

// wantTextContains fails unless res's text contains every one of want.
func wantTextContains(t *testing.T, res *mcp.CallToolResult, want ...string) {
	t.Helper()
	text := resultText(res)
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("result text %q does not contain %q", text, w)
		}
	}
}

// resilienceRESTConfig has REST tools on three fault APIs: %[1]s for
// retries, %[2]s for the budget, and %[3]s (host:port) for the breaker,
// each its own backend. retry_budget 0 leaves every backend the floor of
// 10 retries per 10s.
const resilienceRESTConfig = `
builtin: [calc, sleep]
guards: {loop: {action: "off"}} # the breaker is tested with identical calls
batch_tool: true
defaults:
  retry: {attempts: 3, initial_backoff: 5ms, max_backoff: 20ms}
  retry_budget: 0
  circuit_breaker: {failures: 3, failure_ratio: 0, open_for: 2s}
rest:
  - name: flaky_get
    url: %[1]s/fail/{key}
    query: {times: "{times}", status: "503"}
  - name: flaky_post
    method: POST
    url: %[1]s/fail/{key}
    query: {times: "{times}", status: "503"}
  - name: retry_after_get
    url: %[1]s/fail/{key}
    query: {times: "1", status: "503", retry_after: "1"}
    retry: {max_backoff: 5s}
  - name: hang_get
    url: %[1]s/block/{key}
    timeout: 300ms
  - name: missing_get
    url: %[1]s/nothing/here
  - name: budget_get
    url: %[2]s/fail/{key}
    query: {times: "1000", status: "429"}
    retry: {attempts: 10, initial_backoff: 1ms, max_backoff: 2ms}
  - name: dead_get
    url: http://%[3]s/fail/{key}
    retry: {attempts: 1}
`

func TestResilienceREST(t *testing.T) {
	api, budgetAPI := startFaultAPI(t), startFaultAPI(t)
	deadAddr := freeAddr(t) // nothing listens there until the breaker subtest starts a server
	srv := startServe(t, fmt.Sprintf(resilienceRESTConfig, api.URL(), budgetAPI.URL(), deadAddr))
	c := connect(t, streamableHTTP, srv)

	t.Run("retried then success", func(t *testing.T) {
		retries := map[string]string{"tool": "flaky_get", "error_class": "unavailable"}
		before := metricOrZero(scrape(t, srv.URL), "toolgate_retries_total", retries)
		res := mustCall(t, c, "flaky_get", map[string]any{"key": "r1", "times": "2"}, "")
		if res.IsError {
			t.Fatalf("flaky_get = %q, want success after two 503s", resultText(res))
		}
		if got := metaNumber(t, res, attemptsMetaKey); got != 3 {
			t.Errorf("_meta[%q] = %v, want 3", attemptsMetaKey, got)
		}
		if got := structured(t, res)["request"]; got != float64(3) {
			t.Errorf("structuredContent.request = %v, want 3", got)
		}
		if n := api.hits("r1"); n != 3 {
			t.Errorf("the API received %d requests, want 3", n)
		}
		waitMetric(t, srv.URL, "toolgate_retries_total", retries, before+2)
	})

	t.Run("POST not retried", func(t *testing.T) {
		res := mustCall(t, c, "flaky_post", map[string]any{"key": "p1", "times": "1"}, "")
		wantError(t, res, "unavailable")
		wantTextContains(t, res, "returned 503", `not retried: tool "flaky_post" is not idempotent (mark it idempotent: true if repeating it is safe)`)
		if n := api.hits("p1"); n != 1 {
			t.Errorf("the API received %d requests, want 1", n)
		}
	})

	t.Run("Retry-After honoured", func(t *testing.T) {
		res := mustCall(t, c, "retry_after_get", map[string]any{"key": "ra1"}, "")
		if res.IsError {
			t.Fatalf("retry_after_get = %q, want success after one 503", resultText(res))
		}
		if got := metaNumber(t, res, attemptsMetaKey); got != 2 {
			t.Errorf("_meta[%q] = %v, want 2", attemptsMetaKey, got)
		}
		// The policy's own backoff is at most 20ms: only Retry-After: 1
		// makes the retry wait a second.
		at := api.times("ra1")
		if len(at) != 2 {
			t.Fatalf("the API received %d requests, want 2", len(at))
		}
		if gap := at[1].Sub(at[0]); gap < time.Second {
			t.Errorf("the retry came %v after the 503, want at least the Retry-After of 1s", gap)
		}
	})

	t.Run("hang ends at the tool's timeout", func(t *testing.T) {
		res := mustCall(t, c, "hang_get", map[string]any{"key": "h1"}, "")
		wantError(t, res, "timeout")
		wantTextContains(t, res, "/block/h1 did not finish before the call's deadline (after 1 attempt)")
		if n := api.hits("h1"); n != 1 {
			t.Errorf("the API received %d requests, want 1 (no retry past the deadline)", n)
		}
	})

	t.Run("toolgate_batch mixed outcomes", func(t *testing.T) {
		res := mustCall(t, c, "toolgate_batch", map[string]any{"calls": []any{
			map[string]any{"tool": "calc", "arguments": map[string]any{"expression": "2+3"}},
			map[string]any{"tool": "sleep", "arguments": map[string]any{"ms": "soon"}},
			map[string]any{"tool": "no_such_tool", "arguments": map[string]any{}},
			map[string]any{"tool": "missing_get"},
			map[string]any{"tool": "flaky_get", "arguments": map[string]any{"key": "bt1", "times": "0"}},
		}}, "")
		if res.IsError {
			t.Fatalf("toolgate_batch = %q, want a result listing every outcome", resultText(res))
		}
		var got struct {
			Results []struct {
				Tool    string          `json:"tool"`
				Status  string          `json:"status"`
				Class   string          `json:"class"`
				Content json.RawMessage `json:"content"`
			} `json:"results"`
			OK     int `json:"ok"`
			Failed int `json:"failed"`
		}
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("structuredContent %s: %v", b, err)
		}
		type outcome struct{ Tool, Status, Class string }
		var outcomes []outcome
		for _, r := range got.Results {
			outcomes = append(outcomes, outcome{r.Tool, r.Status, r.Class})
		}
		want := []outcome{
			{"calc", "ok", ""},
			{"sleep", "error", "validation"},
			{"no_such_tool", "error", "not_found"},
			{"missing_get", "error", "not_found"},
			{"flaky_get", "ok", ""},
		}
		if diff := cmp.Diff(want, outcomes); diff != "" {
			t.Errorf("toolgate_batch outcomes, in order (-want +got):\n%s", diff)
		}
		if got.OK != 2 || got.Failed != 3 {
			t.Errorf("toolgate_batch ok = %d, failed = %d, want 2 and 3", got.OK, got.Failed)
		}
		if len(got.Results) == 5 {
			for i, want := range []string{"5", "ms", "no_such_tool", "404"} {
				if !strings.Contains(string(got.Results[i].Content), want) {
					t.Errorf("toolgate_batch result %d content %s does not mention %q", i, got.Results[i].Content, want)
				}
			}
		}
	})

	t.Run("retry budget exhausted", func(t *testing.T) {
		backend := "rest:" + strings.TrimPrefix(budgetAPI.URL(), "http://")
		exhausted := map[string]string{"backend": backend}
		// The first call's 9 retries leave 1 of the 10 a backend may make.
		res := mustCall(t, c, "budget_get", map[string]any{"key": "b1"}, "")
		wantError(t, res, "rate_limited")
		wantTextContains(t, res, "after 10 attempts")
		if text := resultText(res); strings.Count(text, "10 attempts") != 1 {
			t.Errorf("result text %q gives the attempt count more than once, want it once", text)
		}
		if n := budgetAPI.hits("b1"); n != 10 {
			t.Errorf("the API received %d requests for the first call, want 10", n)
		}
		if got := metricOrZero(scrape(t, srv.URL), "toolgate_retry_budget_exhausted_total", exhausted); got != 0 {
			t.Errorf("toolgate_retry_budget_exhausted_total%s = %v after a call within the budget, want 0", fmtLabels(exhausted), got)
		}
		// The second gets the last retry, and no more.
		res = mustCall(t, c, "budget_get", map[string]any{"key": "b2"}, "")
		wantError(t, res, "rate_limited")
		wantTextContains(t, res, fmt.Sprintf("not retried: the retry budget of backend %q is spent (it allows 10 retries per 10s)", backend))
		if n := budgetAPI.hits("b2"); n != 2 {
			t.Errorf("the API received %d requests for the second call, want 2", n)
		}
		waitMetric(t, srv.URL, "toolgate_retry_budget_exhausted_total", exhausted, 1)
	})

	t.Run("breaker opens on a dead backend, and a probe closes it", func(t *testing.T) {
		backend := "rest:" + deadAddr
		state := map[string]string{"backend": backend}
		if got := readyCircuits(t, srv.URL)[backend]; got != "closed" {
			t.Errorf("/readyz circuits[%q] = %q at start, want closed", backend, got)
		}
		for i := range 3 {
			res := mustCall(t, c, "dead_get", map[string]any{"key": "d1"}, "")
			wantError(t, res, "network")
			if t.Failed() {
				t.Fatalf("call %d to the dead backend: %q", i+1, resultText(res))
			}
		}
		res := mustCall(t, c, "dead_get", map[string]any{"key": "d1"}, "")
		wantError(t, res, "unavailable")
		wantTextContains(t, res, fmt.Sprintf("backend %q is unavailable: its circuit breaker opened after 3 consecutive failures", backend), "; next probe in ")
		if got := readyCircuits(t, srv.URL)[backend]; got != "open" {
			t.Errorf("/readyz circuits[%q] = %q, want open", backend, got)
		}
		waitMetric(t, srv.URL, "toolgate_circuit_state", state, 1)

		// The backend comes back. Until open_for has passed, calls still
		// fail at once without reaching it; then one probe does, and
		// closes the breaker.
		back := startFaultAPIAt(t, deadAddr)
		var last *mcp.CallToolResult
		pollUntil(t, pollTimeout, "a probe to close the breaker", func() (bool, string) {
			last = mustCall(t, c, "dead_get", map[string]any{"key": "d2"}, "")
			if last.IsError && !strings.Contains(resultText(last), "next probe in") {
				t.Fatalf("while the breaker is open: %q, want a fail-fast refusal", resultText(last))
			}
			return !last.IsError, fmt.Sprintf("dead_get = %q", resultText(last))
		})
		if n := back.hits("d2"); n != 1 {
			t.Errorf("the backend received %d requests, want 1 (the probe)", n)
		}
		if got := readyCircuits(t, srv.URL)[backend]; got != "closed" {
			t.Errorf("/readyz circuits[%q] = %q after the probe, want closed", backend, got)
		}
		waitMetric(t, srv.URL, "toolgate_circuit_state", state, 0)
		if res := mustCall(t, c, "dead_get", map[string]any{"key": "d3"}, ""); res.IsError || back.hits("d3") != 1 {
			t.Errorf("dead_get after the probe = %q with %d requests, want success in 1", resultText(res), back.hits("d3"))
		}
	})
}

// resilienceUpstreamConfig has two upstreams running faultupstream (%[1]s)
// with the state directory %[2]s and the process marker %[3]s=%[4]q:
// fault, whose retries outlast a restart, and faulth, with a short
// timeout and every tool idempotent. The breaker's threshold is above the
// attempts, so that a restart does not open it.
const resilienceUpstreamConfig = `
builtin: []
defaults:
  retry_budget: 10
  circuit_breaker: {failures: 50}
upstreams:
  - name: fault
    transport: stdio
    command: %[1]q
    env: {FAULT_STATE_DIR: %[2]q, %[3]s: %[4]q}
    retry: {attempts: 10, initial_backoff: 250ms, max_backoff: 2s}
  - name: faulth
    transport: stdio
    command: %[1]q
    env: {FAULT_STATE_DIR: %[2]q, %[3]s: %[4]q}
    timeout: 300ms
    idempotent: true
`

func TestResilienceUpstream(t *testing.T) {
	bin := buildFaultUpstream(t)
	state := t.TempDir()
	m := newProcMarker(t)
	srv := serveUpstreams(t, m, fmt.Sprintf(resilienceUpstreamConfig, bin, state, m.name, m.value))
	c := connect(t, streamableHTTP, srv)
	waitTools(t, c, "fault__flaky", "fault__unsafe", "faulth__hang")
	// calls returns how many times the upstream ran key's calls.
	calls := func(t *testing.T, key string) int {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(state, "calls-"+key))
		if err != nil {
			t.Fatalf("reading the upstream's count of %s: %v", key, err)
		}
		n, err := strconv.Atoi(string(b))
		if err != nil {
			t.Fatalf("the upstream's count of %s is %q", key, b)
		}
		return n
	}

	t.Run("hang not retried past the deadline", func(t *testing.T) {
		res := mustCall(t, c, "faulth__hang", map[string]any{}, "")
		wantError(t, res, "timeout")
		wantTextContains(t, res, "not retried: the call's deadline has passed")
	})

	t.Run("read-only tool retried through a crash", func(t *testing.T) {
		up := map[string]string{"upstream": "fault"}
		retries := map[string]string{"tool": "fault__flaky", "error_class": "unavailable"}
		before := scrape(t, srv.URL)
		restarts0 := metricOrZero(before, "toolgate_upstream_restarts_total", up)
		retries0 := metricOrZero(before, "toolgate_retries_total", retries)

		res := mustCall(t, c, "fault__flaky", map[string]any{"key": "f1", "fails": 1}, "")
		wantOK(t, res, "flaky f1 ok on call 2")
		attempts := metaNumber(t, res, attemptsMetaKey)
		if attempts < 2 {
			t.Errorf("_meta[%q] = %v, want at least 2", attemptsMetaKey, attempts)
		}
		if n := calls(t, "f1"); n != 2 {
			t.Errorf("the upstream ran fault__flaky %d times, want 2 (one death, one success)", n)
		}
		after := scrape(t, srv.URL)
		if got := metricOrZero(after, "toolgate_upstream_restarts_total", up); got < restarts0+1 {
			t.Errorf("toolgate_upstream_restarts_total%s = %v, want at least %v", fmtLabels(up), got, restarts0+1)
		}
		// Every failed attempt was a dead or restarting upstream.
		if got := metricOrZero(after, "toolgate_retries_total", retries); got != retries0+attempts-1 {
			t.Errorf("toolgate_retries_total%s = %v, want %v (one per attempt after the first)", fmtLabels(retries), got, retries0+attempts-1)
		}
	})

	t.Run("tool without hints not retried", func(t *testing.T) {
		res := mustCall(t, c, "fault__unsafe", map[string]any{"key": "u1", "fails": 1}, "")
		wantError(t, res, "unavailable")
		wantTextContains(t, res, `not retried: tool "fault__unsafe" is not idempotent (mark it idempotent: true if repeating it is safe)`)
		if n := calls(t, "u1"); n != 1 {
			t.Errorf("the upstream ran fault__unsafe %d times, want 1", n)
		}
	})
}

// buildFaultUpstream builds testdata/faultupstream and returns the binary.
func buildFaultUpstream(t *testing.T) string { return buildTestdata(t, "faultupstream") }

func TestResilienceQueueFull(t *testing.T) {
	srv := startServe(t, `
builtin: [sleep]
batch_tool: true
defaults: {max_parallel: 1, max_parallel_per_session: 1, max_queue: 0}
`)
	a, b := connect(t, streamableHTTP, srv), connect(t, streamableHTTP, srv)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := a.CallTool(ctx, callRequest("sleep", map[string]any{"ms": 60000}, ""))
		done <- err
	}()
	waitMetric(t, srv.URL, "toolgate_tool_calls_in_flight", nil, 1)

	// Another session finds the one slot taken and no room to wait.
	res := mustCall(t, b, "sleep", map[string]any{"ms": 0}, "")
	wantError(t, res, "rate_limited")
	wantTextContains(t, res, "toolgate is at its limit: it runs its maximum of 1 calls at once (defaults.max_parallel) and the queue of 0 waiting calls is full (defaults.max_queue)")
	// The same session runs into its own limit first.
	res = mustCall(t, a, "sleep", map[string]any{"ms": 0}, "")
	wantError(t, res, "rate_limited")
	wantTextContains(t, res, "this session already runs its limit of 1 (defaults.max_parallel_per_session)")

	cancel()
	select {
	case <-done:
	case <-time.After(callTimeout):
		t.Fatalf("the cancelled sleep call did not return within %v", callTimeout)
	}
	waitMetric(t, srv.URL, "toolgate_tool_calls_in_flight", nil, 0)
	wantOK(t, mustCall(t, b, "sleep", map[string]any{"ms": 0}, ""), "slept 0 ms")

	// A batch runs its calls within the session's one slot instead of
	// refusing its own calls for want of room in the queue.
	call := map[string]any{"tool": "sleep", "arguments": map[string]any{"ms": 100}}
	res = mustCall(t, b, "toolgate_batch", map[string]any{"calls": []any{call, call, call}}, "")
	if res.IsError {
		t.Fatalf("toolgate_batch = %q", resultText(res))
	}
	if got := structured(t, res); got["ok"] != float64(3) || got["failed"] != float64(0) {
		t.Errorf("toolgate_batch of 3 sleeps with max_parallel_per_session 1 and max_queue 0: ok %v, failed %v, want 3 and 0; results %v", got["ok"], got["failed"], got["results"])
	}
}

func TestResilienceShutdownWithQueuedCall(t *testing.T) {
	api := startFaultAPI(t)
	srv := startServe(t, fmt.Sprintf(`
server: {shutdown_grace: 20s}
builtin: [sleep]
defaults: {max_parallel: 1, max_parallel_per_session: 1, max_queue: 4}
rest:
  - name: hold
    url: %s/block/{key}
`, api.URL()))
	a, b := connect(t, streamableHTTP, srv), connect(t, streamableHTTP, srv)

	type outcome struct {
		res *mcp.CallToolResult
		err error
	}
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	running, queued := make(chan outcome, 1), make(chan outcome, 1)
	go func() {
		res, err := a.CallTool(ctx, callRequest("hold", map[string]any{"key": "s1"}, ""))
		running <- outcome{res, err}
	}()
	// The held request has reached the API: the call has the one slot.
	pollUntil(t, pollTimeout, "the held request to reach the API", func() (bool, string) {
		return api.hits("s1") == 1, fmt.Sprintf("the API received %d requests", api.hits("s1"))
	})
	go func() {
		res, err := b.CallTool(ctx, callRequest("sleep", map[string]any{"ms": 1}, ""))
		queued <- outcome{res, err}
	}()
	waitMetric(t, srv.URL, "toolgate_queue_length", nil, 1)

	srv.Signal(t, syscall.SIGTERM)
	pollUntil(t, pollTimeout, "toolgate to start shutting down", func() (bool, string) {
		return strings.Contains(srv.Stderr(), `"msg":"shutting down"`), "no \"shutting down\" log line yet"
	})
	api.unblock()

	for name, ch := range map[string]chan outcome{"running": running, "queued": queued} {
		select {
		case o := <-ch:
			if o.err != nil {
				t.Fatalf("the %s call failed: %v", name, o.err)
			}
			if o.res.IsError {
				t.Errorf("the %s call = %q, want success", name, resultText(o.res))
			}
		case <-ctx.Done():
			t.Fatalf("the %s call did not return: %v", name, ctx.Err())
		}
	}
	if code := srv.Wait(t, stopTimeout); code != 0 {
		t.Errorf("toolgate serve exited with code %d after SIGTERM, want 0", code)
	}
	if strings.Contains(srv.Stderr(), "shutdown grace ran out") {
		t.Errorf("the grace ran out; stderr:\n%s", srv.Stderr())
	}
}
