package tests

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// everythingEntry is server-everything's entry point, installed by
// `make npm-deps` (npm ci in tests/npm).
func everythingEntry(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs("npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Skipf("server-everything is not installed (%v); run `make npm-deps`", err)
	}
	return p
}

// TestUpstreamSmoke runs server-everything over stdio behind the real
// binary: its tools appear prefixed, and calls pass through.
func TestUpstreamSmoke(t *testing.T) {
	entry := everythingEntry(t)
	srv := startServe(t, "builtin: [calc]\nupstreams:\n  - name: ev\n    transport: stdio\n    command: node\n    args: [\""+entry+"\", stdio]\n")
	// The upstream connects in the background; its tools are listed once
	// it is up.
	waitMetric(t, srv.URL, "toolgate_upstream_up", map[string]string{"upstream": "ev"}, 1)
	c := connect(t, streamableHTTP, srv)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	list, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
	}
	for _, want := range []string{"calc", "ev__echo", "ev__get-sum", "ev__get-tiny-image"} {
		if !strings.Contains(","+strings.Join(names, ",")+",", ","+want+",") {
			t.Fatalf("tools/list = %v, want %s among them", names, want)
		}
	}
	call := func(name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = name, args
		res, err := c.CallTool(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res
	}
	if res := call("ev__echo", map[string]any{"message": "through toolgate"}); res.IsError || !strings.Contains(res.Content[0].(mcp.TextContent).Text, "through toolgate") {
		t.Errorf("ev__echo = %+v", res)
	}
	if res := call("ev__get-sum", map[string]any{"a": 2, "b": 3}); res.IsError || !strings.Contains(res.Content[0].(mcp.TextContent).Text, "5") {
		t.Errorf("ev__get-sum = %+v", res)
	}
	res := call("ev__get-tiny-image", map[string]any{})
	var img *mcp.ImageContent
	for _, ct := range res.Content {
		if ic, ok := ct.(mcp.ImageContent); ok {
			img = &ic
		}
	}
	if img == nil || img.MIMEType == "" || img.Data == "" {
		t.Errorf("ev__get-tiny-image returned no image content: %+v", res.Content)
	}
	// Arguments are validated against the upstream's own schema before
	// the call is forwarded.
	if res := call("ev__get-sum", map[string]any{"a": "two"}); !res.IsError {
		t.Errorf("ev__get-sum with a string = %+v, want a validation error", res)
	}
}

// TestUpstreamProgress checks that progress notifications of an upstream's
// long-running tool reach our client under its own progress token.
func TestUpstreamProgress(t *testing.T) {
	entry := everythingEntry(t)
	srv := startServe(t, "upstreams:\n  - name: ev\n    transport: stdio\n    command: node\n    args: [\""+entry+"\", stdio]\n")
	waitMetric(t, srv.URL, "toolgate_upstream_up", map[string]string{"upstream": "ev"}, 1)
	c := connect(t, streamableHTTP, srv)
	progress := make(chan mcp.JSONRPCNotification, 16)
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == "notifications/progress" {
			progress <- n
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = "ev__trigger-long-running-operation"
	req.Params.Arguments = map[string]any{"duration": 0.6, "steps": 3}
	req.Params.Meta = &mcp.Meta{ProgressToken: "my-token"}
	res, err := c.CallTool(ctx, req)
	if err != nil || res.IsError {
		t.Fatalf("long-running operation = %+v, %v", res, err)
	}
	got := len(progress)
	if got < 2 {
		t.Fatalf("received %d progress notifications, want at least 2", got)
	}
	for range got {
		n := <-progress
		if tok := n.Params.AdditionalFields["progressToken"]; tok != "my-token" {
			t.Errorf("progress notification with token %v, want the client's my-token", tok)
		}
	}
}

// pidsWithEnv returns the processes whose environment holds marker.
func pidsWithEnv(t *testing.T, marker string) []int {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc to find processes in: %v", err)
	}
	var pids []int
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", d.Name(), "environ"))
		if err == nil && strings.Contains(string(env), marker) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestUpstreamRestart kills the upstream's process mid-session: the next
// call fails fast with class unavailable, and after the supervisor's
// restart calls succeed again; shutting toolgate down leaves no process.
func TestUpstreamRestart(t *testing.T) {
	entry := everythingEntry(t)
	marker := "TG_E2E_MARK=" + strconv.FormatInt(time.Now().UnixNano(), 36)
	name, value, _ := strings.Cut(marker, "=")
	srv := startServe(t, "upstreams:\n  - name: ev\n    transport: stdio\n    command: node\n    args: [\""+entry+"\", stdio]\n    env: {"+name+": "+value+"}\n")
	waitMetric(t, srv.URL, "toolgate_upstream_up", map[string]string{"upstream": "ev"}, 1)
	c := connect(t, streamableHTTP, srv)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	echo := func() *mcp.CallToolResult {
		t.Helper()
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = "ev__echo", map[string]any{"message": "hi"}
		res, err := c.CallTool(ctx, req)
		if err != nil {
			t.Fatalf("ev__echo: %v", err)
		}
		return res
	}
	if res := echo(); res.IsError {
		t.Fatalf("ev__echo before the kill = %+v", res)
	}
	pids := pidsWithEnv(t, marker)
	if len(pids) != 1 {
		t.Fatalf("found %d upstream processes with %s, want 1", len(pids), marker)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitMetric(t, srv.URL, "toolgate_upstream_up", map[string]string{"upstream": "ev"}, 0)
	start := time.Now()
	res := echo()
	if !res.IsError || res.Meta == nil || res.Meta.AdditionalFields[errorClassMetaKey] != "unavailable" {
		// The supervisor may already have restarted it; then the call works.
		if res.IsError {
			t.Fatalf("ev__echo right after the kill = %+v, want an unavailable error or a success", res)
		}
	} else if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the unavailable error took %s, want it fast", d)
	}
	waitMetric(t, srv.URL, "toolgate_upstream_up", map[string]string{"upstream": "ev"}, 1)
	if res := echo(); res.IsError {
		t.Fatalf("ev__echo after the restart = %+v", res)
	}
	text := scrape(t, srv.URL)
	if n, _ := metricValue(text, "toolgate_upstream_restarts_total", map[string]string{"upstream": "ev"}); n < 1 {
		t.Errorf("toolgate_upstream_restarts_total = %v, want at least 1", n)
	}
	srv.Stop(t)
	if left := pidsWithEnv(t, marker); len(left) != 0 {
		t.Errorf("processes %v outlived toolgate", left)
	}
}
