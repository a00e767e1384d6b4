package catalogtool

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/internal/principal"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

// tracked returns a tracking catalog "fs" of the tools of source
// upstream:fs in reg, tracking them all.
func tracked(reg *fakeRegistry) *Catalog {
	c := NewTracking(TrackOptions{Name: "fs", Prefix: "fs__", Member: func(t *registry.Tool) bool { return t.Source == "upstream:fs" }},
		Env{Tool: reg.get})
	var all []*registry.Tool
	for _, t := range reg.tools {
		all = append(all, t)
	}
	c.Track(all, nil)
	return c
}

func fsRegistry() *fakeRegistry {
	reg := &fakeRegistry{tools: map[string]*registry.Tool{}}
	for _, t := range []registry.Tool{
		{Name: "fs__read_text_file", Source: "upstream:fs", Description: "Read the complete contents of a file from the file system as text.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"head":{"type":"number"}}}`)},
		{Name: "fs__write_file", Source: "upstream:fs", Description: "Create a new file or completely overwrite an existing file.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}}}`)},
		{Name: "fs__list_directory", Source: "upstream:fs", Title: "List a directory", Description: "Get a detailed listing of all files and directories in a specified path.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)},
		{Name: "fs__search", Source: "catalog:fs", Description: "the meta-tool"},
		{Name: "calc", Source: "go", Description: "Adds numbers."},
	} {
		reg.tools[t.Name] = &t
	}
	return reg
}

func searchNames(t *testing.T, c *Catalog, id *principal.Identity, query string) ([]string, error) {
	t.Helper()
	ctx := t.Context()
	if id != nil {
		ctx = principal.With(ctx, id)
	}
	res, err := metaExec{c: c, op: Search}.Execute(ctx, executors.Call{Args: map[string]any{"query": query}})
	if err != nil {
		return nil, err
	}
	var out struct{ Tools []hit }
	if err := json.Unmarshal([]byte(res.Content[0].Text), &out); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, h := range out.Tools {
		names = append(names, h.Name)
	}
	return names, nil
}

func TestTracking(t *testing.T) {
	reg := fsRegistry()
	c := tracked(reg)
	if c.Len() != 3 {
		t.Fatalf("Len = %d, want the 3 tools of upstream:fs (not its meta-tool, not calc)", c.Len())
	}
	tests := []struct {
		query string
		want  []string
	}{
		{"read a file", []string{"fs__read_text_file", "fs__write_file", "fs__list_directory"}},
		{"directory", []string{"fs__list_directory"}},
		{"content", []string{"fs__write_file", "fs__read_text_file"}}, // a parameter before a description
		{"adds", nil},
	}
	for _, tc := range tests {
		if got, err := searchNames(t, c, nil, tc.query); err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("search(%q) = %v, %v; want %v", tc.query, got, err, tc.want)
		}
	}

	// A principal denied fs__* finds, describes and resolves nothing.
	denied := &principal.Identity{Name: "eve", Policy: denyAll{}}
	if got, err := searchNames(t, c, denied, "file"); err != nil || len(got) != 0 {
		t.Errorf("eve's search = %v, %v; want nothing", got, err)
	}
	ctx := principal.With(t.Context(), denied)
	_, err := metaExec{c: c, op: Describe}.Execute(ctx, executors.Call{Args: map[string]any{"name": "fs__write_file"}})
	if retry.Classify(err) != retry.NotFound || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("eve describing fs__write_file = %v, want not_found suggesting nothing", err)
	}

	// A change: one tool gone, one replaced, one new.
	reg.tools["fs__move_file"] = &registry.Tool{Name: "fs__move_file", Source: "upstream:fs", Description: "Move or rename files."}
	c.Track([]*registry.Tool{reg.tools["fs__move_file"], {Name: "fs__write_file", Source: "upstream:fs", Description: "Replaced."}}, []string{"fs__list_directory", "fs__write_file"})
	if got, _ := searchNames(t, c, nil, "rename"); !slices.Equal(got, []string{"fs__move_file"}) {
		t.Errorf("search rename after the change = %v", got)
	}
	if got, _ := searchNames(t, c, nil, "directory"); len(got) != 0 {
		t.Errorf("search directory after its removal = %v", got)
	}
	if got, _ := searchNames(t, c, nil, "overwrite"); len(got) != 0 {
		t.Errorf("search overwrite after write_file was replaced = %v", got)
	}
	if name, err := c.Resolve("move_file", nil); err != nil || name != "fs__move_file" {
		t.Errorf("Resolve(move_file) = %q, %v", name, err)
	}
}

// denyAll is a policy that permits nothing.
type denyAll struct{}

func (denyAll) Permits(string) bool { return false }
func (denyAll) Take() time.Duration { return 0 }

func TestParseQuery(t *testing.T) {
	tests := []struct {
		name, q string
		want    []string
		wantErr string
	}{
		{"words", "Read a FILE", []string{"read", "file"}, ""},
		{"all punctuation", "?!.,", nil, "has no words to search for"},
		{"too long", strings.Repeat("x", maxQueryBytes+1), nil, "more than the 1000 allowed"},
		{"too many words", manyWords(maxQueryTerms + 1), nil, "words, more than the 16 allowed"},
	}
	for _, tc := range tests {
		got, err := parseQuery(tc.q)
		if tc.wantErr != "" {
			if retry.Classify(err) != retry.Validation || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: parseQuery = %v, want a validation error saying %q", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: parseQuery(%q) = %v, %v; want %v", tc.name, tc.q, got, err, tc.want)
		}
	}
}

