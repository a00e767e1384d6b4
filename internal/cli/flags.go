package cli

import (
	"errors"
	"flag"
	"io"
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

// Parse parses args; a usage error has already been printed by fs.
func Parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitError{Code: 0}
		}
		return ExitError{Code: 2}
	}
	return nil
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
