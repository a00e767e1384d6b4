package registry

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFilterMatch(t *testing.T) {
	tests := []struct {
		name   string
		filter Filter
		in     string
		want   bool
	}{
		{"zero filter keeps all", Filter{}, "anything", true},
		{"include matches", Filter{Include: []string{"list*"}}, "list_pets", true},
		{"include misses", Filter{Include: []string{"list*"}}, "get_pet", false},
		{"exclude wins", Filter{Include: []string{"*"}, Exclude: []string{"delete*"}}, "delete_pet", false},
		{"exclude alone", Filter{Exclude: []string{"delete*"}}, "get_pet", true},
		{"class", Filter{Include: []string{"[gl]et_*"}}, "let_it", true},
		{"malformed glob matches nothing", Filter{Include: []string{"[a-"}}, "a", false},
		{"no separator crossing", Filter{Include: []string{"a*"}}, "a/b", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.filter.Match(tc.in); got != tc.want {
				t.Errorf("%+v.Match(%q) = %v, want %v", tc.filter, tc.in, got, tc.want)
			}
		})
	}
}

func TestFilterValidate(t *testing.T) {
	f := Filter{Include: []string{"ok*", "[a-", ""}, Exclude: []string{`x\`}}
	err := f.Validate()
	var got []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		fe, ok := errors.AsType[*FieldError](e)
		if !ok {
			t.Fatalf("Validate() part %T %v, want *FieldError", e, e)
		}
		got = append(got, fe.Error())
	}
	want := []string{
		`include[1] is not a valid glob (* ? [a-z] and \ to escape, as in Go's path.Match); write \[ for a literal [; got "[a-"`,
		`include[2] is empty; write a name or a glob, like list*`,
		`exclude[0] is not a valid glob (* ? [a-z] and \ to escape, as in Go's path.Match); write \[ for a literal [; got "x\\"`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Validate() mismatch (-want +got):\n%s", diff)
	}
	if err := (Filter{Include: []string{"*"}}).Validate(); err != nil {
		t.Errorf("Validate() of a valid filter = %v", err)
	}
}

func TestValidatePrefix(t *testing.T) {
	tests := []struct {
		in      string
		wantErr bool
	}{
		{"fs", false},
		{"Az09_.-", false},
		{strings.Repeat("p", MaxPrefixLen), false},
		{"", true},
		{"a__b", true},
		{strings.Repeat("p", MaxPrefixLen+1), true},
		{"has space", true},
		{"café", true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			err := ValidatePrefix(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ValidatePrefix(%q) = %v, want error %v", tc.in, err, tc.wantErr)
			}
			if err == nil {
				if n := Prefixed(tc.in, strings.Repeat("t", MaxNameLen-MaxPrefixLen-len(Separator))); ValidateName(n) != nil {
					t.Errorf("a valid prefix leaves no room for a %d-character tool name: %v", MaxNameLen-MaxPrefixLen-len(Separator), ValidateName(n))
				}
				return
			}
			fe, ok := errors.AsType[*FieldError](err)
			if !ok || !errors.Is(err, ErrInvalidPrefix) || fe.Field != "name" {
				t.Errorf("ValidatePrefix(%q) = %#v, want a *FieldError for name wrapping ErrInvalidPrefix", tc.in, err)
			}
			if tc.in != "" && strings.Contains(fe.Msg, tc.in) {
				t.Errorf("ValidatePrefix(%q).Msg = %q shows the value", tc.in, fe.Msg)
			}
		})
	}
}

func TestUnderPrefix(t *testing.T) {
	for _, tc := range []struct {
		name, prefix string
		want         bool
	}{{"fs", "fs", true}, {"fs__x", "fs", true}, {"fs_x", "fs", false}, {"fsx", "fs", false}, {"x", "", false}} {
		if got := UnderPrefix(tc.name, tc.prefix); got != tc.want {
			t.Errorf("UnderPrefix(%q, %q) = %v, want %v", tc.name, tc.prefix, got, tc.want)
		}
	}
}

func TestFieldPath(t *testing.T) {
	for _, tc := range []struct{ path, key, want string }{
		{"headers", "X-Key", "headers.X-Key"},
		{"headers", "Bad Header", `headers."Bad Header"`},
		{"query", "", `query.""`},
		{"", "url", "url"},
	} {
		if got := FieldPath(tc.path, tc.key); got != tc.want {
			t.Errorf("FieldPath(%q, %q) = %q, want %q", tc.path, tc.key, got, tc.want)
		}
	}
}
