// Package prereq finds the programs the tests run (Chromium, redis-server,
// HAProxy, nginx), which `make test` installs through .ci/need, and says
// what to do when one is missing: under CI=true, where every test must
// run, the test fails; elsewhere (a contributor's Mac, say) it is skipped
// with the component's name and how to get it, never counted as passed.
package prereq

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Component is a program a test needs.
type Component struct {
	Name      string   // what .ci/need and the make target call it
	Programs  []string // the executables that provide it, in order of preference
	Debian    string   // Debian's package, which .ci/need installs
	Elsewhere string   // how to get it without apt-get
	Target    string   // the Makefile target that installs it
}

// The components; .ci/need holds the same table (TestNeedScriptAgrees).
var (
	Chromium    = Component{"chromium", []string{"chromium", "chromium-browser"}, "chromium", "brew install --cask chromium (macOS), or your system's chromium package", "chromium"}
	RedisServer = Component{"redis-server", []string{"redis-server"}, "redis-server", "brew install redis (macOS), or your system's redis package", "redis-server"}
	HAProxy     = Component{"haproxy", []string{"haproxy"}, "haproxy", "brew install haproxy (macOS), or your system's haproxy package", "balancers"}
	Nginx       = Component{"nginx", []string{"nginx"}, "nginx-light", "brew install nginx (macOS), or your system's nginx package", "balancers"}
)

// All lists every component.
var All = []Component{Chromium, RedisServer, HAProxy, Nginx}

// Lookup returns the component called name.
func Lookup(name string) (Component, bool) {
	for _, c := range All {
		if c.Name == name {
			return c, true
		}
	}
	return Component{}, false
}

// sbinDirs are searched after PATH: Debian installs the servers there,
// and a user's PATH does not always hold them.
var sbinDirs = []string{"/usr/sbin", "/sbin", "/usr/local/sbin"}

// Find returns the path of c's program, or "" when none is installed.
func (c Component) Find() string {
	for _, name := range c.Programs {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	for _, dir := range sbinDirs {
		for _, name := range c.Programs {
			p := filepath.Join(dir, name)
			if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
				return p
			}
		}
	}
	return ""
}

// Missing is the message of a test that cannot run without c.
func (c Component) Missing() string {
	return "this test needs " + c.Name + ", which is not installed: `make " + c.Target +
		"` installs Debian's " + c.Debian + " (apt-get install --no-upgrade); without apt-get: " + c.Elsewhere
}

// Need returns the path of c's program; without one it fails t under
// CI=true and skips it elsewhere, saying what is missing and how to get
// it.
func Need(t testing.TB, c Component) string {
	t.Helper()
	if p := c.Find(); p != "" {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatal(c.Missing() + " (CI=true: a test that cannot run fails)")
	}
	t.Skip(c.Missing())
	return ""
}
