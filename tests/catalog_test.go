package tests

// Tool search over every source (issue 30, item 1): server-everything,
// server-filesystem and a paged 5,000-tool upstream behind one gateway in
// catalog.mode: search, reached by the mcp-go client.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
)

// bulkTools is how many tools the paged fixture upstream serves.
const bulkTools = 5000

// searchResult is toolgate_search's result.
type searchResult struct {
	Tools []struct {
		Name    string `json:"name"`
		Summary string `json:"summary"`
	} `json:"tools"`
	Total int `json:"total"`
}

func (r searchResult) names() []string {
	var out []string
	for _, h := range r.Tools {
		out = append(out, h.Name)
	}
	return out
}

// searchTools runs toolgate_search with query over c.
func searchTools(t *testing.T, c *client.Client, query string, limit int) searchResult {
	t.Helper()
	res, err := callTool(t, c, "toolgate_search", map[string]any{"query": query, "limit": limit}, "")
	if err != nil || res.IsError {
		t.Fatalf("toolgate_search %q = %v, %v", query, res, err)
	}
	var out searchResult
	if err := json.Unmarshal([]byte(resultText(res)), &out); err != nil {
		t.Fatalf("toolgate_search %q: %v in %s", query, err, resultText(res))
	}
	return out
}

// wantToolError calls name with args and checks the result is an error
// whose text starts with prefix.
func wantToolError(t *testing.T, c *client.Client, name string, args map[string]any, prefix string) {
	t.Helper()
	res, err := callTool(t, c, name, args, "")
	if err != nil || !res.IsError || !strings.HasPrefix(resultText(res), prefix) {
		text := ""
		if res != nil {
			text = resultText(res)
		}
		t.Errorf("%s %.80v = %.300s, %v; want an error starting %q", name, args, text, err, prefix)
	}
}

