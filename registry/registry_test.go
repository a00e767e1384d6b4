package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/toolgate/toolgate/schemas"
)

func tool(name, source string) Tool {
	return Tool{Name: name, Kind: Stateless, Source: source}
}

func names(ts []*Tool) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out
}

func mustAdd(t *testing.T, r *Registry, tools ...Tool) {
	t.Helper()
	if err := r.Add(tools...); err != nil {
		t.Fatalf("Add: %v", err)
	}
}

// errorLines splits a joined error into its messages.
func errorLines(err error) []string {
	if err == nil {
		return nil
	}
	return strings.Split(err.Error(), "\n")
}

func TestAdd(t *testing.T) {
	tests := []struct {
		name      string
		existing  []Tool
		add       []Tool
		wantErrs  []string // exact lines of the joined error; nil means success
		wantNames []string // registered names afterwards
	}{
		{
			name:      "ok",
			add:       []Tool{tool("calc", "builtin"), tool("clock_now", "builtin")},
			wantNames: []string{"calc", "clock_now"},
		},
		{
			name:      "all kinds",
			add:       []Tool{{Name: "a", Kind: Stateless, Source: "s"}, {Name: "b", Kind: Stateful, Source: "s"}, {Name: "c", Kind: REST, Source: "s"}, {Name: "d", Kind: MCP, Source: "s"}},
			wantNames: []string{"a", "b", "c", "d"},
		},
		{
			name:      "duplicate across sources",
			existing:  []Tool{tool("calc", "builtin")},
			add:       []Tool{tool("calc", "rest:calc")},
			wantErrs:  []string{`tool "calc" from source "rest:calc" conflicts with the tool of that name from source "builtin"`},
			wantNames: []string{"calc"},
		},
		{
			name:      "duplicate within batch",
			add:       []Tool{tool("calc", "builtin"), tool("calc", "embedder")},
			wantErrs:  []string{`tool "calc" from source "embedder" conflicts with the tool of that name from source "builtin"`},
			wantNames: nil,
		},
		{
			name:     "invalid tool still checked for conflicts",
			existing: []Tool{tool("taken", "builtin")},
			add:      []Tool{{Name: "taken", Kind: REST, Source: "rest:t", InputSchema: json.RawMessage(`{"type":"string"}`)}},
			wantErrs: []string{
				`tool "taken": input schema must describe an object (type: object)`,
				`tool "taken" from source "rest:t" conflicts with the tool of that name from source "builtin"`,
			},
			wantNames: []string{"taken"},
		},
		{
			name:     "all or nothing, every problem reported",
			existing: []Tool{tool("taken", "builtin")},
			add: []Tool{
				tool("fine", "embedder"),
				tool("bad name", "embedder"),
				{Name: "nokind", Source: "embedder"},
				{Name: "oddkind", Kind: "grpc", Source: "embedder"},
				{Name: "nosource", Kind: REST},
				tool("taken", "embedder"),
				{Name: "badschema", Kind: REST, Source: "rest:x", InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"strnig"}}}`)},
				{Name: "arrayschema", Kind: REST, Source: "rest:x", InputSchema: json.RawMessage(`{"type":"array"}`)},
				{Name: "badoutput", Kind: MCP, Source: "upstream:x", OutputSchema: json.RawMessage(`{"properties":{"n":{"$ref":"https://example.com/x"}}}`)},
			},
			wantErrs: []string{
				`invalid tool name "bad name": character ' ' (U+0020) at byte 3 is not allowed; use only A-Z a-z 0-9 _ . -`,
				`tool "nokind": kind is missing; use one of stateless, stateful, rest, mcp`,
				`tool "oddkind": unknown kind "grpc"; use one of stateless, stateful, rest, mcp`,
				`tool "nosource": source is missing`,
				`tool "badschema": invalid input schema at /properties/n/type: "strnig" is not valid: expected array, but got string; value must be one of "array", "boolean", "integer", "null", "number", "object", "string"`,
				`tool "arrayschema": input schema must describe an object (type: object)`,
				`tool "badoutput": invalid output schema at /properties/n/$ref: reference "https://example.com/x" points outside the schema document; only local references such as "#/$defs/name" are allowed`,
				`tool "taken" from source "embedder" conflicts with the tool of that name from source "builtin"`,
			},
			wantNames: []string{"taken"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := New()
			mustAdd(t, r, tc.existing...)
			err := r.Add(tc.add...)
			if diff := cmp.Diff(tc.wantErrs, errorLines(err)); diff != "" {
				t.Errorf("Add error mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantNames, names(r.List())); diff != "" {
				t.Errorf("List after Add mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestZeroValueRegistry(t *testing.T) {
	var r Registry
	if _, err := r.Resolve("calc", true); !errors.Is(err, ErrNotFound) {
		t.Errorf("Resolve on empty zero value = %v, want ErrNotFound", err)
	}
	mustAdd(t, &r, tool("calc", "builtin"))
	if got, err := r.Resolve("Calc", true); err != nil || got.Name != "calc" {
		t.Errorf("Resolve(Calc) = %v, %v, want calc", got, err)
	}
	if r.Len() != 1 {
		t.Errorf("Len = %d, want 1", r.Len())
	}
}

func TestAddErrorsAreTyped(t *testing.T) {
	r := New()
	mustAdd(t, r, tool("calc", "builtin"))
	err := r.Add(tool("calc", "rest:calc"), tool("x y", "e"), Tool{Name: "s", Kind: REST, Source: "e", InputSchema: json.RawMessage(`{"type":1}`)})
	ce, ok := errors.AsType[*ConflictError](err)
	if !ok || ce.Name != "calc" || ce.Source != "rest:calc" || ce.ExistingSource != "builtin" {
		t.Errorf("AsType[*ConflictError](%v) = %+v, %v", err, ce, ok)
	}
	if !errors.Is(err, ErrInvalidName) {
		t.Errorf("errors.Is(%v, ErrInvalidName) = false", err)
	}
	if _, ok := errors.AsType[*schemas.CompileError](err); !ok {
		t.Errorf("AsType[*schemas.CompileError](%v) failed", err)
	}
}

func TestAddCopiesTools(t *testing.T) {
	r := New()
	in := Tool{Name: "calc", Kind: Stateless, Source: "builtin", InputSchema: json.RawMessage(`{"type":"object","required":["x"]}`)}
	mustAdd(t, r, in)
	in.Description = "changed"
	in.InputSchema[0] = ' '
	got, _ := r.Get("calc")
	if got.Description != "" || string(got.InputSchema) != `{"type":"object","required":["x"]}` {
		t.Errorf("registered tool changed with the caller's value: %+v", got)
	}
}

func TestToolValidate(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}`)
	r := New()
	mustAdd(t, r, Tool{Name: "calc", Kind: Stateless, Source: "builtin", InputSchema: schema})
	registered, _ := r.Get("calc")
	unregistered := &Tool{Name: "calc", InputSchema: schema}
	broken := &Tool{Name: "broken", InputSchema: json.RawMessage(`{"type":"array"}`)}
	tests := []struct {
		name string
		tool *Tool
		args string
		want []schemas.Violation
	}{
		{"registered valid", registered, `{"x": 1}`, nil},
		{"registered invalid", registered, `{"x": "1"}`, []schemas.Violation{{Pointer: "/x", Message: "expected integer, but got string"}}},
		{"unregistered compiles lazily", unregistered, `{}`, []schemas.Violation{{Message: `missing required property "x"`}}},
		{"unregistered with broken schema", broken, `{}`, []schemas.Violation{{Message: "the tool cannot be called: input schema must describe an object (type: object)"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var args any
			if err := json.Unmarshal([]byte(tc.args), &args); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, tc.tool.Validate(args)); diff != "" {
				t.Errorf("Validate(%s) mismatch (-want +got):\n%s", tc.args, diff)
			}
		})
	}
}

