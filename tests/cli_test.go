package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// cliResult is what one run of the toolgate command produced.
type cliResult struct {
	stdout, stderr string
	code           int
}

func (r cliResult) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// runCLI runs toolgate with args, bounded by callTimeout.
func runCLI(t *testing.T, args ...string) cliResult {
	t.Helper()
	return runProgram(t, toolgateBin, nil, args...)
}

// runProgram runs the binary bin with args and env added to this process's
// environment (a variable in env replaces the inherited one), bounded by
// callTimeout.
func runProgram(t *testing.T, bin string, env []string, args ...string) cliResult {
	t.Helper()
	return runProgramIn(t, "", bin, env, args...)
}

// runProgramIn is runProgram in the working directory dir ("" for the
// test's own).
func runProgramIn(t *testing.T, dir, bin string, env []string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	name := filepath.Base(bin) + " " + strings.Join(args, " ")
	if _, isExit := errors.AsType[*exec.ExitError](err); err != nil && !isExit {
		t.Fatalf("running %s: %v", name, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("%s did not finish within %v", name, callTimeout)
	}
	return cliResult{stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()}
}

func TestCLIValidate(t *testing.T) {
	good := writeConfig(t, baseConfig)
	r := runCLI(t, "validate", "--config", good)
	if want := good + ": valid (4 tools)\n"; r.code != 0 || r.stdout != want {
		t.Errorf("validate of a good file: %v\nwant exit 0 and stdout %q", r, want)
	}

	tests := []struct {
		name string
		yaml string
		// want are `:LINE:COL: path: ` prefixes that must each follow the
		// file's name in an error line.
		want []string
	}{
		{
			name: "unknown key",
			yaml: "server:\n  sse: true\n  listn: 127.0.0.1:9\nbuiltin: [calc]\n",
			want: []string{":3:3: server.listn: "},
		},
		{
			name: "unknown top-level key",
			yaml: "builtin: [calc]\nplugins: []\n",
			want: []string{":2:1: plugins: "},
		},
		{
			name: "wrong type",
			yaml: "server:\n  max_body_bytes: lots\n",
			want: []string{":2:19: server.max_body_bytes: "},
		},
		{
			name: "every problem at once",
			yaml: "server:\n  max_body_bytes: -1\n  shutdown_grace: -5s\nbuiltin: [calc, abacus]\nlog: {level: loud}\n",
			want: []string{":2:19: server.max_body_bytes: ", ":3:19: server.shutdown_grace: ", ":4:17: builtin[1]: ", ":5:14: log.level: "},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bad := writeConfig(t, tc.yaml)
			r := runCLI(t, "validate", "--config", bad)
			if r.code != 1 {
				t.Errorf("validate exit code %d, want 1\n%v", r.code, r)
			}
			if strings.Contains(r.stdout, "valid") {
				t.Errorf("validate of a bad file printed %q on stdout", r.stdout)
			}
			for _, pos := range tc.want {
				if !strings.Contains(r.stderr, bad+pos) {
					t.Errorf("stderr does not contain %q:\n%s", bad+pos, r.stderr)
				}
			}
		})
	}

	t.Run("missing file", func(t *testing.T) {
		r := runCLI(t, "validate", "--config", t.TempDir()+"/absent.yaml")
		if r.code == 0 {
			t.Errorf("validate of a missing file exited 0\n%v", r)
		}
	})
}

