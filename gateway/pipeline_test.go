package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/gateway/internal/mcpfront"
	"github.com/toolgate/toolgate/internal/syncbuf"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

// TestUse checks where middleware sits in the chain: after resolve,
// validate and thread (it sees the tool, validated arguments and the final
// thread; invalid calls never reach it), first added outermost, around the
// calls of toolgate_batch too, and able to answer or rewrite a call.
func TestUse(t *testing.T) {
	g, _ := newGateway(t, func(c *config.Config) { c.BatchTool = true })
	var mu sync.Mutex
	var seen []string // "<middleware>:<tool>:<thread>:<text arg>"
	trace := func(name string) Middleware {
		return func(next Handler) Handler {
			return func(ctx context.Context, c *Call) (*Result, error) {
				text, _ := c.Args["text"].(string)
				mu.Lock()
				seen = append(seen, name+":"+c.Tool.Name+":"+c.Thread+":"+text)
				mu.Unlock()
				return next(ctx, c)
			}
		}
	}
	g.Use(trace("outer"), trace("inner"))
	g.Use(func(next Handler) Handler {
		return func(ctx context.Context, c *Call) (*Result, error) {
			if c.Args["text"] == "refuse" {
				return &Result{Content: []Content{{Type: executors.TextContent, Text: "refused"}}, IsError: true, Class: "validation"}, nil
			}
			res, err := next(ctx, c)
			if err == nil && !res.IsError && c.Tool.Name == "echo" {
				res.Content[0].Text += "!"
			}
			return res, err
		}
	})
	thread := map[string]any{ThreadMetaKey: "th"}
	call := func(tool, args string) *Result {
		t.Helper()
		res, err := g.Call(t.Context(), tool, json.RawMessage(args), thread)
		if err != nil {
			t.Fatalf("Call(%s, %s): %v", tool, args, err)
		}
		return res
	}
	reset := func() []string {
		mu.Lock()
		defer mu.Unlock()
		s := seen
		seen = nil
		return s
	}

	if res := call("ECHO", `{"text":"hi"}`); res.IsError || resultText(t, res) != "hi!" {
		t.Errorf("echo through middleware = %q (isError %v), want hi!", resultText(t, res), res.IsError)
	}
	if got, want := reset(), []string{"outer:echo:t:th:hi", "inner:echo:t:th:hi"}; !slices.Equal(got, want) {
		t.Errorf("middleware saw %q, want %q (resolved name, validated args, thread, first added outermost)", got, want)
	}

	if res := call("echo", `{"text":1}`); !res.IsError || errorClass(res) != "validation" {
		t.Errorf("invalid call = %q, want a validation result", resultText(t, res))
	}
	if got := reset(); len(got) != 0 {
		t.Errorf("middleware saw an invalid call: %q", got)
	}

	if res := call("echo", `{"text":"refuse"}`); !res.IsError || resultText(t, res) != "refused" {
		t.Errorf("refused call = %q, want the middleware's answer", resultText(t, res))
	}
	reset()

	res := call(BatchToolName, `{"calls":[{"tool":"echo","arguments":{"text":"a"}},{"tool":"echo","arguments":{"text":"b"}}]}`)
	if res.IsError || !strings.Contains(resultText(t, res), `a!`) || !strings.Contains(resultText(t, res), `b!`) {
		t.Errorf("batch = %s, want both calls rewritten by the middleware", resultText(t, res))
	}
	got := reset()
	slices.Sort(got)
	want := []string{"inner:echo:t:th:a", "inner:echo:t:th:b", "inner:toolgate_batch:t:th:", "outer:echo:t:th:a", "outer:echo:t:th:b", "outer:toolgate_batch:t:th:"}
	if !slices.Equal(got, want) {
		t.Errorf("middleware saw %q, want the batch and each of its calls, all in the batch's thread: %q", got, want)
	}
}

// TestBatchInheritsSession checks that the calls of toolgate_batch run in
// the batch's session thread, so a stateful tool called in a batch shares
// the session's instance.
func TestBatchInheritsSession(t *testing.T) {
	g, _ := newGateway(t, func(c *config.Config) { c.BatchTool = true })
	frontBackend{g: g}.SessionStarted("S")
	run := func(c *Call) *Result {
		t.Helper()
		res, err := g.handle(t.Context(), c)
		if err != nil || res.IsError {
			t.Fatalf("call %s = %v, %v", c.Name, res, err)
		}
		return res
	}
	run(&Call{Name: "counter", Session: "S"})
	res := run(&Call{Name: BatchToolName, Session: "S", Raw: json.RawMessage(`{"calls":[{"tool":"counter"}]}`)})
	if !strings.Contains(resultText(t, res), `\"n\":2`) && !strings.Contains(resultText(t, res), `"n":2`) {
		t.Errorf("batch in session S = %s, want the counter's second call (n 2) in the session's instance", resultText(t, res))
	}
}