func TestResolve(t *testing.T) {
	r := New()
	mustAdd(t, r,
		tool("calc", "builtin"),
		tool("clock_now", "builtin"),
		tool("github__create_issue", "upstream:github"),
		tool("Dup-Name", "a"),
		tool("dup_name", "b"),
		tool("weather", "rest:weather"),
	)
	tests := []struct {
		name    string
		in      string
		repair  bool
		want    string   // resolved name; "" means not found
		suggest []string // suggestions when not found
		errText string   // exact error text when not found; "" to skip
	}{
		{name: "exact", in: "calc", repair: false, want: "calc"},
		{name: "exact with repair", in: "clock_now", repair: true, want: "clock_now"},
		{name: "case repair", in: "CALC", repair: true, want: "calc"},
		{name: "separator repair", in: "Clock.Now", repair: true, want: "clock_now"},
		{name: "namespace separator repair", in: "github.create-issue", repair: true, want: "github__create_issue"},
		{name: "no repair without the flag", in: "CALC", repair: false, suggest: []string{"calc"}, errText: `unknown tool "CALC"; did you mean "calc"?`},
		{name: "ambiguous repair", in: "DUP.NAME", repair: true, suggest: []string{"Dup-Name", "dup_name"}, errText: `tool name "DUP.NAME" is ambiguous: it could be "Dup-Name", "dup_name"; call it by its full name`},
		{name: "ambiguous without repair", in: "DUP.NAME", repair: false, suggest: []string{"Dup-Name", "dup_name"}, errText: `unknown tool "DUP.NAME"; did you mean "Dup-Name", "dup_name"?`},
		{name: "exact beats ambiguity", in: "dup_name", repair: true, want: "dup_name"},
		{name: "not found with suggestion", in: "now", repair: true, suggest: []string{"clock_now"}},
		{name: "typo", in: "wether", repair: true, suggest: []string{"weather"}},
		{name: "not found without suggestion", in: "zzzzzzzz", repair: true, errText: `unknown tool "zzzzzzzz"; call tools/list to see the 6 available tools`},
		{name: "empty", in: "", repair: true, errText: `unknown tool ""; call tools/list to see the 6 available tools`},
		{name: "hostile name cut in message", in: strings.Repeat("q", 5000), repair: true, errText: `unknown tool "` + strings.Repeat("q", 80) + `…"; call tools/list to see the 6 available tools`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := r.Resolve(tc.in, tc.repair)
			if tc.want != "" {
				if err != nil || got == nil || got.Name != tc.want {
					t.Fatalf("Resolve(%q, %v) = %v, %v, want %q", tc.in, tc.repair, got, err, tc.want)
				}
				return
			}
			if got != nil || !errors.Is(err, ErrNotFound) {
				t.Fatalf("Resolve(%.20q, %v) = %v, %v, want ErrNotFound", tc.in, tc.repair, got, err)
			}
			nf, ok := errors.AsType[*NotFoundError](err)
			if !ok {
				t.Fatalf("Resolve(%q) error %T is not *NotFoundError", tc.in, err)
			}
			if diff := cmp.Diff(tc.suggest, nf.Suggestions); diff != "" {
				t.Errorf("Resolve(%.20q) suggestions mismatch (-want +got):\n%s", tc.in, diff)
			}
			if nf.Available != 6 {
				t.Errorf("Resolve(%.20q) Available = %d, want 6", tc.in, nf.Available)
			}
			if tc.errText != "" && err.Error() != tc.errText {
				t.Errorf("Resolve(%.20q) error =\n%s\nwant\n%s", tc.in, err, tc.errText)
			}
		})
	}
}

