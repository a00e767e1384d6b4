package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, again, stop := notifySignals()
	err := run(ctx, again, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		code := 1
		if ec, ok := errors.AsType[exitError](err); ok {
			code = ec.code
			if ec.msg == "" {
				os.Exit(code)
			}
		}
		fmt.Fprintln(os.Stderr, "toolgate:", err)
		os.Exit(code)
	}
}

// notifySignals returns a context that the first SIGINT or SIGTERM
// cancels, which starts a graceful shutdown, and a channel that receives
// the signals after it, each of which asks to stop at once. stop restores
// the default handling of both signals.
func notifySignals() (ctx context.Context, again <-chan os.Signal, stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancel(context.Background())
	later := make(chan os.Signal, 1)
	done := make(chan struct{})
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-done:
			return
		}
		for {
			select {
			case s := <-sigs:
				select {
				case later <- s:
				default: // one pending is enough
				}
			case <-done:
				return
			}
		}
	}()
	return ctx, later, func() {
		signal.Stop(sigs)
		close(done)
		cancel()
	}
}

// exitError ends the program with code, printing msg if it is not empty.
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }

const usage = `toolgate: an MCP gateway

usage:
  toolgate serve    [flags]             serve MCP over streamable HTTP (and SSE)
  toolgate stdio    [flags]             serve MCP over stdio (Claude Desktop)
  toolgate validate [flags]             check a configuration file
  toolgate tools    [flags] [--json]    list the tools a configuration yields
                    [--skipped]         or the OpenAPI operations left out, with why
  toolgate call     [flags] NAME [JSON] call one tool through the full pipeline
  toolgate agent    [flags] TASK        let a model do TASK with the tools (--provider, --model)
  toolgate version                      print the version

common flags:
  --config FILE        configuration (default ./toolgate.yaml if present, else the embedded default)
  --log-level LEVEL    debug, info, warn or error (default from config: info)
  --log-format FORMAT  text or json (default from config: text)

run 'toolgate COMMAND --help' for a command's own flags.
`

// run runs the command args name. ctx ends at the first SIGINT or SIGTERM;
// again receives the later ones, which end serve's and stdio's graceful
// shutdown at once.
func run(ctx context.Context, again <-chan os.Signal, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitError{code: 2}
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve":
		return cmdServe(ctx, again, rest, stderr)
	case "stdio":
		return cmdStdio(ctx, again, rest, stdin, stdout, stderr)
	case "validate":
		return cmdValidate(rest, stdout, stderr)
	case "tools":
		return cmdTools(rest, stdout, stderr)
	case "call":
		return cmdCall(ctx, rest, stdout, stderr)
	case "agent":
		return cmdAgent(ctx, rest, stdout, stderr)
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "toolgate", version)
		return nil
	case "help", "--help", "-h":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return exitError{code: 2, msg: fmt.Sprintf("unknown command %q", cmd)}
	}
}
