package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/registry"
)

// newRepairGateway is newGateway with namespaced tools: fs__read_file, and
// write_file under two namespaces. Each answers with its own name.
func newRepairGateway(t *testing.T) *Gateway {
	t.Helper()
	g, _ := newGateway(t, func(c *config.Config) { c.BatchTool = true })
	for _, name := range []string{"fs__read_file", "fs__write_file", "git__write_file"} {
		err := g.RegisterStateless(registry.Tool{Name: name, Description: name},
			func(context.Context, map[string]any) (executors.Result, error) { return executors.Text(name), nil })
		if err != nil {
			t.Fatalf("RegisterStateless(%s): %v", name, err)
		}
	}
	return g
}

// repairs returns how many repairs of kind g has counted, as /metrics
// shows it.
func repairs(t *testing.T, g *Gateway, kind registry.RepairKind) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	g.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	prefix := fmt.Sprintf("toolgate_name_repairs_total{kind=%q} ", kind)
	for line := range strings.Lines(rec.Body.String()) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err != nil {
				t.Fatalf("/metrics: %q: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("/metrics lacks %s", prefix)
	return 0
}

// TestNamespaceRepair checks that a name with a missing or wrong namespace
// runs the one tool it can mean, counted once per call by kind, through
// Gateway.Call and toolgate_batch.
func TestNamespaceRepair(t *testing.T) {
	g := newRepairGateway(t)
	for i, name := range []string{"read_file", "files__read_file"} {
		res, err := g.Call(t.Context(), name, nil, nil)
		if err != nil || res.IsError || resultText(t, res) != "fs__read_file" {
			t.Fatalf("Call(%s) = %+v, %v, want the result of fs__read_file", name, res, err)
		}
		if got := repairs(t, g, registry.RepairNamespace); got != float64(i+1) {
			t.Errorf("after Call(%s), namespace repairs = %v, want %d", name, got, i+1)
		}
	}
	if _, err := g.Call(t.Context(), "ECHO", json.RawMessage(`{"text":"x"}`), nil); err != nil {
		t.Fatal(err)
	}
	if got := repairs(t, g, registry.RepairCase); got != 1 {
		t.Errorf("case repairs = %v, want 1", got)
	}

	out := batchOf(t, g, `{"calls":[{"tool":"read_file"},{"tool":"write_file"}]}`, nil)
	if len(out.Results) != 2 || out.OK != 1 || out.Failed != 1 {
		t.Fatalf("batch = %+v, want read_file ok and write_file refused", out)
	}
	if got := repairs(t, g, registry.RepairNamespace); got != 3 {
		t.Errorf("after the batch, namespace repairs = %v, want 3", got)
	}

	_, err := g.Call(t.Context(), "write_file", nil, nil)
	nf, ok := errors.AsType[*registry.NotFoundError](err)
	if !ok || !nf.Ambiguous || !slices.Equal(nf.Suggestions, []string{"fs__write_file", "git__write_file"}) {
		t.Errorf("Call(write_file) error = %v, want ambiguous between fs__write_file and git__write_file", err)
	}

	off, _ := newGateway(t, func(c *config.Config) { c.Guards.NameRepair = false })
	if err := off.RegisterStateless(registry.Tool{Name: "fs__read_file"},
		func(context.Context, map[string]any) (executors.Result, error) { return executors.Text("x"), nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := off.Call(t.Context(), "read_file", nil, nil); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("with name_repair off, Call(read_file) error = %v, want ErrNotFound", err)
	}
}

// TestNamespaceRepairOverHTTP checks that the front repairs a missing
// namespace (counting it once) and answers an ambiguous name with -32602
// listing every candidate in data.suggestions.
func TestNamespaceRepairOverHTTP(t *testing.T) {
	g := newRepairGateway(t)
	srv := serveHTTP(t, g)
	s := newRawSession(t, srv.URL+"/mcp")

	r := s.call("tools/call", `{"name":"read_file","arguments":{}}`)
	if r.Error != nil || !strings.Contains(string(r.Result), `"text":"fs__read_file"`) {
		t.Fatalf("tools/call read_file = %s %+v, want the result of fs__read_file", r.Result, r.Error)
	}
	if got := repairs(t, g, registry.RepairNamespace); got != 1 {
		t.Errorf("namespace repairs = %v, want 1", got)
	}

	r = s.call("tools/call", `{"name":"write_file","arguments":{}}`)
	if r.Error == nil || r.Error.Code != mcp.INVALID_PARAMS {
		t.Fatalf("tools/call write_file = %s %+v, want JSON-RPC -32602", r.Result, r.Error)
	}
	if want := []string{"fs__write_file", "git__write_file"}; !slices.Equal(r.Error.Data.Suggestions, want) {
		t.Errorf("data.suggestions = %v, want %v", r.Error.Data.Suggestions, want)
	}
	if want := `tool name "write_file" is ambiguous: it could be "fs__write_file", "git__write_file"`; !strings.Contains(r.Error.Message, want) {
		t.Errorf("message = %q, want it to contain %q", r.Error.Message, want)
	}
	if got := repairs(t, g, registry.RepairNamespace); got != 1 {
		t.Errorf("after the refused call, namespace repairs = %v, want 1", got)
	}
}

// TestRepairKeepsConfiguredNamespace checks that a call naming a
// configured upstream that has not listed its tools (not connected, or
// never) is not moved to another source's tool of the same name.
func TestRepairKeepsConfiguredNamespace(t *testing.T) {
	g, _ := newGateway(t, func(c *config.Config) {
		c.Upstreams = []config.Upstream{{Name: "fsnw", Transport: "stdio", Command: "/nonexistent", Isolation: "shared", StartupTimeout: config.Duration(time.Second)}}
	})
	if err := g.RegisterStateless(registry.Tool{Name: "fs__write_file"}, func(context.Context, map[string]any) (executors.Result, error) {
		return executors.Text("wrote"), nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Call(t.Context(), "fsnw__write_file", nil, nil); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("Call(fsnw__write_file) error = %v, want not found: fsnw is a namespace of its own", err)
	}
	if res, err := g.Call(t.Context(), "files__write_file", nil, nil); err != nil || resultText(t, res) != "wrote" {
		t.Errorf("Call(files__write_file) = %v, %v; want fs__write_file (files is no namespace)", res, err)
	}
}
