package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/toolgate/toolgate/builtin"
	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/internal/buildinfo"
)

// Version is both commands' version (internal/buildinfo says where it
// comes from); Build reports it to clients.
var Version = buildinfo.Read().Version

// load reads the configuration and builds a logger from it and the flags.
func (c *Common) load(stderr io.Writer) (*config.Config, *slog.Logger, error) {
	cfg, err := config.Resolve(c.Config, &config.Options{Builtins: builtin.Names()})
	if err != nil {
		return nil, nil, ExitError{Code: 1, Msg: "invalid configuration:\n" + indent(err.Error())}
	}
	level, format := cfg.Log.Level, cfg.Log.Format
	if c.LogLevel != "" {
		level = c.LogLevel
	}
	if c.LogFormat != "" {
		format = c.LogFormat
	}
	logger, err := newLogger(stderr, level, format)
	if err != nil {
		return nil, nil, ExitError{Code: 2, Msg: err.Error()}
	}
	return cfg, logger, nil
}

func indent(s string) string { return "  " + strings.ReplaceAll(s, "\n", "\n  ") }

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log format %q: use text or json", format)
}

// Load reads the configuration and builds a logger from it and the flags.
func Load(c *Common, stderr io.Writer) (*config.Config, *slog.Logger, error) { return c.load(stderr) }

// Build loads the configuration and builds a gateway with its builtins,
// and opts.
func Build(c *Common, stderr io.Writer, opts ...gateway.Option) (*config.Config, *slog.Logger, *gateway.Gateway, error) {
	cfg, logger, err := c.load(stderr)
	if err != nil {
		return nil, nil, nil, err
	}
	g, err := gateway.New(cfg, append([]gateway.Option{gateway.WithLogger(logger), gateway.WithVersion(Version)}, opts...)...)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := builtin.Register(g, cfg.Builtin, nil); err != nil {
		g.Close()
		return nil, nil, nil, fmt.Errorf("registering builtin tools: %w", err)
	}
	return cfg, logger, g, nil
}

// upstreamWait bounds how long WaitUpstreams waits for upstream MCP
// servers to connect.
const upstreamWait = 30 * time.Second

// ErrInterrupted is the error of a command a first SIGINT or SIGTERM
// stopped before it was done.
var ErrInterrupted = ExitError{Code: 130, Msg: "interrupted"}

// WaitUpstreams starts the upstream MCP servers and waits (bounded) until
// they are connected, so that their tools are listed; a server that does
// not come up is reported and left out. It returns [ErrInterrupted] when
// ctx ends first (a signal: the command should stop), else nil. `tools`,
// `call` and the agent's in-process gateway use it.
func WaitUpstreams(ctx context.Context, g *gateway.Gateway, stderr io.Writer) error {
	g.StartUpstreams()
	wctx, cancel := context.WithTimeout(ctx, upstreamWait)
	defer cancel()
	switch err := g.WaitUpstreams(wctx); {
	case err == nil:
	case ctx.Err() != nil:
		return ErrInterrupted
	default:
		fmt.Fprintf(stderr, "toolgate: not every upstream MCP server came up within %s; their tools are missing\n", upstreamWait)
	}
	return nil
}
