package main

import (
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"

	"github.com/toolgate/toolgate/internal/cli"
)

// agentBinary is the program `toolgate agent` runs. The agent loop is a
// binary of its own (cmd/toolgate-agent) because it links the model
// providers' SDKs, whose package init and code would cost every toolgate
// serve about 9 MiB of RSS: Go runs every linked package's init whatever
// the subcommand.
const agentBinary = "toolgate-agent"

// cmdAgent runs `toolgate agent ARGS...`: it finds toolgate-agent and
// hands it the arguments, the environment and stdio (on Unix it replaces
// this process with it, so its exit code and signals are the command's).
func cmdAgent(args []string) error {
	path, err := findAgent()
	if err != nil {
		return err
	}
	if self, ok := debug.ReadBuildInfo(); ok {
		if agent, err := buildinfo.ReadFile(path); err == nil {
			if w := agentMismatch(self, agent); w != "" {
				fmt.Fprintf(os.Stderr, "toolgate: warning: %s at %s %s; its flags and messages may differ from this toolgate's docs: install both from one version (make build puts both in bin/)\n", agentBinary, path, w)
			}
		}
	}
	return execAgent(path, args)
}

// agentMismatch says how the agent build differs from self (toolgate's
// own): another module, or another version; "" when they match or either
// build cannot tell (no version and no VCS revision recorded).
func agentMismatch(self, agent *debug.BuildInfo) string {
	if agent.Main.Path != self.Main.Path {
		return fmt.Sprintf("is not toolgate's (its module is %q)", agent.Main.Path)
	}
	sv, av := buildVersion(self), buildVersion(agent)
	if sv == "" || av == "" || sv == av {
		return ""
	}
	return fmt.Sprintf("is version %s, this toolgate %s", av, sv)
}

// buildVersion is a build's module version, else the VCS revision it was
// built from ("+dirty" when the tree had changes), else "".
func buildVersion(bi *debug.BuildInfo) string {
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev != "" && modified == "true" {
		rev += "+dirty"
	}
	return rev
}

// findAgent returns the path of toolgate-agent: next to this executable
// (symbolic links resolved), as `make build` and a release archive put it,
// else the first in PATH.
func findAgent() (string, error) {
	where := "the toolgate executable"
	if exe, err := os.Executable(); err == nil {
		if p, err := filepath.EvalSymlinks(exe); err == nil {
			exe = p
		}
		where = exe
		if p, err := exec.LookPath(filepath.Join(filepath.Dir(exe), agentBinary)); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath(agentBinary); err == nil {
		return p, nil
	}
	return "", cli.ExitError{Code: 2, Msg: fmt.Sprintf("toolgate agent runs the separate %s binary (it carries the model providers' SDKs, which would cost every toolgate serve about 9 MiB of RSS), and none was found next to %s or in PATH: build it next to toolgate with make build (bin/%s), or use a release archive, which holds both", agentBinary, where, agentBinary)}
}
