package main

import (
	"os"
	"sync"

	"github.com/toolgate/toolgate/internal/cli"
)

func main() {
	// The first SIGINT or SIGTERM cancels the run (exit 130), and the
	// agent closes its tools: a stdio MCP server that ignores its stdin
	// closing is waited for up to 5 s, an in-process gateway's upstreams,
	// closed together, up to 4 s. A second signal ends the agent at once,
	// killing the tools' processes first.
	ctx, again, stop := cli.NotifySignals()
	go func() {
		sig := <-again
		exitMu.Lock() // before the kill, which lets the run end
		abort.run()
		cli.Exit(cli.SignalExit(sig, "the tools' processes were killed, not closed"))
	}()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	exitMu.Lock()
	cli.Exit(err)
}

// exitMu makes the agent's exit one decision, never unlocked: the first
// of the run's end and a second signal to take it exits, and the other
// waits for the process to end. Without it, the kill a second signal makes
// ends the closing of the tools, and the run's own "interrupted" could win
// the race to exit over the second signal's message.
var exitMu sync.Mutex

// abort holds what a second signal does before the agent exits: kill the
// processes of its tools, which closing would have waited for.
var abort aborter

type aborter struct {
	mu    sync.Mutex
	kills []func()
}

// add registers kill, to be run if the agent is aborted.
func (a *aborter) add(kill func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.kills = append(a.kills, kill)
}

// run runs every kill registered.
func (a *aborter) run() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, kill := range a.kills {
		kill()
	}
}
