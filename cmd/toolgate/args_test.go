package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/cli"
)

// runArgs runs the command line args in process.
func runArgs(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errb strings.Builder
	err = run(t.Context(), nil, args, strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), err
}

func TestFlagsAfterArguments(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "t.yaml")
	if err := os.WriteFile(cfg, []byte("builtin: [calc]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := runArgs(t, "call", "calc", `{"expression": "1+2"}`, "--config", cfg)
	if err != nil || !strings.Contains(out, `"text": "3"`) {
		t.Errorf("call with --config after the arguments: %v\nstdout %s\nstderr %s", err, out, stderr)
	}
	if _, _, err := runArgs(t, "validate", "--log-level", "warn", "--config", cfg); err != nil {
		t.Errorf("validate with flags: %v", err)
	}
}

func TestExtraArgumentsRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"tools", "extra-arg"}, `toolgate tools takes no arguments; unexpected "extra-arg"`},
		{[]string{"validate", "a.yaml"}, `toolgate validate takes no arguments; unexpected "a.yaml"`},
		{[]string{"serve", "--listen", "127.0.0.1:0", "now"}, `toolgate serve takes no arguments; unexpected "now"`},
		{[]string{"call", "calc", "{}", "{}"}, `toolgate call takes a tool NAME and at most one JSON-ARGUMENTS object (quote it as one argument); unexpected "{}"`},
		{[]string{"--config", "x.yaml", "tools", "--json"}, `flags go after the command: toolgate tools --config x.yaml --json`},
		{[]string{"--verbose"}, `--verbose: flags go after the command, like toolgate serve --config FILE`},
	} {
		_, _, err := runArgs(t, tc.args...)
		ec, ok := err.(cli.ExitError)
		if !ok || ec.Code != 2 || !strings.HasPrefix(ec.Msg, tc.want) {
			t.Errorf("%q: %v, want exit 2 with %q", tc.args, err, tc.want)
		}
	}
}

func TestListenFromEnvironment(t *testing.T) {
	t.Setenv(listenEnv, "127.0.0.1:1")
	_, stderr, _ := runArgs(t, "serve", "--help")
	if !strings.Contains(stderr, `(default "127.0.0.1:1")`) {
		t.Errorf("serve --help does not show $%s as --listen's default:\n%s", listenEnv, stderr)
	}
}
