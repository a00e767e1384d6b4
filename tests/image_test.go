package tests

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDockerfileBuildStage runs the go build line of the Dockerfile's
// build stage, as the image build would (no container registry is
// reachable here to pull its golang base: make image cannot run in this
// sandbox), and checks what the final stage relies on: static binaries
// that report the version given as a build argument, on an empty base, as
// a non-root user, with the configuration volume.
func TestDockerfileBuildStage(t *testing.T) {
	data, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(data)
	for _, want := range []string{"go build -trimpath -tags " + releaseTags + " ", "\nFROM scratch\n", "\nUSER 65532:65532\n", `VOLUME ["/etc/toolgate"]`, "\nWORKDIR /etc/toolgate\n", "ENV TOOLGATE_LISTEN=0.0.0.0:8080", `CMD ["serve"]`} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	line := regexp.MustCompile(`(?m)^RUN (CGO_ENABLED=0 go build .*)$`).FindStringSubmatch(df)
	if line == nil {
		t.Fatal("Dockerfile has no RUN CGO_ENABLED=0 go build line")
	}
	out := t.TempDir()
	cmd := strings.NewReplacer("${VERSION}", "v0.0.0-imagetest", "${REVISION}", "feedbeef", "/out/bin/", out+"/").Replace(line[1])
	build := exec.CommandContext(t.Context(), "sh", "-c", cmd)
	build.Dir = ".."
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, b)
	}
	for _, name := range []string{"toolgate", "toolgate-agent"} {
		f, err := elf.Open(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s has a dynamic loader: not static, it cannot run on an empty base", name)
			}
		}
		f.Close()
	}
	r := runProgram(t, filepath.Join(out, "toolgate"), nil, "version")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "toolgate v0.0.0-imagetest (revision feedbeef, ") {
		t.Errorf("the image's toolgate version: %v\nwant the build arguments' version and revision", r)
	}
}

// releaseTags are the build tags of every binary that ships: the
// Makefile's TAGS, which TestReleaseTags checks against this.
const releaseTags = "grpcnotrace"

// TestReleaseTags checks the Makefile builds, tests and vets with
// releaseTags, and that they still do what they are there for: without
// grpcnotrace, gRPC links golang.org/x/net/trace, whose HTML templates
// call methods by name through reflect and so make the linker keep every
// exported method of every linked type (48 MB instead of 33). When gRPC
// stops linking it anyway, the tag can go.
func TestReleaseTags(t *testing.T) {
	data, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	mk := string(data)
	if !strings.Contains(mk, "\nTAGS := "+releaseTags+"\n") {
		t.Errorf("the Makefile's TAGS is not %q", releaseTags)
	}
	for _, use := range []string{"build -tags $(TAGS) ", "build -trimpath -tags $(TAGS) ", "test -race -count=1 -tags $(TAGS) ", "vet -tags $(TAGS) "} {
		if !strings.Contains(mk, use) {
			t.Errorf("the Makefile lacks %q", use)
		}
	}
	const trace = "golang.org/x/net/trace"
	deps := func(tags ...string) []string {
		args := append(append([]string{"list", "-deps"}, tags...), "./cmd/toolgate")
		cmd := exec.CommandContext(t.Context(), "go", args...)
		cmd.Dir = ".."
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go %s: %v", strings.Join(args, " "), err)
		}
		return strings.Fields(string(out))
	}
	if slices.Contains(deps("-tags", releaseTags), trace) {
		t.Errorf("toolgate built with -tags %s still links %s", releaseTags, trace)
	}
	if !slices.Contains(deps(), trace) {
		t.Errorf("toolgate no longer links %s without -tags %s: the tag can go", trace, releaseTags)
	}
}