func TestResolveRepair(t *testing.T) {
	r := New()
	mustAdd(t, r,
		tool("fs__read_file", "upstream:fs"),
		tool("fs__write_file", "upstream:fs"),
		tool("git__write_file", "upstream:git"),
		tool("mem__write-file", "upstream:mem"),
		tool("web__Fetch-Page", "upstream:web"),
		tool("cache__fetch_page", "upstream:cache"),
		tool("calc", "builtin"),
		tool("db__a__b", "upstream:db"),
		tool("gh__git__status_x", "upstream:gh"),
	)
	r.ReserveNamespaces("up")
	tests := []struct {
		name     string
		in       string
		repair   bool
		want     string // resolved name; "" means not found
		wantKind RepairKind
		suggest  []string // suggestions when not found
		ambig    bool     // refused as ambiguous
		errText  string   // exact error text when not found; "" to skip
	}{
		{name: "exact", in: "fs__read_file", repair: true, want: "fs__read_file", wantKind: RepairNone},
		{name: "case", in: "FS__Read-File", repair: true, want: "fs__read_file", wantKind: RepairCase},
		{name: "missing namespace", in: "read_file", repair: true, want: "fs__read_file", wantKind: RepairNamespace},
		{name: "missing namespace and case", in: "Read.File", repair: true, want: "fs__read_file", wantKind: RepairNamespace},
		{name: "wrong namespace", in: "files__read_file", repair: true, want: "fs__read_file", wantKind: RepairNamespace},
		{name: "wrong namespace and case", in: "FILES__READ-FILE", repair: true, want: "fs__read_file", wantKind: RepairNamespace},
		// git is a namespace of its own, which has no read_file (an
		// upstream that excludes it, say): never swapped for fs's.
		{name: "real namespace without the tool", in: "git__read_file", repair: true, suggest: []string{"fs__read_file", "git__write_file"}},
		{name: "real namespace by case", in: "GIT__read_file", repair: true, suggest: []string{"fs__read_file", "git__write_file"}},
		// gh has a tool whose tool part is git__read_file as a whole: git
		// being a namespace, the call is not moved there either.
		{name: "real namespace, whole name as a tool part", in: "git__status_x", repair: true, suggest: []string{"gh__git__status_x"}},
		// up is reserved (configured, not connected yet).
		{name: "reserved namespace", in: "up__read_file", repair: true, suggest: []string{"fs__read_file"}},
		{name: "namespace on an unprefixed tool", in: "builtin__calc", repair: true, want: "calc", wantKind: RepairNamespace},
		{name: "tool part holding the separator", in: "a__b", repair: true, want: "db__a__b", wantKind: RepairNamespace},
		{
			name: "ambiguous missing namespace", in: "write_file", repair: true, ambig: true,
			suggest: []string{"fs__write_file", "git__write_file", "mem__write-file"},
			errText: `tool name "write_file" is ambiguous: it could be "fs__write_file", "git__write_file", "mem__write-file"; call it by its full name`,
		},
		{
			name: "ambiguous wrong namespace", in: "s3__write_file", repair: true, ambig: true,
			suggest: []string{"fs__write_file", "git__write_file", "mem__write-file"},
		},
		{
			name: "tool part ambiguous by case repair", in: "fetch-page", repair: true, ambig: true,
			suggest: []string{"cache__fetch_page", "web__Fetch-Page"},
			errText: `tool name "fetch-page" is ambiguous: it could be "cache__fetch_page", "web__Fetch-Page"; call it by its full name`,
		},
		{
			name: "repair off", in: "read_file", repair: false,
			suggest: []string{"fs__read_file"},
			errText: `unknown tool "read_file"; did you mean "fs__read_file"?`,
		},
		{name: "repair off, ambiguous", in: "write_file", repair: false, suggest: []string{"fs__write_file", "git__write_file", "mem__write-file"}},
		{name: "empty tool part", in: "fs__", repair: true, suggest: []string{"fs__read_file", "fs__write_file"}},
		{name: "no such tool part", in: "fs__delete_file", repair: true, suggest: []string{"fs__write_file"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, kind, err := r.ResolveRepair(tc.in, tc.repair)
			if tc.want != "" {
				if err != nil || got == nil || got.Name != tc.want || kind != tc.wantKind {
					t.Fatalf("ResolveRepair(%q, %v) = %v, %q, %v, want %q, %q", tc.in, tc.repair, got, kind, err, tc.want, tc.wantKind)
				}
				return
			}
			if got != nil || kind != RepairNone || !errors.Is(err, ErrNotFound) {
				t.Fatalf("ResolveRepair(%q, %v) = %v, %q, %v, want ErrNotFound", tc.in, tc.repair, got, kind, err)
			}
			nf, ok := errors.AsType[*NotFoundError](err)
			if !ok {
				t.Fatalf("ResolveRepair(%q) error %T is not *NotFoundError", tc.in, err)
			}
			if diff := cmp.Diff(tc.suggest, nf.Suggestions); diff != "" {
				t.Errorf("ResolveRepair(%q) suggestions mismatch (-want +got):\n%s", tc.in, diff)
			}
			if nf.Ambiguous != tc.ambig {
				t.Errorf("ResolveRepair(%q) Ambiguous = %v, want %v", tc.in, nf.Ambiguous, tc.ambig)
			}
			if tc.errText != "" && err.Error() != tc.errText {
				t.Errorf("ResolveRepair(%q) error =\n%s\nwant\n%s", tc.in, err, tc.errText)
			}
		})
	}
}

