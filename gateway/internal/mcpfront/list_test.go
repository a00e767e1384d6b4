package mcpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/internal/principal"
	"github.com/toolgate/toolgate/registry"
)

// prefixPolicy permits the tools whose names start with its prefix.
type prefixPolicy string

func (p prefixPolicy) Permits(tool string) bool { return strings.HasPrefix(tool, string(p)) }
func (prefixPolicy) Take() time.Duration        { return 0 }

// listFront is a front with tools a000…a149 and z000…z149, whose
// principal (X-Test-Principal) may use the tools starting with
// X-Test-Prefix; logs go to logs.
func listFront(t *testing.T, logs io.Writer, extra ...Tool) (*Front, string) {
	t.Helper()
	auth := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := &principal.Identity{Name: r.Header.Get("X-Test-Principal")}
			if p := r.Header.Get("X-Test-Prefix"); p != "" {
				id.Policy = prefixPolicy(p)
			}
			next.ServeHTTP(w, r.WithContext(principal.With(r.Context(), id)))
		})
	}
	f := New(&fakeBackend{reg: registry.New()}, Options{Name: "toolgate", Version: "test", MCPPath: "/mcp",
		MaxSessions: 100, MaxBodyBytes: 1 << 20, ReadTimeout: 10 * time.Second, Authenticate: auth,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	t.Cleanup(f.Close)
	var tools []Tool
	for _, p := range []string{"z", "a"} {
		for i := range 150 {
			tools = append(tools, Tool{Def: &registry.Tool{Name: fmt.Sprintf("%s%03d", p, i), Source: "test"}, Call: func(context.Context, *Request) *executors.Result { return new(executors.Text("ok")) }})
		}
	}
	f.SetTools(append(tools, extra...), nil)
	mux := http.NewServeMux()
	f.Mount(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return f, srv.URL + "/mcp"
}

// listPage POSTs tools/list with cursor in session sid as a principal
// permitted prefix, and returns the names listed, the next cursor and the
// error, if any.
func listPage(t *testing.T, url, sid, prefix, cursor string) (names []string, next string, rpcErr *mcp.JSONRPCErrorDetails) {
	t.Helper()
	params := "{}"
	if cursor != "" {
		params = fmt.Sprintf(`{"cursor":%q}`, cursor)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":`+params+`}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("X-Test-Principal", "p")
	req.Header.Set("X-Test-Prefix", prefix)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var out struct {
		Result *struct {
			Tools      []mcp.Tool `json:"tools"`
			NextCursor string     `json:"nextCursor"`
		} `json:"result"`
		Error *mcp.JSONRPCErrorDetails `json:"error"`
	}
	if err := json.Unmarshal(bytes.TrimPrefix(bytes.TrimSpace(body), []byte("data: ")), &out); err != nil {
		t.Fatalf("tools/list answer %q: %v", body, err)
	}
	if out.Error != nil {
		return nil, "", out.Error
	}
	for _, tool := range out.Result.Tools {
		names = append(names, tool.Name)
	}
	return names, out.Result.NextCursor, nil
}

// TestListPagesPermittedTools checks that tools/list pages through the
// tools a principal may use, full pages in name order: mcp-go paged every
// tool and the filter then emptied the pages of a principal permitted only
// the tools late in the order.
func TestListPagesPermittedTools(t *testing.T) {
	_, url := listFront(t, io.Discard)
	sid, code := sessionAs(t, url, "p")
	if sid == "" {
		t.Fatalf("initialize: HTTP %d", code)
	}
	for _, tc := range []struct {
		prefix string
		pages  []int // tools per page
	}{{"z", []int{100, 50}}, {"", []int{100, 100, 100}}, {"a1", []int{50}}, {"none", []int{0}}} {
		var got []int
		var all []string
		cursor := ""
		for range 5 {
			names, next, rpcErr := listPage(t, url, sid, tc.prefix, cursor)
			if rpcErr != nil {
				t.Fatalf("prefix %q: %+v", tc.prefix, rpcErr)
			}
			got = append(got, len(names))
			all = append(all, names...)
			if cursor = next; cursor == "" {
				break
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.pages) {
			t.Errorf("prefix %q: pages of %v tools, want %v", tc.prefix, got, tc.pages)
		}
		for i, n := range all {
			if !strings.HasPrefix(n, tc.prefix) || i > 0 && all[i-1] >= n {
				t.Errorf("prefix %q: %q at %d is not permitted or out of order", tc.prefix, n, i)
				break
			}
		}
	}
	if _, _, rpcErr := listPage(t, url, sid, "", "not base64!"); rpcErr == nil || rpcErr.Code != mcp.INVALID_PARAMS || !strings.Contains(rpcErr.Message, "nextCursor") {
		t.Errorf("an invalid cursor got %+v, want -32602 saying which cursor to send", rpcErr)
	}
}

// TestListLeavesOutInvalidHeaderTool checks that a tool whose schema has
// an invalid x-mcp-header annotation (an upstream's, say) is left out
// with a warning naming it, and the other tools are served: mcp-go's
// AddTools panicked on it, ending the process.
func TestListLeavesOutInvalidHeaderTool(t *testing.T) {
	var logs bytes.Buffer
	bad := Tool{Def: &registry.Tool{Name: "bad", Source: "up", InputSchema: json.RawMessage(`{"type":"object","properties":{"r":{"type":"object","x-mcp-header":"Region"}}}`)},
		Call: func(context.Context, *Request) *executors.Result { return new(executors.Text("ok")) }}
	f, url := listFront(t, &logs, bad)
	if (*f.tools.Load())["bad"] != nil {
		t.Error("the tool with an invalid x-mcp-header annotation is served")
	}
	if !strings.Contains(logs.String(), "x-mcp-header") || !strings.Contains(logs.String(), "tool=bad") {
		t.Errorf("no warning naming the tool left out:\n%s", logs.String())
	}
	sid, _ := sessionAs(t, url, "p")
	if names, _, rpcErr := listPage(t, url, sid, "a", ""); rpcErr != nil || len(names) != 100 {
		t.Errorf("tools/list beside the tool left out: %d tools, error %+v", len(names), rpcErr)
	}
}

// TestEncodeListedShares: a tool's listed encoding is what json.Marshal
// gives, and holds a description with nothing to escape and a compact
// input schema by reference, not as second copies; a description or
// schema the encoding changes is held encoded.
func TestEncodeListedShares(t *testing.T) {
	const plain = `{"type":"object","properties":{"q":{"type":"string"}}}`
	for _, tc := range []struct {
		name, desc, schema string
		descShared, shared bool
	}{
		{"schema escaped", `finds`, `{"type":"object","properties":{"q":{"type":"string","description":"a <b> query"}}}`, true, false},
		{"both shared", `finds things`, plain, true, true},
		{"description escaped", `says "inputSchema": {}`, plain, false, true},
		{"description with <", `a <b> c`, plain, false, true},
		{"no description", ``, plain, false, true},
		{"spaced", `finds`, `{ "type": "object" }`, true, false},
		{"description like the key", `"description":`, `{ "type": "object" }`, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := mcp.Tool{Name: "find", Description: tc.desc, RawInputSchema: json.RawMessage(tc.schema),
				Annotations: mcp.ToolAnnotation{Title: "Find"}}
			want, err := json.Marshal(w)
			if err != nil {
				t.Fatal(err)
			}
			l := encodeListed(&w)
			var got bytes.Buffer
			l.writeTo(&got)
			if !bytes.Equal(got.Bytes(), want) || l.len() != len(want) {
				t.Errorf("listed = %s (len %d), want %s", got.Bytes(), l.len(), want)
			}
			if shared := l.schema != nil && &l.schema[0] == &w.RawInputSchema[0]; shared != tc.shared {
				t.Errorf("schema shared = %v, want %v", shared, tc.shared)
			}
			if descShared := l.desc != ""; descShared != tc.descShared {
				t.Errorf("description shared = %v, want %v", descShared, tc.descShared)
			}
			if kept := len(want) - len(l.desc) - len(l.schema); len(l.own) != kept {
				t.Errorf("own holds %d bytes, want %d: the shared parts left out", len(l.own), kept)
			}
		})
	}
}
