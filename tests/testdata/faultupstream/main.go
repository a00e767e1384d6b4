// Command faultupstream is a tiny MCP server over stdio that injects
// faults, for the end-to-end resilience tests of toolgate's upstream
// retries:
//
//   - flaky (readOnlyHint: true, so toolgate may retry it) and unsafe (no
//     hints, so it may not) take {"key": string, "fails": integer}: the
//     first fails calls with that key make the process exit mid-call,
//     without answering, and later calls answer "<tool> <key> ok on call
//     N". The counts live in files under $FAULT_STATE_DIR, so they
//     survive the process: toolgate's supervisor restarts it after each
//     death.
//   - hang never answers; it returns only when the call is cancelled.
//
// The count of key is in the file $FAULT_STATE_DIR/calls-<key>, which
// the tests read.
package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

func main() {
	dir := os.Getenv("FAULT_STATE_DIR")
	if dir == "" {
		fmt.Fprintln(os.Stderr, "faultupstream: FAULT_STATE_DIR is not set")
		os.Exit(2)
	}
	if err := server.ServeStdio(newServer(&counter{dir: dir})); err != nil {
		fmt.Fprintf(os.Stderr, "faultupstream: serving stdio: %v\n", err)
		os.Exit(1)
	}
}

// counter counts calls per key in files under dir.
type counter struct {
	dir string
	mu  sync.Mutex // serializes read-increment-write
}

func (c *counter) path(key string) string {
	return filepath.Join(c.dir, "calls-"+strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, key))
}

// read returns key's count; c.mu is held.
func (c *counter) read(key string) (int, error) {
	b, err := os.ReadFile(c.path(key))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(string(b))
}

// add increments key's count and returns the new count.
func (c *counter) add(key string) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, err := c.read(key)
	if err != nil {
		return 0, err
	}
	n++
	return n, os.WriteFile(c.path(key), []byte(strconv.Itoa(n)), 0o600)
}

// newServer returns the MCP server with the fault-injecting tools.
func newServer(c *counter) *server.MCPServer {
	s := server.NewMCPServer("faultupstream", "1", server.WithToolCapabilities(true))

	dying := func(name string) server.ToolHandlerFunc {
		return func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			key := req.GetString("key", "")
			n, err := c.add(key)
			if err != nil {
				return mcp.NewToolResultError(err.Error()), nil
			}
			if n <= req.GetInt("fails", 0) {
				// Mid-call: the request was read and is never answered.
				fmt.Fprintf(os.Stderr, "faultupstream: %s %s: dying on call %d\n", name, key, n)
				os.Exit(3)
			}
			return mcp.NewToolResultText(fmt.Sprintf("%s %s ok on call %d", name, key, n)), nil
		}
	}
	args := []mcp.ToolOption{
		mcp.WithString("key", mcp.Required()),
		mcp.WithNumber("fails", mcp.Required()),
	}

	s.AddTool(mcp.NewTool("flaky", append([]mcp.ToolOption{
		mcp.WithDescription("Read-only: exits mid-call for the first fails calls with key."),
		mcp.WithReadOnlyHintAnnotation(true),
	}, args...)...), dying("flaky"))

	unsafe := mcp.NewTool("unsafe", append([]mcp.ToolOption{
		mcp.WithDescription("No hints: exits mid-call for the first fails calls with key."),
	}, args...)...)
	unsafe.Annotations = mcp.ToolAnnotation{} // no hints at all
	s.AddTool(unsafe, dying("unsafe"))

	s.AddTool(mcp.NewTool("hang", mcp.WithDescription("Never answers; returns when cancelled.")),
		func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			<-ctx.Done()
			return mcp.NewToolResultError("cancelled"), nil
		})

	return s
}
