package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/internal/cli"
)

// commonFlags are the flags every command but version and completion
// takes (cli.NewFlags).
var commonFlags = []string{"config", "log-level", "log-format"}

// commandFlags lists each command and its own flags, for the completion
// scripts; TestCompletionKnowsEveryFlag checks it against each command's
// --help. agent's flags are toolgate-agent's, which completes them
// as the same command line.
var commandFlags = map[string][]string{
	"serve":      {"listen", "insecure-no-auth", "pid-file"},
	"stdio":      {"pid-file", "endpoint"},
	"reload":     {"pid-file", "pid"},
	"auth":       {"no-browser"},
	"validate":   {},
	"tools":      {"json", "skipped"},
	"call":       {"thread"},
	"agent":      {"provider", "model", "base-url", "mcp", "mcp-header", "max-iterations", "system", "max-tokens", "thinking-budget", "idle-timeout"},
	"version":    nil,
	"completion": nil,
}

// cmdCompletion prints the completion script of the shell args names.
func cmdCompletion(args []string, stdout io.Writer) error {
	if len(args) != 1 {
		return cli.ExitError{Code: 2, Msg: "usage: toolgate completion bash|zsh|fish; e.g. toolgate completion bash > /etc/bash_completion.d/toolgate"}
	}
	switch args[0] {
	case "bash":
		fmt.Fprint(stdout, bashCompletion())
	case "zsh":
		fmt.Fprint(stdout, "#compdef toolgate\nautoload -U +X bashcompinit && bashcompinit\n"+bashCompletion())
	case "fish":
		fmt.Fprint(stdout, fishCompletion())
	default:
		return cli.ExitError{Code: 2, Msg: fmt.Sprintf("completion for %q: use bash, zsh or fish", args[0])}
	}
	return nil
}

// commands returns the command names, sorted.
func commands() []string {
	var names []string
	for name := range commandFlags {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// flagsOf returns the --flags of command name.
func flagsOf(name string) []string {
	fl := commandFlags[name]
	if fl != nil {
		fl = append(slices.Clone(commonFlags), fl...)
	}
	out := make([]string, len(fl))
	for i, f := range fl {
		out[i] = "--" + f
	}
	return out
}

// bashCompletion completes the command, then its flags, file names after
// --config, the levels and formats, and the shells of completion.
func bashCompletion() string {
	var b strings.Builder
	b.WriteString("# toolgate completion for bash (toolgate completion bash)\n_toolgate() {\n")
	b.WriteString("  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n")
	fmt.Fprintf(&b, "  if [ \"$COMP_CWORD\" -eq 1 ]; then COMPREPLY=($(compgen -W %q -- \"$cur\")); return; fi\n", strings.Join(commands(), " "))
	b.WriteString("  case $prev in\n")
	b.WriteString("    --config) COMPREPLY=($(compgen -f -- \"$cur\")); return;;\n")
	b.WriteString("    --log-level) COMPREPLY=($(compgen -W \"debug info warn error\" -- \"$cur\")); return;;\n")
	b.WriteString("    --log-format) COMPREPLY=($(compgen -W \"text json\" -- \"$cur\")); return;;\n")
	b.WriteString("    --provider) COMPREPLY=($(compgen -W \"anthropic openai\" -- \"$cur\")); return;;\n")
	b.WriteString("  esac\n  case ${COMP_WORDS[1]} in\n")
	for _, name := range commands() {
		words := strings.Join(flagsOf(name), " ")
		if name == "completion" {
			words = "bash zsh fish"
		}
		fmt.Fprintf(&b, "    %s) COMPREPLY=($(compgen -W %q -- \"$cur\"));;\n", name, words)
	}
	b.WriteString("  esac\n}\ncomplete -o default -F _toolgate toolgate\n")
	return b.String()
}

// fishCompletion completes the commands and each one's flags.
func fishCompletion() string {
	var b strings.Builder
	b.WriteString("# toolgate completion for fish (toolgate completion fish)\ncomplete -c toolgate -f\n")
	fmt.Fprintf(&b, "complete -c toolgate -n __fish_use_subcommand -a %q\n", strings.Join(commands(), " "))
	for _, name := range commands() {
		if name == "completion" {
			fmt.Fprintf(&b, "complete -c toolgate -n '__fish_seen_subcommand_from completion' -a 'bash zsh fish'\n")
			continue
		}
		for _, f := range flagsOf(name) {
			f = strings.TrimPrefix(f, "--")
			extra := ""
			switch f {
			case "config":
				extra = " -r -F"
			case "log-level":
				extra = " -x -a 'debug info warn error'"
			case "log-format":
				extra = " -x -a 'text json'"
			case "provider":
				extra = " -x -a 'anthropic openai'"
			}
			fmt.Fprintf(&b, "complete -c toolgate -n '__fish_seen_subcommand_from %s' -l %s%s\n", name, f, extra)
		}
	}
	return b.String()
}