// TestRepairIndexFollowsChanges checks that namespace repair sees tools
// removed and replaced.
func TestRepairIndexFollowsChanges(t *testing.T) {
	r := New()
	mustAdd(t, r, tool("fs__read_file", "upstream:fs"), tool("git__read_file", "upstream:git"))
	if _, err := r.Resolve("read_file", true); err == nil {
		t.Fatal("Resolve(read_file) with two candidates succeeded")
	}
	r.Remove("git__read_file")
	if got, kind, err := r.ResolveRepair("read_file", true); err != nil || got.Name != "fs__read_file" || kind != RepairNamespace {
		t.Fatalf("ResolveRepair(read_file) = %v, %q, %v, want fs__read_file by namespace", got, kind, err)
	}
	if err := r.ReplaceSource("upstream:fs", []Tool{tool("fs__list_dir", "")}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Resolve("read_file", true); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Resolve(read_file) after its tool went = %v, want ErrNotFound", err)
	}
	if got, err := r.Resolve("list-dir", true); err != nil || got.Name != "fs__list_dir" {
		t.Fatalf("Resolve(list-dir) = %v, %v, want fs__list_dir", got, err)
	}
}

func TestNotFoundErrorText(t *testing.T) {
	tests := []struct {
		err  NotFoundError
		want string
	}{
		{NotFoundError{Name: "x", Suggestions: []string{"a", "b", "c"}}, `unknown tool "x"; did you mean "a", "b", "c"?`},
		{NotFoundError{Name: "x", Available: 1}, `unknown tool "x"; call tools/list to see the 1 available tool`},
		{NotFoundError{Name: "x"}, `unknown tool "x"; no tools are available`},
		{NotFoundError{Name: "x", Suggestions: []string{"a__x", "b__x"}, Ambiguous: true}, `tool name "x" is ambiguous: it could be "a__x", "b__x"; call it by its full name`},
		{
			NotFoundError{Name: "x", Suggestions: strings.Split("a b c d e f g h i j k l", " "), Ambiguous: true},
			`tool name "x" is ambiguous: it could be "a", "b", "c", "d", "e", "f", "g", "h", "i", "j" or 2 more; call it by its full name`,
		},
	}
	for _, tc := range tests {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}

func TestResolveExactDoesNotAllocate(t *testing.T) {
	r := New()
	mustAdd(t, r, tool("calc", "builtin"))
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := r.Resolve("calc", true); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Resolve exact hit allocates %v times, want 0", allocs)
	}
}