func TestCLITools(t *testing.T) {
	cfg := writeConfig(t, baseConfig)
	names := []string{"calc", "clock_now", "scratchpad", "sleep"}

	r := runCLI(t, "tools", "--config", cfg)
	if r.code != 0 {
		t.Fatalf("tools: %v", r)
	}
	for _, n := range names {
		if !strings.Contains(r.stdout, n) {
			t.Errorf("tools output does not list %s:\n%s", n, r.stdout)
		}
	}

	r = runCLI(t, "tools", "--config", cfg, "--json")
	if r.code != 0 {
		t.Fatalf("tools --json: %v", r)
	}
	var rows []struct {
		Name        string          `json:"name"`
		InputSchema json.RawMessage `json:"inputSchema"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil {
		t.Fatalf("tools --json output is not a JSON array: %v\n%s", err, r.stdout)
	}
	var got []string
	for _, row := range rows {
		got = append(got, row.Name)
		if len(row.InputSchema) == 0 {
			t.Errorf("tools --json: %s has no inputSchema", row.Name)
		}
	}
	slices.Sort(got)
	if diff := cmp.Diff(names, got); diff != "" {
		t.Errorf("tools --json names (-want +got):\n%s", diff)
	}
}

func TestCLICall(t *testing.T) {
	cfg := writeConfig(t, baseConfig)
	type callOut struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		StructuredContent map[string]any `json:"structuredContent"`
		IsError           bool           `json:"isError"`
	}
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantText string // prefix of the first text content
	}{
		{"calc", []string{"calc", `{"expression":"1+1"}`}, 0, "2"},
		{"division by zero", []string{"calc", `{"expression":"1/0"}`}, 1, "execution: "},
		{"invalid arguments", []string{"calc", `{"expression":5}`}, 1, "validation: "},
		{"miscased name", []string{"CALC", `{"expression":"2*21"}`}, 0, "42"},
		{"named thread", []string{"--thread", "cli", "scratchpad", `{"op":"put","key":"k","value":"v"}`}, 0, "stored k"},
		{"missing note", []string{"--thread", "cli", "scratchpad", `{"op":"get","key":"k"}`}, 1, "not_found: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"call", "--config", cfg}, tc.args...)
			r := runCLI(t, args...)
			if r.code != tc.wantCode {
				t.Errorf("exit code %d, want %d\n%v", r.code, tc.wantCode, r)
			}
			var out callOut
			if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
				t.Fatalf("stdout is not a JSON result: %v\n%v", err, r)
			}
			if out.IsError != (tc.wantCode != 0) {
				t.Errorf("isError = %v, want %v", out.IsError, tc.wantCode != 0)
			}
			if len(out.Content) == 0 || !strings.HasPrefix(out.Content[0].Text, tc.wantText) {
				t.Errorf("content %+v, want text starting with %q", out.Content, tc.wantText)
			}
		})
	}

	t.Run("structured result", func(t *testing.T) {
		r := runCLI(t, "call", "--config", cfg, "calc", `{"expression":"1+1"}`)
		var out callOut
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
			t.Fatalf("stdout is not a JSON result: %v\n%v", err, r)
		}
		if diff := cmp.Diff(map[string]any{"value": 2.0}, out.StructuredContent); diff != "" {
			t.Errorf("structuredContent (-want +got):\n%s", diff)
		}
	})

	t.Run("unknown tool", func(t *testing.T) {
		r := runCLI(t, "call", "--config", cfg, "calcc", `{}`)
		if r.code != 1 || !strings.Contains(r.stderr, `unknown tool "calcc"`) || !strings.Contains(r.stderr, `"calc"`) {
			t.Errorf("call calcc: %v\nwant exit 1 and an error suggesting calc on stderr", r)
		}
	})

	t.Run("arguments not JSON", func(t *testing.T) {
		r := runCLI(t, "call", "--config", cfg, "calc", `{expression: 1+1}`)
		if r.code == 0 {
			t.Errorf("call with invalid JSON arguments exited 0\n%v", r)
		}
	})
}

// TestCLIVersion checks that `toolgate version` names the build: its
// version and at least the Go version it was built with (the revision
// and time are there when the toolchain stamped them: not in a git
// worktree, where go build records no VCS information).
func TestCLIVersion(t *testing.T) {
	for _, arg := range []string{"version", "--version"} {
		r := runCLI(t, arg)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "toolgate ") || !strings.Contains(r.stdout, runtime.Version()+")") {
			t.Errorf("%s: %v\nwant exit 0 and \"toolgate <version> (…%s)\"", arg, r, runtime.Version())
		}
	}
}
