package gateway

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/toolgate/toolgate/config/configtest"
)

func TestConfigCheckUpstreamPrefixes(t *testing.T) {
	got := checkLines(t, configtest.Lines(
		"rest: [{name: gh_issues, url: 'http://h/'}]",
		"upstreams:",
		"  - {name: a, prefix: '', transport: stdio, command: x}",
		"  - {name: b, prefix: '', transport: stdio, command: x}",
		"  - {name: c, prefix: p_, transport: stdio, command: x}",
		"  - {name: d, prefix: p_, transport: stdio, command: x}",
		"  - {name: e, prefix: gh_, transport: stdio, command: x}",
		"  - {name: f, prefix: 'bad prefix', transport: stdio, command: x}",
		"  - {name: h, transport: stdio, command: x}",
		"  - {name: i, prefix: h__, transport: stdio, command: x}",
	), nil)
	want := []string{
		`t.yaml:6:23: upstreams[3].prefix: "p_" is also the prefix of upstreams[2]'s tools; give one of them another prefix; got "p_"`,
		`t.yaml:7:23: upstreams[4].prefix: clashes with rest[0] ("gh_issues"), whose name starts with "gh_"; change the prefix or rename the tool; got "gh_"`,
		`t.yaml:8:23: upstreams[5].prefix: must be empty or 1 to 34 characters from A-Z a-z 0-9 _ . -, like fs_; leave it out for <name>__; got "bad prefix"`,
		`t.yaml:10:23: upstreams[7].prefix: "h__" is also the prefix of upstreams[6]'s tools; give one of them another prefix; got "h__"`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("prefix problems (-want +got):\n%s", diff)
	}
}
