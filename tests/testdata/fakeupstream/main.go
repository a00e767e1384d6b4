// Command fakeupstream is a tiny MCP server over stdio that the end-to-end
// tests run behind the toolgate binary, for behaviour the real npm servers
// cannot show:
//
//   - add_tool registers a tool "late" at runtime (mcp-go then sends
//     notifications/tools/list_changed);
//   - wait sends progress every 50 ms (when the call has a progress token)
//     until "seconds" pass or the call is cancelled, and counts the
//     cancellations it sees;
//   - cancellations returns that count, so a test can tell that a
//     cancellation reached the upstream.
//
// Run as `fakeupstream many N`, it also serves N numbered tools
// (op_00000, ...), listed in pages of 500, for tests of large catalogs.
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

func main() {
	var opts []server.ServerOption
	n := 0
	if len(os.Args) == 3 && os.Args[1] == "many" {
		var err error
		if n, err = strconv.Atoi(os.Args[2]); err != nil || n < 0 {
			fmt.Fprintf(os.Stderr, "fakeupstream: many %q: want a number of tools\n", os.Args[2])
			os.Exit(2)
		}
		opts = append(opts, server.WithPaginationLimit(500))
	}
	s := newServer(opts...)
	for i := range n {
		s.AddTool(mcp.NewTool(fmt.Sprintf("op_%05d", i),
			mcp.WithDescription(fmt.Sprintf("Synthetic operation number %d of the paged fixture; returns its number.", i)),
			mcp.WithString("note")),
			func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText(strconv.Itoa(i)), nil
			})
	}
	if err := server.ServeStdio(s); err != nil {
		fmt.Fprintf(os.Stderr, "fakeupstream: serving stdio: %v\n", err)
		os.Exit(1)
	}
}

// newServer returns the MCP server with the three tools.
func newServer(opts ...server.ServerOption) *server.MCPServer {
	s := server.NewMCPServer("fakeupstream", "1", append([]server.ServerOption{server.WithToolCapabilities(true)}, opts...)...)
	var cancelled atomic.Int64

	s.AddTool(mcp.NewTool("add_tool", mcp.WithDescription("Registers the tool late.")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			s.AddTool(mcp.NewTool("late", mcp.WithDescription("Added at runtime by add_tool.")),
				func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return mcp.NewToolResultText("late tool"), nil
				})
			return mcp.NewToolResultText("added late"), nil
		})

	s.AddTool(mcp.NewTool("wait",
		mcp.WithDescription("Waits, sending progress, until seconds pass or the call is cancelled."),
		mcp.WithNumber("seconds", mcp.Required()),
	), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var token mcp.ProgressToken
		if req.Params.Meta != nil {
			token = req.Params.Meta.ProgressToken
		}
		deadline := time.NewTimer(time.Duration(req.GetFloat("seconds", 0) * float64(time.Second)))
		defer deadline.Stop()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for step := 1; ; step++ {
			if token != nil {
				_ = s.SendNotificationToClient(ctx, "notifications/progress", map[string]any{
					"progressToken": token, "progress": step,
				})
			}
			select {
			case <-ctx.Done():
				cancelled.Add(1)
				return mcp.NewToolResultError("cancelled"), nil
			case <-deadline.C:
				return mcp.NewToolResultText("waited"), nil
			case <-tick.C:
			}
		}
	})

	s.AddTool(mcp.NewTool("cancellations", mcp.WithDescription("Returns how many wait calls were cancelled.")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(strconv.FormatInt(cancelled.Load(), 10)), nil
		})
	return s
}
