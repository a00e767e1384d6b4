package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/internal/buildinfo"
	"github.com/toolgate/toolgate/internal/cli"
)

func main() {
	ctx, again, stop := cli.NotifySignals()
	err := run(ctx, again, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	cli.Exit(err)
}

const usage = `toolgate: an MCP gateway

usage:
  toolgate serve    [flags]             serve MCP over streamable HTTP (and SSE)
  toolgate stdio    [flags]             serve MCP over stdio (Claude Desktop)
  toolgate validate [flags]             check a configuration file
  toolgate reload   [flags] --pid-file FILE | --pid PID
                                        check it, then make a running serve or stdio reload it (SIGHUP)
  toolgate tools    [flags] [--json]    list the tools a configuration yields
                    [--skipped]         or the OpenAPI operations left out, with why
  toolgate call     [flags] NAME [JSON] call one tool through the full pipeline
  toolgate agent    [flags] TASK        let a model do TASK with the tools (--provider, --model)
  toolgate auth     login|status|logout authorize OAuth upstreams (see toolgate auth)
  toolgate version                      print the version, VCS revision and Go version
  toolgate completion bash|zsh|fish     print a shell completion script

common flags:
  --config FILE        configuration (default ./toolgate.yaml if present, else the embedded default)
  --log-level LEVEL    debug, info, warn or error (default from config: info)
  --log-format FORMAT  text or json (default from config: text)

Flags go after the command, before or after its arguments; after -- every
argument is positional. serve listens per --listen, else $TOOLGATE_LISTEN,
else server.listen.
run 'toolgate COMMAND --help' for a command's own flags.
`

// run runs the command args name. ctx ends at the first SIGINT or SIGTERM;
// again receives the later ones, which end a command's graceful shutdown
// at once (serve, stdio, tools and call: the gateway's upstream processes
// are killed rather than waited for).
func run(ctx context.Context, again <-chan os.Signal, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return cli.ExitError{Code: 2}
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve":
		return cmdServe(ctx, again, rest, stderr)
	case "stdio":
		return cmdStdio(ctx, again, rest, stdin, stdout, stderr)
	case "validate":
		return cmdValidate(rest, stdout, stderr)
	case "reload":
		return cmdReload(rest, stdout, stderr)
	case "tools":
		return cmdTools(ctx, again, rest, stdout, stderr)
	case "call":
		return cmdCall(ctx, again, rest, stdout, stderr)
	case "agent":
		return cmdAgent(rest)
	case "auth":
		return cmdAuth(ctx, rest, stdout, stderr)
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "toolgate", buildinfo.Read())
		return nil
	case "help", "--help", "-h":
		fmt.Fprint(stdout, usage)
		return nil
	case "completion":
		return cmdCompletion(rest, stdout)
	default:
		if strings.HasPrefix(cmd, "-") {
			return flagsFirst(args, stderr)
		}
		fmt.Fprint(stderr, usage)
		return cli.ExitError{Code: 2, Msg: fmt.Sprintf("unknown command %q", cmd)}
	}
}

// flagsFirst is the error of a command line that starts with a flag:
// flags go after the command, which it shows when it finds one in args.
func flagsFirst(args []string, stderr io.Writer) error {
	for i, a := range args {
		if _, ok := commandFlags[a]; ok {
			fixed := append([]string{a}, append(slices.Clone(args[:i]), args[i+1:]...)...)
			return cli.ExitError{Code: 2, Msg: fmt.Sprintf("flags go after the command: toolgate %s", strings.Join(fixed, " "))}
		}
	}
	fmt.Fprint(stderr, usage)
	return cli.ExitError{Code: 2, Msg: fmt.Sprintf("%s: flags go after the command, like toolgate serve --config FILE", args[0])}
}
