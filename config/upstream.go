package config

import (
	"cmp"
	"fmt"
	"path/filepath"
	"strconv"
	"time"
)

// Transports and isolations of upstream MCP servers, and the defaults of
// the upstreams section.
const (
	transportList         = "stdio, sse, streamable-http"
	defaultIsolation      = "shared"
	defaultStartupTimeout = 20 * time.Second
	// defaultMaxMessageBytes is max_message_bytes when the file leaves it
	// out (16 MiB), and minMaxMessageBytes the smallest allowed (1 KiB).
	defaultMaxMessageBytes = 16 << 20
	minMaxMessageBytes     = 1 << 10
)

// Upstream is another MCP server whose tools toolgate serves as
// <Name>__<tool> (or under [Upstream.Prefix]), with its resources, prompts,
// completions and log messages. The gateway turns it into the upstream
// executor's configuration; the meaning of each field is that executor's.
//
// Fields that do not apply to the transport (Command, Args, Env, Cwd and
// InheritEnv for sse and streamable-http; URL and Headers for stdio) are
// errors when set.
type Upstream struct {
	// Name prefixes the tool names: 1 to 32 characters from A-Z a-z 0-9 _
	// . -, without "__" (registry.ValidatePrefix, checked when the gateway
	// builds the upstream). Required; unique among the upstreams, and clear
	// of the openapi sources and of the rest tools (a rest tool may be
	// neither Name nor start with Name__).
	Name string `yaml:"name"`
	// Prefix is put before the upstream's own tool and prompt names. Nil
	// (the file leaves it out) means Name + "__" (fs__read_file); "" serves
	// them under their own names, which must then stay unique (a tool whose
	// name another source already has is dropped, with a warning naming
	// both).
	// Otherwise 1 to 34 characters from A-Z a-z 0-9 _ . - (checked when
	// the gateway builds the upstream), used as written: "fs_" gives
	// fs_read_file. Two upstreams may not share a non-empty prefix, nor
	// may a rest tool's name start with it.
	Prefix *string `yaml:"prefix"`
	// Transport is stdio, sse or streamable-http. Required.
	Transport string `yaml:"transport"`
	// Command is the program of a stdio server, found through PATH when it
	// has no slash. Required for stdio.
	Command string `yaml:"command"`
	// Args are the command's arguments (stdio). Default none.
	Args []string `yaml:"args"`
	// Env is added to the environment of a stdio server, over what it
	// gets of toolgate's own (see InheritEnv). Names must not be empty or
	// hold = or NUL. Default none.
	Env map[string]string `yaml:"env"`
	// InheritEnv passes toolgate's whole environment to a stdio server.
	// Default false: it gets only HOME, LANG, LOGNAME, PATH, SHELL, TERM,
	// TMPDIR and USER of it (plus Env and TOOLGATE_INSTANCE_DIR), so that
	// the secrets of other tools and upstreams stay out of it.
	InheritEnv bool `yaml:"inherit_env"`
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
	// Catalog is how the upstream's tools are listed: [CatalogTools] lists
	// each; [CatalogSearch] lists three meta-tools, <Name>__search,
	// <Name>__describe and <Name>__call, that find, describe and call the
	// upstream's tools, which stay out of tools/list (docs/catalog.md).
	// Default (empty) defaults.catalog.
	Catalog Catalog `yaml:"catalog"`
	// Timeout bounds one call. Zero means defaults.timeout.
	Timeout Duration `yaml:"timeout"`
	// StartupTimeout bounds connecting and initializing. Positive; [Parse]
	// stores 20s when the file leaves it out.
	StartupTimeout Duration `yaml:"startup_timeout"`
	// MaxMessageBytes caps one message from the server (stdio: a line;
	// HTTP: a response body or an event-stream event): a response over it
	// fails its call with class execution, and the server keeps running.
	// At least 1024; [Parse] stores 16777216 (16 MiB) when the file
	// leaves it out.
	MaxMessageBytes int64 `yaml:"max_message_bytes"`
	// Idempotent marks every tool of the upstream idempotent (true) or not
	// (false), for retry decisions. Nil means each tool's annotations
	// (idempotentHint, readOnlyHint) decide.
	Idempotent *bool `yaml:"idempotent"`
	// Retry is the retry policy of the upstream's tools; only idempotent
	// tools retry. Nil means defaults.retry; [Parse] fills in each field
	// the file leaves out from defaults.retry.
	Retry *Retry `yaml:"retry"`
	// OAuth makes toolgate an OAuth 2.1 client of the server (sse and
	// streamable-http only): see [UpstreamOAuth]. Default none: requests
	// carry only Headers.
	OAuth *UpstreamOAuth `yaml:"oauth"`
	// Cache keeps the results of the upstream's read-only tools (those
	// whose readOnlyHint is true) for a while (see [Cache]); its other
	// tools are never cached. Not with isolation: thread, nor with
	// idempotent: false. Default none.
	Cache *Cache `yaml:"cache"`
}

// completeUpstreams fills in, between decoding and validation, what the
// file left out of the upstreams: isolation shared (also for an empty one), startup_timeout 20s, max_message_bytes 16 MiB,
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
		if !present(p + ".max_message_bytes") {
			u.MaxMessageBytes = defaultMaxMessageBytes
		}
		completeCache(u.Cache, p+".cache", present)
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

// upstreams checks what config owns of the upstreams section: the
// transport, which selects the fields that apply, and the durations and
// retry policy. The upstream's own settings (name, command, url, headers,
// isolation, globs) are checked by the upstream executor when the gateway
// builds it; see [Config.Locate].
func (c *checker) upstreams(cfg *Config) {
	for i, u := range cfg.Upstreams {
		p := fmt.Sprintf("upstreams[%d]", i)
		if c.broken[p] {
			continue
		}
		c.catalog(p+".catalog", u.Catalog)
		switch u.Transport {
		case "stdio", "sse", "streamable-http":
		case "":
			c.fail(p+".transport", "", "is required; write one of %s", transportList)
		default:
			c.fail(p+".transport", quoteShort(u.Transport), "must be one of %s", transportList)
		}
		if u.Timeout < 0 {
			c.fail(p+".timeout", u.Timeout.String(), "must be positive, like 60s; leave it out to use defaults.timeout")
		}
		if u.Retry != nil {
			c.retry(p+".retry", u.Retry)
		}
		if u.StartupTimeout <= 0 {
			c.fail(p+".startup_timeout", u.StartupTimeout.String(), "must be positive, like 20s; leave it out for 20s")
		}
		if u.MaxMessageBytes < minMaxMessageBytes {
			c.fail(p+".max_message_bytes", strconv.FormatInt(u.MaxMessageBytes, 10), "must be at least 1024 (1 KiB), like 16777216; leave it out for 16 MiB")
		}
		if u.OAuth != nil {
			c.upstreamOAuth(cfg, i, u)
		}
		c.upstreamCache(p, u)
	}
}
