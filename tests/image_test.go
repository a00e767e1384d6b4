package tests

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
	for _, want := range []string{"\nFROM scratch\n", "\nUSER 65532:65532\n", `VOLUME ["/etc/toolgate"]`, "\nWORKDIR /etc/toolgate\n", "ENV TOOLGATE_LISTEN=0.0.0.0:8080", `CMD ["serve"]`} {
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
