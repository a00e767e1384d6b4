package mcpfront

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/config"
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
