package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestFrom(t *testing.T) {
	for _, tc := range []struct {
		name string
		bi   debug.BuildInfo
		want Info
		line string
	}{
		{
			name: "go install at a tag",
			bi:   debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}},
			want: Info{Version: "v1.2.3", GoVersion: "go1.26.8"},
			line: "v1.2.3 (go1.26.8)",
		},
		{
			name: "checkout with changes",
			bi: debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
				{Key: "vcs.revision", Value: "0123abc"}, {Key: "vcs.time", Value: "2026-11-29T02:00:00Z"}, {Key: "vcs.modified", Value: "true"},
			}},
			want: Info{Version: Devel, Revision: "0123abc+dirty", Time: "2026-11-29T02:00:00Z", GoVersion: "go1.26.8"},
			line: Devel + " (revision 0123abc+dirty, 2026-11-29T02:00:00Z, go1.26.8)",
		},
		{
			name: "nothing recorded",
			want: Info{Version: Devel},
			line: Devel,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := From(&tc.bi)
			if got != tc.want {
				t.Errorf("From = %+v, want %+v", got, tc.want)
			}
			if s := got.String(); s != tc.line {
				t.Errorf("String = %q, want %q", s, tc.line)
			}
		})
	}
}

// TestReadLdflags checks that the release build's -ldflags version wins
// over what the toolchain recorded, and that the test binary's own Go
// version is reported.
func TestReadLdflags(t *testing.T) {
	defer func(v, r string) { version, revision = v, r }(version, revision)
	version, revision = "v9.9.9", "feedbeef"
	i := Read()
	if i.Version != "v9.9.9" || i.Revision != "feedbeef" {
		t.Errorf("Read() = %+v, want the -ldflags version v9.9.9 and revision feedbeef", i)
	}
	if i.GoVersion == "" {
		t.Error("Read().GoVersion is empty; the toolchain records it in every binary")
	}
}
