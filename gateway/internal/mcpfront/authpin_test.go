package mcpfront

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// TestMCPGoToolListHook pins doc.go fact 16.
func TestMCPGoToolListHook(t *testing.T) {
	add := func(s *server.MCPServer) {
		for _, name := range []string{"a", "b"} {
			s.AddTool(mcp.NewTool(name), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText("ran"), nil
			})
		}
	}
	call := func(s *server.MCPServer, msg string) string {
		ctx := s.WithContext(t.Context(), &pinSession{id: "x"})
		b, _ := json.Marshal(s.HandleMessage(ctx, json.RawMessage(msg)))
		return string(b)
	}
	onlyA := func(_ context.Context, tools []mcp.Tool) []mcp.Tool {
		var out []mcp.Tool
		for _, tl := range tools {
			if tl.Name == "a" {
				out = append(out, tl)
			}
		}
		return out
	}
	filtered := server.NewMCPServer("pin", "1", server.WithToolCapabilities(true), server.WithToolFilter(onlyA))
	add(filtered)
	if got := call(filtered, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"b"}}`); !strings.Contains(got, "not found") {
		t.Errorf("a filtered tool's call = %s; mcp-go no longer refuses it: the filter could replace the hook", got)
	}
	hooks := &server.Hooks{}
	hooks.AddAfterListTools(func(ctx context.Context, _ any, _ *mcp.ListToolsRequest, res *mcp.ListToolsResult) {
		res.Tools = onlyA(ctx, res.Tools)
	})
	hooked := server.NewMCPServer("pin", "1", server.WithToolCapabilities(true), server.WithHooks(hooks))
	add(hooked)
	if got := call(hooked, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); strings.Contains(got, `"name":"b"`) || !strings.Contains(got, `"name":"a"`) {
		t.Errorf("tools/list through the hook = %s; the hook's change is not what is sent", got)
	}
	if got := call(hooked, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"b"}}`); !strings.Contains(got, "ran") {
		t.Errorf("a tool hidden by the hook could not be called: %s", got)
	}
}
