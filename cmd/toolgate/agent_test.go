package main

import (
	"runtime/debug"
	"testing"
)

// The launcher warns when the toolgate-agent it found is another module's
// or another version's, and stays quiet when it cannot tell.
func TestAgentMismatch(t *testing.T) {
	const mod = "github.com/toolgate/toolgate"
	build := func(path, version, rev, modified string) *debug.BuildInfo {
		bi := &debug.BuildInfo{Main: debug.Module{Path: path, Version: version}}
		if rev != "" {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: "vcs.revision", Value: rev})
		}
		if modified != "" {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: "vcs.modified", Value: modified})
		}
		return bi
	}
	for _, tc := range []struct {
		name        string
		self, agent *debug.BuildInfo
		want        string
	}{
		{"same release", build(mod, "v1.2.0", "", ""), build(mod, "v1.2.0", "", ""), ""},
		{"other release", build(mod, "v1.3.0", "", ""), build(mod, "v1.2.0", "", ""), "is version v1.2.0, this toolgate v1.3.0"},
		{"same checkout", build(mod, "(devel)", "abc", "false"), build(mod, "(devel)", "abc", "false"), ""},
		{"other commit", build(mod, "(devel)", "abc", "false"), build(mod, "(devel)", "def", "false"), "is version def, this toolgate abc"},
		{"dirty tree", build(mod, "(devel)", "abc", "true"), build(mod, "(devel)", "abc", "false"), "is version abc, this toolgate abc+dirty"},
		{"no version recorded", build(mod, "(devel)", "", ""), build(mod, "v1.2.0", "", ""), ""},
		{"another module", build(mod, "v1.2.0", "", ""), build("example.com/agent", "v1.2.0", "", ""), `is not toolgate's (its module is "example.com/agent")`},
	} {
		if got := agentMismatch(tc.self, tc.agent); got != tc.want {
			t.Errorf("%s: agentMismatch = %q, want %q", tc.name, got, tc.want)
		}
	}
}
