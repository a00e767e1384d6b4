package prereq

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

const needScript = "../../.ci/need"

// TestNeedScriptAgrees checks that .ci/need's table is this package's.
func TestNeedScriptAgrees(t *testing.T) {
	data, err := os.ReadFile(needScript)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(data), "<<'TABLE'\n")
	body, _, ok := strings.Cut(rest, "TABLE\n")
	if !ok {
		t.Fatal(".ci/need has no TABLE here-document")
	}
	var got []Component
	for _, line := range strings.Split(strings.TrimSpace(body), "\n") {
		f := strings.Split(line, "|")
		if len(f) != 4 {
			t.Fatalf(".ci/need table line %q: want 4 fields", line)
		}
		got = append(got, Component{Name: f[0], Programs: strings.Split(f[1], ","), Debian: f[2], Elsewhere: f[3]})
	}
	if len(got) != len(All) {
		t.Fatalf(".ci/need lists %d components, internal/prereq %d", len(got), len(All))
	}
	for i, c := range All {
		g := got[i]
		if g.Name != c.Name || !slices.Equal(g.Programs, c.Programs) || g.Debian != c.Debian || g.Elsewhere != c.Elsewhere {
			t.Errorf(".ci/need has %+v, internal/prereq %+v", g, c)
		}
	}
}

// need runs .ci/need with PATH holding only bin (and the tools the script
// uses), no sbin directory searched, and env added.
func need(t *testing.T, bin string, env []string, args ...string) (string, int) {
	t.Helper()
	for _, tool := range []string{"sh", "cat", "grep", "cut", "tr", "id"} {
		if _, err := os.Lstat(filepath.Join(bin, tool)); err == nil {
			continue // the test put its own there
		}
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Fatalf("the script needs %s: %v", tool, err)
		}
		if err := os.Symlink(p, filepath.Join(bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.CommandContext(t.Context(), filepath.Join(bin, "sh"), append([]string{needScript}, args...)...)
	cmd.Env = append([]string{"PATH=" + bin, "NEED_SBIN_DIRS="}, env...)
	out, _ := cmd.CombinedOutput()
	return string(out), cmd.ProcessState.ExitCode()
}

// fake writes an executable shell script named name into dir.
func fake(t *testing.T, dir, name, script string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestNeedWithoutAptGet(t *testing.T) {
	out, code := need(t, t.TempDir(), nil, "haproxy")
	if code != 0 || !strings.Contains(out, ".ci/need: haproxy is missing, and there is no apt-get here to install it: brew install haproxy (macOS)") {
		t.Errorf("without apt-get: exit %d, %q; want exit 0 naming haproxy and how to get it", code, out)
	}
	out, code = need(t, t.TempDir(), []string{"CI=true"}, "haproxy")
	if code != 1 || !strings.Contains(out, "haproxy is missing") {
		t.Errorf("without apt-get under CI=true: exit %d, %q; want exit 1", code, out)
	}
}

func TestNeedInstallsOnlyWhatIsMissing(t *testing.T) {
	bin := t.TempDir()
	log := filepath.Join(t.TempDir(), "apt-get.log")
	fake(t, bin, "haproxy", "exit 0")                             // installed
	fake(t, bin, "apt-get", `echo "$DEBIAN_FRONTEND $*" >> `+log) // records what it was asked
	fake(t, bin, "id", "echo 0")                                  // root
	out, code := need(t, bin, nil, "haproxy", "nginx", "redis-server")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	data, _ := os.ReadFile(log)
	if got, want := string(data), "noninteractive install -y --no-upgrade nginx-light redis-server\n"; got != want {
		t.Errorf("apt-get was run with %q, want %q: only the missing packages, without upgrades", got, want)
	}
}

func TestNeedWithoutRoot(t *testing.T) {
	bin := t.TempDir()
	fake(t, bin, "apt-get", "echo apt-get must not run; exit 1")
	fake(t, bin, "id", "echo 1000")
	out, code := need(t, bin, nil, "redis-server")
	if code != 0 || !strings.Contains(out, "install it with sudo apt-get install -y --no-upgrade redis-server") || strings.Contains(out, "must not run") {
		t.Errorf("without root: exit %d, %q; want the sudo command and no apt-get run", code, out)
	}
}

func TestNeedUnknownComponent(t *testing.T) {
	out, code := need(t, t.TempDir(), nil, "postgres")
	if code != 2 || !strings.Contains(out, `unknown component "postgres"; known: chromium redis-server haproxy nginx`) {
		t.Errorf("exit %d, %q", code, out)
	}
}

// TestNeedHelper checks Need: a program found is returned; a missing one
// skips the test outside CI and fails it under CI=true, with the message.
func TestNeedHelper(t *testing.T) {
	bin := t.TempDir()
	fake(t, bin, "fakeprog", "exit 0")
	t.Setenv("PATH", bin)
	c := Component{Name: "fakeprog", Programs: []string{"fakeprog"}, Debian: "fakeprog-pkg", Elsewhere: "build it", Target: "fake"}
	if p := c.Find(); p != filepath.Join(bin, "fakeprog") {
		t.Errorf("Find = %q", p)
	}
	gone := Component{Name: "gone", Programs: []string{"no-such-program-here"}, Debian: "gone-pkg", Elsewhere: "brew install gone", Target: "gone"}
	for _, ci := range []string{"", "true"} {
		t.Setenv("CI", ci)
		r := &recorder{TB: t}
		done := make(chan struct{})
		go func() { // Skip and Fatal end the goroutine, as in a test
			defer close(done)
			Need(r, gone)
		}()
		<-done
		want := "this test needs gone, which is not installed: `make gone` installs Debian's gone-pkg (apt-get install --no-upgrade); without apt-get: brew install gone"
		switch {
		case ci == "" && (!r.skipped || r.failed || !strings.HasPrefix(r.msg, want)):
			t.Errorf("outside CI: skipped %v failed %v %q; want a skip saying %q", r.skipped, r.failed, r.msg, want)
		case ci == "true" && (!r.failed || r.skipped || !strings.HasPrefix(r.msg, want)):
			t.Errorf("under CI=true: skipped %v failed %v %q; want a failure", r.skipped, r.failed, r.msg)
		}
	}
}

// recorder records what Need does to a test instead of doing it.
type recorder struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (r *recorder) Helper() {}
func (r *recorder) Skip(args ...any) {
	r.skipped, r.msg = true, args[0].(string)
	runtime.Goexit()
}
func (r *recorder) Fatal(args ...any) {
	r.failed, r.msg = true, args[0].(string)
	runtime.Goexit()
}