func TestCatalogSearchEverySource(t *testing.T) {
	fsEntry := npmEntry(t, "server-filesystem")
	evEntry := npmEntry(t, "server-everything")
	bulk := buildFakeUpstream(t)
	m := newProcMarker(t)
	dir := t.TempDir()
	hello := filepath.Join(dir, "hello.txt")
	if err := os.WriteFile(hello, []byte("hello from the catalog test\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const (
		devToken  = "dev-token-0123456789abcdef"
		nofsToken = "nofs-token-0123456789abcdef"
	)
	srv := serveUpstreams(t, m, fmt.Sprintf(`catalog: {mode: search}
auth:
  tokens:
    - {name: dev, token: %s}
    - {name: nofs, token: %s, deny: ["fs__*"]}
upstreams:
  - {name: ev, transport: stdio, command: node, args: [%q, stdio], env: %s}
  - {name: fs, transport: stdio, command: node, args: [%q, %q], env: %s}
  - {name: bulk, transport: stdio, command: %q, args: [many, "%d"], env: %s, startup_timeout: 60s}
  - {name: fake, transport: stdio, command: %q, env: %s}
`, devToken, nofsToken, evEntry, m.yaml(), fsEntry, dir, m.yaml(), bulk, bulkTools, m.yaml(), bulk, m.yaml()))
	dev, err := authClient(t, srv, devToken)
	if err != nil {
		t.Fatal(err)
	}
	nofs, err := authClient(t, srv, nofsToken)
	if err != nil {
		t.Fatal(err)
	}

	// The upstreams list their tools as they connect; the search tool
	// finds each source's once they have.
	pollUntil(t, upstreamTimeout, "every upstream's tools in the index", func() (bool, string) {
		var missing []string
		for _, q := range []string{"fs__read_text_file", "ev__echo", fmt.Sprintf("bulk__op_%05d", bulkTools-1), "fake__add_tool"} {
			if r := searchTools(t, dev, q, 1); len(r.Tools) == 0 || r.Tools[0].Name != q {
				missing = append(missing, q)
			}
		}
		return len(missing) == 0, fmt.Sprintf("not found yet: %v", missing)
	})

	t.Run("tools/list is the meta-tools", func(t *testing.T) {
		got := listNames(t, dev)
		if want := []string{"toolgate_call", "toolgate_describe", "toolgate_search"}; !slices.Equal(got, want) || len(got) > 10 {
			t.Errorf("tools/list = %v, want %v", got, want)
		}
		if r := searchTools(t, dev, "synthetic", 1); r.Total != bulkTools {
			t.Errorf("search synthetic: %d matches, want the %d tools of the paged upstream", r.Total, bulkTools)
		}
	})

	t.Run("search, describe, call", func(t *testing.T) {
		r := searchTools(t, dev, "read a file", 10)
		if !slices.Contains(r.names(), "fs__read_text_file") {
			t.Fatalf("search read a file = %v, want fs__read_text_file among them", r.names())
		}
		res, err := callTool(t, dev, "toolgate_describe", map[string]any{"name": "fs__read_text_file"}, "")
		if err != nil || res.IsError {
			t.Fatalf("describe fs__read_text_file = %v, %v", res, err)
		}
		var d struct {
			Name        string `json:"name"`
			InputSchema struct {
				Properties map[string]any `json:"properties"`
				Required   []string       `json:"required"`
			} `json:"inputSchema"`
		}
		if err := json.Unmarshal([]byte(resultText(res)), &d); err != nil || d.Name != "fs__read_text_file" || d.InputSchema.Properties["path"] == nil {
			t.Errorf("describe fs__read_text_file = %s (%v), want its schema with path", resultText(res), err)
		}
		res, err = callTool(t, dev, "toolgate_call", map[string]any{"name": "fs__read_text_file", "arguments": map[string]any{"path": hello}}, "")
		if err != nil || res.IsError || !strings.Contains(resultText(res), "hello from the catalog test") {
			t.Errorf("call fs__read_text_file = %v, %v; want the file's text", res, err)
		}
		res, err = callTool(t, dev, "toolgate_call", map[string]any{"name": "ev__echo", "arguments": map[string]any{"message": "hi"}}, "")
		if err != nil || res.IsError || !strings.Contains(resultText(res), "hi") {
			t.Errorf("call ev__echo = %v, %v", res, err)
		}
		// The direct call's validation, through the pipeline.
		wantToolError(t, dev, "toolgate_call", map[string]any{"name": "fs__read_text_file", "arguments": map[string]any{}}, "validation: ")
	})

	t.Run("a principal denied fs__* finds nothing there", func(t *testing.T) {
		r := searchTools(t, nofs, "read a file", 50)
		for _, n := range r.names() {
			if strings.HasPrefix(n, "fs__") {
				t.Errorf("nofs's search read a file = %v, want no fs__ tool", r.names())
				break
			}
		}
		wantToolError(t, nofs, "toolgate_describe", map[string]any{"name": "fs__read_text_file"}, `not_found: toolgate has no tool "fs__read_text_file"`)
		wantToolError(t, nofs, "toolgate_call", map[string]any{"name": "fs__read_text_file", "arguments": map[string]any{"path": hello}}, "permission: ")
	})

	t.Run("bad input gets a clear error", func(t *testing.T) {
		wantToolError(t, dev, "toolgate_search", map[string]any{"query": ""}, "validation: ")
		wantToolError(t, dev, "toolgate_search", map[string]any{"query": strings.Repeat("read ", 200_000)}, "validation: ")
		wantToolError(t, dev, "toolgate_search", map[string]any{"query": "?!.,;:"}, `validation: query "?!.,;:" has no words to search for`)
		wantToolError(t, dev, "toolgate_describe", map[string]any{"name": "fs__read_txt_file"}, `not_found: toolgate has no tool "fs__read_txt_file"; did you mean "fs__read_text_file"`)
		wantToolError(t, dev, "toolgate_call", map[string]any{"name": "nope"}, `not_found: toolgate has no tool "nope"`)
	})

	t.Run("an upstream's list_changed updates the index", func(t *testing.T) {
		if r := searchTools(t, dev, "added at runtime", 5); len(r.Tools) != 0 {
			t.Fatalf("search added at runtime = %v before add_tool", r.names())
		}
		res, err := callTool(t, dev, "toolgate_call", map[string]any{"name": "fake__add_tool"}, "")
		if err != nil || res.IsError {
			t.Fatalf("call fake__add_tool = %v, %v", res, err)
		}
		pollUntil(t, upstreamTimeout, "fake__late in the index", func() (bool, string) {
			r := searchTools(t, dev, "added at runtime", 5)
			return slices.Equal(r.names(), []string{"fake__late"}), fmt.Sprintf("search added at runtime = %v", r.names())
		})
	})
}
