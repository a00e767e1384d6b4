//go:build !unix

package agent

import (
	"os"
	"syscall"
)

// serverProcAttr leaves a stdio server in the agent's process group:
// there are no Unix process groups here.
func serverProcAttr() *syscall.SysProcAttr { return nil }

// killServer kills the server's own process.
func killServer(p *os.Process) { _ = p.Kill() }
