package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/agent"
	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/registry"
)

// counter is a per-thread tool instance: it counts its calls.
type counter struct{ n int }

func (c *counter) Call(context.Context, map[string]any) (executors.Result, error) {
	c.n++
	return executors.Structured(map[string]any{"count": c.n}, ""), nil
}

// newGateway returns a gateway with a stateful counter and a tool that
// always fails.
func newGateway(t *testing.T) *gateway.Gateway {
	t.Helper()
	cfg, err := config.Default(nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	if err := g.RegisterStateful(registry.Tool{Name: "count", Description: "Counts its calls in this thread"},
		executors.Factory{New: func(context.Context, string) (executors.Instance, error) { return &counter{}, nil }}); err != nil {
		t.Fatal(err)
	}
	if err := g.RegisterStateless(registry.Tool{Name: "broken", Description: "Always fails",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}`)},
		func(context.Context, map[string]any) (executors.Result, error) {
			return executors.Result{}, errors.New("it broke")
		}); err != nil {
		t.Fatal(err)
	}
	return g
}

// checkToolset checks a toolset over newGateway's tools: the list, state
// kept across calls (one thread), failures as isError results in the
// gateway's words.
func checkToolset(t *testing.T, ts agent.Toolset) {
	t.Helper()
	specs, err := ts.Tools(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	for _, want := range []string{"broken", "count"} {
		if !slices.Contains(names, want) {
			t.Errorf("Tools() = %v, want %q among them", names, want)
		}
	}
	for want := 1; want <= 2; want++ {
		r, err := ts.Call(t.Context(), agent.ToolCall{ID: "c", Name: "count", Arguments: `{}`})
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Text(); r.IsError || got != fmt.Sprintf(`{"count":%d}`, want) {
			t.Errorf("call %d = %v %q, want {\"count\":%d}", want, r.IsError, got, want)
		}
	}
	r, err := ts.Call(t.Context(), agent.ToolCall{ID: "c", Name: "broken", Arguments: `{"x": "one"}`})
	if err != nil {
		t.Fatal(err)
	}
	if !r.IsError || !strings.HasPrefix(r.Text(), "validation: ") {
		t.Errorf("a call with bad arguments = %v %q, want an isError validation result", r.IsError, r.Text())
	}
}

func TestGatewayToolset(t *testing.T) {
	checkToolset(t, &agent.GatewayToolset{Gateway: newGateway(t), Thread: "run-1"})
}

func TestMCPToolset(t *testing.T) {
	g := newGateway(t)
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	ts, err := agent.NewMCPToolset(t.Context(), agent.MCPOptions{URL: srv.URL + "/mcp"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ts.Close() })
	checkToolset(t, ts)

	// A tool added mid-run is offered at the next step.
	if err := g.RegisterStateless(registry.Tool{Name: "late", Description: "Added later"},
		func(context.Context, map[string]any) (executors.Result, error) { return executors.Text("here"), nil }); err != nil {
		t.Fatal(err)
	}
	specs, err := ts.Tools(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(specs, func(s agent.ToolSpec) bool { return s.Name == "late" }) {
		t.Errorf("Tools() after a registration lacks the new tool: %v", specs)
	}
}

func TestNewMCPToolsetErrors(t *testing.T) {
	for _, o := range []agent.MCPOptions{{}, {URL: "http://127.0.0.1:1/mcp", Command: []string{"x"}}} {
		if _, err := agent.NewMCPToolset(t.Context(), o); err == nil {
			t.Errorf("NewMCPToolset(%+v) succeeded, want an error", o)
		}
	}
}

// TestMCPToolsetKeepsTheRawSchema: the schema a model gets through
// MCPToolset is the one the server sent, keyword for keyword, including
// the keywords mcp-go's decoded mcp.ToolInputSchema has no field for.
func TestMCPToolsetKeepsTheRawSchema(t *testing.T) {
	g := newGateway(t)
	const schema = `{"type":"object","description":"Give a or b.","minProperties":1,
		"properties":{"a":{"type":"string","pattern":"^x"},"b":{"type":"integer","minimum":2}},
		"oneOf":[{"required":["a"]},{"required":["b"]}],"additionalProperties":false}`
	if err := g.RegisterStateless(registry.Tool{Name: "either", Description: "Takes a or b", InputSchema: json.RawMessage(schema)},
		func(context.Context, map[string]any) (executors.Result, error) { return executors.Text("ok"), nil }); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	ts, err := agent.NewMCPToolset(t.Context(), agent.MCPOptions{URL: srv.URL + "/mcp"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ts.Close() })
	specs, err := ts.Tools(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(specs, func(s agent.ToolSpec) bool { return s.Name == "either" })
	if i < 0 {
		t.Fatalf("Tools() lacks %q: %v", "either", specs)
	}
	var want, got any
	if err := json.Unmarshal([]byte(schema), &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(specs[i].InputSchema, &got); err != nil {
		t.Fatalf("the listed schema %s: %v", specs[i].InputSchema, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("MCPToolset schema of %q mismatch (-sent +listed):\n%s", "either", diff)
	}
}
