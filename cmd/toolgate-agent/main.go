package main

import (
	"os"

	"github.com/toolgate/toolgate/internal/cli"
)

func main() {
	// The first SIGINT or SIGTERM cancels the run (exit 130); the agent has
	// no graceful shutdown for a second one to cut short.
	ctx, _, stop := cli.NotifySignals()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	cli.Exit(err)
}