func TestRemove(t *testing.T) {
	r := New()
	mustAdd(t, r, tool("a", "s"), tool("b", "s"), tool("c", "s"))
	var changes []Change
	r.Subscribe(func(c Change) { changes = append(changes, c) })

	if got := r.Remove("c", "missing", "a", "a"); !cmp.Equal(got, []string{"a", "c"}) {
		t.Errorf("Remove = %v, want [a c]", got)
	}
	if got := r.Remove("missing"); got != nil {
		t.Errorf("Remove(missing) = %v, want nil", got)
	}
	if diff := cmp.Diff([]Change{{Removed: []string{"a", "c"}}}, changes); diff != "" {
		t.Errorf("changes mismatch (-want +got):\n%s", diff)
	}
	if r.Len() != 1 {
		t.Errorf("Len = %d, want 1", r.Len())
	}
	if _, err := r.Resolve("A", true); !errors.Is(err, ErrNotFound) {
		t.Errorf("Resolve(A) after Remove = %v, want ErrNotFound (repair index updated)", err)
	}
}

func TestReplaceSource(t *testing.T) {
	r := New()
	mustAdd(t, r, tool("x", "upstream:a"), tool("y", "upstream:a"), tool("calc", "builtin"))
	var changes []Change
	r.Subscribe(func(c Change) { changes = append(changes, c) })

	newY := Tool{Name: "y", Kind: MCP, Description: "new y"}
	if err := r.ReplaceSource("upstream:a", []Tool{newY, {Name: "z", Kind: MCP}}); err != nil {
		t.Fatalf("ReplaceSource: %v", err)
	}
	if diff := cmp.Diff([]string{"calc", "y", "z"}, names(r.List())); diff != "" {
		t.Errorf("List mismatch (-want +got):\n%s", diff)
	}
	if y, _ := r.Get("y"); y.Description != "new y" || y.Source != "upstream:a" {
		t.Errorf("Get(y) = %+v, want the new definition with source upstream:a", y)
	}
	if len(changes) != 1 || !cmp.Equal(names(changes[0].Added), []string{"y", "z"}) || !cmp.Equal(changes[0].Removed, []string{"x", "y"}) {
		t.Errorf("changes = %+v, want one change adding [y z] and removing [x y]", changes)
	}

	// A conflict with another source changes nothing.
	err := r.ReplaceSource("upstream:a", []Tool{{Name: "calc", Kind: MCP}, {Name: "w", Kind: MCP}})
	want := `tool "calc" from source "upstream:a" conflicts with the tool of that name from source "builtin"`
	if err == nil || err.Error() != want {
		t.Errorf("ReplaceSource(conflict) = %v, want %q", err, want)
	}
	if diff := cmp.Diff([]string{"calc", "y", "z"}, names(r.List())); diff != "" {
		t.Errorf("List after failed ReplaceSource mismatch (-want +got):\n%s", diff)
	}

	// A tool of another source is refused.
	err = r.ReplaceSource("upstream:a", []Tool{{Name: "q", Kind: MCP, Source: "upstream:b"}})
	if err == nil || !strings.Contains(err.Error(), `source "upstream:b" does not match`) {
		t.Errorf("ReplaceSource(foreign tool) = %v, want a source mismatch error", err)
	}

	// Emptying a source removes its tools.
	if err := r.ReplaceSource("upstream:a", nil); err != nil {
		t.Fatalf("ReplaceSource(nil): %v", err)
	}
	if diff := cmp.Diff([]string{"calc"}, names(r.List())); diff != "" {
		t.Errorf("List after emptying mismatch (-want +got):\n%s", diff)
	}
	if n := len(changes); n != 2 {
		t.Errorf("got %d changes, want 2 (failed calls emit none)", n)
	}
	if err := r.ReplaceSource("upstream:none", nil); err != nil || len(changes) != 2 {
		t.Errorf("ReplaceSource of an unknown source with nothing = %v and %d changes, want nil and no change", err, len(changes))
	}
	if err := r.ReplaceSource("", nil); err == nil {
		t.Error("ReplaceSource(\"\") = nil, want an error")
	}
}

