package restsource

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/toolgate/toolgate/config/configtest"
	"github.com/toolgate/toolgate/executors/rest"
	"github.com/toolgate/toolgate/executors/rest/openapi"
	"github.com/toolgate/toolgate/gateway/internal/catalogtool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// bound is what a Loader told its Bound of one tool.
type bound struct{ source, url string }

// newLoader returns a loader over a real REST executor, and what it tells
// its Bound.
func newLoader(t *testing.T) (*Loader, *[]bound) {
	t.Helper()
	ex := rest.New(nil)
	t.Cleanup(ex.Close)
	var told []bound
	return &Loader{
		Compile: ex.Add,
		NewCatalog: func(name string, d *openapi.Document) *catalogtool.Catalog {
			return catalogtool.New(name, d, catalogtool.Env{Compile: ex.Add})
		},
		Bound: func(source, url string) { told = append(told, bound{source, url}) },
		State: &State{},
	}, &told
}

func errTexts(errs []error) string {
	var b strings.Builder
	for _, e := range errs {
		b.WriteString(e.Error() + "\n")
	}
	return b.String()
}

// TestAll checks that a rest tool and an OpenAPI source's operation
// become bound tools, each told to Bound with its source and URL.
func TestAll(t *testing.T) {
	in := configtest.Lines(
		"rest:",
		"  - {name: ping, url: 'http://127.0.0.1:9/ping'}",
		"openapi:",
		"  - {name: s, spec: a.yaml}",
	)
	l, told := newLoader(t)
	tools, cats, problems := l.All(t.Context(), configtest.ParseIn(t, in, map[string]string{"a.yaml": configtest.TinyOpenAPI}))
	if len(problems) > 0 || len(cats) > 0 {
		t.Fatalf("All = %d catalogs, problems:\n%s", len(cats), errTexts(problems))
	}
	var names []string
	for _, b := range tools {
		names = append(names, b.Tool.Name)
	}
	if !slices.Equal(names, []string{"ping", "s__list"}) {
		t.Errorf("tools %q, want ping and s__list", names)
	}
	want := []bound{{"rest:ping", "http://127.0.0.1:9/ping"}, {"openapi:s", "http://127.0.0.1:9/list"}}
	if !slices.Equal(*told, want) {
		t.Errorf("Bound told %v, want %v", *told, want)
	}
}

// TestAllTooLarge checks the bound on a source served as one tool per
// operation: a document whose tools pass maxSourceToolBytes is refused
// with a problem that says to serve it with catalog: search, and loads
// that way.
func TestAllTooLarge(t *testing.T) {
	old := maxSourceToolBytes
	maxSourceToolBytes = 1 << 20
	t.Cleanup(func() { maxSourceToolBytes = old })
	var doc strings.Builder
	doc.WriteString(`{"openapi":"3.0.3","info":{"title":"big","version":"1"},"servers":[{"url":"http://127.0.0.1:9"}],"paths":{`)
	desc := strings.Repeat("x", 300<<10)
	n := 4 // 1.2 MiB of descriptions
	for i := range n {
		if i > 0 {
			doc.WriteString(",")
		}
		fmt.Fprintf(&doc, `"/op%d":{"get":{"operationId":"op%d","description":"%s","responses":{"200":{"description":"OK"}}}}`, i, i, desc)
	}
	doc.WriteString("}}")
	files := map[string]string{"big.json": doc.String()}
	in := configtest.Lines("openapi:", "  - {name: big, spec: big.json, max_spec_bytes: 67108864}")
	l, _ := newLoader(t)
	tools, _, problems := l.All(t.Context(), configtest.ParseIn(t, in, files))
	want := fmt.Sprintf("t.yaml:2:23: openapi[0].spec: its %d operations make more tools than a client can list: their input schemas and descriptions pass %d MiB before the last; "+
		"serve it with catalog: search", n, maxSourceToolBytes>>20)
	if len(tools) > 0 || len(problems) != 1 || !strings.Contains(problems[0].Error(), want) {
		t.Errorf("All = %d tools, problems:\n%s\nwant none and one containing %q", len(tools), errTexts(problems), want)
	}

	in = configtest.Lines("openapi:", "  - {name: big, spec: big.json, max_spec_bytes: 67108864, catalog: search}")
	l, _ = newLoader(t)
	tools, cats, problems := l.All(t.Context(), configtest.ParseIn(t, in, files))
	if len(problems) > 0 {
		t.Fatalf("All with catalog: search: problems:\n%s", errTexts(problems))
	}
	behind := 0
	for _, b := range tools {
		if b.Tool.Source == "openapi:big" {
			behind++
		}
	}
	if len(cats) != 1 || cats[0].Source() != "openapi:big" || behind != n {
		t.Errorf("All = %d catalogs, %d tools of big; want its catalog and %d tools", len(cats), behind, n)
	}
}

