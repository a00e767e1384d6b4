package surface

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/internal/principal"
)

func raws(entries ...string) []json.RawMessage {
	out := make([]json.RawMessage, len(entries))
	for i, e := range entries {
		out[i] = json.RawMessage(e)
	}
	return out
}

// put puts c as source's catalog and returns what the change served.
func put(s *Set, source string, c *Catalog) *Listing {
	var got *Listing
	s.Put(source, c, func(l *Listing) { got = l })
	return got
}

func uris(rs []Resource) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Def.URI)
	}
	return out
}

// TestPutFirstSourceWins pins the merge: what two sources both list is
// served from the one whose name sorts first, whichever came first, and
// a kind is reported changed only when what it lists changed.
func TestPutFirstSourceWins(t *testing.T) {
	s := New(nil)
	b := &Catalog{
		Resources: raws(`{"uri":"file:///x","name":"x from b"}`, `{"uri":"file:///b","name":"b"}`, `{"name":"no uri"}`),
		Templates: raws(`{"uriTemplate":"db://{t}","name":"t"}`),
		Prompts:   []CatalogPrompt{{Name: "greet", Orig: "hello", Raw: json.RawMessage(`{"name":"hello"}`)}},
	}
	l := put(s, "b", b)
	if !l.ResourcesChanged || !l.TemplatesChanged || !l.PromptsChanged {
		t.Fatalf("the first Put changed %v %v %v, want every kind", l.ResourcesChanged, l.TemplatesChanged, l.PromptsChanged)
	}
	if diff := cmp.Diff([]string{"file:///x", "file:///b"}, uris(l.Resources)); diff != "" {
		t.Errorf("resources (-want +got):\n%s", diff)
	}
	if len(l.Prompts) != 1 || l.Prompts[0].Def.Name != "greet" || l.Prompts[0].Orig != "hello" || l.Prompts[0].Cat != b {
		t.Errorf("prompts = %+v, want greet, served as the source's hello", l.Prompts)
	}

	a := &Catalog{Resources: raws(`{"uri":"file:///x","name":"x from a"}`)}
	l = put(s, "a", a)
	if !l.ResourcesChanged || l.TemplatesChanged || l.PromptsChanged {
		t.Errorf("adding a's resource changed %v %v %v, want resources only", l.ResourcesChanged, l.TemplatesChanged, l.PromptsChanged)
	}
	if got := s.Current().Owner("file:///x"); got != a {
		t.Errorf("Owner(file:///x) is b's, want a's: a sorts first")
	}
	if got := s.Current().Owner("db://orders"); got != b {
		t.Errorf("Owner(db://orders) = %v, want b's template", got)
	}
	if got := s.Current().Owner("mem://none"); got != nil {
		t.Errorf("Owner(mem://none) = %v, want nil", got)
	}
	if got := s.Current().TemplateOwner("db://{t}"); got != b {
		t.Errorf("TemplateOwner(db://{t}) = %v, want b's", got)
	}

	l = put(s, "a", nil)
	if got := s.Current().Owner("file:///x"); got != b {
		t.Errorf("after a is removed Owner(file:///x) = %v, want b's", got)
	}
	if !l.ResourcesChanged {
		t.Error("removing a's catalog left the resources unchanged")
	}
	if l = put(s, "a", nil); l.ResourcesChanged || l.TemplatesChanged || l.PromptsChanged {
		t.Error("removing a catalog that is not there changed a kind")
	}
}

// denyPolicy permits every tool but those matching deny.
type denyPolicy struct{ deny string }

func (p denyPolicy) Permits(tool string) bool {
	ok, _ := path.Match(p.deny, tool)
	return !ok
}
func (denyPolicy) Take() time.Duration { return 0 }

// TestVisible pins who may see a catalog: any principal without a
// policy; one whose policy permits a tool of the source; for a source
// serving no tools, one whose policy permits its namespace.
func TestVisible(t *testing.T) {
	s := New(nil)
	tools := &Catalog{Resources: raws(`{"uri":"t://1","name":"1"}`), Namespace: "t__"}
	bare := &Catalog{Resources: raws(`{"uri":"b://1","name":"1"}`), Namespace: "b__"}
	nameless := &Catalog{Resources: raws(`{"uri":"n://1","name":"1"}`)}
	put(s, "upstream:t", tools)
	put(s, "upstream:b", bare)
	put(s, "upstream:n", nameless)
	s.SetTools(map[string][]string{"upstream:t": {"t__a", "t__b"}})

	for _, tc := range []struct {
		name string
		id   *principal.Identity
		want []string // the readable URIs
	}{
		{"no identity", nil, []string{"b://1", "n://1", "t://1"}},
		{"no policy", &principal.Identity{Name: "x"}, []string{"b://1", "n://1", "t://1"}},
		{"one tool permitted", &principal.Identity{Name: "x", Policy: denyPolicy{deny: "t__a"}}, []string{"b://1", "t://1"}},
		{"every tool denied", &principal.Identity{Name: "x", Policy: denyPolicy{deny: "t__*"}}, []string{"b://1"}},
		{"namespace denied", &principal.Identity{Name: "x", Policy: denyPolicy{deny: "b__*"}}, []string{"t://1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, uri := range []string{"b://1", "n://1", "t://1", "none://1"} {
				if s.Readable(tc.id, uri) {
					got = append(got, uri)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Readable (-want +got):\n%s", diff)
			}
			res, _ := s.Resources(tc.id, "")
			var listed []string
			for _, r := range res {
				listed = append(listed, r.URI)
			}
			if diff := cmp.Diff(tc.want, listed); diff != "" {
				t.Errorf("Resources (-want +got):\n%s", diff)
			}
		})
	}
}

// TestResourcesPageByNameAndURI pins the paging: resources of one name
// are all listed, in URI order, across page boundaries.
func TestResourcesPageByNameAndURI(t *testing.T) {
	s := New(nil)
	var rs []string
	for i := range 2*PageSize + 10 {
		rs = append(rs, fmt.Sprintf(`{"uri":"r://%04d","name":"same"}`, 2*PageSize+10-i))
	}
	put(s, "s", &Catalog{Resources: raws(rs...)})
	var got []string
	cursor := mcp.Cursor("")
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatal("more than 3 pages")
		}
		page, next := s.Resources(nil, cursor)
		if len(page) > PageSize {
			t.Fatalf("a page of %d, want at most %d", len(page), PageSize)
		}
		for _, r := range page {
			got = append(got, r.URI)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if len(got) != len(rs) || !slices.IsSorted(got) {
		t.Errorf("listed %d resources (sorted: %v), want %d in URI order", len(got), slices.IsSorted(got), len(rs))
	}
}

// TestLevelsPassTheMostVerbose pins the level passed on: the most
// verbose any session set, passed only when it changes.
func TestLevelsPassTheMostVerbose(t *testing.T) {
	var l Levels
	var passed []mcp.LoggingLevel
	pass := func(v mcp.LoggingLevel) { passed = append(passed, v) }
	l.Set("a", mcp.LoggingLevelWarning, pass)
	l.Set("b", mcp.LoggingLevelDebug, pass)
	l.Set("a", mcp.LoggingLevelError, pass) // b's debug is still the most verbose
	l.Forget("b")
	l.Set("a", mcp.LoggingLevelInfo, pass)
	want := []mcp.LoggingLevel{mcp.LoggingLevelWarning, mcp.LoggingLevelDebug, mcp.LoggingLevelInfo}
	if diff := cmp.Diff(want, passed); diff != "" {
		t.Errorf("levels passed on (-want +got):\n%s", diff)
	}
}
