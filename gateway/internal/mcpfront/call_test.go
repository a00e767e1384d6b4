package mcpfront

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
)

// TestResolve: a tools/call's tool is the one its name names, else the one
// it repairs to, else a -32602 answer with suggestions (bounded however
// hostile the name).
func TestResolve(t *testing.T) {
	g, _ := newGateway(t, nil)
	noRepair, _ := newGateway(t, func(c *config.Config) { c.Guards.NameRepair = false })
	tests := []struct {
		name, tool string
		g          *harness
		wantTool   string // the tool resolved; "" for an answer
		wantReply  string // in the answer
	}{
		{name: "known tool", g: g, tool: "echo", wantTool: "echo"},
		{name: "unknown", g: g, tool: "ecoh",
			wantReply: `{"jsonrpc":"2.0","id":"a-1","error":{"code":-32602,"message":"unknown tool \"ecoh\"; did you mean \"echo\"?","data":{"suggestions":["echo"]}}}`},
		{name: "unknown without suggestions", g: g, tool: "zzzzzzzzzzzz", wantReply: `"data":{"suggestions":[]}`},
		{name: "no name", g: g, tool: "", wantReply: `"code":-32602`},
		{name: "miscased", g: g, tool: "ECHO", wantTool: "echo"},
		{name: "miscased stateful", g: g, tool: "Counter", wantTool: "counter"},
		{name: "repair off", g: noRepair, tool: "ECHO", wantReply: `"code":-32602`},
		{name: "hostile name", g: g, tool: strings.Repeat("\u202e<script>", 5000), wantReply: `"code":-32602`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tool, a := tc.g.resolve(nil, tc.tool, json.RawMessage(`"a-1"`))
			if tc.wantTool != "" {
				if tool == nil || tool.Def.Name != tc.wantTool {
					t.Fatalf("resolve(%q) = %v, %s; want %s", tc.tool, tool, a.body, tc.wantTool)
				}
				return
			}
			if tool != nil || !strings.Contains(string(a.body), tc.wantReply) || !json.Valid(a.body) {
				t.Fatalf("resolve(%q) = %v, %s; want an answer containing %s", tc.tool, tool, a.body, tc.wantReply)
			}
			if len(a.body) > 2048 {
				t.Errorf("answer is %d bytes; a hostile name must not be echoed whole", len(a.body))
			}
		})
	}
}

// TestCallResult: a tools/call's result is written from its JSON, as the
// tool gave it; a 2026-07-28 one with what the revision asks of every
// result, its resultType and the server's identity in _meta, added to that
// JSON, or merged with a _meta or resultType the result has.
func TestCallResult(t *testing.T) {
	f := &Front{o: Options{Name: "tg", Version: "9"}, completeMembers: completeMembers("tg", "9")}
	const serverInfo = `"io.modelcontextprotocol/serverInfo":{"name":"tg","version":"9"}`
	text := executors.Text("hi")
	for _, tc := range []struct {
		name   string
		out    executors.Result
		modern bool
		want   string // the result, as JSON
	}{
		{"legacy", text, false, `{"content":[{"type":"text","text":"hi"}]}`},
		{"2026-07-28", text, true, `{"content":[{"type":"text","text":"hi"}],"resultType":"complete","_meta":{` + serverInfo + `}}`},
		{"2026-07-28, toolgate's _meta", executors.Result{Content: text.Content, Meta: map[string]any{"toolgate/attempts": 2}}, true,
			`{"content":[{"type":"text","text":"hi"}],"resultType":"complete","_meta":{"toolgate/attempts":2,` + serverInfo + `}}`},
		{"2026-07-28, an upstream's result as sent", executors.Result{Passthrough: json.RawMessage(`{"content":[{"type":"text","text":"up"}], "isError":true}`)}, true,
			`{"content":[{"type":"text","text":"up"}],"isError":true,"resultType":"complete","_meta":{` + serverInfo + `}}`},
		{"2026-07-28, an upstream's _meta", executors.Result{Passthrough: json.RawMessage(`{"content":[],"_meta":{"u":1}}`)}, true,
			`{"content":[],"resultType":"complete","_meta":{"u":1,` + serverInfo + `}}`},
		{"2026-07-28, an upstream's serverInfo and resultType", executors.Result{Passthrough: json.RawMessage(`{"content":[],"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up","version":"1"}}}`)}, true,
			`{"content":[],"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up","version":"1"}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := f.callResult(json.RawMessage(`7`), &tc.out, tc.modern)
			var got, want struct {
				JSONRPC string `json:"jsonrpc"`
				ID      int    `json:"id"`
				Result  any    `json:"result"`
			}
			if err := json.Unmarshal(a.body, &got); err != nil || a.code != 0 || got.JSONRPC != "2.0" || got.ID != 7 {
				t.Fatalf("answer %s (%v); want a JSON-RPC result of id 7", a.body, err)
			}
			if err := json.Unmarshal([]byte(tc.want), &want.Result); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Result, want.Result) {
				t.Errorf("result %s; want %s", a.body, tc.want)
			}
		})
	}
}
