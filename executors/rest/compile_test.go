package rest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/registry"
)

// problem is what a test expects of one *registry.FieldError: its field,
// whether it is about the key, its value, and a part of its message (the
// advice).
type problem struct {
	field string
	key   bool
	value string
	msg   string
}

// problems returns the FieldErrors in err as problems whose msg is the
// part of their Msg that want names (or all of it), and the plain errors'
// texts.
func problems(err error, want []problem) (got []problem, plain []string) {
	var walk func(error)
	walk = func(e error) {
		switch x := e.(type) {
		case nil:
		case *registry.FieldError:
			p := problem{field: x.Field, key: x.Key, value: x.Value, msg: x.Msg}
			for _, w := range want {
				if w.field == x.Field && strings.Contains(x.Msg, w.msg) {
					p.msg = w.msg
					break
				}
			}
			got = append(got, p)
		case interface{ Unwrap() []error }:
			for _, c := range x.Unwrap() {
				walk(c)
			}
		default:
			plain = append(plain, e.Error())
		}
	}
	walk(err)
	return got, plain
}

// TestAddErrors checks that Add reports every problem of a Spec at the
// field (configuration key) it is in, saying what to write instead.
func TestAddErrors(t *testing.T) {
	base := Spec{Name: "t", Source: "rest:t", URL: "https://api.example.com/x"}
	with := func(f func(*Spec)) Spec { s := base; f(&s); return s }
	tests := []struct {
		name      string
		spec      Spec
		want      []problem
		wantPlain string // part of the one error that is not a FieldError
	}{
		{"no name", with(func(s *Spec) { s.Name = "" }), []problem{{field: "name", msg: "is required; name the tool"}}, ""},
		{"bad name", with(func(s *Spec) { s.Name = "has space" }), []problem{{field: "name", value: "has space", msg: "must be 1 to 64 characters from A-Z a-z 0-9 _ . -"}}, ""},
		{"no source", with(func(s *Spec) { s.Source = "" }), nil, `write "rest:<name>"`},
		{"placeholder in host", with(func(s *Spec) { s.URL = "https://{tenant}.example.com/x" }), []problem{{field: "url", value: "https://{tenant}.example.com/x", msg: "not in the scheme, host or port; write them out"}}, ""},
		{"bad method", with(func(s *Spec) { s.Method = "FETCH" }), []problem{{field: "method", value: "FETCH", msg: "must be one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"}}, ""},
		{"trace refused", with(func(s *Spec) { s.Method = "TRACE" }), []problem{{field: "method", value: "TRACE", msg: "must be one of GET"}}, ""},
		{"unknown scheme", with(func(s *Spec) { s.URL = "ftp://h/x" }), []problem{{field: "url", value: "ftp://h/x", msg: "the scheme must be http or https"}}, ""},
		{"header name invalid", with(func(s *Spec) { s.Headers = map[string]string{"X Bad": "1"} }), []problem{{field: `headers."X Bad"`, key: true, value: "X Bad", msg: "a header name must be an HTTP token"}}, ""},
		{"placeholder header name", with(func(s *Spec) { s.Headers = map[string]string{"{h}": "1"} }), []problem{{field: `headers."{h}"`, key: true, value: "{h}", msg: "a header name must be an HTTP token"}}, ""},
		{"reserved header", with(func(s *Spec) { s.Headers = map[string]string{"host": "evil"} }), []problem{{field: "headers.host", key: true, value: "host", msg: "is set by the HTTP client"}}, ""},
		{"duplicate header", with(func(s *Spec) { s.Headers = map[string]string{"X-A": "1", "x-a": "2"} }), []problem{{field: "headers.x-a", key: true, msg: `duplicate header, also set as "X-A" (header names ignore case); keep one`}}, ""},
		{"CR in header value", with(func(s *Spec) { s.Headers = map[string]string{"X-A": "a\rb"} }), []problem{{field: "headers.X-A", msg: "must not contain CR, LF or NUL"}}, ""},
		{"control character in header value", with(func(s *Spec) { s.Headers = map[string]string{"X-A": "a\x01b"} }), []problem{{field: "headers.X-A", msg: "must not contain control characters"}}, ""},
		{"bad brace in header value", with(func(s *Spec) { s.Headers = map[string]string{"X-A": "{a"} }), []problem{{field: "headers.X-A", msg: "has an unclosed {"}}, ""},
		{"body not JSON", with(func(s *Spec) { s.Method = "POST"; s.Body = json.RawMessage(`{name: 1}`) }), []problem{{field: "body", msg: "is not JSON; write a JSON value"}}, ""},
		{"bad brace in body", with(func(s *Spec) { s.Body = json.RawMessage(`{"a":"{b"}`) }), []problem{{field: "body.a", msg: "or write {{ for a literal brace"}}, ""},
		{"empty query key", with(func(s *Spec) { s.Query = map[string]string{"": "x"} }), []problem{{field: `query.""`, key: true, msg: "a query key must not be empty"}}, ""},
		{"bad query value", with(func(s *Spec) { s.Query = map[string]string{"q": "x}"} }), []problem{{field: "query.q", msg: "write }} for a literal brace"}}, ""},
		{"host not allowed", with(func(s *Spec) { s.AllowedHosts = []string{"other.example.com"} }), []problem{{field: "allowed_hosts", msg: "does not allow the host (and port) of url"}}, ""},
		{"bad allowed host", with(func(s *Spec) { s.AllowedHosts = []string{"https://x/"} }), []problem{{field: "allowed_hosts[0]", value: "https://x/", msg: "must be a host or host:port"}}, ""},
		{"negative max bytes", with(func(s *Spec) { s.MaxResponseBytes = -1 }), []problem{{field: "max_response_bytes", value: "-1", msg: "must be a positive number of bytes"}}, ""},
		{"negative timeout", with(func(s *Spec) { s.Timeout = -1 }), []problem{{field: "timeout", value: "-1ns", msg: "must be positive"}}, ""},
		{"schema not an object", with(func(s *Spec) { s.InputSchema = json.RawMessage(`[1]`) }), []problem{{field: "input_schema", msg: "must be a JSON object"}}, ""},
		{"every problem", with(func(s *Spec) {
			s.Name, s.Method, s.URL = "", "FETCH", "gopher://h/"
			s.Headers = map[string]string{"Bad Header": "x"}
			s.AllowedHosts = []string{"h/x"}
		}), []problem{
			{field: "name", msg: "is required"},
			{field: "method", value: "FETCH", msg: "must be one of"},
			{field: "url", value: "gopher://h/", msg: "the scheme must be http or https"},
			{field: `headers."Bad Header"`, key: true, value: "Bad Header", msg: "a header name must be an HTTP token"},
			{field: "allowed_hosts[0]", value: "h/x", msg: "must be a host or host:port"},
		}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := New(nil).Add(tc.spec)
			if err == nil {
				t.Fatal("Add = nil error, want one")
			}
			got, plain := problems(err, tc.want)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(problem{})); diff != "" {
				t.Errorf("Add(%s) problems (-want +got):\n%s", tc.name, diff)
			}
			switch {
			case tc.wantPlain == "" && len(plain) > 0:
				t.Errorf("Add(%s) = %v, want only FieldErrors", tc.name, plain)
			case tc.wantPlain != "" && (len(plain) != 1 || !strings.Contains(plain[0], tc.wantPlain)):
				t.Errorf("Add(%s) plain errors = %q, want one containing %q", tc.name, plain, tc.wantPlain)
			}
		})
	}
}

