package configerr

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/internal/httpheader"
	"github.com/toolgate/toolgate/registry"
)

func parse(t *testing.T, lines ...string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("t.yaml", []byte(strings.Join(lines, "\n")+"\n"), nil)
	if err != nil {
		t.Fatalf("config.Parse = %v", err)
	}
	return cfg
}

func texts(errs []error) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

// TestPlace checks that each problem of a joined, wrapped tree lands at
// its field, and that a leaf that names no field keeps its wrappers'
// context and lands at the definition.
func TestPlace(t *testing.T) {
	cfg := parse(t,
		"rest:",
		"  - name: a",
		"    url: 'http://127.0.0.1:9/x'",
		"    method: FETCH",
	)
	err := fmt.Errorf("tool a: %w", errors.Join(
		&registry.FieldError{Field: "method", Msg: "is not supported; write GET or POST", Value: "FETCH"},
		fmt.Errorf("compiling: %w", errors.New("no luck")),
	))
	got := texts(Place(cfg, "rest[0]", err))
	want := []string{
		`t.yaml:4:13: rest[0].method: is not supported; write GET or POST; got "FETCH"`,
		`t.yaml:2:5: rest[0]: compiling: no luck`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Place =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestPlaceDuplicateHeader checks that a header written twice in
// different cases is reported at the spelling written last, whichever
// spelling the error names.
func TestPlaceDuplicateHeader(t *testing.T) {
	cfg := parse(t,
		"rest:",
		"  - name: a",
		"    url: 'http://127.0.0.1:9/x'",
		"    headers:",
		"      accept: text/plain",
		"      Accept: text/plain",
	)
	for _, name := range []string{"accept", "Accept"} {
		other := strings.ToUpper(name[:1]) + name[1:]
		if other == name {
			other = strings.ToLower(name)
		}
		p := (&httpheader.DuplicateError{Name: name, Other: other}).Problem()
		fe := &registry.FieldError{Field: registry.FieldPath("headers", name), Key: true, Msg: p.Msg, Err: p.Err}
		got := texts(Place(cfg, "rest[0]", fe))
		want := `t.yaml:6:7: rest[0].headers.Accept: duplicate header, also set as "accept" (header names ignore case); keep one`
		if len(got) != 1 || got[0] != want {
			t.Errorf("reported at %s: Place = %q, want %q", name, got, want)
		}
	}
}

// TestShown checks that a name holding a value from the environment is
// replaced, and any other is kept.
func TestShown(t *testing.T) {
	cfg, err := config.Parse("t.yaml", []byte("rest:\n  - {name: '${NAME}', url: 'http://127.0.0.1:9/x'}\n"),
		&config.Options{LookupEnv: func(k string) (string, bool) { return "s3cr3tname", k == "NAME" }})
	if err != nil {
		t.Fatal(err)
	}
	if got := Shown(cfg, "s3cr3tname", "<its name>"); got != "<its name>" {
		t.Errorf("Shown(secret) = %q, want the stand-in", got)
	}
	if got := Shown(cfg, "plain", "<its name>"); got != "plain" {
		t.Errorf("Shown(plain) = %q, want it kept", got)
	}
}
