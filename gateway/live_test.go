package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/gateway/internal/callshare"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

// applyChange applies g's configuration as it is in force with change
// made, and checks that Apply reports it as changed under want and
// needing no restart.
func applyChange(t *testing.T, g *Gateway, want []string, change func(*config.Config)) {
	t.Helper()
	next := *g.cfg
	s := g.settings()
	next.Guards, next.Defaults, next.Threads, next.BatchTool = s.guards, s.defaults, s.threads, s.batchTool
	next.Auth.MaxSessions, next.Auth.MaxInstances = s.maxSessions, s.maxInstances
	change(&next)
	applied, err := g.Apply(&next)
	if err != nil {
		t.Fatalf("Apply = %v", err)
	}
	if d := cmp.Diff(&Applied{Changed: want}, applied); d != "" {
		t.Errorf("Apply (-want +got):\n%s", d)
	}
}

// TestApplyGuards: a reload that switches the loop guard on and name
// repair off applies to the next calls of a thread that was already
// repeating itself.
func TestApplyGuards(t *testing.T) {
	g, _ := newGateway(t, func(c *config.Config) {
		c.Guards.Loop.Action = config.LoopOff
		c.Guards.NameRepair = true
	})
	thread := map[string]any{ThreadMetaKey: "t"}
	args := json.RawMessage(`{"text":"again"}`)
	for i := range 4 {
		if res, err := g.Call(t.Context(), "echo", args, thread); err != nil || res.IsError {
			t.Fatalf("call %d with the guard off: %v %+v", i+1, err, res)
		}
	}
	if _, err := g.Call(t.Context(), "ECHO", args, nil); err != nil {
		t.Fatalf("a repaired name before the reload: %v", err)
	}
	applyChange(t, g, []string{"guards"}, func(c *config.Config) {
		c.Guards.Loop = config.LoopGuard{Threshold: 2, Action: config.LoopBlock}
		c.Guards.NameRepair = false
	})
	// The guard was off: it counts the thread's calls from the reload on.
	for i := range 2 {
		if res, err := g.Call(t.Context(), "echo", args, thread); err != nil || res.IsError {
			t.Fatalf("identical call %d after the guard went on (threshold 2): %v %+v, want it run", i+1, err, res)
		}
	}
	res, err := g.Call(t.Context(), "echo", args, thread)
	if err != nil || !res.IsError || res.Class != retry.Validation || !strings.Contains(resultText(t, res), "the last 2 returned the same result") {
		t.Errorf("identical call 3 after the guard went on (threshold 2): %v %+v, want it blocked", err, res)
	}
	if _, err := g.Call(t.Context(), "ECHO", args, nil); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("a name that needs repair after name_repair went off: %v, want not found", err)
	}
}