// TestAddNeverShowsSecret checks that no problem of a Spec shows a value
// holding one of its Secrets, in Msg, Value or the error's text.
func TestAddNeverShowsSecret(t *testing.T) {
	const secret = "ftp://sk-live-[Sup3r{S3cret}\r\nX: y"
	s := Spec{
		Name: secret, Source: "rest:x", Method: secret, URL: secret,
		Query:        map[string]string{"q": secret},
		Headers:      map[string]string{"X-A": secret, "X-B": "Bearer " + secret},
		Body:         json.RawMessage(`{"a":` + mustJSON(t, secret) + `}`),
		AllowedHosts: []string{secret},
		Secrets:      []string{secret},
	}
	_, _, err := New(nil).Add(s)
	if err == nil {
		t.Fatal("Add = nil error, want errors")
	}
	got, plain := problems(err, nil)
	if len(plain) > 0 {
		t.Errorf("Add = %v, want only FieldErrors", plain)
	}
	// name, method, url, headers.X-A, headers.X-B, allowed_hosts[0]; the
	// query value and the body string are valid templates.
	if len(got) != 6 {
		t.Errorf("Add reported %d problems, want 6 (one per invalid value):\n%v", len(got), err)
	}
	for _, part := range []string{"Sup3r", "S3cret", "sk-live", "ftp:"} {
		if strings.Contains(err.Error(), part) {
			t.Errorf("Add error shows the secret (%q):\n%v", part, err)
		}
	}
	for _, p := range got {
		if p.value != "" {
			t.Errorf("problem %s has Value %q, want none", p.field, p.value)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
