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
		return ok && g.takesHandles(tl)
	}
	for name, want := range map[string]bool{"th__a": true, "th__b": true, "th__own": false} {
		tl, ok := g.reg.Get(name)
		if !ok {
			t.Fatalf("%s is not registered", name)
		}
		if got := takes(name); got != want {
			t.Errorf("takesHandles(%s) = %v, want %v", name, got, want)
		}
		var schema struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if err := json.Unmarshal(tl.InputSchema, &schema); err != nil {
			t.Fatal(err)
		}
		if got := string(schema.Properties[HandleArg]) == string(handleArgSchema); got != want {
			t.Errorf("%s's schema %s: has toolgate's %q = %v, want %v", name, tl.InputSchema, HandleArg, got, want)
		}
	}

	// Listed again without th__b: it is unmarked.
	if err := g.addThreadUpstreamTools("th", tools("th__a", "th__own")); err != nil {
		t.Fatal(err)
	}
	if v, ok := g.handleTools.Load("th__b"); ok {
		t.Errorf("th__b, no longer listed, is still marked (%v)", v)
	}
	if !takes("th__a") {
		t.Errorf("th__a, listed again, takes no handles")
	}
	// Same name, another source or kind: no handles.
	other := registry.Tool{Name: "th__a", Kind: registry.MCP, Source: "upstream:other"}
	stateless := registry.Tool{Name: "th__a", Kind: registry.Stateless, Source: "upstream:th"}
	for _, tl := range []registry.Tool{other, stateless} {
		if g.takesHandles(&tl) {
			t.Errorf("takesHandles(%s of %s, kind %s) = true, want false", tl.Name, tl.Source, tl.Kind)
		}
	}
	// The stateful tools' marks are untouched.
	if !takes("counter") {
		t.Errorf("the stateful tool counter takes no handles")
	}
}

// withHandle adds the handle to an upstream's result as it sent it: a
// text part after its own, and _meta.
func TestWithHandlePassthrough(t *testing.T) {
	in := &Result{Passthrough: json.RawMessage(`{"content":[{"type":"text","text":"hi"}],"structuredContent":{"n":1}}`)}
	out := withHandle(in, "up__t", "th_x")
	var got struct {
		Content []struct {
			Type, Text string
		} `json:"content"`
		Structured map[string]any `json:"structuredContent"`
		Meta       map[string]any `json:"_meta"`
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Content) != 2 || got.Content[0].Text != "hi" || !strings.HasPrefix(got.Content[1].Text, "thread handle: th_x (") {
		t.Errorf("content = %+v, want the upstream's text, then the handle's", got.Content)
	}
	if got.Structured["n"] != 1.0 || got.Meta[HandleMetaKey] != "th_x" {
		t.Errorf("structuredContent %v, _meta %v; want the upstream's and the handle", got.Structured, got.Meta)
	}
	if strings.Contains(string(in.Passthrough), "th_x") {
		t.Errorf("withHandle changed its input: %s", in.Passthrough)
	}
}

func TestWithoutMember(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		{`{"q":"x","thread":"th_1"}`, `{"q":"x"}`},
		{`{ "thread" : "th_1" , "n": 1.0, "big": 12345678901234567890, "o": {"thread": 1} }`, `{"n":1.0,"big":12345678901234567890,"o":{"thread": 1}}`},
		{`{"thread":"a","thread":"b"}`, `{}`},
		{`{"z":1,"a":2}`, `{"z":1,"a":2}`},
		{`{"\u0074hread":"th_1","k\"ey":true}`, `{"k\"ey":true}`},
		{`[1]`, ``},
		{`{"q":`, ``},
		{``, ``},
	} {
		if got := string(withoutMember(json.RawMessage(tc.raw), HandleArg)); got != tc.want {
			t.Errorf("withoutMember(%s) = %s, want %s", tc.raw, got, tc.want)
		}
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
	if !g.takesHandles(counter) {
		t.Errorf("the stateful tool counter takes no handles after an upstream tool of its name failed to register")
	}
	if v, _ := g.handleTools.Load("counter"); v != struct{}{} {
		t.Errorf("counter's mark = %v, want the stateful tool's", v)
	}
}
