package upstreamset

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/config"
)

// TestNameErrors: each clash of an upstream's name or prefix is reported
// at its position with what to do, and a name holding a secret (an
// environment variable's value) is not shown.
func TestNameErrors(t *testing.T) {
	in := strings.Join([]string{
		"rest:",
		"  - {name: gh_issues, url: 'http://h/'}",
		"  - {name: s3cr3t__x, url: 'http://h/', headers: {Authorization: '${TOK}'}}",
		"upstreams:",
		"  - {name: a, transport: stdio, command: x}",
		"  - {name: a, transport: stdio, command: x}",
		"  - {name: gh, prefix: '', transport: stdio, command: x}",
		"  - {name: s3cr3t, transport: stdio, command: x}",
		"  - {name: c, prefix: gh_, transport: stdio, command: x}",
		"  - {name: d, prefix: s3cr3t__, transport: stdio, command: x}",
	}, "\n") + "\n"
	env := func(k string) (string, bool) { return "s3cr3t", k == "TOK" }
	cfg, err := config.Parse("t.yaml", []byte(in), &config.Options{LookupEnv: env})
	if err != nil {
		t.Fatalf("config.Parse = %v", err)
	}
	var got []string
	for _, e := range NameErrors(cfg) {
		got = append(got, e.Error())
	}
	want := []string{
		`t.yaml:6:12: upstreams[1].name: duplicate upstream name, already used by upstreams[0]; rename one; got "a"`,
		`t.yaml:8:12: upstreams[3].name: clashes with rest[1] (its name), as this upstream's tools are named <this name>__<tool>; rename the upstream or the tool; got "s3cr3t"`,
		`t.yaml:9:23: upstreams[4].prefix: clashes with rest[0] ("gh_issues"), whose name starts with "gh_"; change the prefix or rename the tool; got "gh_"`,
		`t.yaml:10:23: upstreams[5].prefix: this prefix is also the prefix of upstreams[3]'s tools; give one of them another prefix; got "s3cr3t__"`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("NameErrors (-want +got):\n%s", diff)
	}
}
