package httpheader

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// problem is what a test expects of one *Error: the header it is at,
// whether it is about the name, the value shown, and a part of its
// message (the advice).
type problem struct {
	name  string
	key   bool
	value string
	msg   string
}

// problems returns errs as problems whose msg is the part of their Msg
// that want names (or all of it).
func problems(errs []*Error, want []problem) []problem {
	var got []problem
	for _, e := range errs {
		p := problem{name: e.Name, key: e.Key, value: e.Value, msg: e.Msg}
		for _, w := range want {
			if w.name == e.Name && strings.Contains(e.Msg, w.msg) {
				p.msg = w.msg
				break
			}
		}
		got = append(got, p)
	}
	return got
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		in   map[string]string
		want []problem
	}{
		{"valid", map[string]string{"X-Api-Key": "k", "Accept": "application/json", "X-Tab": "a\tb"}, nil},
		{"every problem", map[string]string{"Bad Header": "x", "X-Ok": "line\nbreak", "accept": "a", "Accept": "b", "Content-Length": "1"}, []problem{
			{name: "Bad Header", key: true, value: "Bad Header", msg: "a header name must be an HTTP token (letters, digits and !#$%&'*+-.^_`|~), like X-Api-Key"},
			{name: "Content-Length", key: true, value: "Content-Length", msg: "is set by the HTTP client from the request itself; remove it"},
			{name: "X-Ok", msg: "a header value must not contain CR, LF or NUL; put it on one line"},
			{name: "accept", key: true, msg: `duplicate header, also set as "Accept" (header names ignore case); keep one`},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := problems(Check(tc.in), tc.want)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(problem{})); diff != "" {
				t.Errorf("Check(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestDuplicateError(t *testing.T) {
	errs := Check(map[string]string{"x-key": "1", "X-Key": "2"})
	if len(errs) != 1 {
		t.Fatalf("Check = %v, want one problem", errs)
	}
	d, ok := errors.AsType[*DuplicateError](errs[0])
	if !ok {
		t.Fatalf("Check = %v, want a *DuplicateError", errs[0])
	}
	if got, want := *d, (DuplicateError{Name: "x-key", Other: "X-Key"}); got != want {
		t.Errorf("DuplicateError = %+v, want %+v", got, want)
	}
	sw := d.Swapped()
	if sw.Name != "X-Key" || !sw.Key || !strings.Contains(sw.Msg, `also set as "x-key"`) {
		t.Errorf("Swapped() = %+v, want the problem at X-Key", sw)
	}
}

func TestToken68(t *testing.T) {
	for s, want := range map[string]bool{
		"abc": true, "a-b.c_d~e+f/g": true, "abc==": true, "Zm9v": true,
		"": false, "=": false, "===": false, "a=b": false, "a b": false, "a!b": false, "ä": false,
	} {
		if got := Token68(s); got != want {
			t.Errorf("Token68(%q) = %v, want %v", s, got, want)
		}
	}
}
