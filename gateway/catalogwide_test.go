package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/config/configtest"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/registry"
)

// pathEcho is a REST backend that answers every request with its path,
// {"path": "/…"}.
func pathEcho(t *testing.T) *httptest.Server {
	t.Helper()
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"path":"` + r.URL.Path + `"}`))
	}))
	t.Cleanup(backend.Close)
	return backend
}

// wideGateway serves, with catalog.mode: search, an OpenAPI source behind
// its own catalog (shop), two rest tools and the batch tool, with calc
// registered in Go after New; alice may not call rest tools.
func wideGateway(t *testing.T) *Gateway {
	t.Helper()
	backend := pathEcho(t)
	in := configtest.Lines(
		"catalog: {mode: search, always: [toolgate_batch]}",
		"batch_tool: true",
		"openapi:",
		"  - {name: shop, spec: a.yaml, base_url: '"+backend.URL+"', catalog: search}",
		"rest:",
		"  - {name: weather_now, description: Current weather of a city., url: '"+backend.URL+"/weather', query: {city: '{city}'},",
		"     input_schema: {type: object, properties: {city: {type: string}}, required: [city]}}",
		"  - {name: stock_quote, description: Latest price of a stock., url: '"+backend.URL+"/stock'}",
		"auth:",
		"  tokens:",
		"    - {name: alice, token: "+aliceToken+", allow: ['*'], deny: [weather_*, stock_*]}",
		"    - {name: bob, token: "+bobToken+", allow: ['*']}",
	)
	g, err := New(configtest.ParseIn(t, in, map[string]string{"a.yaml": catalogDoc}))
	if err != nil {
		t.Fatalf("New = %v", err)
	}
	t.Cleanup(func() { g.Close() })
	calc := registry.Tool{Name: "calc", Title: "Calculator", Description: "Adds two numbers.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"first_number":{"type":"number"},"second_number":{"type":"number"}}}`)}
	if err := g.RegisterStateless(calc, func(_ context.Context, args map[string]any) (executors.Result, error) {
		return executors.Result{Content: []executors.Content{{Type: executors.TextContent, Text: "sum"}}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	return g
}

func TestCatalogGatewayWide(t *testing.T) {
	g := wideGateway(t)
	srv := serveHTTP(t, g)
	alice := newRawSessionAs(t, srv.URL+"/mcp", aliceToken)
	bob := newRawSessionAs(t, srv.URL+"/mcp", bobToken)

	t.Run("tools/list shows the meta-tools and the always-listed", func(t *testing.T) {
		want := []string{"toolgate_batch", "toolgate_call", "toolgate_describe", "toolgate_search"}
		if got := toolNames(t, bob.call("tools/list", `{}`)); !slices.Equal(got, want) {
			t.Errorf("tools/list = %v, want %v", got, want)
		}
	})

	t.Run("search covers every source, by name, title, description, parameters", func(t *testing.T) {
		tests := []struct{ query, want string }{
			{"weather", "weather_now"},          // name
			{"calculator", "calc"},              // title, of a tool registered after New
			{"price of a stock", "stock_quote"}, // description
			{"second number", "calc"},           // parameter names
			{"list pets", "shop__listPets"},     // an OpenAPI catalog's tool
		}
		for _, tc := range tests {
			if got := searchNames(t, bob, tc.query); len(got) == 0 || got[0] != tc.want {
				t.Errorf("search(%q) = %v, want %s first", tc.query, got, tc.want)
			}
		}
	})

	t.Run("a principal never sees, describes or calls a denied tool", func(t *testing.T) {
		if got := searchNames(t, alice, "weather"); len(got) != 0 {
			t.Errorf("alice's search for weather = %v, want nothing", got)
		}
		res := decodeCall(t, alice.call("tools/call", `{"name":"toolgate_describe","arguments":{"name":"weather_now"}}`))
		if !res.IsError || !strings.HasPrefix(res.Content[0].Text, "not_found: ") || strings.Contains(res.Content[0].Text, "Current weather") {
			t.Errorf("alice describing weather_now = %+v", res)
		}
		res = decodeCall(t, alice.call("tools/call", `{"name":"toolgate_call","arguments":{"name":"weather_now","arguments":{"city":"Oslo"}}}`))
		if !res.IsError || !strings.HasPrefix(res.Content[0].Text, "permission: ") {
			t.Errorf("alice calling weather_now = %+v", res)
		}
	})

	t.Run("describe and call, through the pipeline", func(t *testing.T) {
		res := decodeCall(t, bob.call("tools/call", `{"name":"toolgate_describe","arguments":{"name":"calc"}}`))
		if res.IsError || !strings.Contains(res.Content[0].Text, `"first_number"`) || !strings.Contains(res.Content[0].Text, `"title":"Calculator"`) {
			t.Errorf("describe calc = %+v", res)
		}
		res = decodeCall(t, bob.call("tools/call", `{"name":"toolgate_describe","arguments":{"name":"shop__createPet"}}`))
		if res.IsError || !strings.Contains(res.Content[0].Text, `"required":["body"]`) {
			t.Errorf("describe shop__createPet = %+v, want its built schema", res)
		}
		res = decodeCall(t, bob.call("tools/call", `{"name":"toolgate_call","arguments":{"name":"weather_now","arguments":{"city":"Oslo"}}}`))
		if res.IsError || res.Content[0].Text != `{"path":"/weather"}` {
			t.Errorf("call weather_now = %+v", res)
		}
		// Validation is the direct call's.
		res = decodeCall(t, bob.call("tools/call", `{"name":"toolgate_call","arguments":{"name":"weather_now","arguments":{}}}`))
		if !res.IsError || !strings.HasPrefix(res.Content[0].Text, "validation: ") {
			t.Errorf("call weather_now without city = %+v", res)
		}
		res = decodeCall(t, bob.call("tools/call", `{"name":"toolgate_call","arguments":{"name":"shop__listPets"}}`))
		if res.IsError || res.Content[0].Text != `{"path":"/pets"}` {
			t.Errorf("call shop__listPets through toolgate_call = %+v", res)
		}
	})

	t.Run("a hidden tool called by name points at toolgate_call", func(t *testing.T) {
		r := bob.call("tools/call", `{"name":"calc"}`)
		if r.Error == nil || !slices.Equal(r.Error.Data.Suggestions, []string{"toolgate_call"}) {
			t.Errorf("calling calc directly = %+v", r.Error)
		}
	})

	t.Run("bad input gets a clear error", func(t *testing.T) {
		tests := []struct{ name, call, want string }{
			{"empty query", `{"name":"toolgate_search","arguments":{"query":""}}`, "validation: "},
			{"all punctuation", `{"name":"toolgate_search","arguments":{"query":"?!.,;"}}`, "validation: query \"?!.,;\" has no words"},
			{"1 MB query", `{"name":"toolgate_search","arguments":{"query":"` + strings.Repeat("read ", 200_000) + `"}}`, "validation: "},
			{"many words", `{"name":"toolgate_search","arguments":{"query":"` + manyWords(20) + `"}}`, "validation: query has 20 words"},
			{"describe unknown", `{"name":"toolgate_describe","arguments":{"name":"nope"}}`, `not_found: toolgate has no tool "nope"`},
			{"call unknown", `{"name":"toolgate_call","arguments":{"name":"cal"}}`, `not_found: toolgate has no tool "cal"; did you mean "calc"`},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				res := decodeCall(t, bob.call("tools/call", tc.call))
				if !res.IsError || !strings.HasPrefix(res.Content[0].Text, tc.want) {
					t.Errorf("%s = %.300v, want an error starting %q", tc.name, res.Content, tc.want)
				}
			})
		}
	})

	t.Run("unregistering a tool takes it out of search", func(t *testing.T) {
		g.Unregister("calc")
		if got := searchNames(t, bob, "calculator"); len(got) != 0 {
			t.Errorf("search after unregistering calc = %v", got)
		}
	})
}