// TestRefusedToolKeepsExecutor checks that a tool the registry refuses
// (an upstream listing a name an embedder's tool holds) never replaces the
// executor of the registered tool: routes built later still run the
// embedder's function.
func TestRefusedToolKeepsExecutor(t *testing.T) {
	g, _ := newGateway(t, nil)
	err := g.RegisterStateless(registry.Tool{Name: "fs__x"}, func(context.Context, map[string]any) (executors.Result, error) {
		return executors.Text("embedder"), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	upstream := executors.StatelessFunc(func(context.Context, map[string]any) (executors.Result, error) {
		return executors.Text("upstream"), nil
	})
	if err := g.addUpstreamTools("fs", []executors.Bound{{Tool: registry.Tool{Name: "fs__x", Kind: registry.MCP}, Exec: upstream}}); err == nil {
		t.Fatal("an upstream took the name of an embedder's tool")
	}
	r := g.newRoute(mustTool(t, g, "fs__x"))
	res, err := r.exec.Execute(t.Context(), executors.Call{Tool: r.tool, Args: map[string]any{}})
	if err != nil || len(res.Content) != 1 || res.Content[0].Text != "embedder" {
		t.Errorf("the embedder's tool now runs %+v, %v; want its own function", res, err)
	}
}

// rawEcho answers with the argument bytes it would forward: Raw when set
// (as an upstream MCP tool forwards it), else Args encoded.
type rawEcho struct{}

func (rawEcho) Execute(_ context.Context, c executors.Call) (executors.Result, error) {
	b := c.Raw
	if b == nil {
		b, _ = json.Marshal(c.Args)
	}
	return executors.Text(string(b)), nil
}

// TestMiddlewareContract checks what middleware may rely on: a change to
// Args reaches executors that forward raw bytes, an error or a nil result
// becomes an isError result (Gateway.Call's error stays for unknown tools
// only), calls inside toolgate_batch carry their Name, and a Result
// marshals as an MCP result by value too.
func TestMiddlewareContract(t *testing.T) {
	g, _ := newGateway(t, func(c *config.Config) { c.BatchTool = true })
	if err := g.register(executors.Bound{Tool: registry.Tool{Name: "raw", Kind: registry.MCP, Source: "test"}, Exec: rawEcho{}}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var names []string
	g.Use(func(next Handler) Handler {
		return func(ctx context.Context, c *Call) (*Result, error) {
			mu.Lock()
			names = append(names, c.Name)
			mu.Unlock()
			switch c.Args["do"] {
			case "rewrite":
				c.Args["do"] = "rewritten"
			case "fail":
				return nil, errors.New("middleware failed")
			case "nothing":
				return nil, nil
			}
			return next(ctx, c)
		}
	})
	call := func(tool, args string) *Result {
		t.Helper()
		res, err := g.Call(t.Context(), tool, json.RawMessage(args), nil)
		if err != nil {
			t.Fatalf("Call(%s, %s) error = %v, want a result", tool, args, err)
		}
		return res
	}
	if res := call("raw", `{"do":"rewrite"}`); resultText(t, res) != `{"do":"rewritten"}` {
		t.Errorf("the executor got %s, want the arguments as the middleware left them", resultText(t, res))
	}
	if res := call("raw", `{"do":"fail"}`); !res.IsError || !strings.Contains(resultText(t, res), "middleware failed") {
		t.Errorf("a middleware error = %q (isError %v), want an isError result with it", resultText(t, res), res.IsError)
	}
	if res := call("raw", `{"do":"nothing"}`); !res.IsError || res.Class != "internal" {
		t.Errorf("a nil result = %q (class %q), want an internal isError result", resultText(t, res), res.Class)
	}
	mu.Lock()
	names = nil
	mu.Unlock()
	call(BatchToolName, `{"calls":[{"tool":"RAW","arguments":{}}]}`)
	mu.Lock()
	got := slices.Clone(names)
	mu.Unlock()
	slices.Sort(got)
	if want := []string{"RAW", BatchToolName}; !slices.Equal(got, want) {
		t.Errorf("middleware saw names %q, want %q", got, want)
	}
	res := call("raw", `{"do":"x"}`)
	b, err := json.Marshal(*res)
	if err != nil || !strings.Contains(string(b), `"content":[{"type":"text"`) {
		t.Errorf("json.Marshal(Result) = %s, %v; want an MCP CallToolResult", b, err)
	}
}

// TestRoutesFollowTheRegistry checks that a call already routed to a tool
// that is then removed or replaced runs what the name means now (not the
// removed executor), and that executors of tools an upstream stops listing
// are forgotten.
func TestRoutesFollowTheRegistry(t *testing.T) {
	g, _ := newGateway(t, nil)
	text := func(s string) executors.StatelessFunc {
		return func(context.Context, map[string]any) (executors.Result, error) { return executors.Text(s), nil }
	}
	if err := g.RegisterStateless(registry.Tool{Name: "x"}, text("old")); err != nil {
		t.Fatal(err)
	}
	r := (*g.routes.Load())["x"]
	serve := g.serveFront(r) // as the front holds it
	g.Unregister("x")
	if res := serve(t.Context(), &mcpfront.Request{}); !res.IsError || res.Class != retry.NotFound {
		t.Errorf("a call routed to a removed tool = %+v, want not_found", res)
	}
	if err := g.RegisterStateless(registry.Tool{Name: "x"}, text("new")); err != nil {
		t.Fatal(err)
	}
	if res := serve(t.Context(), &mcpfront.Request{}); res.IsError || res.Content[0].Text != "new" {
		t.Errorf("a call routed to a replaced tool = %+v, want the new tool's result", res)
	}

	up := []executors.Bound{{Tool: registry.Tool{Name: "fs__a", Kind: registry.MCP}, Exec: text("a")}, {Tool: registry.Tool{Name: "fs__b", Kind: registry.MCP}, Exec: text("b")}}
	if err := g.addUpstreamTools("fs", up); err != nil {
		t.Fatal(err)
	}
	if err := g.addUpstreamTools("fs", up[:1]); err != nil {
		t.Fatal(err)
	}
	g.execMu.Lock()
	_, stale := g.execs[execKey{"upstream:fs", "fs__b"}]
	_, kept := g.execs[execKey{"upstream:fs", "fs__a"}]
	g.execMu.Unlock()
	if stale || !kept {
		t.Errorf("after a re-list without fs__b: executor of fs__b kept %v, of fs__a kept %v; want false, true", stale, kept)
	}
}

// TestCallDecodesPassthrough checks that Gateway.Call gives an embedder an
// upstream tool's result as content parts, with the upstream's JSON kept.
func TestCallDecodesPassthrough(t *testing.T) {
	g, _ := newGateway(t, nil)
	const raw = `{"content":[{"type":"text","text":"from upstream"},{"type":"image","data":"aGk=","mimeType":"image/png"}],"structuredContent":{"n":1},"isError":true}`
	up := executors.StatelessFunc(func(context.Context, map[string]any) (executors.Result, error) {
		return executors.Result{Passthrough: json.RawMessage(raw), IsError: true}, nil
	})
	if err := g.register(executors.Bound{Tool: registry.Tool{Name: "up__t", Kind: registry.MCP, Source: "upstream:up"}, Exec: up}); err != nil {
		t.Fatal(err)
	}
	res, err := g.Call(t.Context(), "up__t", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || res.Text() != "from upstream" || len(res.Content) != 2 || string(res.Content[1].Data) != "hi" || string(res.Passthrough) != raw {
		t.Errorf("Call = %+v, want the upstream's parts decoded and its JSON kept", res)
	}
	if b, _ := json.Marshal(res.Structured); string(b) != `{"n":1}` {
		t.Errorf("Structured = %s, want {\"n\":1}", b)
	}
}

// TestDispatchLogsNoArguments checks that the debug record of a call
// names its tool and the size of its arguments, never their values.
func TestDispatchLogsNoArguments(t *testing.T) {
	g, _ := newGateway(t, nil)
	var logs syncbuf.Buffer
	g.logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	const value = "hunter2-arg-value"
	args := json.RawMessage(`{"text":"` + value + `"}`)
	if _, err := g.Call(t.Context(), "echo", args, nil); err != nil {
		t.Fatal(err)
	}
	l := logs.String()
	if !strings.Contains(l, "tool call arguments") || !strings.Contains(l, "argument_bytes="+strconv.Itoa(len(args))) {
		t.Errorf("log = %q, want the call's record with argument_bytes=%d", l, len(args))
	}
	if strings.Contains(l, value) {
		t.Errorf("log = %q, shows an argument value", l)
	}
}
