// Package buildinfo says which toolgate this is: the version, the VCS
// revision and time it was built from, and the Go version, as the Go
// toolchain records them in the binary (runtime/debug.ReadBuildInfo). A
// release build (make release) names its version with -ldflags
// "-X github.com/toolgate/toolgate/internal/buildinfo.version=v1.2.3"
// (and .revision, for a checkout the toolchain does not stamp: a git
// worktree, or a source archive); `go install …@v1.2.3` records the
// module version itself.
package buildinfo

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// Devel is the version of a build that records none: `go build` or
// `go run` in a checkout, without -ldflags.
const Devel = "0.1.0-dev"

// version and revision are set by the release build's -ldflags; empty
// otherwise.
var version, revision string

// Info is what a build recorded about itself. A field the build did not
// record is empty (Version is [Devel] then).
type Info struct {
	Version   string // v1.2.3, or Devel
	Revision  string // the VCS commit, with "+dirty" when the tree had changes
	Time      string // the commit's time, RFC 3339
	GoVersion string // go1.26.8
}

// Read returns this binary's build information.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Version: orDevel(version), Revision: revision}
	}
	i := From(bi)
	if version != "" {
		i.Version = version
	}
	if revision != "" {
		i.Revision = revision
	}
	return i
}

// From returns what bi records: the main module's version (Devel when it
// is "(devel)" or empty) and the vcs.* settings.
func From(bi *debug.BuildInfo) Info {
	i := Info{Version: bi.Main.Version, GoVersion: bi.GoVersion}
	if i.Version == "(devel)" {
		i.Version = ""
	}
	i.Version = orDevel(i.Version)
	var dirty bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			i.Revision = s.Value
		case "vcs.time":
			i.Time = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && i.Revision != "" {
		i.Revision += "+dirty"
	}
	return i
}

func orDevel(v string) string {
	if v == "" {
		return Devel
	}
	return v
}

// String is the version line `toolgate version` prints after the
// program's name: "v1.2.3 (revision 0123abc, 2026-11-29T02:00:00Z, go1.26.8)",
// leaving out what the build did not record.
func (i Info) String() string {
	var parts []string
	if i.Revision != "" {
		parts = append(parts, "revision "+i.Revision)
	}
	if i.Time != "" {
		parts = append(parts, i.Time)
	}
	if i.GoVersion != "" {
		parts = append(parts, i.GoVersion)
	}
	if len(parts) == 0 {
		return i.Version
	}
	return fmt.Sprintf("%s (%s)", i.Version, strings.Join(parts, ", "))
}
