package config

import (
	"cmp"
	"fmt"
	"maps"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Transports and isolations of upstream MCP servers, and the defaults of
// the upstreams section.
const (
	transportList         = "stdio, sse, streamable-http"
	isolationList         = "shared, thread"
	defaultIsolation      = "shared"
	defaultStartupTimeout = 20 * time.Second
)

// Upstream is another MCP server whose tools toolgate serves as
// <Name>__<tool>. The gateway turns it into the upstream executor's
// configuration; the meaning of each field is that executor's.
//
// Fields that do not apply to the transport (Command, Args, Env and Cwd for
// sse and streamable-http; URL and Headers for stdio) are errors when set.
type Upstream struct {
	// Name prefixes the tool names: 1 to 32 characters from A-Z a-z 0-9 _
	// . -, without "__". Required; unique among the upstreams, and clear of
	// the openapi sources and of the rest tools (a rest tool may be neither
	// Name nor start with Name__).
	Name string `yaml:"name"`
	// Transport is stdio, sse or streamable-http. Required.
	Transport string `yaml:"transport"`
	// Command is the program of a stdio server, found through PATH when it
	// has no slash. Required for stdio.
	Command string `yaml:"command"`
	// Args are the command's arguments (stdio). Default none.
	Args []string `yaml:"args"`
	// Env is added to toolgate's own environment for a stdio server.
	// Names must not be empty or hold = or NUL. Default none.
	Env map[string]string `yaml:"env"`
	// Cwd is the working directory of a stdio server. [Parse] resolves a
	// relative one against the config file's directory, which is also the
	// default ("." for the embedded default, the working directory); a
	// [Config] built in Go keeps it as it is ("" is the working directory).
	Cwd string `yaml:"cwd"`
	// URL is the endpoint of an sse or streamable-http server: an absolute
	// http or https URL. Required for those transports.
	URL string `yaml:"url"`
	// Headers are sent with every request to an sse or streamable-http
	// server. Names must be HTTP tokens, unique whatever their case; values
	// must not contain CR, LF or NUL. Default none.
	Headers map[string]string `yaml:"headers"`
	// Isolation is shared (one connection, for stdio one process, for
	// everyone) or thread (one per thread, started on first use and closed
	// with the thread). Empty means shared; [Parse] stores shared.
	Isolation string `yaml:"isolation"`
	// Include lists globs ([path.Match] syntax) of the upstream's own tool
	// names to keep, before prefixing. Default none, which keeps every tool.
	Include []string `yaml:"include"`
	// Exclude lists globs of the upstream's own tool names to drop, after
	// Include. Default none.
	Exclude []string `yaml:"exclude"`
	// Timeout bounds one call. Zero means defaults.timeout.
	Timeout Duration `yaml:"timeout"`
	// StartupTimeout bounds connecting and initializing. Positive; [Parse]
	// stores 20s when the file leaves it out.
	StartupTimeout Duration `yaml:"startup_timeout"`
	// Idempotent marks every tool of the upstream idempotent (true) or not
	// (false), for retry decisions. Nil means each tool's annotations
	// (idempotentHint, readOnlyHint) decide.
	Idempotent *bool `yaml:"idempotent"`
	// Retry is the retry policy of the upstream's tools; only idempotent
	// tools retry. Nil means defaults.retry; [Parse] fills in each field
	// the file leaves out from defaults.retry.
	Retry *Retry `yaml:"retry"`
}

// completeUpstreams fills in, between decoding and validation, what the
// file left out of the upstreams: isolation shared (also for an empty one), startup_timeout 20s,
// and for stdio the working directory, resolved against the config file's
// directory. present reports whether the file gave a key path a value.
func completeUpstreams(cfg *Config, file string, present func(path string) bool) {
	for i := range cfg.Upstreams {
		u := &cfg.Upstreams[i]
		p := fmt.Sprintf("upstreams[%d]", i)
		if u.Isolation == "" {
			u.Isolation = defaultIsolation
		}
		inheritRetry(u.Retry, cfg.Defaults.Retry, p+".retry", present)
		if !present(p + ".startup_timeout") {
			u.StartupTimeout = Duration(defaultStartupTimeout)
		}
		if u.Transport == "stdio" {
			u.Cwd = resolveCwd(u.Cwd, file)
		}
	}
}

// resolveCwd resolves a stdio server's working directory against the
// directory of the config file. The embedded default has no directory: its
// relative paths, and the empty default, are the working directory (".").
func resolveCwd(cwd, file string) string {
	switch {
	case filepath.IsAbs(cwd):
		return cwd
	case file == EmbeddedSource:
		return filepath.Clean(cmp.Or(cwd, "."))
	}
	return filepath.Join(filepath.Dir(file), cwd)
}

// upstreams checks the upstreams section.
func (c *checker) upstreams(cfg *Config) {
	names := map[string]int{}
	for i, u := range cfg.Upstreams {
		p := fmt.Sprintf("upstreams[%d]", i)
		if c.broken[p] {
			continue
		}
		c.upstreamName(p+".name", u.Name, names, i, cfg)
		// What a transport needs, and what belongs to another one. An
		// unknown transport is reported alone: which fields are wrong
		// depends on what was meant.
		stdioOnly := []struct {
			key string
			set bool
		}{{"command", u.Command != ""}, {"args", len(u.Args) > 0}, {"env", len(u.Env) > 0}, {"cwd", u.Cwd != ""}}
		httpOnly := []struct {
			key string
			set bool
		}{{"url", u.URL != ""}, {"headers", len(u.Headers) > 0}}
		switch u.Transport {
		case "stdio":
			if u.Command == "" {
				c.fail(p+".command", "", "is required for transport: stdio; write the program to start, like npx")
			}
			for _, f := range httpOnly {
				if f.set {
					c.fail(p+"."+f.key, "", "is only for transport: sse or streamable-http; remove it, or change the transport")
				}
			}
			c.process(p, u)
		case "sse", "streamable-http":
			if u.URL == "" {
				c.fail(p+".url", "", "is required for transport: %s; write the server's endpoint, like http://127.0.0.1:9000/mcp", u.Transport)
			} else if msg := upstreamURLProblem(u.URL); msg != "" {
				c.fail(p+".url", quoteShort(u.URL), "%s", msg)
			}
			for _, f := range stdioOnly {
				if f.set {
					c.fail(p+"."+f.key, "", "is only for transport: stdio; remove it, or change the transport")
				}
			}
			c.headers(p+".headers", u.Headers)
		case "":
			c.fail(p+".transport", "", "is required; write one of %s", transportList)
		default:
			c.fail(p+".transport", quoteShort(u.Transport), "must be one of %s", transportList)
		}
		if u.Isolation != "" && u.Isolation != "shared" && u.Isolation != "thread" {
			c.fail(p+".isolation", quoteShort(u.Isolation), "must be one of %s", isolationList)
		}
		c.globs(p+".include", u.Include, "a tool name")
		c.globs(p+".exclude", u.Exclude, "a tool name")
		if u.Timeout < 0 {
			c.fail(p+".timeout", u.Timeout.String(), "must be positive, like 60s; leave it out to use defaults.timeout")
		}
		if u.Retry != nil {
			c.retry(p+".retry", u.Retry)
		}
		if u.StartupTimeout <= 0 {
			c.fail(p+".startup_timeout", u.StartupTimeout.String(), "must be positive, like 20s; leave it out for 20s")
		}
	}
}

// process checks what starts the stdio server of upstream u at path p:
// strings the operating system cannot pass to a process (NUL) and
// environment names it cannot set. Values are never shown: they may be
// credentials.
func (c *checker) process(p string, u Upstream) {
	if strings.ContainsRune(u.Command, 0) {
		c.fail(p+".command", "", "must not contain NUL")
	}
	for i, a := range u.Args {
		if hasNUL(a) {
			c.fail(fmt.Sprintf("%s.args[%d]", p, i), "", "must not contain NUL")
		}
	}
	if strings.ContainsRune(u.Cwd, 0) {
		c.fail(p+".cwd", "", "must not contain NUL")
	}
	for _, name := range slices.Sorted(maps.Keys(u.Env)) {
		ep := childPath(p+".env", name)
		switch {
		case name == "" || strings.ContainsAny(name, "=\x00"):
			c.failKey(ep, quoteShort(name), "an environment variable name must not be empty or contain = or NUL, like NODE_ENV")
		case hasNUL(u.Env[name]):
			c.fail(ep, "", "must not contain NUL")
		}
	}
}

// upstreamName checks the name of upstreams[i] at path: present, well
// formed, unique, and clear of the openapi sources and rest tools.
func (c *checker) upstreamName(path, name string, names map[string]int, i int, cfg *Config) {
	switch {
	case name == "":
		c.fail(path, "", "is required; name the upstream, like fs (its tools are named fs__<tool>)")
		return
	case !validToolName(name) || len(name) > maxSourceNameLen || strings.Contains(name, "__"):
		c.fail(path, quoteShort(name), "must be 1 to %d characters from A-Z a-z 0-9 _ . - with no __, like fs", maxSourceNameLen)
		return
	}
	if j, dup := names[name]; dup {
		c.fail(path, quoteShort(name), "duplicate upstream name, already used by upstreams[%d]; rename one", j)
		return
	}
	names[name] = i
	for j, o := range cfg.OpenAPI {
		if o.Name == name {
			c.fail(path, quoteShort(name), "clashes with openapi[%d] of the same name (both prefix tool names with %s__); rename one", j, name)
			return
		}
	}
	for j, t := range cfg.Rest {
		if t.Name == name || strings.HasPrefix(t.Name, name+"__") {
			c.fail(path, quoteShort(name), "clashes with rest[%d] (%s), as this upstream's tools are named %s__<tool>; rename the upstream or the tool", j, quoteShort(t.Name), name)
			return
		}
	}
}

// upstreamURLProblem says what is wrong with an sse or streamable-http
// endpoint, or "" if nothing. The message never quotes the URL, which may
// have come from the environment.
func upstreamURLProblem(raw string) string {
	u, err := url.Parse(raw)
	switch {
	case err != nil || !httpScheme(u.Scheme) || u.Opaque != "":
		return "must be an absolute http or https URL, like http://127.0.0.1:9000/mcp"
	case u.Hostname() == "":
		return "must name a host, like http://127.0.0.1:9000/mcp"
	case strings.HasSuffix(u.Host, ":") || u.Port() != "" && !validPort(u.Port()):
		return "the port must be a number from 0 to 65535"
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return "must not have a #fragment (it is never sent); remove it"
	}
	return ""
}

// hasNUL reports whether s, an args or env value, holds a NUL byte other
// than those framing [InstanceDirRef].
func hasNUL(s string) bool {
	return strings.ContainsRune(strings.ReplaceAll(s, InstanceDirRef, ""), 0)
}
