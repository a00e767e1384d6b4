package config

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Limits on server.max_body_bytes.
const (
	minBodyBytes = 1024
	maxBodyBytes = 1 << 30
)

// Validate checks c as [Parse] does after decoding, and returns every problem
// as an [errors.Join] of *PosError values. A Config built in Go has no
// positions, so the errors carry only File (c.Source) and Path. opts may be
// nil; opts.Builtins, when not nil, lists the names allowed in c.Builtin.
func (c *Config) Validate(opts *Options) error {
	return joinSorted(validate(c, opts, c.Source, nil))
}

// checker collects validation problems.
type checker struct {
	file string
	// at positions a path; nil means no positions are known.
	at func(path string) pos
	// fromEnv maps paths whose value came from ${...} to the text written
	// in the file; such values are never shown.
	fromEnv map[string]string
	// broken holds the paths of sections that were not mappings; the
	// decoder reported them, so their (empty) fields are not checked.
	broken map[string]bool
	errs   []*PosError
}

// fail records a problem at path. got is the offending value, shown as
// `; got "x"` unless it came from the environment.
func (c *checker) fail(path, got, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if raw, ok := c.fromEnv[path]; ok {
		msg += " (value came from " + raw + ")"
	} else if got != "" {
		msg += "; got " + got
	}
	e := &PosError{File: c.file, Path: path, Msg: oneLine(msg)}
	if c.at != nil {
		p := c.at(path)
		e.Line, e.Col = p.line, p.col
	}
	c.errs = append(c.errs, e)
}

// validate checks the values in cfg. d is the decoder that read cfg, for
// positions and for what came from the environment; nil for a Config built
// in Go.
func validate(cfg *Config, opts *Options, file string, d *decoder) []*PosError {
	c := &checker{file: file}
	if d != nil {
		c.at, c.fromEnv, c.broken = d.locate, d.fromEnv, d.broken
	}
	s := cfg.Server

	if !validListen(s.Listen) {
		c.fail("server.listen", quoteShort(s.Listen), "must be host:port with a numeric port, like 127.0.0.1:8080 or :8080")
	}
	switch p := s.MCPPath; {
	case !strings.HasPrefix(p, "/"):
		c.fail("server.mcp_path", quoteShort(p), `must start with "/", like /mcp`)
	case reservedPath(p) != "":
		c.fail("server.mcp_path", quoteShort(p), "is reserved for %s; pick another path, like /mcp", reservedPath(p))
	}
	if s.MaxBodyBytes < minBodyBytes || s.MaxBodyBytes > maxBodyBytes {
		c.fail("server.max_body_bytes", strconv.FormatInt(s.MaxBodyBytes, 10), "must be between %d and %d (1 GiB)", minBodyBytes, maxBodyBytes)
	}
	if s.MaxSessions < 1 {
		c.fail("server.max_sessions", strconv.Itoa(s.MaxSessions), "must be at least 1, like 10000")
	}
	for _, f := range []struct {
		path string
		d    Duration
	}{
		{"server.read_timeout", s.ReadTimeout},
		{"server.shutdown_grace", s.ShutdownGrace},
		{"server.session_idle_ttl", s.SessionIdleTTL},
		{"defaults.timeout", cfg.Defaults.Timeout},
		{"threads.idle_ttl", cfg.Threads.IdleTTL},
	} {
		if f.d <= 0 {
			c.fail(f.path, f.d.String(), "must be positive, like 30s")
		}
	}
	for i, o := range s.AllowedOrigins {
		if !validOrigin(o) {
			c.fail(fmt.Sprintf("server.allowed_origins[%d]", i), quoteShort(o), "must be scheme://host[:port] with no path, like https://app.example.com")
		}
	}
	if b := cfg.Threads.MaxBytesPerPrincipal; b < 0 || b > 0 && b < 1<<20 {
		c.fail("threads.max_bytes_per_principal", strconv.FormatInt(b, 10), "must be at least 1048576 (1 MiB), like 67108864 (64 MiB), or 0 for 64 MiB")
	}
	if cfg.Threads.MaxInstances < 1 {
		c.fail("threads.max_instances", strconv.Itoa(cfg.Threads.MaxInstances), "must be at least 1")
	}
	c.loopGuard(cfg.Guards.Loop)
	if l := cfg.Log.Level; !slices.Contains([]string{"debug", "info", "warn", "error"}, l) {
		c.fail("log.level", quoteShort(l), "must be one of debug, info, warn, error")
	}
	if f := cfg.Log.Format; f != "text" && f != "json" {
		c.fail("log.format", quoteShort(f), "must be text or json")
	}
	first := map[string]int{}
	for i, b := range cfg.Builtin {
		path := fmt.Sprintf("builtin[%d]", i)
		if j, dup := first[b]; dup {
			c.fail(path, quoteShort(b), "duplicate entry, already listed as builtin[%d]; remove one", j)
			continue
		}
		first[b] = i
		if opts != nil && opts.Builtins != nil && !slices.Contains(opts.Builtins, b) {
			c.fail(path, quoteShort(b), "unknown builtin; valid names: %s", strings.Join(opts.Builtins, ", "))
		}
	}
	c.restSections(cfg)
	c.upstreams(cfg)
	c.hooks(cfg)
	c.auth(cfg)
	c.cluster(cfg)
	c.audit(cfg)
	c.telemetry(cfg)
	c.endpoints(cfg)
	c.resilience(&cfg.Defaults)
	return c.errs
}

// validListen reports whether s is host:port with a numeric port; the host
// may be empty (all interfaces) and port 0 picks a free port.
func validListen(s string) bool {
	_, port, err := net.SplitHostPort(s)
	return err == nil && validPort(port)
}

func validPort(p string) bool {
	_, err := strconv.ParseUint(p, 10, 16)
	return err == nil
}

// reservedPath says what toolgate serves at p itself, or "" if nothing.
func reservedPath(p string) string {
	switch p {
	case "/sse", "/message":
		return "the legacy SSE transport"
	case "/metrics":
		return "Prometheus metrics"
	case "/healthz", "/readyz":
		return "health checks"
	}
	return ""
}

// validOrigin reports whether o is a browser origin: scheme://host[:port],
// with no user info, path, query or fragment.
func validOrigin(o string) bool {
	u, err := url.Parse(o)
	if err != nil || u.Scheme == "" || u.Opaque != "" || u.User != nil || u.Hostname() == "" ||
		u.Path != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.HasSuffix(u.Host, ":") {
		return false
	}
	return u.Port() == "" || validPort(u.Port())
}

// loopGuard checks guards.loop.
func (c *checker) loopGuard(l LoopGuard) {
	if l.Threshold < 1 {
		c.fail("guards.loop.threshold", strconv.Itoa(l.Threshold), "must be at least 1, like 3")
	}
	names := make([]string, len(loopActions))
	for i, a := range loopActions {
		names[i] = string(a)
	}
	valid := strings.Join(names, ", ")
	if !l.Action.Valid() {
		c.fail("guards.loop.action", quoteShort(string(l.Action)), "must be one of %s", valid)
	}
	for _, tool := range slices.Sorted(maps.Keys(l.Tools)) {
		path := childPath("guards.loop.tools", tool)
		if tool == "" {
			c.fail(path, "", "needs a tool name as its key")
		}
		if a := l.Tools[tool]; !a.Valid() {
			c.fail(path, quoteShort(string(a)), "must be one of %s", valid)
		}
	}
}
