package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/internal/textcut"
)

// Common holds the flags every command takes.
type Common struct {
	Config    string
	LogLevel  string
	LogFormat string
}

// NewFlags returns the flag set of the command "toolgate name", with the
// common flags defined, writing its usage to stderr.
func NewFlags(name string, stderr io.Writer) (*flag.FlagSet, *Common) {
	fs := flag.NewFlagSet("toolgate "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := &Common{}
	fs.StringVar(&c.Config, "config", "", "configuration `file` (default ./toolgate.yaml if present, else the embedded default)")
	fs.StringVar(&c.LogLevel, "log-level", "", "log `level`: debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", "", "log `format`: text or json")
	return fs, c
}

// Parse parses args, flags and positional arguments in any order
// (`toolgate call calc '{}' --config x.yaml` as `toolgate call --config
// x.yaml calc '{}'`); after "--" every argument is positional. fs.Args()
// returns the positional arguments, in order. A usage error has already
// been printed by fs.
func Parse(fs *flag.FlagSet, args []string) error {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return ExitError{Code: 0}
			}
			return ExitError{Code: 2}
		}
		rest := fs.Args()
		// flag stops at the first argument that is not a flag, and after
		// a "--" it consumed (rest then follows it in args).
		if len(rest) == 0 || (len(args) > len(rest) && args[len(args)-len(rest)-1] == "--") {
			positional = append(positional, rest...)
			break
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
	// Leave fs.Args() holding the positional arguments: a parse of "--"
	// sets no flag.
	_ = fs.Parse(append([]string{"--"}, positional...))
	return nil
}

// MaxArgs refuses more than n positional arguments after [Parse], saying
// which were not expected; name is what the command takes ("" for
// nothing).
func MaxArgs(fs *flag.FlagSet, n int, takes string) error {
	if fs.NArg() <= n {
		return nil
	}
	extra := fs.Args()[n:]
	what := "takes no arguments"
	if takes != "" {
		what = "takes " + takes
	}
	return ExitError{Code: 2, Msg: fmt.Sprintf("%s %s; unexpected %s (flags go before or after the arguments: run '%s --help' for them)",
		fs.Name(), what, quoteAll(extra), fs.Name())}
}

// quoteAll quotes each of args, for an error message.
func quoteAll(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = strconv.Quote(a)
	}
	return strings.Join(q, " ")
}

// FirstLine returns the first line of s, cut with "…" before max bytes
// and never inside a character.
func FirstLine(s string, max int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > max {
		s = textcut.Prefix(s, max-1) + "…"
	}
	return s
}