// TestApplyDefaultsTimeout: a call that started before a reload keeps
// its deadline; the next call runs under the new defaults.timeout.
func TestApplyDefaultsTimeout(t *testing.T) {
	g, _ := newGateway(t, func(c *config.Config) { c.Defaults.Timeout = config.Duration(time.Hour) })
	started := make(chan time.Duration, 2)
	release := make(chan struct{})
	err := g.RegisterStateless(registry.Tool{Name: "wait", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ map[string]any) (executors.Result, error) {
			d, _ := ctx.Deadline()
			started <- time.Until(d)
			select {
			case <-release:
				return executors.Text("released"), nil
			case <-ctx.Done():
				return executors.Result{}, ctx.Err()
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan *Result, 1)
	go func() {
		res, err := g.Call(context.WithoutCancel(t.Context()), "wait", nil, nil)
		if err != nil {
			res = errorResult(err)
		}
		first <- res
	}()
	if left := <-started; left < 30*time.Minute {
		t.Fatalf("the first call's deadline is %v away, want about the 1h it started with", left)
	}
	applyChange(t, g, []string{"defaults"}, func(c *config.Config) { c.Defaults.Timeout = config.Duration(50 * time.Millisecond) })
	res, err := g.Call(t.Context(), "wait", nil, nil)
	<-started
	if err != nil || res.Class != retry.Timeout || !strings.Contains(resultText(t, res), "within 50ms") {
		t.Errorf("a call after the reload: %v %+v, want a timeout after the new 50ms", err, res)
	}
	close(release)
	if res := <-first; res.IsError {
		t.Errorf("the call in flight across the reload: %q, want it to finish under its own deadline", resultText(t, res))
	}
}

// TestApplyDefaultsRetry: the retry policy of tools that have none of
// their own is defaults.retry as a reload leaves it.
func TestApplyDefaultsRetry(t *testing.T) {
	g, _ := newGateway(t, func(c *config.Config) {
		c.Defaults.Retry = config.Retry{Attempts: 3, InitialBackoff: config.Duration(time.Millisecond), MaxBackoff: config.Duration(time.Millisecond), On: []string{"unavailable"}}
	})
	var attempts atomic.Int64
	err := g.RegisterStateless(registry.Tool{Name: "flaky", Idempotent: true, InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, map[string]any) (executors.Result, error) {
			attempts.Add(1)
			return executors.Result{}, retry.Errorf(retry.Unavailable, "down")
		})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ attempts, want int }{{3, 3}, {1, 1}, {5, 5}} {
		if tc.attempts != 3 {
			applyChange(t, g, []string{"defaults"}, func(c *config.Config) { c.Defaults.Retry.Attempts = tc.attempts })
		}
		attempts.Store(0)
		if res, err := g.Call(t.Context(), "flaky", nil, nil); err != nil || res.Class != retry.Unavailable {
			t.Fatalf("flaky: %v %+v", err, res)
		}
		if got := attempts.Load(); got != int64(tc.want) {
			t.Errorf("defaults.retry.attempts %d: the tool ran %d times, want %d", tc.attempts, got, tc.want)
		}
	}
}

// TestApplyLimits: raising max_parallel lets a new call run at once while
// a call holds the only slot of the limits before; that call gives its
// slot back to the old limiter when it ends.
func TestApplyLimits(t *testing.T) {
	g, _ := newGateway(t, func(c *config.Config) {
		c.Defaults.MaxParallel, c.Defaults.MaxParallelPerSession, c.Defaults.MaxParallelPerPrincipal, c.Defaults.MaxQueue = 1, 1, 1, 0
	})
	arrived, release := make(chan struct{}, 4), make(chan struct{})
	err := g.RegisterStateless(registry.Tool{Name: "hold", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ map[string]any) (executors.Result, error) {
			arrived <- struct{}{}
			select {
			case <-release:
				return executors.Text("done"), nil
			case <-ctx.Done():
				return executors.Result{}, ctx.Err()
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	old := g.limiter.Load()
	first := make(chan *Result, 1)
	go func() {
		res, err := g.Call(context.WithoutCancel(t.Context()), "hold", nil, nil)
		if err != nil {
			res = errorResult(err)
		}
		first <- res
	}()
	<-arrived
	if res, _ := g.Call(t.Context(), "echo", json.RawMessage(`{"text":"x"}`), nil); res.Class != retry.RateLimited {
		t.Fatalf("a second call at max_parallel 1 and max_queue 0: %+v, want rate_limited", res)
	}
	applyChange(t, g, []string{"defaults"}, func(c *config.Config) {
		c.Defaults.MaxParallel, c.Defaults.MaxParallelPerSession, c.Defaults.MaxParallelPerPrincipal = 2, 2, 2
	})
	if res, err := g.Call(t.Context(), "echo", json.RawMessage(`{"text":"x"}`), nil); err != nil || res.IsError {
		t.Errorf("a second call after max_parallel went to 2: %v %+v, want it run", err, res)
	}
	close(release)
	if res := <-first; res.IsError {
		t.Errorf("the call holding the old slot: %q", resultText(t, res))
	}
	if cur := g.limiter.Load(); cur == old || old.Stats().Running != 0 || cur.Stats() != (callshare.Stats{Global: 2}) {
		t.Errorf("limiters after every call: old %+v, new %+v; want a new limiter of 2, both empty", old.Stats(), cur.Stats())
	}
}

// TestApplyBatchTool: batch_tool switched on and off by reloads adds and
// removes toolgate_batch.
func TestApplyBatchTool(t *testing.T) {
	g, _ := newGateway(t, nil)
	if slices.Contains(registered(g), BatchToolName) {
		t.Fatal("toolgate_batch is registered without batch_tool")
	}
	applyChange(t, g, []string{"batch_tool"}, func(c *config.Config) { c.BatchTool = true })
	args := json.RawMessage(`{"calls":[{"tool":"echo","arguments":{"text":"a"}},{"tool":"echo","arguments":{"text":"b"}}]}`)
	if res, err := g.Call(t.Context(), BatchToolName, args, nil); err != nil || res.IsError {
		t.Fatalf("toolgate_batch after batch_tool went on: %v %+v", err, res)
	}
	applyChange(t, g, []string{"batch_tool"}, func(c *config.Config) { c.BatchTool = false })
	if _, err := g.Call(t.Context(), BatchToolName, args, nil); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("toolgate_batch after batch_tool went off: %v, want not found", err)
	}
}

// TestApplyThreads: a shortened threads.idle_ttl closes an idle instance
// soon after the reload, while an instance's state survives the reload
// itself.
func TestApplyThreads(t *testing.T) {
	g, _ := newGateway(t, func(c *config.Config) { c.Threads.IdleTTL = config.Duration(time.Hour) })
	closed := make(chan struct{}, 4)
	err := g.RegisterStateful(registry.Tool{Name: "tally"}, executors.Factory{
		New: func(context.Context, string) (executors.Instance, error) {
			return &signalCounter{closed: closed}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	thread := map[string]any{ThreadMetaKey: "t"}
	count := func() int {
		t.Helper()
		res, err := g.Call(t.Context(), "tally", nil, thread)
		if err != nil || res.IsError {
			t.Fatalf("tally: %v %+v", err, res)
		}
		return res.Structured.(map[string]any)["n"].(int)
	}
	count()
	applyChange(t, g, []string{"threads"}, func(c *config.Config) { c.Threads.MaxInstances = 5 })
	if n := count(); n != 2 {
		t.Errorf("the tally after a reload = %v, want 2: its instance was kept", n)
	}
	applyChange(t, g, []string{"threads"}, func(c *config.Config) { c.Threads.IdleTTL = config.Duration(20 * time.Millisecond) })
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the idle instance was not closed after threads.idle_ttl went from 1h to 20ms")
	}
	if n := count(); n != 1 {
		t.Errorf("the tally after its instance idled out = %v, want a fresh 1", n)
	}
}

// signalCounter counts its calls and says when it is closed.
type signalCounter struct {
	n      int
	closed chan<- struct{}
}

func (c *signalCounter) Call(context.Context, map[string]any) (executors.Result, error) {
	c.n++
	return executors.Structured(map[string]any{"n": c.n}, ""), nil
}

func (c *signalCounter) Close() error { c.closed <- struct{}{}; return nil }

// TestApplyAuthCaps: a lowered auth.max_sessions refuses a principal's
// next session; the ones it has stay.
func TestApplyAuthCaps(t *testing.T) {
	g := authGateway(t, func(c *config.Config) { c.Auth.MaxSessions = 2 })
	srv := serveHTTP(t, g)
	bob := newRawSessionAs(t, srv.URL+"/mcp", bobToken)
	applyChange(t, g, []string{"auth.max_sessions"}, func(c *config.Config) { c.Auth.MaxSessions = 1 })
	init := fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, mcp.ProtocolVersion20251125)
	status, body, _ := (&rawSession{t: t, url: srv.URL + "/mcp", token: bobToken}).post(init)
	if status != http.StatusServiceUnavailable || !strings.Contains(string(body), "auth.max_sessions") {
		t.Errorf("bob's second session under the new cap of 1: HTTP %d %s, want 503 naming auth.max_sessions", status, body)
	}
	if names := toolNames(t, bob.call("tools/list", `{}`)); len(names) == 0 {
		t.Error("bob's open session lists no tools after the reload")
	}
}

// TestApplyRestartStillNeeded: what a reload cannot apply is listed, not
// applied: defaults.catalog, and auth's caps when the rest of auth
// changed too.
func TestApplyRestartStillNeeded(t *testing.T) {
	g := authGateway(t, nil)
	next := *g.cfg
	next.Defaults.Catalog = config.CatalogSearch
	next.Auth.MaxSessions = 7
	next.Auth.RateScope = "cluster"
	applied, err := g.Apply(&next)
	if err != nil {
		t.Fatalf("Apply = %v", err)
	}
	for _, k := range []string{"defaults.catalog", "auth.max_sessions", "auth.rate_scope"} {
		if !slices.Contains(applied.Restart, k) {
			t.Errorf("Restart = %v, want %s in it", applied.Restart, k)
		}
	}
	if s := g.settings(); s.defaults.Catalog != "" || s.maxSessions != g.cfg.Auth.MaxSessions {
		t.Errorf("settings in force: catalog %q, max_sessions %d; want them as at start", s.defaults.Catalog, s.maxSessions)
	}
}

// TestApplyBreakerSettings: a reload that changes the breaker settings
// gives every backend a new, closed breaker under them; one that changes
// only the retry policy keeps the breakers and their state.
func TestApplyBreakerSettings(t *testing.T) {
	g, _ := newGateway(t, nil)
	before := g.res.Backend("upstream:x")
	applyChange(t, g, []string{"defaults"}, func(c *config.Config) { c.Defaults.Retry.Attempts++ })
	if got := g.res.Backend("upstream:x"); got != before {
		t.Error("a retry-only change replaced the backends: their breakers' state is lost")
	}
	applyChange(t, g, []string{"defaults"}, func(c *config.Config) { c.Defaults.CircuitBreaker.Failures = 2 })
	after := g.res.Backend("upstream:x")
	if after == before || after.Breaker().Config().Failures != 2 {
		t.Errorf("after circuit_breaker.failures went to 2: the same backend %v, or a breaker of %d failures", after == before, after.Breaker().Config().Failures)
	}
}
