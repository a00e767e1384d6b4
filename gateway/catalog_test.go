package gateway

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/config/configtest"
	"github.com/toolgate/toolgate/gateway/internal/batchtool"
)

// catalogDoc is the document served with catalog: search.
const catalogDoc = configtest.ShopOpenAPI

// catalogHit is one result of a catalog's search, as a client reads it.
type catalogHit struct {
	Name      string `json:"name"`
	Summary   string `json:"summary"`
	Operation string `json:"operation"`
}

// catalogGateway serves catalogDoc as catalog shop against a backend that
// records each request's method and URI, with alice allowed the
// meta-tools and listPets only and bob everything.
func catalogGateway(t *testing.T) (*Gateway, *[]string) {
	t.Helper()
	var mu sync.Mutex
	var seen []string
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.RequestURI())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(backend.Close)
	in := configtest.Lines(
		"defaults: {catalog: search}",
		"batch_tool: true",
		"openapi:",
		"  - {name: shop, spec: a.yaml, base_url: '"+backend.URL+"'}",
		"auth:",
		"  tokens:",
		"    - {name: alice, token: "+aliceToken+", allow: [shop__search, shop__describe, shop__call, shop__listPets, toolgate_batch]}",
		"    - {name: bob, token: "+bobToken+", allow: ['*']}",
	)
	g, err := New(configtest.ParseIn(t, in, map[string]string{"a.yaml": catalogDoc}))
	if err != nil {
		t.Fatalf("New = %v", err)
	}
	t.Cleanup(func() { g.Close() })
	return g, &seen
}