// manyWords is n distinct words.
func manyWords(n int) string {
	var ws []string
	for i := range n {
		ws = append(ws, "word"+string(rune('a'+i)))
	}
	return strings.Join(ws, " ")
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// With defaults.catalog: search the rest tools are served as a group,
// behind rest__search, rest__describe and rest__call.
func TestCatalogRESTGroup(t *testing.T) {
	in := configtest.Lines(
		"defaults: {catalog: search}",
		"rest:",
		"  - {name: weather_now, description: Current weather., url: 'http://127.0.0.1:9/w'}",
		"  - {name: stock_quote, description: Latest price., url: 'http://127.0.0.1:9/s'}",
	)
	g, err := New(configtest.ParseIn(t, in, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var listed []string
	for _, r := range *g.routes.Load() {
		if !r.hidden[listing(false)] {
			listed = append(listed, r.tool.Name)
		}
	}
	slices.Sort(listed)
	if want := []string{"rest__call", "rest__describe", "rest__search"}; !slices.Equal(listed, want) {
		t.Errorf("listed tools = %v, want %v", listed, want)
	}
	res, err := g.Call(t.Context(), "rest__search", json.RawMessage(`{"query":"price"}`), nil)
	if err != nil || res.IsError || !strings.Contains(res.Content[0].Text, `"stock_quote"`) || strings.Contains(res.Content[0].Text, "weather") {
		t.Errorf("rest__search price = %+v, %v", res, err)
	}
}
