package upstreamset

import (
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/registry"
)

// TestServable: an upstream's tool whose schema does not compile, named
// as its catalog's meta-tool, or whose name another source has, is dropped
// alone, with a warning; the registry takes the rest.
func TestServable(t *testing.T) {
	reg := registry.New()
	if err := reg.ReplaceSource("rest:echo", []registry.Tool{{Name: "echo", Kind: registry.REST, Source: "rest:echo", InputSchema: json.RawMessage(`{"type":"object"}`)}}); err != nil {
		t.Fatal(err)
	}
	tool := func(name, in, out string) executors.Bound {
		b := executors.Bound{Tool: registry.Tool{Name: name, Kind: registry.MCP, Source: "upstream:u", InputSchema: json.RawMessage(in)}}
		if out != "" {
			b.Tool.OutputSchema = json.RawMessage(out)
		}
		return b
	}
	const obj = `{"type":"object"}`
	in := []executors.Bound{
		tool("good", obj, ""),
		tool("bad_in", `{"type":"object","properties":{"x":{"$ref":"#/$defs/missing"}}}`, ""),
		tool("bad_out", obj, `{"type":"object","properties":{"x":{"$ref":"#/$defs/missing"}}}`),
		tool("echo", obj, ""),   // the rest source's
		tool("search", obj, ""), // the catalog's meta-tool
		tool("also_good", `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{"a":{"type":"string"}},"properties":{"a":{"$ref":"#/$defs/a"}},"additionalProperties":false}`, obj),
	}
	var logs strings.Builder
	out := Servable("u", in, reg, func(name string) bool { return name == "search" }, slog.New(slog.NewTextHandler(&logs, nil)))
	var names []string
	for _, b := range out {
		names = append(names, b.Tool.Name)
	}
	if want := []string{"good", "also_good"}; !slices.Equal(names, want) {
		t.Fatalf("Servable = %v, want %v", names, want)
	}
	for _, dropped := range []string{"tool=bad_in", "tool=bad_out", "tool=echo", "tool=search"} {
		if !strings.Contains(logs.String(), dropped) {
			t.Errorf("no warning names %s:\n%s", dropped, logs.String())
		}
	}
	defs := make([]registry.Tool, len(out))
	for i, b := range out {
		defs[i] = b.Tool
	}
	if err := reg.ReplaceSource("upstream:u", defs); err != nil {
		t.Fatalf("registering what is left: %v", err)
	}
	if echo, _ := reg.Get("echo"); echo.Source != "rest:echo" {
		t.Errorf("echo is %s's, want rest:echo's", echo.Source)
	}
	if got := Servable("u", in[:1], reg, nil, slog.New(slog.DiscardHandler)); len(got) != 1 {
		t.Errorf("Servable(good) again, its own = %v, want it kept", got)
	}
}
