package main

import (
	"os"

	"github.com/toolgate/toolgate/internal/cli"
)

func main() {
	// The first SIGINT or SIGTERM cancels the run (exit 130), and the
	// agent closes its tools: a stdio MCP server that ignores its stdin
	// closing is waited for up to 5 s, an in-process gateway's upstreams,
	// closed together, up to 4 s. A second signal ends the agent at once.
	ctx, again, stop := cli.NotifySignals()
	go func() { cli.Exit(cli.SignalExit(<-again, "the tools were not closed")) }()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	cli.Exit(err)
}