func TestCatalogSearch(t *testing.T) {
	g, seen := catalogGateway(t)
	srv := serveHTTP(t, g)
	alice := newRawSessionAs(t, srv.URL+"/mcp", aliceToken)
	bob := newRawSessionAs(t, srv.URL+"/mcp", bobToken)

	t.Run("tools/list shows the meta-tools only", func(t *testing.T) {
		want := []string{"shop__call", "shop__describe", "shop__search", "toolgate_batch"}
		if got := toolNames(t, bob.call("tools/list", `{}`)); !slices.Equal(got, want) {
			t.Errorf("tools/list = %v, want %v", got, want)
		}
		// The hidden tools are registered: they dispatch and count.
		if _, ok := g.reg.Get("shop__createPet"); !ok {
			t.Error("shop__createPet is not registered")
		}
	})

	search := func(s *rawSession, args string) []catalogHit {
		t.Helper()
		res := decodeCall(t, s.call("tools/call", `{"name":"shop__search","arguments":`+args+`}`))
		if res.IsError {
			t.Fatalf("search %s = %+v", args, res)
		}
		var out struct {
			Tools []catalogHit `json:"tools"`
			Total int          `json:"total"`
		}
		if err := json.Unmarshal([]byte(res.Content[0].Text), &out); err != nil {
			t.Fatal(err)
		}
		return out.Tools
	}
	names := func(hs []catalogHit) []string {
		var out []string
		for _, h := range hs {
			out = append(out, h.Name)
		}
		return out
	}

	t.Run("search ranks by terms matched, then weight, then name", func(t *testing.T) {
		tests := []struct {
			name, args string
			want       []string
		}{
			{"a name before a tag", `{"query":"pets"}`, []string{"shop__listPets", "shop__createPet"}},
			{"more terms matched first", `{"query":"list pets"}`, []string{"shop__listPets", "shop__createPet"}},
			{"a path", `{"query":"orders"}`, []string{"shop__getOrder"}},
			{"the summary", `{"query":"shop"}`, []string{"shop__listPets"}},
			{"equal scores by name, limit", `{"query":"pets order","limit":2}`, []string{"shop__getOrder", "shop__listPets"}},
			{"nothing", `{"query":"zebra"}`, nil},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				if got := names(search(bob, tc.args)); !slices.Equal(got, tc.want) {
					t.Errorf("search(%s) = %v, want %v", tc.args, got, tc.want)
				}
			})
		}
		if got := search(bob, `{"query":"list"}`); len(got) != 1 || got[0] != (catalogHit{Name: "shop__listPets", Summary: "List every pet in the shop", Operation: "GET /pets"}) {
			t.Errorf("search list = %+v", got)
		}
	})

	t.Run("search and describe reveal only what the principal may call", func(t *testing.T) {
		if got := names(search(alice, `{"query":"pets"}`)); !slices.Equal(got, []string{"shop__listPets"}) {
			t.Errorf("alice's search = %v", got)
		}
		res := decodeCall(t, alice.call("tools/call", `{"name":"shop__describe","arguments":{"name":"shop__createPet"}}`))
		if !res.IsError || !strings.HasPrefix(res.Content[0].Text, "not_found: ") || strings.Contains(res.Content[0].Text, "Add a pet") {
			t.Errorf("alice describing createPet = %+v", res)
		}
	})

	t.Run("describe", func(t *testing.T) {
		res := decodeCall(t, bob.call("tools/call", `{"name":"shop__describe","arguments":{"name":"listPets"}}`))
		var got struct {
			Name        string          `json:"name"`
			Operation   string          `json:"operation"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"inputSchema"`
		}
		if res.IsError || json.Unmarshal([]byte(res.Content[0].Text), &got) != nil {
			t.Fatalf("describe = %+v", res)
		}
		tool := mustTool(t, g, "shop__listPets")
		if got.Name != "shop__listPets" || got.Operation != "GET /pets" || got.Description != tool.Description || string(got.InputSchema) != string(tool.InputSchema) {
			t.Errorf("describe = %+v, want the tool's own description and schema %s", got, tool.InputSchema)
		}
	})

	t.Run("call is the direct call", func(t *testing.T) {
		*seen = nil
		res := decodeCall(t, bob.call("tools/call", `{"name":"shop__call","arguments":{"name":"shop__getOrder","arguments":{"id":"a b"}}}`))
		if res.IsError || res.Content[0].Text != `{"ok":true}` {
			t.Errorf("call = %+v", res)
		}
		if want := []string{"GET /orders/a%20b"}; !slices.Equal(*seen, want) {
			t.Errorf("backend saw %v, want %v", *seen, want)
		}
		// Invalid arguments: the direct call's validation result, and
		// the backend is not called.
		*seen = nil
		viaCatalog, err := g.Call(t.Context(), "shop__call", json.RawMessage(`{"name":"shop__listPets","arguments":{"limit":1000}}`), nil)
		if err != nil {
			t.Fatal(err)
		}
		direct, err := g.Call(t.Context(), "shop__listPets", json.RawMessage(`{"limit":1000}`), nil)
		if err != nil {
			t.Fatal(err)
		}
		if !direct.IsError || direct.Class != "validation" {
			t.Fatalf("direct call = %+v, want a validation result", direct)
		}
		if diff := cmp.Diff(direct.Content, viaCatalog.Content); diff != "" || viaCatalog.Class != direct.Class {
			t.Errorf("call through the catalog differs from the direct call (-direct +catalog):\n%s", diff)
		}
		if len(*seen) != 0 {
			t.Errorf("backend saw %v for invalid arguments", *seen)
		}
	})

	t.Run("call applies the principal's permissions", func(t *testing.T) {
		*seen = nil
		res := decodeCall(t, alice.call("tools/call", `{"name":"shop__call","arguments":{"name":"shop__createPet","arguments":{"body":{"name":"x"}}}}`))
		if !res.IsError || !strings.HasPrefix(res.Content[0].Text, "permission: ") {
			t.Errorf("alice calling createPet through the catalog = %+v", res)
		}
		res = decodeCall(t, alice.call("tools/call", `{"name":"shop__call","arguments":{"name":"shop__listPets"}}`))
		if res.IsError {
			t.Errorf("alice calling listPets through the catalog = %+v", res)
		}
		if want := []string{"GET /pets"}; !slices.Equal(*seen, want) {
			t.Errorf("backend saw %v, want %v", *seen, want)
		}
		res = decodeCall(t, bob.call("tools/call", `{"name":"shop__call","arguments":{"name":"shop__nope"}}`))
		if !res.IsError || !strings.HasPrefix(res.Content[0].Text, "not_found: ") {
			t.Errorf("calling an unknown tool = %+v", res)
		}
	})

	t.Run("a hidden tool called by name points at the catalog", func(t *testing.T) {
		r := bob.call("tools/call", `{"name":"shop__listPets"}`)
		if r.Error == nil || r.Error.Code != -32602 || !slices.Equal(r.Error.Data.Suggestions, []string{"shop__call"}) {
			t.Errorf("calling shop__listPets directly = %+v", r.Error)
		}
		// Repair finds no hidden tool either.
		r = bob.call("tools/call", `{"name":"SHOP__LISTPETS"}`)
		if r.Error == nil || slices.Contains(r.Error.Data.Suggestions, "shop__listPets") {
			t.Errorf("calling SHOP__LISTPETS = %+v", r.Error)
		}
	})

	t.Run("toolgate_batch runs hidden tools and the call tool", func(t *testing.T) {
		res := decodeCall(t, bob.call("tools/call", `{"name":"toolgate_batch","arguments":{"calls":[`+
			`{"tool":"shop__listPets"},{"tool":"shop__call","arguments":{"name":"shop__getOrder","arguments":{"id":"7"}}}]}}`))
		var out batchtool.Result
		if err := json.Unmarshal([]byte(res.Content[0].Text), &out); err != nil {
			t.Fatal(err)
		}
		if out.OK != 2 {
			t.Errorf("batch = %+v", out)
		}
	})
}