// TestReplace checks that Replace swaps registered tools for new
// definitions of the same names and sources, compiling their schemas, and
// changes nothing on any error.
func TestReplace(t *testing.T) {
	r := New()
	mustAdd(t, r, tool("api__a", "openapi:api"), tool("api__b", "openapi:api"), tool("calc", "builtin"))
	var changes []Change
	r.Subscribe(func(c Change) { changes = append(changes, c) })

	full := Tool{Name: "api__a", Kind: Stateless, Source: "openapi:api",
		InputSchema: []byte(`{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}`)}
	if err := r.Replace(full); err != nil {
		t.Fatalf("Replace: %v", err)
	}
	a, _ := r.Get("api__a")
	if vs := a.Validate(map[string]any{}); len(vs) == 0 {
		t.Error("the replaced tool accepts {}, want its new schema to require id")
	}
	if diff := cmp.Diff([]string{"api__a", "api__b", "calc"}, names(r.List())); diff != "" {
		t.Errorf("List mismatch (-want +got):\n%s", diff)
	}
	if len(changes) != 1 || !cmp.Equal(names(changes[0].Added), []string{"api__a"}) || !cmp.Equal(changes[0].Removed, []string{"api__a"}) {
		t.Errorf("changes = %+v, want one change adding and removing api__a", changes)
	}

	for _, tc := range []struct {
		name  string
		tools []Tool
		want  string
	}{
		{"unknown", []Tool{tool("api__c", "openapi:api")}, `replacing tool "api__c": it is not registered`},
		{"other source", []Tool{tool("calc", "openapi:api")}, `replacing tool "calc": it is registered by builtin, not openapi:api`},
		{"bad schema", []Tool{{Name: "api__b", Kind: Stateless, Source: "openapi:api", InputSchema: []byte(`{"type":"string"}`)}}, `must describe an object`},
		{"twice", []Tool{tool("api__b", "openapi:api"), tool("api__b", "openapi:api")}, `conflicts`},
		{"one bad of two", []Tool{tool("api__b", "openapi:api"), tool("api__c", "openapi:api")}, `api__c`},
	} {
		err := r.Replace(tc.tools...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Replace = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	if b, _ := r.Get("api__b"); b.Source != "openapi:api" || len(changes) != 1 {
		t.Errorf("failed Replace calls changed the registry: api__b = %+v, %d changes", b, len(changes))
	}
	if a2, _ := r.Get("api__a"); a2 != a {
		t.Error("a failed Replace changed api__a")
	}
}

func TestListIsFresh(t *testing.T) {
	r := New()
	mustAdd(t, r, tool("b", "s"), tool("a", "s"))
	l := r.List()
	l[0] = nil
	if got := names(r.List()); !cmp.Equal(got, []string{"a", "b"}) {
		t.Errorf("List after modifying a previous result = %v, want [a b]", got)
	}
}

func TestSubscribe(t *testing.T) {
	r := New()
	var got []string
	record := func(tag string) func(Change) {
		return func(c Change) { got = append(got, fmt.Sprintf("%s+%v-%v", tag, names(c.Added), c.Removed)) }
	}
	cancelA := r.Subscribe(record("A"))
	mustAdd(t, r, tool("x", "s"))
	cancelB := r.Subscribe(record("B"))
	mustAdd(t, r, tool("y", "s"), tool("w", "s"))
	cancelA()
	cancelA() // idempotent
	r.Remove("x")
	cancelB()
	mustAdd(t, r, tool("z", "s"))
	r.Subscribe(nil) // never called

	want := []string{
		"A+[x]-[]",
		"A+[w y]-[]",
		"B+[w y]-[]",
		"B+[]-[x]",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("notifications mismatch (-want +got):\n%s", diff)
	}
}

func TestSubscriberMayMutate(t *testing.T) {
	r := New()
	var got []string
	r.Subscribe(func(c Change) {
		got = append(got, fmt.Sprintf("+%v-%v", names(c.Added), c.Removed))
		if len(c.Added) == 1 && c.Added[0].Name == "a" {
			// Reentrant mutation: delivered after this call returns.
			if err := r.Add(tool("b", "s")); err != nil {
				t.Errorf("Add from subscriber: %v", err)
			}
			if _, ok := r.Get("b"); !ok {
				t.Error("tool added from subscriber is not visible")
			}
			got = append(got, "after inner Add")
		}
	})
	mustAdd(t, r, tool("a", "s"))
	want := []string{"+[a]-[]", "after inner Add", "+[b]-[]"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("notifications mismatch (-want +got):\n%s", diff)
	}
}

func TestSubscriberCancelsItself(t *testing.T) {
	r := New()
	calls := 0
	var cancel func()
	cancel = r.Subscribe(func(Change) {
		calls++
		cancel()
	})
	mustAdd(t, r, tool("a", "s"))
	mustAdd(t, r, tool("b", "s"))
	if calls != 1 {
		t.Errorf("subscriber called %d times, want 1", calls)
	}
}

func TestSubscriberPanicDoesNotWedgeDelivery(t *testing.T) {
	r := New()
	var seen []string
	r.Subscribe(func(c Change) {
		if c.Added[0].Name == "boom" {
			panic("subscriber failed")
		}
		seen = append(seen, c.Added[0].Name)
	})
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the subscriber's panic did not reach the caller")
			}
		}()
		_ = r.Add(tool("boom", "s"))
	}()
	mustAdd(t, r, tool("after", "s"))
	if !cmp.Equal(seen, []string{"after"}) {
		t.Errorf("seen = %v, want [after]", seen)
	}
}

