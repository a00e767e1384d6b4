//go:build unix

package agent

import (
	"os"
	"syscall"
)

// serverProcAttr puts a stdio server in a process group of its own, so
// that killing the group reaches whatever the server started. A
// terminal's Ctrl-C then reaches the agent alone, which closes the server.
func serverProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// killServer sends SIGKILL to the process group p leads (nothing left in
// it is fine).
func killServer(p *os.Process) { _ = syscall.Kill(-p.Pid, syscall.SIGKILL) }
