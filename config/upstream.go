package config

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"
)

// The transports and isolations of upstream MCP servers.
const (
	transportList        = "stdio, sse, streamable-http"
	isolationList        = "shared, thread"
	defaultStartupTimout = 20 * time.Second
)

// Upstream is another MCP server whose tools toolgate serves as
// <Name>__<tool>. The gateway turns it into the upstream executor's
// configuration; the meaning of each field is that executor's.
type Upstream struct {
	// Name prefixes the tool names: 1 to 32 characters from A-Z a-z 0-9 _
	// . -, without "__". Required; unique among upstreams, and clear of the
	// openapi sources and rest tools.
	Name string `yaml:"name"`
	// Transport is stdio, sse or streamable-http. Required.
	Transport string `yaml:"transport"`
	// Command starts a stdio server. Required for stdio, only for stdio.
	Command string `yaml:"command"`
	// Args are the command's arguments (stdio only).
	Args []string `yaml:"args"`
	// Env is added to the environment of a stdio server.
	Env map[string]string `yaml:"env"`
	// Cwd is the working directory of a stdio server; [Parse] resolves a
	// relative one against the config file's directory, which is also the
	// default.
	Cwd string `yaml:"cwd"`
	// URL is the endpoint of an sse or streamable-http server: an absolute
	// http or https URL. Required for those transports, only for them.
	URL string `yaml:"url"`
	// Headers are sent with every request to an sse or streamable-http
	// server. Names must be HTTP tokens; values must not hold CR, LF or NUL.
	Headers map[string]string `yaml:"headers"`
	// Isolation is shared (one connection for everyone, the default) or
	// thread (one connection, for stdio one process, per thread).
	Isolation string `yaml:"isolation"`
	// Include lists globs (path.Match syntax) of the upstream's own tool
	// names to keep. Default all.
	Include []string `yaml:"include"`
	// Exclude lists globs of tool names to drop, after Include.
	Exclude []string `yaml:"exclude"`
	// Timeout bounds one call. Zero means defaults.timeout.
	Timeout Duration `yaml:"timeout"`
	// StartupTimeout bounds connecting and initializing. Default 20s.
	StartupTimeout Duration `yaml:"startup_timeout"`
	// Idempotent marks every tool of the upstream idempotent (retries, in
	// a later release). Nil means each tool's own annotations decide.
	Idempotent *bool `yaml:"idempotent"`
}

// completeUpstreams fills in what the file left out of the upstreams:
// isolation shared, startup_timeout 20s, and cwd resolved against the
// config file's directory.
func completeUpstreams(cfg *Config, file string, present func(path string) bool) {
	for i := range cfg.Upstreams {
		u := &cfg.Upstreams[i]
		p := fmt.Sprintf("upstreams[%d]", i)
		if u.Isolation == "" {
			u.Isolation = "shared"
		}
		if !present(p + ".startup_timeout") {
			u.StartupTimeout = Duration(defaultStartupTimout)
		}
		if u.Transport == "stdio" && file != EmbeddedSource && !filepath.IsAbs(u.Cwd) {
			u.Cwd = filepath.Join(filepath.Dir(file), u.Cwd)
		}
	}
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
		switch u.Transport {
		case "stdio":
			if u.Command == "" {
				c.fail(p+".command", "", "is required for transport: stdio; write the program to start, like npx")
			}
			if u.URL != "" {
				c.fail(p+".url", "", "is only for transport: sse or streamable-http; remove it")
			}
			if len(u.Headers) > 0 {
				c.fail(p+".headers", "", "is only for transport: sse or streamable-http; remove it")
			}
		case "sse", "streamable-http":
			if u.URL == "" {
				c.fail(p+".url", "", "is required for transport: %s; write the server's endpoint, like http://127.0.0.1:9000/mcp", u.Transport)
			} else if pu, err := url.Parse(u.URL); err != nil || !httpScheme(pu.Scheme) || pu.Host == "" {
				c.fail(p+".url", quoteShort(u.URL), "must be an absolute http or https URL, like http://127.0.0.1:9000/mcp")
			}
			for key, set := range map[string]bool{"command": u.Command != "", "args": len(u.Args) > 0, "env": len(u.Env) > 0, "cwd": u.Cwd != ""} {
				if set {
					c.fail(p+"."+key, "", "is only for transport: stdio; remove it")
				}
			}
			c.headers(p+".headers", u.Headers)
		case "":
			c.fail(p+".transport", "", "is required; write one of %s", transportList)
		default:
			c.fail(p+".transport", quoteShort(u.Transport), "must be one of %s", transportList)
		}
		if u.Isolation != "shared" && u.Isolation != "thread" {
			c.fail(p+".isolation", quoteShort(u.Isolation), "must be one of %s", isolationList)
		}
		c.globs(p+".include", u.Include)
		c.globs(p+".exclude", u.Exclude)
		if u.Timeout < 0 {
			c.fail(p+".timeout", u.Timeout.String(), "must be positive, like 60s; leave it out to use defaults.timeout")
		}
		if u.StartupTimeout <= 0 {
			c.fail(p+".startup_timeout", u.StartupTimeout.String(), "must be positive, like 20s")
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
			c.fail(path, quoteShort(name), "clashes with openapi[%d] of the same name (both prefix tool names); rename one", j)
			return
		}
	}
	for j, t := range cfg.Rest {
		if t.Name == name || strings.HasPrefix(t.Name, name+"__") {
			c.fail(path, quoteShort(name), "clashes with rest[%d] (%s); rename the upstream or the tool", j, quoteShort(t.Name))
			return
		}
	}
}
