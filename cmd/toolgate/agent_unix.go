//go:build unix

package main

import (
	"fmt"
	"os"
	"syscall"
)

// execAgent replaces this process with the agent binary at path.
func execAgent(path string, args []string) error {
	err := syscall.Exec(path, append([]string{path}, args...), os.Environ())
	return fmt.Errorf("running %s: %w", path, err)
}
