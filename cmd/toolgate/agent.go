package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

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
	return execAgent(path, args)
}

// findAgent returns the path of toolgate-agent: next to this executable
// (symbolic links resolved), as `make build` and `go install` put it,
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
	return "", cli.ExitError{Code: 2, Msg: fmt.Sprintf("toolgate agent runs the separate %s binary (it carries the model providers' SDKs, which would cost every toolgate serve about 9 MiB of RSS), and none was found next to %s or in PATH: install it with go install github.com/toolgate/toolgate/cmd/%s@latest, or make build", agentBinary, where, agentBinary)}
}