// TestCatalogLazy checks, through the whole gateway, that a catalog's
// hidden tools are registered with a stub schema and built on first use
// (describe, call, or a call by name); gateway/internal/catalogtool's
// TestBuild counts the builds and puts built tools back to their stubs.
func TestCatalogLazy(t *testing.T) {
	g, seen := catalogGateway(t)
	c := g.catalogs.Of("openapi:shop")
	stubbed := func(name string) bool { return string(mustTool(t, g, name).InputSchema) == string(c.StubSchema()) }
	for _, name := range []string{"shop__listPets", "shop__createPet", "shop__getOrder"} {
		if !stubbed(name) {
			t.Errorf("%s is registered with schema %s, want the stub", name, mustTool(t, g, name).InputSchema)
		}
	}

	// A call by name of a tool not yet built checks its real schema.
	res, err := g.Call(t.Context(), "shop__listPets", json.RawMessage(`{"limit":1000}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || res.Class != "validation" || !strings.Contains(res.Content[0].Text, "limit") {
		t.Errorf("calling unbuilt shop__listPets with limit 1000 = %+v, want a validation result about limit", res)
	}
	if len(*seen) != 0 {
		t.Errorf("backend saw %v for invalid arguments", *seen)
	}
	if stubbed("shop__listPets") {
		t.Errorf("after the call listPets is still stubbed; want it built")
	}
	if res, err := g.Call(t.Context(), "shop__listPets", json.RawMessage(`{"limit":10}`), nil); err != nil || res.IsError {
		t.Errorf("calling built shop__listPets = %+v, %v", res, err)
	}

	describe := func(name string) string {
		t.Helper()
		res, err := g.Call(t.Context(), "shop__describe", json.RawMessage(`{"name":"`+name+`"}`), nil)
		if err != nil || res.IsError {
			t.Fatalf("describe %s = %+v, %v", name, res, err)
		}
		var out struct {
			InputSchema json.RawMessage `json:"inputSchema"`
		}
		if err := json.Unmarshal([]byte(res.Content[0].Text), &out); err != nil {
			t.Fatal(err)
		}
		return string(out.InputSchema)
	}
	if got := describe("createPet"); !strings.Contains(got, `"required":["body"]`) {
		t.Errorf("describe createPet schema = %s, want its body required", got)
	}
	if stubbed("shop__createPet") {
		t.Errorf("after describing createPet it is still stubbed; want it built")
	}

	// Many at once: every describe gets its tool's real schema.
	var wg sync.WaitGroup
	for range 4 {
		for _, name := range []string{"listPets", "createPet", "getOrder"} {
			wg.Go(func() {
				res, err := g.Call(t.Context(), "shop__describe", json.RawMessage(`{"name":"`+name+`"}`), nil)
				switch {
				case err != nil:
					t.Errorf("describe %s: %v", name, err)
				case res.IsError && !strings.HasPrefix(res.Content[0].Text, "unavailable: "):
					t.Errorf("describe %s = %+v", name, res)
				case !res.IsError && strings.Contains(res.Content[0].Text, "built on first use"):
					t.Errorf("describe %s gave the stub: %s", name, res.Content[0].Text)
				}
			})
		}
	}
	wg.Wait()
	*seen = nil
	res, err = g.Call(t.Context(), "shop__call", json.RawMessage(`{"name":"shop__getOrder","arguments":{"id":"7"}}`), nil)
	if err != nil || res.IsError || !slices.Equal(*seen, []string{"GET /orders/7"}) {
		t.Errorf("call getOrder after the others were built = %+v, %v; backend saw %v", res, err, *seen)
	}
}

func TestCatalogConfig(t *testing.T) {
	// A source's own catalog wins over defaults.catalog.
	in := configtest.Lines(
		"defaults: {catalog: search}",
		"openapi:",
		"  - {name: a, spec: a.yaml}",
		"  - {name: b, spec: a.yaml, catalog: tools}",
	)
	g, err := New(configtest.ParseIn(t, in, map[string]string{"a.yaml": configtest.TinyOpenAPI}))
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
	if want := []string{"a__call", "a__describe", "a__search", "b__list"}; !slices.Equal(listed, want) {
		t.Errorf("listed tools = %v, want %v", listed, want)
	}
	if _, err := config.Parse("t.yaml", []byte("defaults: {catalog: lots}\n"), nil); err == nil ||
		!strings.Contains(err.Error(), "defaults.catalog") {
		t.Errorf("catalog: lots = %v, want an error at defaults.catalog", err)
	}
}