// TestConcurrentOrdering checks that changes reach subscribers in the
// order they happened: each goroutine adds then removes its own tool, so a
// Remove delivered before its Add would be caught.
func TestConcurrentOrdering(t *testing.T) {
	r := New()
	mustAdd(t, r, tool("calc", "builtin"))
	present := map[string]bool{"calc": true}
	var problems []string
	deliveries := 0
	r.Subscribe(func(c Change) {
		deliveries++
		for _, name := range c.Removed {
			if !present[name] {
				problems = append(problems, "removed before added: "+name)
			}
			delete(present, name)
		}
		for _, t := range c.Added {
			if present[t.Name] {
				problems = append(problems, "added twice: "+t.Name)
			}
			present[t.Name] = true
		}
	})

	const workers, rounds = 4, 50
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				name := fmt.Sprintf("w%d_t%d", w, i)
				if err := r.Add(tool(name, "s")); err != nil {
					t.Errorf("Add(%s): %v", name, err)
					return
				}
				if _, err := r.Resolve(strings.ToUpper(name), true); err != nil {
					t.Errorf("Resolve(%s): %v", name, err)
				}
				if got, err := r.Resolve("calc", false); err != nil || got.Name != "calc" {
					t.Errorf("Resolve(calc) = %v, %v", got, err)
				}
				_ = r.List()
				if i%2 == 0 {
					r.Remove(name)
				}
			}
		})
	}
	wg.Wait()

	// Every goroutine has returned, so every change has been delivered.
	if want := workers*rounds + workers*rounds/2; deliveries != want {
		t.Errorf("delivered %d changes, want %d", deliveries, want)
	}
	if len(problems) > 0 {
		t.Errorf("out-of-order delivery: %v", problems)
	}
	var live []string
	for name := range present {
		live = append(live, name)
	}
	if got := names(r.List()); !cmp.Equal(got, slices.Sorted(slices.Values(live))) {
		t.Errorf("replaying changes gives %d tools, registry has %d", len(live), len(got))
	}
}

