package rest

import (
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/registry"
)

func TestParseTemplate(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []tmplPart
		wantErr bool
	}{
		{"literal", "abc", []tmplPart{{lit: "abc"}}, false},
		{"empty", "", nil, false},
		{"one arg", "{id}", []tmplPart{{arg: "id"}}, false},
		{"mixed", "v{ver}.json", []tmplPart{{lit: "v"}, {arg: "ver"}, {lit: ".json"}}, false},
		{"adjacent", "{a}{b}", []tmplPart{{arg: "a"}, {arg: "b"}}, false},
		{"escaped braces", "{{x}}", []tmplPart{{lit: "{x}"}}, false},
		{"escape around arg", "{{{a}}}", []tmplPart{{lit: "{"}, {arg: "a"}, {lit: "}"}}, false},
		{"name chars", "{a-b.c_D9}", []tmplPart{{arg: "a-b.c_D9"}}, false},
		{"unclosed", "a{b", nil, true},
		{"unmatched close", "a}b", nil, true},
		{"empty name", "{}", nil, true},
		{"bad name", "{a b}", nil, true},
		{"slash in name", "{a/b}", nil, true},
		{"too long", "{" + strings.Repeat("a", 65) + "}", nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseTemplate(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("parseTemplate(%q) error = %v, wantErr %v", tc.in, err, tc.wantErr)
			}
			if err != nil {
				if !errors.Is(err, errBraces) {
					t.Errorf("parseTemplate(%q) error %v does not say how to write braces", tc.in, err)
				}
				return
			}
			if diff := cmp.Diff(tc.want, got.parts, cmp.AllowUnexported(tmplPart{})); diff != "" {
				t.Errorf("parseTemplate(%q) parts (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestArgText(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"string", "a b", "a b"},
		{"float", 42.0, "42"},
		{"fraction", 1.5, "1.5"},
		{"big float", 1e21, "1e+21"},
		{"json number", json.Number("12345678901234567890"), "12345678901234567890"},
		{"bool", true, "true"},
		{"int", 7, "7"},
		{"object", map[string]any{"b": 1.0, "a": "<&>"}, `{"a":"<&>","b":1}`},
		{"array", []any{"x", 2.0, nil}, `["x",2,null]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := argText(tc.in); got != tc.want {
				t.Errorf("argText(%#v) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestExpandURL(t *testing.T) {
	tests := []struct {
		name    string
		url     string
		query   map[string]string
		args    map[string]any
		want    string
		wantErr bool
	}{
		{"literal", "https://api.example.com/v1/items", nil, nil, "https://api.example.com/v1/items", false},
		{"no path", "https://api.example.com", nil, nil, "https://api.example.com", false},
		{"path arg", "https://h/users/{id}", nil, map[string]any{"id": "42"}, "https://h/users/42", false},
		{"number arg", "https://h/users/{id}", nil, map[string]any{"id": 42.0}, "https://h/users/42", false},
		{"slash escaped", "https://h/files/{name}", nil, map[string]any{"name": "a/b"}, "https://h/files/a%2Fb", false},
		{"dot dot slash", "https://h/users/{id}/posts", nil, map[string]any{"id": "../admin"}, "https://h/users/..%2Fadmin/posts", false},
		{"dot dot", "https://h/users/{id}/posts", nil, map[string]any{"id": ".."}, "https://h/users/%2E%2E/posts", false},
		{"dot", "https://h/users/{id}/posts", nil, map[string]any{"id": "."}, "https://h/users/%2E/posts", false},
		{"dots from two args", "https://h/x/{a}{b}", nil, map[string]any{"a": ".", "b": "."}, "https://h/x/%2E%2E", false},
		{"dot inside a segment stays", "https://h/x/v{a}", nil, map[string]any{"a": "."}, "https://h/x/v.", false},
		{"query and fragment chars", "https://h/q/{s}", nil, map[string]any{"s": "a b?c#d%"}, "https://h/q/a%20b%3Fc%23d%25", false},
		{"escaped braces in path", "https://h/{{lit}}/{a}", nil, map[string]any{"a": "x"}, "https://h/{lit}/x", false},
		{"url query", "https://h/s?q={q}&units=metric", nil, map[string]any{"q": "a&b=c"}, "https://h/s?q=a%26b%3Dc&units=metric", false},
		{"query map", "https://h/s", map[string]string{"q": "{q}", "lang": "en"}, map[string]any{"q": "x y"}, "https://h/s?lang=en&q=x+y", false},
		{"absent query arg drops key", "https://h/s?q={q}", map[string]string{"n": "{n}"}, map[string]any{}, "https://h/s", false},
		{"null query arg drops key", "https://h/s", map[string]string{"n": "{n}"}, map[string]any{"n": nil}, "https://h/s", false},
		{"query object is JSON", "https://h/s", map[string]string{"f": "{f}"}, map[string]any{"f": map[string]any{"a": 1.0}}, "https://h/s?f=%7B%22a%22%3A1%7D", false},
		{"query prefix", "https://h/s", map[string]string{"id": "x-{id}"}, map[string]any{"id": true}, "https://h/s?id=x-true", false},
		{"encoded literal query", "https://h/s?a=%20b", nil, nil, "https://h/s?a=+b", false},
		{"query keys sorted, a key's values in order", "https://h/s?z=1&b=2&z=0", map[string]string{"b": "{b}", "a b": "3"}, map[string]any{"b": "x"}, "https://h/s?a+b=3&b=2&b=x&z=1&z=0", false},
		{"only later query values present", "https://h/s?a={a}&b={b}", nil, map[string]any{"b": "y"}, "https://h/s?b=y", false},
		{"missing path arg", "https://h/users/{id}", nil, map[string]any{}, "", true},
		{"null path arg", "https://h/users/{id}", nil, map[string]any{"id": nil}, "", true},
		{"empty path arg", "https://h/users/{id}/x", nil, map[string]any{"id": ""}, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, _, err := parseURL(tc.url, tc.query)
			if err != nil {
				t.Fatalf("parseURL(%q) = %v", tc.url, err)
			}
			got, err := u.expand(tc.args)
			if (err != nil) != tc.wantErr {
				t.Fatalf("expand(%v) = %q, %v; wantErr %v", tc.args, got, err, tc.wantErr)
			}
			if err == nil && got != tc.want {
				t.Errorf("expand(%v) = %q, want %q", tc.args, got, tc.want)
			}
		})
	}
}

func TestParseURLErrors(t *testing.T) {
	tests := []struct {
		name  string
		url   string
		field string
		want  string // part of the advice
	}{
		{"placeholder in host", "https://{host}/x", "url", "not in the scheme, host or port; write them out"},
		{"placeholder in port", "https://h:{port}/x", "url", "not in the scheme, host or port; write them out"},
		{"placeholder in scheme", "{scheme}://h/x", "url", "not in the scheme, host or port; write them out"},
		{"placeholder in userinfo", "https://{user}@h/x", "url", "not in the scheme, host or port; write them out"},
		{"unknown scheme", "ftp://h/x", "url", "the scheme must be http or https"},
		{"relative", "/x/y", "url", "must be an absolute http or https URL"},
		{"empty", "", "url", "is required; write an absolute URL"},
		{"no host", "https:///x", "url", "must name a host"},
		{"fragment", "https://h/x#frag", "url", "remove it"},
		{"placeholder in query key", "https://h/x?{k}=1", "url", "query values only"},
		{"bad brace", "https://h/x/{a", "url", "or write {{ for a literal brace"},
		{"bad placeholder name", "https://h/x/{a b}", "url", "name the argument, like {id}"},
		{"bad escape in path", "https://h/x/%zz", "url", "is not a valid URL"},
		{"bad escape in query", "https://h/x?q=%zz", "url", "escape a literal % as %25"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := parseURL(tc.url, nil)
			fe, ok := errors.AsType[*registry.FieldError](err)
			if !ok || fe.Field != tc.field || !strings.Contains(fe.Msg, tc.want) {
				t.Errorf("parseURL(%q) = %v, want a %s problem containing %q", tc.url, err, tc.field, tc.want)
			}
			if ok && fe.Value != "" {
				t.Errorf("parseURL(%q) problem shows the URL (Value %q)", tc.url, fe.Value)
			}
		})
	}
}

// TestURLProblem moved here from config with the rule it tests.
func TestURLProblem(t *testing.T) {
	tests := []struct {
		url    string
		wantOK bool
	}{
		{"http://h/", true},
		{"HTTPS://h:443/a/{b}/c?d={e}&f=g", true},
		{"http://[::1]:8080/{x}", true},
		{"http://h/{{literal}}", true},
		{"http://h/{{{x}}}", true},
		{"http://h", true},
		{"http://h?q={x}", true},
		{"", false},
		{"h/x", false},
		{"http://h:/x", false},
		{"http://h/{a{b}}", false},
		{"http://h/}}}", false},
		{"http://{x}.h/", false},
		{"http://u:{p}@h/", false},
		{"mailto:x@h", false},
		{"http://h/x#{y}", false},
	}
	for _, tc := range tests {
		t.Run(tc.url, func(t *testing.T) {
			if msg := urlProblem(tc.url); (msg == "") != tc.wantOK {
				t.Errorf("urlProblem(%q) = %q, want ok %v", tc.url, msg, tc.wantOK)
			}
		})
	}
}

// FuzzURLProblem moved here from config with the rule it tests; it also
// checks that parseURL compiles every URL urlProblem accepts, or says why
// not at the url field.
func FuzzURLProblem(f *testing.F) {
	for _, s := range []string{"http://h/{x}?q={y}", "http://{h}/", "http://h/{{", "}}", "{", "https://u@h:1/a#b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if urlProblem(raw) != "" {
			return
		}
		// An accepted URL has no placeholder before its path.
		scheme, rest, ok := strings.Cut(raw, "://")
		if !ok {
			t.Fatalf("urlProblem(%q) accepted a URL without a scheme", raw)
		}
		if i := strings.IndexAny(rest, "/?#"); i >= 0 {
			rest = rest[:i]
		}
		if strings.ContainsAny(scheme+rest, "{}") {
			t.Fatalf("urlProblem(%q) accepted a placeholder in the scheme or host", raw)
		}
		if _, sample, err := parseURL(raw, nil); err != nil {
			if fe, ok := errors.AsType[*registry.FieldError](err); !ok || fe.Field != "url" {
				t.Fatalf("parseURL(%q) = %v, want url problems", raw, err)
			}
		} else if sample == nil || sample.Host == "" {
			t.Fatalf("parseURL(%q) accepted a URL with no host", raw)
		}
	})
}

func TestBodyTemplate(t *testing.T) {
	tmpl := `{"name":"{name}","count":"{count}","tags":"{tags}","note":"hi {name}!","opt":"{missing}",
		"lit":"{{x}}","n":1.50,"nested":{"deep":["{name}","{missing}",true]},"null":"{nul}","nulls":"a{nul}"}`
	b, err := parseBody(json.RawMessage(tmpl))
	if err != nil {
		t.Fatalf("parseBody = %v", err)
	}
	v, ok := b.expand(map[string]any{"name": "Ann", "count": 3.0, "tags": []any{"a", "b"}, "nul": nil})
	if !ok {
		t.Fatal("expand: body left out")
	}
	got, err := marshalJSON(v)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"count":3,"lit":"{x}","n":1.50,"name":"Ann","nested":{"deep":["Ann",true]},"note":"hi Ann!","null":null,"tags":["a","b"]}`
	if string(got) != want {
		t.Errorf("body = %s\nwant %s", got, want)
	}

	whole, err := parseBody(json.RawMessage(`"{body}"`))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := whole.expand(map[string]any{}); ok {
		t.Error(`"{body}" with body absent: want the body left out`)
	}
	for _, bad := range []string{`{"a":`, `{"a":"{b"}`, `1 2`} {
		if _, err := parseBody(json.RawMessage(bad)); err == nil {
			t.Errorf("parseBody(%s) = nil error, want one", bad)
		}
	}
}

// FuzzExpand checks that no argument value can leave its place in the
// URL: the host, the number of path segments and the query keys stay as
// the template says, and a segment never becomes "." or "..".
func FuzzExpand(f *testing.F) {
	f.Add("https://api.example.com/users/{id}/posts?q={q}", "../admin", "a&b=c")
	f.Add("http://h:8080/{a}{b}/x", "..", ".")
	f.Add("https://h/{{lit}}/{a}", "/", "#")
	f.Add("https://h/v{a}", "%2e%2e", "\r\n")
	f.Add("https://h/{a}?x={b}&y=lit", "?x=1", "1&y=2")
	f.Fuzz(func(t *testing.T, tmpl, a, b string) {
		u, sample, err := parseURL(tmpl, nil)
		if err != nil {
			return
		}
		args := map[string]any{}
		for _, seg := range u.segments {
			for i, name := range seg.args() {
				args[name] = []string{a, b}[i%2]
			}
		}
		for _, q := range u.query {
			for _, name := range q.value.args() {
				args[name] = b
			}
		}
		got, err := u.expand(args)
		if err != nil {
			return // an empty path argument
		}
		parsed, err := url.Parse(got)
		if err != nil {
			t.Fatalf("expand(%q) = %q, which does not parse: %v", tmpl, got, err)
		}
		if parsed.Host != sample.Host || parsed.Scheme != sample.Scheme || parsed.User.String() != sample.User.String() {
			t.Fatalf("expand(%q) = %q: scheme/host changed from %q", tmpl, got, sample.Redacted())
		}
		if parsed.Fragment != "" {
			t.Fatalf("expand(%q) = %q: a fragment appeared", tmpl, got)
		}
		rawPath, _, _ := strings.Cut(strings.TrimPrefix(got, u.origin), "?")
		segs := strings.Split(rawPath, "/")
		if len(u.segments) > 0 && len(segs)-1 != len(u.segments) {
			t.Fatalf("expand(%q) = %q: %d path segments, want %d", tmpl, got, len(segs)-1, len(u.segments))
		}
		for i, seg := range u.segments {
			if seg.hasArgs() && (segs[i+1] == "." || segs[i+1] == "..") {
				t.Fatalf("expand(%q) = %q: segment %d is a dot segment", tmpl, got, i+1)
			}
		}
		for k := range parsed.Query() {
			if !strings.Contains(tmpl, k) {
				// Keys come only from the template (url-decoded).
				found := false
				for _, q := range u.query {
					found = found || q.key == k
				}
				if !found {
					t.Fatalf("expand(%q) = %q: query key %q was injected", tmpl, got, k)
				}
			}
		}
	})
}
