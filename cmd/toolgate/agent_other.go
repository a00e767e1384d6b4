//go:build !unix

package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"

	"github.com/toolgate/toolgate/internal/cli"
)

// execAgent runs the agent binary at path as a child with this process's
// stdio and environment, and exits with its code. An interrupt reaches
// both (the console sends it to the whole group); this process, which
// catches it, waits for the child's exit.
func execAgent(path string, args []string) error {
	cmd := exec.Command(path, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		code := ee.ExitCode()
		if code < 0 {
			code = 1
		}
		return cli.ExitError{Code: code}
	}
	if err != nil {
		return fmt.Errorf("running %s: %w", path, err)
	}
	return nil
}