func FuzzResolve(f *testing.F) {
	r := New()
	registered := map[string]bool{}
	for _, n := range []string{
		"calc", "clock_now", "clock_today", "github__create_issue", "Dup-Name", "dup_name", "weather", "a",
		"fs__read_file", "fs__write_file", "git__write_file", "web__Fetch-Page", "cache__fetch_page", "db__a__b", "fs__",
	} {
		if err := r.Add(tool(n, "s")); err != nil {
			f.Fatal(err)
		}
		registered[n] = true
	}
	for _, seed := range []string{
		"calc", "CALC", "clock.now", "now", "", "dup.name", "\xff", strings.Repeat("_", 300), "github--create.issue",
		"read_file", "git__read_file", "write_file", "x__fetch.page", "a__b", "__", "fs__", "git__", "__calc",
	} {
		f.Add(seed, true)
		f.Add(seed, false)
	}
	f.Fuzz(func(t *testing.T, name string, repair bool) {
		got, kind, err := r.ResolveRepair(name, repair)
		if registered[name] && (err != nil || got.Name != name || kind != RepairNone) {
			t.Fatalf("ResolveRepair(%q) = %v, %q, %v, want itself", name, got, kind, err)
		}
		if err == nil {
			if got == nil || !registered[got.Name] {
				t.Fatalf("ResolveRepair(%q) = %v, not a registered tool", name, got)
			}
			var ok bool
			switch kind {
			case RepairNone:
				ok = got.Name == name
			case RepairCase:
				ok = repair && normalize(got.Name) == normalize(name)
			case RepairNamespace:
				part := normalize(toolPart(got.Name))
				ok = repair && part != "" && (part == normalize(name) || part == normalize(toolPart(name)))
			}
			if !ok {
				t.Fatalf("ResolveRepair(%q, %v) = %q, %q: not such a repair", name, repair, got.Name, kind)
			}
			return
		}
		if got != nil || kind != RepairNone {
			t.Fatalf("ResolveRepair(%q) = %v, %q with error %v", name, got, kind, err)
		}
		nf, ok := errors.AsType[*NotFoundError](err)
		if !ok || !errors.Is(err, ErrNotFound) {
			t.Fatalf("ResolveRepair(%q) error %v is not a NotFoundError", name, err)
		}
		for _, s := range nf.Suggestions {
			if !registered[s] {
				t.Fatalf("ResolveRepair(%q) suggested %q, which is not registered", name, s)
			}
		}
		if nf.Ambiguous {
			if !repair || len(nf.Suggestions) < 2 || !slices.IsSorted(nf.Suggestions) {
				t.Fatalf("ResolveRepair(%q, %v) ambiguous among %q", name, repair, nf.Suggestions)
			}
			return
		}
		if len(nf.Suggestions) > 3 {
			t.Fatalf("ResolveRepair(%q) gave %d suggestions", name, len(nf.Suggestions))
		}
		if msg := err.Error(); len(msg) > 400 {
			t.Fatalf("ResolveRepair(%q) error is %d bytes long", name, len(msg))
		}
	})
}

func BenchmarkResolve(b *testing.B) {
	r := New()
	for i := range 200 {
		if err := r.Add(tool(fmt.Sprintf("tool_%03d", i), "s")); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Resolve("tool_123", true); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAddBatch adds as many tools in one batch as Microsoft Graph's
// catalog registers (11,422), each with the same small schema.
func BenchmarkAddBatch(b *testing.B) {
	tools := make([]Tool, 11422)
	for i := range tools {
		tools[i] = Tool{Name: fmt.Sprintf("graph__op%05d", (i*7919)%len(tools)), Kind: REST, Source: "openapi:graph",
			InputSchema: []byte(`{"type":"object"}`)}
	}
	for b.Loop() {
		r := New()
		if err := r.Add(tools...); err != nil {
			b.Fatal(err)
		}
	}
}

// TestAddSharesEqualSchemas: tools of one batch that declare the same
// schema hold one copy of it and one compiled form, not the caller's
// bytes; a schema that does not compile is refused for every tool that
// declares it, each named.
func TestAddSharesEqualSchemas(t *testing.T) {
	schema := func() json.RawMessage {
		return json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`)
	}
	withSchema := func(name string, in, out json.RawMessage) Tool {
		tl := tool(name, "src")
		tl.InputSchema, tl.OutputSchema = in, out
		return tl
	}
	var r Registry
	mine := schema()
	if err := r.Add(withSchema("a", mine, schema()), withSchema("b", schema(), nil), withSchema("c", json.RawMessage(`{"type":"object"}`), nil)); err != nil {
		t.Fatal(err)
	}
	a, _ := r.Get("a")
	b, _ := r.Get("b")
	c, _ := r.Get("c")
	if &a.InputSchema[0] != &b.InputSchema[0] || a.schema != b.schema {
		t.Error("a and b, whose schemas are equal, hold a copy each")
	}
	if &a.OutputSchema[0] != &a.InputSchema[0] {
		t.Error("a's output schema, equal to its input schema, is a copy of its own")
	}
	if &c.InputSchema[0] == &a.InputSchema[0] || c.schema == a.schema {
		t.Error("c shares a's schema, which differs")
	}
	if &a.InputSchema[0] == &mine[0] {
		t.Error("the registry holds the caller's bytes, not a copy")
	}
	if v := b.Validate(map[string]any{}); len(v) != 1 {
		t.Errorf("b, validated with the shared schema: %v, want one violation (q is required)", v)
	}

	bad := json.RawMessage(`{"type":"array"}`)
	err := r.Add(withSchema("d", bad, nil), withSchema("e", bad, nil))
	if err == nil || !strings.Contains(err.Error(), `tool "d"`) || !strings.Contains(err.Error(), `tool "e"`) {
		t.Errorf("two tools with a schema that does not compile: %v, want both named", err)
	}
}
