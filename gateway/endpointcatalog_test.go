package gateway

import (
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/config/configtest"
)

// endpointCatalogGateway serves two REST tools, at an endpoint wx (the
// weather tool and toolgate_batch) and an endpoint market (the stock
// tool), with top the top-level catalog section and the endpoints'
// catalog keys as given.
func endpointCatalogGateway(t *testing.T, top, wxCatalog, marketCatalog string) *httptest.Server {
	t.Helper()
	backend := pathEcho(t)
	in := configtest.Lines(
		"catalog: "+top,
		"batch_tool: true",
		"rest:",
		"  - {name: weather_now, description: Current weather of a city., url: '"+backend.URL+"/weather'}",
		"  - {name: stock_quote, description: Latest price of a stock., url: '"+backend.URL+"/stock'}",
		"endpoints:",
		"  - {name: wx, tools: [weather_*, toolgate_batch]"+wxCatalog+"}",
		"  - {name: market, tools: [stock_*]"+marketCatalog+"}",
	)
	g, err := New(configtest.ParseIn(t, in, nil))
	if err != nil {
		t.Fatalf("New = %v", err)
	}
	return serveHTTP(t, g)
}

// searchNames runs toolgate_search for query in s and returns the names found.
func searchNames(t *testing.T, s *rawSession, query string) []string {
	t.Helper()
	res := decodeCall(t, s.call("tools/call", `{"name":"toolgate_search","arguments":{"query":`+jsonString(query)+`}}`))
	if res.IsError {
		t.Fatalf("search %q = %+v", query, res)
	}
	var out struct{ Tools []catalogHit }
	if err := json.Unmarshal([]byte(res.Content[0].Text), &out); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, h := range out.Tools {
		names = append(names, h.Name)
	}
	return names
}

// refusedAsUnknown checks that calling name in s is answered as an
// unknown tool, suggesting no search meta-tool.
func refusedAsUnknown(t *testing.T, s *rawSession, where, name string) {
	t.Helper()
	r := s.call("tools/call", `{"name":"`+name+`","arguments":{"query":"stock"}}`)
	if r.Error == nil || r.Error.Code != -32602 || !strings.Contains(r.Error.Message, `unknown tool "`+name+`"`) ||
		slices.ContainsFunc(r.Error.Data.Suggestions, isGatewayMeta) {
		t.Errorf("calling %s at %s = %+v, want an unknown tool suggesting no meta-tool", name, where, r.Error)
	}
}

func TestEndpointCatalogSearch(t *testing.T) {
	srv := endpointCatalogGateway(t, "{always: [toolgate_batch]}", ", catalog: search", "")
	wx := newRawSession(t, srv.URL+"/mcp/wx")
	market := newRawSession(t, srv.URL+"/mcp/market")
	all := newRawSession(t, srv.URL+"/mcp")

	for _, tc := range []struct {
		where string
		s     *rawSession
		want  []string
	}{
		{"/mcp/wx", wx, []string{"toolgate_batch", "toolgate_call", "toolgate_describe", "toolgate_search"}},
		{"/mcp/market", market, []string{"stock_quote"}},
		{"/mcp", all, []string{"stock_quote", "toolgate_batch", "weather_now"}},
	} {
		if got := toolNames(t, tc.s.call("tools/list", `{}`)); !slices.Equal(got, tc.want) {
			t.Errorf("tools/list at %s = %v, want %v", tc.where, got, tc.want)
		}
	}

	if got := searchNames(t, wx, "weather"); !slices.Equal(got, []string{"weather_now"}) {
		t.Errorf("search weather at wx = %v, want [weather_now]", got)
	}
	if got := searchNames(t, wx, "price of a stock"); len(got) != 0 {
		t.Errorf("search for the stock tool at wx = %v, want nothing: it is not the endpoint's", got)
	}
	res := decodeCall(t, wx.call("tools/call", `{"name":"toolgate_call","arguments":{"name":"weather_now"}}`))
	if res.IsError || res.Content[0].Text != `{"path":"/weather"}` {
		t.Errorf("toolgate_call weather_now at wx = %+v", res)
	}
	res = decodeCall(t, wx.call("tools/call", `{"name":"toolgate_call","arguments":{"name":"stock_quote"}}`))
	if !res.IsError || !strings.HasPrefix(res.Content[0].Text, "permission: ") {
		t.Errorf("toolgate_call stock_quote at wx = %+v, want it refused", res)
	}
	res = decodeCall(t, wx.call("tools/call", `{"name":"toolgate_describe","arguments":{"name":"stock_quote"}}`))
	if !res.IsError || !strings.HasPrefix(res.Content[0].Text, "not_found: ") {
		t.Errorf("toolgate_describe stock_quote at wx = %+v, want not_found", res)
	}
	if r := wx.call("tools/call", `{"name":"weather_now"}`); r.Error == nil || !slices.Equal(r.Error.Data.Suggestions, []string{"toolgate_call"}) {
		t.Errorf("calling weather_now by name at wx = %+v, want it pointed at toolgate_call", r.Error)
	}

	// The other fronts have no meta-tools.
	refusedAsUnknown(t, all, "/mcp", "toolgate_search")
	refusedAsUnknown(t, market, "/mcp/market", "toolgate_call")
	refusedAsUnknown(t, all, "/mcp", "toolgate_serch") // no suggestion of the meta-tools either
}

func TestEndpointCatalogTools(t *testing.T) {
	// catalog.mode: search; market lists its tools whole, wx follows the
	// top-level mode.
	srv := endpointCatalogGateway(t, "{mode: search}", "", ", catalog: tools")
	wx := newRawSession(t, srv.URL+"/mcp/wx")
	market := newRawSession(t, srv.URL+"/mcp/market")
	all := newRawSession(t, srv.URL+"/mcp")
	meta := []string{"toolgate_call", "toolgate_describe", "toolgate_search"}
	for _, tc := range []struct {
		where string
		s     *rawSession
		want  []string
	}{
		{"/mcp/wx", wx, meta},
		{"/mcp/market", market, []string{"stock_quote"}},
		{"/mcp", all, meta},
	} {
		if got := toolNames(t, tc.s.call("tools/list", `{}`)); !slices.Equal(got, tc.want) {
			t.Errorf("tools/list at %s = %v, want %v", tc.where, got, tc.want)
		}
	}
	res := decodeCall(t, market.call("tools/call", `{"name":"stock_quote"}`))
	if res.IsError || res.Content[0].Text != `{"path":"/stock"}` {
		t.Errorf("stock_quote at market = %+v", res)
	}
	refusedAsUnknown(t, market, "/mcp/market", "toolgate_search")
	if got := searchNames(t, all, "stock weather"); len(got) != 2 {
		t.Errorf("search at /mcp = %v, want both tools", got)
	}
}
