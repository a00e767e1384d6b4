package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/config/configtest"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/executors/mcpup"
	"github.com/toolgate/toolgate/gateway/internal/threadname"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

// An audit file's rotator keeps a goroutine for the process's life
// (internal/audit).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("gopkg.in/natefinch/lumberjack%2ev2.(*Logger).millRun"))
}

const echoSchema = `{"type":"object","properties":{"text":{"type":"string","maxLength":20},"n":{"type":"integer"}},"required":["text"],"additionalProperties":false}`

func testConfig(t testing.TB) *config.Config {
	t.Helper()
	cfg, err := config.Default(nil)
	if err != nil {
		t.Fatalf("config.Default: %v", err)
	}
	cfg.Builtin = nil
	return cfg
}

// newGateway returns a gateway with an "echo" stateless tool and a
// "counter" stateful tool whose instances count their calls.
func newGateway(t testing.TB, mutate func(*config.Config)) (*Gateway, *fakeCounters) {
	t.Helper()
	cfg := testConfig(t)
	if mutate != nil {
		mutate(cfg)
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	err = g.RegisterStateless(registry.Tool{Name: "echo", Description: "echo text", InputSchema: json.RawMessage(echoSchema)},
		func(_ context.Context, args map[string]any) (executors.Result, error) {
			return executors.Text(args["text"].(string)), nil
		})
	if err != nil {
		t.Fatalf("RegisterStateless: %v", err)
	}
	fc := &fakeCounters{}
	err = g.RegisterStateful(registry.Tool{Name: "counter", Description: "counts calls in this thread"}, executors.Factory{
		New: func(context.Context, string) (executors.Instance, error) {
			fc.created.Add(1)
			return &fakeCounter{closed: &fc.closed}, nil
		},
	})
	if err != nil {
		t.Fatalf("RegisterStateful: %v", err)
	}
	return g, fc
}

type fakeCounters struct{ created, closed atomic.Int64 }

type fakeCounter struct {
	n      int
	closed *atomic.Int64
}

func (c *fakeCounter) Call(context.Context, map[string]any) (executors.Result, error) {
	c.n++
	return executors.Structured(map[string]any{"n": c.n}, ""), nil
}

func (c *fakeCounter) Close() error { c.closed.Add(1); return nil }

func resultText(t *testing.T, r *Result) string {
	t.Helper()
	var b strings.Builder
	for _, c := range r.Content {
		if c.Type == executors.TextContent {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

func errorClass(r *Result) string {
	s, _ := r.Meta[ErrorClassMetaKey].(string)
	return s
}

func TestCall(t *testing.T) {
	g, _ := newGateway(t, nil)
	tests := []struct {
		name      string
		tool      string
		args      string
		wantText  string   // for success
		wantClass string   // for isError
		wantParts []string // substrings of the error text
	}{
		{name: "ok", tool: "echo", args: `{"text":"hi"}`, wantText: "hi"},
		{name: "repaired name", tool: "ECHO", args: `{"text":"hi"}`, wantText: "hi"},
		{name: "every violation", tool: "echo", args: `{"text":"this text is far too long for the schema","n":"x","extra":1}`,
			wantClass: "validation", wantParts: []string{"/text", "/n", "extra"}},
		{name: "missing required", tool: "echo", args: `{}`, wantClass: "validation", wantParts: []string{"text"}},
		{name: "arguments not an object", tool: "echo", args: `[1,2]`, wantClass: "validation", wantParts: []string{"must be a JSON object", "an array"}},
		{name: "arguments not JSON", tool: "echo", args: `{"text":`, wantClass: "validation", wantParts: []string{"not valid JSON"}},
		// encoding/json reads the last "text", an upstream may read the
		// first: what the hooks and the schema checked would not be what
		// runs (issue 31, item 6).
		{name: "duplicate names", tool: "echo", args: `{"text":"forbidden","n":1,"text":"ok"}`, wantClass: "validation", wantParts: []string{`"text" twice`, "send each name once"}},
		{name: "null arguments are {}", tool: "counter", args: `null`, wantText: `{"n":1}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := g.Call(t.Context(), tc.tool, json.RawMessage(tc.args), nil)
			if err != nil {
				t.Fatalf("Call(%q, %s) error = %v", tc.tool, tc.args, err)
			}
			text := resultText(t, res)
			if tc.wantClass == "" {
				if res.IsError || text != tc.wantText {
					t.Fatalf("Call(%q, %s) = %q (isError %v), want %q", tc.tool, tc.args, text, res.IsError, tc.wantText)
				}
				return
			}
			if !res.IsError || errorClass(res) != tc.wantClass || !strings.HasPrefix(text, tc.wantClass+": ") {
				t.Fatalf("Call(%q, %s) = %q (isError %v, class %q), want isError of class %s", tc.tool, tc.args, text, res.IsError, errorClass(res), tc.wantClass)
			}
			for _, p := range tc.wantParts {
				if !strings.Contains(text, p) {
					t.Errorf("error text %q does not mention %q", text, p)
				}
			}
		})
	}
}

func TestCallUnknownTool(t *testing.T) {
	g, _ := newGateway(t, nil)
	_, err := g.Call(t.Context(), "ecoh", nil, nil)
	nf, ok := errors.AsType[*registry.NotFoundError](err)
	if !ok || !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("Call(unknown) error = %v, want a *registry.NotFoundError", err)
	}
	if len(nf.Suggestions) == 0 || nf.Suggestions[0] != "echo" {
		t.Errorf("suggestions = %v, want echo first", nf.Suggestions)
	}
	g2, _ := newGateway(t, func(c *config.Config) { c.Guards.NameRepair = false })
	if _, err := g2.Call(t.Context(), "ECHO", json.RawMessage(`{"text":"x"}`), nil); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("with name_repair off, Call(ECHO) error = %v, want ErrNotFound", err)
	}
}

func TestThreads(t *testing.T) {
	g, fc := newGateway(t, nil)
	call := func(meta map[string]any) float64 {
		t.Helper()
		res, err := g.handle(t.Context(), &Call{Name: "counter", Meta: meta, Session: sessionOf(meta)})
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError {
			t.Fatalf("counter call failed: %v", resultText(t, res))
		}
		return structuredN(t, res)
	}
	// Same session: one instance, reused.
	if n1, n2 := call(map[string]any{"session": "A"}), call(map[string]any{"session": "A"}); n1 != 1 || n2 != 2 {
		t.Errorf("session A counts = %v, %v; want 1, 2", n1, n2)
	}
	// Another session: its own instance.
	if n := call(map[string]any{"session": "B"}); n != 1 {
		t.Errorf("session B count = %v, want 1", n)
	}
	// An explicit thread is shared across sessions, and separate from the session's own.
	if n1, n2 := call(map[string]any{"session": "A", ThreadMetaKey: "shared"}), call(map[string]any{"session": "B", ThreadMetaKey: "shared"}); n1 != 1 || n2 != 2 {
		t.Errorf("explicit thread counts = %v, %v; want 1, 2", n1, n2)
	}
	// An explicit thread named like a session's thread cannot reach it.
	if n := call(map[string]any{"session": "C", ThreadMetaKey: "s:A"}); n != 1 {
		t.Errorf("thread named after session A count = %v, want 1 (a new instance)", n)
	}
	// No session, no explicit thread: a one-call thread, closed at once.
	before := fc.closed.Load()
	if n1, n2 := call(nil), call(nil); n1 != 1 || n2 != 1 {
		t.Errorf("one-call thread counts = %v, %v; want 1, 1", n1, n2)
	}
	if got := fc.closed.Load() - before; got != 2 {
		t.Errorf("one-call instances closed = %d, want 2", got)
	}
	// Ending session A closes its instance.
	frontBackend{g: g}.SessionStarted("A")
	before = fc.closed.Load()
	frontBackend{g: g}.SessionEnded("A")
	if got := fc.closed.Load() - before; got != 1 {
		t.Errorf("instances closed at session end = %d, want 1", got)
	}
}

// structuredN returns structuredContent.n, as a client would decode it.
func structuredN(t *testing.T, res *Result) float64 {
	t.Helper()
	b, err := json.Marshal(res.Structured)
	if err != nil {
		t.Fatal(err)
	}
	var sc struct{ N float64 }
	if err := json.Unmarshal(b, &sc); err != nil {
		t.Fatal(err)
	}
	return sc.N
}

func mustTool(t *testing.T, g *Gateway, name string) *registry.Tool {
	t.Helper()
	tool, ok := g.reg.Get(name)
	if !ok {
		t.Fatalf("tool %q not registered", name)
	}
	return tool
}

// sessionOf returns the thread of the test's pretend session in meta.
func sessionOf(meta map[string]any) string {
	s, _ := meta["session"].(string)
	return s
}

func TestThreadMetaErrors(t *testing.T) {
	g, _ := newGateway(t, nil)
	for _, tc := range []struct {
		name string
		meta map[string]any
	}{
		{"not a string", map[string]any{ThreadMetaKey: 42}},
		{"too long", map[string]any{ThreadMetaKey: strings.Repeat("x", threadname.MaxNameLen+1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := g.Call(t.Context(), "counter", nil, tc.meta)
			if err != nil || !res.IsError || errorClass(res) != "validation" {
				t.Fatalf("Call with _meta %v = %v, %v; want a validation isError", tc.name, res, err)
			}
		})
	}
}

func TestFailuresAreClassifiedResults(t *testing.T) {
	g, _ := newGateway(t, nil)
	register := func(name string, timeout time.Duration, fn executors.StatelessFunc) {
		t.Helper()
		if err := g.RegisterStateless(registry.Tool{Name: name, Timeout: timeout}, fn); err != nil {
			t.Fatal(err)
		}
	}
	register("panics", 0, func(context.Context, map[string]any) (executors.Result, error) { panic("boom") })
	register("slow", 20*time.Millisecond, func(ctx context.Context, _ map[string]any) (executors.Result, error) {
		<-ctx.Done()
		return executors.Result{}, ctx.Err()
	})
	register("notfound", 0, func(context.Context, map[string]any) (executors.Result, error) {
		return executors.Result{}, retry.Errorf(retry.NotFound, "no such note")
	})
	register("plain", 0, func(context.Context, map[string]any) (executors.Result, error) {
		return executors.Result{}, errors.New("disk on fire")
	})
	for _, tc := range []struct{ tool, class, text string }{
		{"panics", "internal", "panic"},
		{"slow", "timeout", "did not finish within 20ms"},
		{"notfound", "not_found", "no such note"},
		{"plain", "internal", "disk on fire"},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			res, err := g.Call(t.Context(), tc.tool, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if text := resultText(t, res); !res.IsError || errorClass(res) != tc.class || !strings.Contains(text, tc.text) || !strings.HasPrefix(text, tc.class+": ") {
				t.Errorf("Call(%s) = %q (class %q), want class %s mentioning %q", tc.tool, text, errorClass(res), tc.class, tc.text)
			}
		})
	}
	t.Run("client cancels", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		res, _ := g.Call(ctx, "slow", nil, nil)
		if errorClass(res) != "cancelled" {
			t.Errorf("Call with cancelled ctx class = %q (%s), want cancelled", errorClass(res), resultText(t, res))
		}
	})
}

func TestRegisterErrors(t *testing.T) {
	g, _ := newGateway(t, nil)
	noop := func(context.Context, map[string]any) (executors.Result, error) { return executors.Text(""), nil }
	if err := g.RegisterStateless(registry.Tool{Name: "echo", Source: "other"}, noop); err == nil || !strings.Contains(err.Error(), "other") || !strings.Contains(err.Error(), "embedder") {
		t.Errorf("duplicate RegisterStateless error = %v, want one naming both sources", err)
	}
	// The failed duplicate must not have replaced the original implementation.
	res, _ := g.Call(t.Context(), "echo", json.RawMessage(`{"text":"still me"}`), nil)
	if resultText(t, res) != "still me" {
		t.Errorf("after a rejected duplicate, echo = %q", resultText(t, res))
	}
	if err := g.RegisterStateless(registry.Tool{Name: "bad name!"}, noop); err == nil {
		t.Error("RegisterStateless accepted an invalid name")
	}
	if err := g.RegisterStateless(registry.Tool{Name: "x", InputSchema: json.RawMessage(`{"type":"strnig"}`)}, noop); err == nil {
		t.Error("RegisterStateless accepted an invalid schema")
	}
	if err := g.RegisterStateful(registry.Tool{Name: "y"}, executors.Factory{}); err == nil {
		t.Error("RegisterStateful accepted a factory without New")
	}
	if got := g.Unregister("echo", "nope"); len(got) != 1 || got[0] != "echo" {
		t.Errorf("Unregister = %v, want [echo]", got)
	}
	if _, err := g.Call(t.Context(), "echo", nil, nil); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("Call after Unregister error = %v, want ErrNotFound", err)
	}
}

func TestShutdownDrainsCalls(t *testing.T) {
	g, _ := newGateway(t, nil)
	started, release := make(chan struct{}), make(chan struct{})
	if err := g.RegisterStateless(registry.Tool{Name: "wait"}, func(ctx context.Context, _ map[string]any) (executors.Result, error) {
		close(started)
		select {
		case <-release:
			return executors.Text("done"), nil
		case <-ctx.Done():
			return executors.Result{}, ctx.Err()
		}
	}); err != nil {
		t.Fatal(err)
	}
	got := make(chan *Result, 1)
	go func() {
		res, _ := g.Call(context.Background(), "wait", nil, nil)
		got <- res
	}()
	<-started
	shutdownErr := make(chan error, 1)
	go func() { shutdownErr <- g.Shutdown(context.Background()) }()
	// Once draining has begun, a new call is refused.
	<-g.calls.Draining()
	res, _ := g.Call(t.Context(), "echo", json.RawMessage(`{"text":"x"}`), nil)
	if errorClass(res) != "unavailable" {
		t.Errorf("call during shutdown class = %q, want unavailable", errorClass(res))
	}
	select {
	case err := <-shutdownErr:
		t.Fatalf("Shutdown returned %v while a call was in flight", err)
	default:
	}
	close(release)
	if r := <-got; r.IsError || resultText(t, r) != "done" {
		t.Errorf("in-flight call = %q, want done", resultText(t, r))
	}
	if err := <-shutdownErr; err != nil {
		t.Errorf("Shutdown = %v, want nil", err)
	}
}

func TestShutdownGraceRunsOut(t *testing.T) {
	g, _ := newGateway(t, nil)
	started := make(chan struct{})
	if err := g.RegisterStateless(registry.Tool{Name: "hang"}, func(ctx context.Context, _ map[string]any) (executors.Result, error) {
		close(started)
		<-ctx.Done()
		return executors.Result{}, ctx.Err()
	}); err != nil {
		t.Fatal(err)
	}
	got := make(chan *Result, 1)
	go func() {
		res, _ := g.Call(context.Background(), "hang", nil, nil)
		got <- res
	}()
	<-started
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // no grace at all
	if err := g.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Shutdown = %v, want context.Canceled", err)
	}
	r := <-got
	if errorClass(r) != "cancelled" || !strings.Contains(resultText(t, r), "shut down") {
		t.Errorf("call cut by shutdown = %q (class %q), want a cancelled result saying toolgate shut down", resultText(t, r), errorClass(r))
	}
}

// config keeps ${TOOLGATE_INSTANCE_DIR} for the upstream executor to
// replace: both must mean the same text.
func TestInstanceDirRef(t *testing.T) {
	if config.InstanceDirRef != mcpup.InstanceDirRef || config.InstanceDirVar != mcpup.InstanceDirVar {
		t.Errorf("config has %q (%s), mcpup %q (%s)", config.InstanceDirRef, config.InstanceDirVar, mcpup.InstanceDirRef, mcpup.InstanceDirVar)
	}
}

// TestShutdownKillsUpstreamsAtItsEnd: Shutdown asks a stdio upstream to
// exit, and kills it when its context ends. The upstream here never
// answers initialize and ignores its stdin closing and SIGTERM, so asking
// alone takes 4 s (stdin, SIGTERM after 2 s, SIGKILL after 2 s more).
func TestShutdownKillsUpstreamsAtItsEnd(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	parsed, err := config.Parse("t.yaml", configtest.Lines(
		"upstreams:",
		"  - name: mute",
		"    transport: stdio",
		"    command: sh",
		`    args: ["-c", "echo $$$$ > \"$$PIDFILE\"; trap '' TERM; cat > /dev/null; while :; do sleep 1; done"]`,
		"    env: {PIDFILE: "+strconv.Quote(pidFile)+"}",
	), nil)
	if err != nil {
		t.Fatalf("config.Parse = %v", err)
	}
	g, _ := newGateway(t, func(c *config.Config) { c.Upstreams = parsed.Upstreams })
	g.StartUpstreams()
	var pid int
	deadline := time.Now().Add(20 * time.Second)
	for {
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err = strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the upstream never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })

	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := g.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown = %v, want nil (no call was in flight)", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Shutdown took %v; the upstream should have been killed at its context's end (200ms)", took)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("upstream process %d still exists after Shutdown", pid)
	}
}
