package openapi

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/registry"
)

// TestSourceValidate checks that a Source's own settings are checked
// before its document is read, each problem at its configuration key,
// and that headers follow the REST executor's rule and words.
func TestSourceValidate(t *testing.T) {
	const secret = "https://sk-live-{S3cret}"
	tests := []struct {
		name string
		src  Source
		want []registry.FieldError // Err left out
	}{
		{"valid", Source{Name: "pets", BaseURL: "http://h/v1", Headers: map[string]string{"X-Api-Key": "k{1}"}}, nil},
		{"every problem", Source{
			Name:    "a__b",
			BaseURL: "http://h/v1?x=1",
			Include: []string{"[a-", ""},
			Exclude: []string{`x\`},
			Headers: map[string]string{"Bad Header": "x", "X-Ok": "line\nbreak", "accept": "a", "Accept": "b"},
		}, []registry.FieldError{
			{Field: "name", Value: "a__b", Msg: "must be 1 to 32 characters from A-Z a-z 0-9 _ . - with no __, like petstore"},
			{Field: "include[0]", Value: "[a-", Msg: `is not a valid glob: a [ is never closed; close the set, like [a-z], or write \[ for a bracket`},
			{Field: "include[1]", Msg: "is not a valid glob: it is empty; write a name or a glob, like list* or tag:issues"},
			{Field: "exclude[0]", Value: `x\`, Msg: `is not a valid glob: ends in a lone \; write \\ for a backslash`},
			{Field: "base_url", Value: "http://h/v1?x=1", Msg: "must not have a query or fragment; operations add their own"},
			{Field: `headers."Bad Header"`, Key: true, Value: "Bad Header", Msg: "a header name must be an HTTP token (letters, digits and !#$%&'*+-.^_`|~), like X-Api-Key"},
			{Field: "headers.X-Ok", Msg: "a header value must not contain CR, LF or NUL; put it on one line"},
			{Field: "headers.accept", Key: true, Msg: `duplicate header, also set as "Accept" (header names ignore case); keep one`},
		}},
		{"no name", Source{}, []registry.FieldError{
			{Field: "name", Msg: "is required; name the source, like petstore (its tools are named petstore__<operationId>)"},
		}},
		{"secret values are not shown", Source{Name: "pets", BaseURL: secret, Headers: map[string]string{"X-Key": secret + "\r\n"}, Secrets: []string{secret}}, []registry.FieldError{
			{Field: "base_url", Msg: "must not hold placeholders; write the server URL out, like http://127.0.0.1:9000/v1"},
			{Field: "headers.X-Key", Msg: "a header value must not contain CR, LF or NUL; put it on one line"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.src.Validate()
			var got []registry.FieldError
			for _, e := range leaves(err) {
				fe, ok := e.(*registry.FieldError)
				if !ok {
					t.Fatalf("Validate() problem %T %v, want a *registry.FieldError", e, e)
				}
				c := *fe
				c.Err = nil
				got = append(got, c)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Validate() (-want +got):\n%s", diff)
			}
			if err != nil && strings.Contains(err.Error(), "S3cret") {
				t.Errorf("Validate() shows the secret: %v", err)
			}
		})
	}
}

// leaves flattens a tree of joined errors.
func leaves(err error) []error {
	switch x := err.(type) {
	case nil:
		return nil
	case interface{ Unwrap() []error }:
		var out []error
		for _, e := range x.Unwrap() {
			out = append(out, leaves(e)...)
		}
		return out
	}
	return []error{err}
}
