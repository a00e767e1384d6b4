package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/registry"
)

// The tools of an upstream with isolation: thread take thread handles: the
// argument is added to their schemas (not to a tool with a "thread" of its
// own), they are marked for the pipeline while they are served so, and a
// tool of the same name from another source or of another kind takes
// none.
func TestThreadUpstreamTools(t *testing.T) {
	g, _ := newGateway(t, nil)
	text := func(s string) executors.Executor {
		return executors.StatelessFunc(func(context.Context, map[string]any) (executors.Result, error) { return executors.Text(s), nil })
	}
	own := `{"type":"object","properties":{"thread":{"type":"integer"}}}`
	tools := func(names ...string) []executors.Bound {
		var bs []executors.Bound
		for _, n := range names {
			tl := registry.Tool{Name: n, Kind: registry.MCP, InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"additionalProperties":false}`)}
			if strings.HasSuffix(n, "own") {
				tl.InputSchema = json.RawMessage(own)
			}
			bs = append(bs, executors.Bound{Tool: tl, Exec: text(n)})
		}
		return bs
	}
	if err := g.addThreadUpstreamTools("th", tools("th__a", "th__b", "th__own")); err != nil {
		t.Fatal(err)
	}
	takes := func(name string) bool {
		tl, ok := g.reg.Get(name)
		return ok && g.handleTools.Takes(tl)
	}
	for name, want := range map[string]bool{"th__a": true, "th__b": true, "th__own": false} {
		tl, ok := g.reg.Get(name)
		if !ok {
			t.Fatalf("%s is not registered", name)
		}
		if got := takes(name); got != want {
			t.Errorf("Takes(%s) = %v, want %v", name, got, want)
		}
		var schema struct {
			Properties map[string]struct {
				Type string `json:"type"`
			} `json:"properties"`
		}
		if err := json.Unmarshal(tl.InputSchema, &schema); err != nil {
			t.Fatal(err)
		}
		// toolgate's is a string, th__own's own an integer.
		if got := schema.Properties[HandleArg].Type == "string"; got != want {
			t.Errorf("%s's schema %s: has toolgate's %q = %v, want %v", name, tl.InputSchema, HandleArg, got, want)
		}
	}

	// Listed again without th__b: it is unmarked.
	if err := g.addThreadUpstreamTools("th", tools("th__a", "th__own")); err != nil {
		t.Fatal(err)
	}
	if g.handleTools.Takes(&registry.Tool{Name: "th__b", Kind: registry.MCP, Source: "upstream:th"}) {
		t.Errorf("th__b, no longer listed, is still marked")
	}
	if !takes("th__a") {
		t.Errorf("th__a, listed again, takes no handles")
	}
	// Same name, another source or kind: no handles.
	other := registry.Tool{Name: "th__a", Kind: registry.MCP, Source: "upstream:other"}
	stateless := registry.Tool{Name: "th__a", Kind: registry.Stateless, Source: "upstream:th"}
	for _, tl := range []registry.Tool{other, stateless} {
		if g.handleTools.Takes(&tl) {
			t.Errorf("Takes(%s of %s, kind %s) = true, want false", tl.Name, tl.Source, tl.Kind)
		}
	}
	// The stateful tools' marks are untouched.
	if !takes("counter") {
		t.Errorf("the stateful tool counter takes no handles")
	}
}

// An upstream tool named as a stateful tool is not registered, and the
// stateful tool keeps taking handles: its mark is never replaced.
func TestThreadUpstreamToolNameTaken(t *testing.T) {
	g, _ := newGateway(t, nil)
	tl := registry.Tool{Name: "counter", Kind: registry.MCP, InputSchema: json.RawMessage(`{"type":"object"}`)}
	exec := executors.StatelessFunc(func(context.Context, map[string]any) (executors.Result, error) { return executors.Text("up"), nil })
	if err := g.addThreadUpstreamTools("th", []executors.Bound{{Tool: tl, Exec: exec}}); err == nil {
		t.Fatal("an upstream tool named as the stateful tool counter was registered")
	}
	counter, ok := g.reg.Get("counter")
	if !ok || counter.Kind != registry.Stateful {
		t.Fatalf("counter = %+v, %t; want the stateful tool", counter, ok)
	}
	if !g.handleTools.Takes(counter) {
		t.Errorf("the stateful tool counter takes no handles after an upstream tool of its name failed to register")
	}
	if g.handleTools.Takes(&registry.Tool{Name: "counter", Kind: registry.MCP, Source: "upstream:th"}) {
		t.Errorf("counter's mark is the upstream's, want the stateful tool's")
	}
}
