// Command notesupstream is an MCP server over stdio that keeps state per
// process, for the end-to-end tests of thread handles with an upstream of
// `isolation: thread` (a process per thread):
//
//   - note appends its "text" (when given) to the process's notes and
//     answers with the process's ID, every note so far and the names of
//     the arguments it got, as JSON text;
//   - own_thread has an argument "thread" of its own, and answers with
//     the arguments it got, as JSON text.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

func main() {
	if err := server.ServeStdio(newServer()); err != nil {
		fmt.Fprintf(os.Stderr, "notesupstream: serving stdio: %v\n", err)
		os.Exit(1)
	}
}

// newServer returns the MCP server with its two tools.
func newServer() *server.MCPServer {
	s := server.NewMCPServer("notesupstream", "1", server.WithToolCapabilities(true))
	var (
		mu    sync.Mutex // guards notes
		notes = []string{}
	)
	s.AddTool(mcp.NewTool("note", mcp.WithDescription("Keeps a note in this process."), mcp.WithString("text")),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			args := req.GetArguments()
			mu.Lock()
			if text, ok := args["text"].(string); ok {
				notes = append(notes, text)
			}
			out := map[string]any{"pid": os.Getpid(), "notes": slices.Clone(notes), "args": argNames(args)}
			mu.Unlock()
			return jsonText(out)
		})
	s.AddTool(mcp.NewTool("own_thread", mcp.WithDescription("Takes a thread argument of its own."), mcp.WithString("thread")),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return jsonText(req.GetArguments())
		})
	return s
}

func argNames(args map[string]any) []string {
	names := []string{}
	for k := range args {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

func jsonText(v any) (*mcp.CallToolResult, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return mcp.NewToolResultText(string(b)), nil
}
