package mcpfront

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
	"github.com/toolgate/toolgate/schemas"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The front's tests run it behind a harness: a small backend over a real
// registry that runs stateless tools directly (validated against their
// schemas, failures as classified isError results), standing in for the
// gateway, which this package cannot import.

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

// harness is a Front with a fake backend and tools.
type harness struct {
	*Front
	cfg *config.Config
	reg *registry.Registry
	b   *fakeBackend

	mu    sync.Mutex
	funcs map[string]executors.StatelessFunc // guarded by mu

	counter *counters

	httpOnce sync.Once
	mux      *http.ServeMux
}

// fakeBackend resolves names in a registry and records sessions.
type fakeBackend struct {
	reg      *registry.Registry
	repair   bool
	sessions sync.Map // live session ID → true
}

func (b *fakeBackend) Resolve(name []byte) (string, error) {
	if _, ok := b.reg.Get(string(name)); ok {
		return "", nil
	}
	t, err := b.reg.Resolve(string(name), b.repair)
	if err != nil {
		return "", err
	}
	return t.Name, nil
}

func (b *fakeBackend) SessionStarted(id string)    { b.sessions.Store(id, true) }
func (b *fakeBackend) SessionEnded(id string)      { b.sessions.Delete(id) }
func (b *fakeBackend) Drain(context.Context) error { return nil }
func (h *harness) liveSession(id string) bool      { _, ok := h.b.sessions.Load(id); return ok }
func (h *harness) Handler() http.Handler           { h.httpOnce.Do(func() { h.Mount(h.mux) }); return h.mux }
func serveHTTP(t *testing.T, h *harness) *httptest.Server {
	srv := httptest.NewServer(h.Handler())
	t.Cleanup(srv.Close)
	return srv
}

// counters is the state of the "counter" tool: calls per session.
type counters struct {
	mu sync.Mutex
	n  map[string]int // guarded by mu
}

// newGateway returns a front behind a harness with an "echo" tool and a
// "counter" tool that counts its calls per session.
func newGateway(t testing.TB, mutate func(*config.Config)) (*harness, *counters) {
	t.Helper()
	cfg := testConfig(t)
	if mutate != nil {
		mutate(cfg)
	}
	s := cfg.Server
	reg := registry.New()
	b := &fakeBackend{reg: reg, repair: cfg.Guards.NameRepair}
	h := &harness{
		Front: New(b, Options{Name: "toolgate", Version: "test", MCPPath: s.MCPPath, SSE: s.SSE, MaxSessions: s.MaxSessions,
			SessionIdleTTL: s.SessionIdleTTL.D(), MaxBodyBytes: s.MaxBodyBytes, ReadTimeout: s.ReadTimeout.D(), AllowedOrigins: s.AllowedOrigins}),
		cfg: cfg, reg: reg, b: b, funcs: map[string]executors.StatelessFunc{}, mux: http.NewServeMux(),
	}
	unsubscribe := reg.Subscribe(h.sync)
	t.Cleanup(func() {
		h.Close()
		unsubscribe()
	})
	err := h.RegisterStateless(registry.Tool{Name: "echo", Description: "echo text", InputSchema: json.RawMessage(echoSchema)},
		func(_ context.Context, args map[string]any) (executors.Result, error) {
			return executors.Text(args["text"].(string)), nil
		})
	if err != nil {
		t.Fatalf("RegisterStateless: %v", err)
	}
	fc := &counters{n: map[string]int{}}
	if err := reg.Add(registry.Tool{Name: "counter", Description: "counts calls in this session", Kind: registry.Stateful, Source: "test"}); err != nil {
		t.Fatalf("adding counter: %v", err)
	}
	h.counter = fc
	return h, fc
}

// RegisterStateless adds a tool that runs fn.
func (h *harness) RegisterStateless(t registry.Tool, fn executors.StatelessFunc) error {
	t.Kind, t.Source = registry.Stateless, "test"
	h.mu.Lock()
	h.funcs[t.Name] = fn
	h.mu.Unlock()
	return h.reg.Add(t)
}

// sync mirrors the registry into the front.
func (h *harness) sync(c registry.Change) {
	add := make([]Tool, 0, len(c.Added))
	for _, def := range c.Added {
		add = append(add, Tool{Def: def, Call: h.call(def)})
	}
	h.SetTools(add, c.Removed)
}

func (h *harness) call(def *registry.Tool) func(context.Context, *Request) *executors.Result {
	return func(ctx context.Context, req *Request) *executors.Result {
		var args map[string]any
		if len(req.Raw) > 0 && json.Unmarshal(req.Raw, &args) != nil {
			return failure(retry.Errorf(retry.Validation, "arguments must be a JSON object"))
		}
		if args == nil {
			args = map[string]any{}
		}
		if vs := def.Validate(args); len(vs) > 0 {
			return failure(retry.Errorf(retry.Validation, "%s", schemas.Format(vs)))
		}
		if def.Name == "counter" {
			h.counter.mu.Lock()
			h.counter.n[req.Session]++
			n := h.counter.n[req.Session]
			h.counter.mu.Unlock()
			r := executors.Structured(map[string]any{"n": n}, "")
			return &r
		}
		h.mu.Lock()
		fn := h.funcs[def.Name]
		h.mu.Unlock()
		res, err := fn(ctx, args)
		if err != nil {
			return failure(err)
		}
		return &res
	}
}

// failure is err as the gateway's map step shows it.
func failure(err error) *executors.Result {
	class := retry.Classify(err)
	return &executors.Result{
		Content: []executors.Content{{Type: executors.TextContent, Text: string(class) + ": " + err.Error()}},
		IsError: true, Class: class, Meta: map[string]any{"toolgate/error_class": string(class)},
	}
}

// addTool registers name for preflight to find, then puts call in the
// front in its place: a tool that sees the whole Request.
func (h *harness) addTool(t testing.TB, name string, call func(context.Context, *Request) *executors.Result) {
	t.Helper()
	if err := h.reg.Add(registry.Tool{Name: name, Kind: registry.Stateless, Source: "test"}); err != nil {
		t.Fatal(err)
	}
	h.SetTools([]Tool{{Def: &registry.Tool{Name: name, Source: "test"}, Call: call}}, nil)
}

// waitTool is a tool's call that closes started when it runs, waits for
// its context to end, and sends how on ended.
func waitTool() (call func(context.Context, *Request) *executors.Result, started <-chan struct{}, ended <-chan error) {
	s, e := make(chan struct{}), make(chan error, 1)
	return func(ctx context.Context, _ *Request) *executors.Result {
		close(s)
		<-ctx.Done()
		e <- ctx.Err()
		return new(executors.Text("cancelled"))
	}, s, e
}

// isEventStream reports whether a response's header says it is an event
// stream.
func isEventStream(h http.Header) bool {
	return strings.HasPrefix(h.Get("Content-Type"), "text/event-stream")
}
