package main

import (
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// flagLine matches a flag in flag.PrintDefaults output: "  -name value".
var flagLine = regexp.MustCompile(`(?m)^  -([a-z-]+)`)

// TestCompletionKnowsEveryFlag checks commandFlags against what each
// command's --help lists, so the completion cannot fall behind a new flag.
func TestCompletionKnowsEveryFlag(t *testing.T) {
	for _, name := range []string{"serve", "stdio", "validate", "reload", "tools", "call"} {
		var stdout, stderr strings.Builder
		err := run(t.Context(), nil, []string{name, "--help"}, strings.NewReader(""), &stdout, &stderr)
		if err == nil || err.Error() != "" {
			t.Fatalf("%s --help: %v", name, err)
		}
		var got []string
		for _, m := range flagLine.FindAllStringSubmatch(stderr.String(), -1) {
			got = append(got, "--"+m[1])
		}
		want := flagsOf(name)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: --help lists %v, the completion knows %v", name, got, want)
		}
	}
}

// TestBashCompletion runs the bash script's function as bash's completion
// would, for a command and for a flag.
func TestBashCompletion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed: nothing to complete with")
	}
	for line, want := range map[string]string{
		"toolgate se":             "serve",
		"toolgate tools --js":     "--json",
		"toolgate serve --li":     "--listen",
		"toolgate completion z":   "zsh",
		"toolgate call --log-l":   "--log-level",
		"toolgate x --log-format": "text json",
	} {
		words := strings.Fields(line)
		if strings.HasSuffix(line, "--log-format") {
			words = append(words, "")
		}
		script := bashCompletion() + "COMP_WORDS=(" + quoteWords(words) + "); COMP_CWORD=" + strconv.Itoa(len(words)-1) + "; _toolgate; echo \"${COMPREPLY[*]}\"\n"
		out, err := exec.Command(bash, "-c", script).CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v\n%s", err, out)
		}
		if got := strings.TrimSpace(string(out)); got != want {
			t.Errorf("completing %q: %q, want %q", line, got, want)
		}
	}
}

func TestCompletionShells(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		var out strings.Builder
		if err := cmdCompletion([]string{shell}, &out); err != nil || !strings.Contains(out.String(), "serve") {
			t.Errorf("completion %s: %v, %q", shell, err, out.String())
		}
	}
	if err := cmdCompletion([]string{"tcsh"}, &strings.Builder{}); err == nil || !strings.Contains(err.Error(), "use bash, zsh or fish") {
		t.Errorf("completion tcsh: %v, want an error naming the shells", err)
	}
}

func quoteWords(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = "'" + w + "'"
	}
	return strings.Join(q, " ")
}