// TestOpenAPIWhileServing checks loading one source while serving: a
// source that failed before loads once its document is there, and what
// its failure left behind is gone; a source behind a catalog is refused.
func TestOpenAPIWhileServing(t *testing.T) {
	in := configtest.Lines(
		"rest:",
		"  - {name: ping, url: 'http://127.0.0.1:9/ping'}",
		"openapi:",
		"  - {name: late, spec: a.yaml}",
		"  - {name: cat, spec: a.yaml, catalog: search}",
	)
	cfg := configtest.ParseIn(t, in, nil)
	l, _ := newLoader(t)
	l.State.failed("late", fmt.Errorf("not there yet"))
	if err := os.WriteFile("a.yaml", []byte(configtest.TinyOpenAPI), 0o600); err != nil {
		t.Fatal(err)
	}
	tools, problems := l.OpenAPI(t.Context(), cfg, 0)
	if len(problems) > 0 || len(tools) != 1 || tools[0].Tool.Name != "late__list" {
		t.Errorf("OpenAPI(late) = %d tools, problems:\n%s\nwant late__list", len(tools), errTexts(problems))
	}
	if down, probs := l.State.Unavailable(), l.State.Problems(); len(down) > 0 || len(probs) > 0 {
		t.Errorf("after loading late: unavailable %q, problems %q; want none", down, probs)
	}
	_, problems = l.OpenAPI(t.Context(), cfg, 1)
	want := "t.yaml:5:40: openapi[1].catalog: a source served with catalog: search cannot be added or changed while serving; restart toolgate"
	if len(problems) != 1 || problems[0].Error() != want {
		t.Errorf("OpenAPI(cat) problems:\n%s\nwant %s", errTexts(problems), want)
	}
}

// TestDocChanged checks how a reload tells a changed document: unchanged
// is not, rewritten or gone is, and a source never loaded is.
func TestDocChanged(t *testing.T) {
	in := configtest.Lines("openapi:", "  - {name: s, spec: a.yaml}")
	cfg := configtest.ParseIn(t, in, map[string]string{"a.yaml": configtest.TinyOpenAPI})
	l, _ := newLoader(t)
	o := cfg.OpenAPI[0]
	if !l.DocChanged(t.Context(), o) {
		t.Error("DocChanged before loading = false, want true")
	}
	if _, _, problems := l.All(t.Context(), cfg); len(problems) > 0 {
		t.Fatal(errTexts(problems))
	}
	if l.DocChanged(t.Context(), o) {
		t.Error("DocChanged of the same document = true")
	}
	if err := os.WriteFile("a.yaml", []byte(configtest.TinyOpenAPI+"# edited\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if !l.DocChanged(t.Context(), o) {
		t.Error("DocChanged of an edited document = false")
	}
	if err := os.Remove("a.yaml"); err != nil {
		t.Fatal(err)
	}
	if !l.DocChanged(t.Context(), o) {
		t.Error("DocChanged of a document gone = false")
	}
}
