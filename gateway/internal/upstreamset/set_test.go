package upstreamset

import (
	"context"
	"errors"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"go.uber.org/goleak"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors/mcpup"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// mcpServer is the URL of a real MCP server over streamable HTTP with one
// tool.
func mcpServer(t *testing.T) string {
	t.Helper()
	s := server.NewMCPServer("up", "1")
	s.AddTool(mcp.NewTool("ping"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("pong"), nil
	})
	h := server.NewStreamableHTTPServer(s, server.WithStateful(true))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { _ = h.Shutdown(context.Background()) })
	return srv.URL
}

// upstream builds (without starting) the upstream cfg.
func upstream(t *testing.T, cfg config.Upstream) *Upstream {
	t.Helper()
	if cfg.Transport == "" {
		cfg.Transport, cfg.URL = "streamable-http", "http://127.0.0.1:1/mcp"
	}
	m, err := mcpup.New([]mcpup.Upstream{Spec(cfg, nil)}, nil)
	if err != nil {
		t.Fatalf("mcpup.New(%s) = %v", cfg.Name, err)
	}
	return &Upstream{Config: cfg, Manager: m}
}

// TestSetStartsWhatIsPutAfterStart: an upstream put before Start waits for
// it; one put after Start connects at once; Wait returns when every
// upstream is up.
func TestSetStartsWhatIsPutAfterStart(t *testing.T) {
	var s Set
	defer s.Close()
	if err := s.Wait(t.Context()); err != nil || s.Status() != nil {
		t.Fatalf("an empty set: Wait = %v, Status = %v; want nil, nil", err, s.Status())
	}
	url := mcpServer(t)
	s.Put(upstream(t, config.Upstream{Name: "a", Transport: "streamable-http", URL: url}))
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if err := s.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait before Start = %v, want the deadline: nothing was started", err)
	}
	s.Start()
	s.Put(upstream(t, config.Upstream{Name: "b", Transport: "streamable-http", URL: url}))
	ctx, cancel = context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := s.Wait(ctx); err != nil {
		t.Fatalf("Wait after Start = %v", err)
	}
	if st := s.Status(); !st["a"] || !st["b"] || len(st) != 2 {
		t.Errorf("Status = %v, want a and b up", st)
	}
}

// TestSetPutTake: Put replaces the upstream of its name and returns it,
// Take removes it, and the lookups follow.
func TestSetPutTake(t *testing.T) {
	var s Set
	defer s.Close()
	prefix := "p_"
	a1 := upstream(t, config.Upstream{Name: "a"})
	a2 := upstream(t, config.Upstream{Name: "a", Prefix: &prefix})
	b := upstream(t, config.Upstream{Name: "b", OAuth: &config.UpstreamOAuth{Grant: "client_credentials"}})
	if old := s.Put(a1); old != nil {
		t.Fatalf("Put(a) into an empty set = %v, want nil", old)
	}
	s.Put(b)
	if ns := s.Namespace("a"); ns != "a__" {
		t.Errorf("Namespace(a) = %q, want a__", ns)
	}
	if old := s.Put(a2); old != a1 {
		t.Fatalf("Put(a again) = %v, want the first a", old)
	}
	_ = a1.Manager.Close()
	if s.Get("a") != a2.Manager || s.Namespace("a") != "p_" || s.Namespace("c") != "" {
		t.Errorf("after replacing a: Get(a) is not the new one, or Namespace(a) = %q (want p_), Namespace(c) = %q (want \"\")", s.Namespace("a"), s.Namespace("c"))
	}
	if got := s.All(); !slices.Equal(got, []*mcpup.Manager{a2.Manager, b.Manager}) {
		t.Errorf("All = %v, want a's and b's managers in name order", got)
	}
	if got := s.WithOAuth(); !slices.Equal(got, []string{"b"}) {
		t.Errorf("WithOAuth = %v, want [b]", got)
	}
	if got := s.Take("a"); got != a2 {
		t.Fatalf("Take(a) = %v, want the second a", got)
	}
	_ = a2.Manager.Close()
	if s.Take("a") != nil || s.Get("a") != nil {
		t.Error("a is still in the set after Take")
	}
	if c := s.Configured(); len(c) != 1 || c["b"].Name != "b" {
		t.Errorf("Configured = %v, want b alone", c)
	}
}

func TestSame(t *testing.T) {
	a := config.Upstream{Name: "a", Transport: "stdio", Command: "x", Args: []string{"1"}}
	b := a
	b.Args = []string{"1"}
	if !Same(a, b) {
		t.Error("Same = false for equal settings in different slices")
	}
	b.Args = []string{"2"}
	if Same(a, b) {
		t.Error("Same = true for different args")
	}
}