func manyWords(n int) string {
	var ws []string
	for i := range n {
		ws = append(ws, fmt.Sprintf("word%c", 'a'+i))
	}
	return strings.Join(ws, " ")
}

// synthTools makes n tools of many sources, with names, descriptions and
// parameters drawn from a fixed vocabulary (seeded: the same every run).
func synthTools(n int) []*registry.Tool {
	verbs := []string{"get", "list", "create", "update", "delete", "search", "read", "write", "send", "sync", "export", "import"}
	nouns := []string{"file", "issue", "invoice", "customer", "order", "message", "calendar_event", "repository", "ticket", "user", "report", "payment", "document", "image", "webhook"}
	params := []string{"id", "path", "query", "limit", "cursor", "owner", "repo", "title", "body", "amount", "currency", "email", "start_date", "end_date", "tags"}
	r := rand.New(rand.NewPCG(1, 2))
	out := make([]*registry.Tool, n)
	for i := range n {
		v, o := verbs[r.IntN(len(verbs))], nouns[r.IntN(len(nouns))]
		var props []string
		for range 2 + r.IntN(4) {
			props = append(props, fmt.Sprintf(`%q:{"type":"string","description":"The %s."}`, params[r.IntN(len(params))], o))
		}
		out[i] = &registry.Tool{
			Name:        fmt.Sprintf("src%03d__%s_%s_%d", i%200, v, o, i),
			Source:      fmt.Sprintf("upstream:src%03d", i%200),
			Description: fmt.Sprintf("%s a %s of the account. Returns the %s as JSON, with its id and the time it was last changed.", strings.ToUpper(v[:1])+v[1:], strings.ReplaceAll(o, "_", " "), o),
			InputSchema: json.RawMessage(`{"type":"object","properties":{` + strings.Join(props, ",") + `}}`),
		}
	}
	return out
}

// BenchmarkSearch10k measures a search of the gateway-wide catalog over
// 10,000 tools: its latency (p50 and p99 over the run's searches), the
// index's memory, and the size of tools/list with every tool listed and
// with the three meta-tools instead. docs/benchmarks.md has the numbers.
func BenchmarkSearch10k(b *testing.B) {
	tools := synthTools(10_000)
	byName := make(map[string]*registry.Tool, len(tools))
	for _, t := range tools {
		byName[t.Name] = t
	}
	env := Env{Tool: func(n string) (*registry.Tool, bool) { t, ok := byName[n]; return t, ok }}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c := NewTracking(TrackOptions{Prefix: "toolgate_"}, env)
	c.Track(tools, nil)
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(c)
	indexMiB := float64(after.HeapAlloc-before.HeapAlloc) / (1 << 20)

	listed, _ := json.Marshal(listOf(tools))
	var metas []*registry.Tool
	for _, m := range c.Tools(nil) {
		metas = append(metas, &m.Tool)
	}
	meta, _ := json.Marshal(listOf(metas))

	queries := []string{"read a file", "create invoice", "list customers by email", "send message", "delete webhook", "export report as json", "payment amount currency", "zebra"}
	ctx := context.Background()
	var lat []time.Duration
	i := 0
	for b.Loop() {
		start := time.Now()
		if _, err := (metaExec{c: c, op: Search}).Execute(ctx, executors.Call{Args: map[string]any{"query": queries[i%len(queries)]}}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
		i++
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(indexMiB, "index-MiB")
	b.ReportMetric(float64(len(listed))/1024, "list-all-KiB")
	b.ReportMetric(float64(len(meta))/1024, "list-search-KiB")
}

// listOf is tools as tools/list shows them.
func listOf(tools []*registry.Tool) any {
	type wire struct {
		Name        string          `json:"name"`
		Title       string          `json:"title,omitempty"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"inputSchema"`
	}
	out := make([]wire, len(tools))
	for i, t := range tools {
		out[i] = wire{t.Name, t.Title, t.Description, t.InputSchema}
	}
	return map[string]any{"tools": out}
}
