package mcpup

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/registry"
)

func TestPrefix(t *testing.T) {
	m, err := New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	listed := []rawTool{{Name: "read"}, {Name: "write"}}
	for _, tc := range []struct {
		prefix *string
		want   []string
	}{
		{nil, []string{"fs__read", "fs__write"}},
		{new(""), []string{"read", "write"}},
		{new("fs_"), []string{"fs_read", "fs_write"}},
	} {
		u := newUpstream(m, Upstream{Name: "fs", Prefix: tc.prefix})
		var got []string
		for _, b := range u.convert(listed) {
			got = append(got, b.Tool.Name)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("prefix %v: tools %v, want %v", tc.prefix, got, tc.want)
		}
	}
}

func TestPrefixValidate(t *testing.T) {
	base := Upstream{Name: "fs", Transport: TransportStdio, Command: "x"}
	for _, p := range []string{"", "fs_", "a.b-c__", "x234567890123456789012345678901234"} {
		u := base
		u.Prefix = &p
		if err := u.Validate(); err != nil {
			t.Errorf("prefix %q: %v, want valid", p, err)
		}
	}
	for _, p := range []string{"has space", "x2345678901234567890123456789012345", "é"} {
		u := base
		u.Prefix = &p
		err := u.Validate()
		fe, ok := errors.AsType[*registry.FieldError](err)
		if !ok {
			t.Errorf("prefix %q: %v, want a *registry.FieldError", p, err)
			continue
		}
		if fe.Field != "prefix" || !strings.Contains(fe.Msg, "characters from") {
			t.Errorf("prefix %q: field %q, message %q; want field prefix and what is allowed", p, fe.Field, fe.Msg)
		}
	}
}
