package tests

// No upstream tool is dropped for its name: one whose prefixed name is
// longer than MCP's 64 characters gets a shortened name (readable start,
// hash of the whole), stable across restarts, is called upstream by its
// own name, and a clash after shortening is numbered.

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/registry"
)

// longName is a 90-character tool name.
func longName(word string) string {
	n := word + "_" + strings.Repeat("and_then_some_more_", 5)
	return n[:90]
}

// longNameUpstream serves tools named long (90 characters), clash (another
// 90 characters) and squat, whose prefixed name "w__"+squat is exactly
// what clash would be shortened to. Each tool answers with the name it
// was called by.
func longNameUpstream(t *testing.T, long, clash, squat string) string {
	t.Helper()
	s := mcpserver.NewMCPServer("long-names", "1", mcpserver.WithToolCapabilities(false))
	for _, name := range []string{long, clash, squat} {
		s.AddTool(mcp.NewTool(name, mcp.WithDescription("answers with its name")),
			func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText("called " + req.Params.Name), nil
			})
	}
	return serveMCP(t, s)
}

func TestUpstreamLongToolNames(t *testing.T) {
	long, clash := longName("read_everything"), longName("write_everything")
	if len(long) != 90 || len(clash) != 90 {
		t.Fatalf("test names are %d and %d characters, want 90", len(long), len(clash))
	}
	clashShort, _, _ := registry.ShortName("w__" + clash)
	squat := strings.TrimPrefix(clashShort, "w__")
	url := longNameUpstream(t, long, clash, squat)
	cfg := fmt.Sprintf("upstreams:\n  - name: w\n    transport: streamable-http\n    url: %q\n", url)

	wantLong, _, _ := registry.ShortName("w__" + long)
	wantClash, _, _ := registry.ShortName("w__" + clash + "_2")
	want := map[string]string{wantLong: long, wantClash: clash, "w__" + squat: ""}

	var first map[string]mcp.Tool
	for run := range 2 { // a restart gives the same names
		srv := startServe(t, cfg)
		c := connect(t, streamableHTTP, srv)
		tools := waitTools(t, c, wantLong, wantClash, "w__"+squat)
		for name, orig := range want {
			tool := tools[name]
			if len(name) > registry.MaxNameLen {
				t.Errorf("run %d: tool %q is %d characters long", run, name, len(name))
			}
			var got any
			if tool.Meta != nil {
				got = tool.Meta.AdditionalFields[registry.UpstreamNameMetaKey]
			}
			if orig == "" {
				if got != nil {
					t.Errorf("run %d: unrenamed tool %s has _meta %s = %v", run, name, registry.UpstreamNameMetaKey, got)
				}
				orig = squat
			} else {
				if got != orig {
					t.Errorf("run %d: tool %s: _meta %s = %v, want %q", run, name, registry.UpstreamNameMetaKey, got, orig)
				}
				if tool.Title != orig {
					t.Errorf("run %d: tool %s: title %q, want the upstream's name %q", run, name, tool.Title, orig)
				}
			}
			// Called upstream by its own name.
			wantOK(t, mustCall(t, c, name, map[string]any{}, ""), "called "+orig)
		}
		if run == 0 {
			first = tools
		} else if len(tools) != len(first) {
			t.Errorf("restart listed %d tools, first run %d", len(tools), len(first))
		}
		if n := strings.Count(srv.Stderr(), "upstream tool renamed: its shortened name clashed"); n != 1 {
			t.Errorf("run %d: the clash was logged %d times, want once:\n%s", run, n, srv.Stderr())
		}
		srv.Stop(t)
	}

	r := runCLI(t, "tools", "--config", writeConfig(t, cfg))
	for name, orig := range want {
		if orig != "" && !strings.Contains(r.stdout, name) || !strings.Contains(r.stdout, orig) {
			t.Errorf("toolgate tools does not show %s ← %q:\n%s", name, orig, r.stdout)
		}
	}
	if !strings.Contains(r.stdout, "RENAMED") {
		t.Errorf("toolgate tools shows no RENAMED section:\n%s", r.stdout)
	}
}
