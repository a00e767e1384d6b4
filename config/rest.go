package config

import (
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Defaults and limits of the rest and openapi sections.
const (
	// defaultMaxResponseBytes is max_response_bytes when the file leaves
	// it out: 1 MiB.
	defaultMaxResponseBytes = 1 << 20
	// maxResponseBytes is the largest max_response_bytes allowed: 1 GiB.
	maxResponseBytes = 1 << 30
	// maxRetryAttempts is the most attempts a retry policy may ask for.
	maxRetryAttempts = 10
	// defaultMaxSpecBytes is an openapi source's max_spec_bytes when the
	// file leaves it out: 16 MiB.
	defaultMaxSpecBytes = 16 << 20
	// maxMaxSpecBytes is the largest max_spec_bytes allowed: 1 GiB.
	maxMaxSpecBytes = 1 << 30
)

// defaultRetry is defaults.retry when the file leaves it out.
func defaultRetry() Retry {
	return Retry{Attempts: 3, InitialBackoff: Duration(100 * time.Millisecond), MaxBackoff: Duration(5 * time.Second), On: slices.Clone(defaultRetryOn)}
}

// RESTTool is one REST tool written out in the file: toolgate makes the
// HTTP call it describes. The gateway turns it into the REST executor's
// spec; the meaning of each field is the spec's.
type RESTTool struct {
	// Name is the MCP tool name: 1 to 64 characters from A-Z a-z 0-9 _ . -.
	// Required; unique among the rest tools, and not one an openapi source
	// produces (<source>__<operationId>).
	Name string `yaml:"name"`
	// Description is shown to clients and models. Default none.
	Description string `yaml:"description"`
	// Method is the HTTP method: GET, HEAD, POST, PUT, PATCH, DELETE or
	// OPTIONS, in any case; [Parse] stores it in upper case. Default GET.
	Method string `yaml:"method"`
	// URL is the request URL template: an absolute http or https URL whose
	// path and query may hold {arg} placeholders ({{ and }} are literal
	// braces). Placeholders elsewhere (scheme, host, port) are an error:
	// an argument must never choose where the call goes. Required.
	URL string `yaml:"url"`
	// Query maps query keys to value templates ("{units}", "en").
	// Default none.
	Query map[string]string `yaml:"query"`
	// Headers maps header names to value templates. Names must be HTTP
	// tokens, unique whatever their case; a value must not contain CR, LF or
	// NUL. Default none.
	Headers map[string]string `yaml:"headers"`
	// Body is the request body template, written in YAML (a mapping, list
	// or scalar) and stored as JSON. A string that is exactly "{arg}" takes
	// the argument's JSON value. Nil means no body.
	Body json.RawMessage `yaml:"body"`
	// InputSchema is the arguments' JSON Schema, written as a YAML mapping
	// and stored as JSON. Nil means derived from the placeholders, each a
	// required string.
	InputSchema json.RawMessage `yaml:"input_schema"`
	// Idempotent overrides the method's idempotency (GET HEAD PUT DELETE
	// OPTIONS are idempotent, POST PATCH are not); only idempotent calls
	// are retried. Nil means the method decides.
	Idempotent *bool `yaml:"idempotent"`
	// Timeout bounds one call, all attempts included. Zero means
	// defaults.timeout.
	Timeout Duration `yaml:"timeout"`
	// Retry is the tool's retry policy. Nil means defaults.retry; [Parse]
	// fills the fields the file leaves out from defaults.retry.
	Retry *Retry `yaml:"retry"`
	// MaxResponseBytes caps the response body kept, from 1 to 1073741824.
	// Default 1048576 (1 MiB).
	MaxResponseBytes int64 `yaml:"max_response_bytes"`
	// AllowedHosts are the hosts (host or host:port) the call and its
	// redirects may reach. Default none, which means the host of URL only.
	AllowedHosts []string `yaml:"allowed_hosts"`
	// Cache keeps the tool's results for a while (see [Cache]); only a GET
	// or HEAD tool not marked idempotent: false may have one. Default
	// none: every call reaches the backend.
	Cache *Cache `yaml:"cache"`
}

// Retry is a retry policy. Only idempotent calls are retried, and only
// after failures that may pass (timeouts, network errors, 408, 425, 429,
// 5xx). Each wait is a random duration up to InitialBackoff doubled per
// retry, capped at MaxBackoff; a Retry-After from the server wins, capped
// at MaxBackoff too.
type Retry struct {
	// Attempts counts every try, the first included: 1 means no retries.
	// From 1 to 10. Default 3.
	Attempts int `yaml:"attempts"`
	// InitialBackoff caps the wait before the first retry. Positive, and
	// at most MaxBackoff. Default 100ms.
	InitialBackoff Duration `yaml:"initial_backoff"`
	// MaxBackoff caps every wait. Positive. Default 5s.
	MaxBackoff Duration `yaml:"max_backoff"`
	// On lists the failure classes that are retried, from network,
	// timeout, unavailable, rate_limited and execution. Default network,
	// timeout, unavailable, rate_limited.
	On []string `yaml:"on"`
}

// OpenAPISource is an OpenAPI 3 document whose operations become REST
// tools named <Name>__<operationId>. The gateway reads the document and
// builds the tools; config checks only the fields.
type OpenAPISource struct {
	// Name prefixes the tool names: 1 to 32 characters from A-Z a-z 0-9 _
	// . -, without "__" (registry.ValidatePrefix, checked when the gateway
	// builds the tools). Required; unique among the openapi sources.
	Name string `yaml:"name"`
	// Spec is where the document is: an http or https URL, or a file path.
	// [Parse] resolves a relative path against the directory of the config
	// file and stores the result; a [Config] built in Go keeps it as it is
	// (relative to the working directory). Required.
	Spec string `yaml:"spec"`
	// BaseURL replaces the document's servers[0].url: an absolute http or
	// https URL with no placeholders, query or fragment. Default the
	// document's own.
	BaseURL string `yaml:"base_url"`
	// Include lists globs of the operations to keep. A glob matches an
	// operation's tool name (as toolgate tools shows it), its
	// operationId, "METHOD /path" as the document writes the path, or
	// "tag:<tag>" for one of its tags; * matches any run of characters, /
	// included, ? one character, [a-z] a set. Default none, which keeps
	// every operation. A glob that matches no operation is a warning.
	Include []string `yaml:"include"`
	// Exclude lists globs of operations to drop, after Include, matched
	// the same way. Default none.
	Exclude []string `yaml:"exclude"`
	// Auth maps the names of the document's securitySchemes to
	// credentials, usually ${ENV} references: an apiKey scheme's key, an
	// http bearer (or oauth2) scheme's token, "user:password" for http
	// basic. An operation sends only the credentials its security
	// requirements name. Values are secrets: never logged or shown.
	// Default none.
	Auth map[string]string `yaml:"auth"`
	// MaxSpecBytes caps the document, with the files its $refs read,
	// from 1 to 1073741824. Default 16777216 (16 MiB); [Parse] fills it
	// in, and 0 in a [Config] built in Go means the default too.
	MaxSpecBytes int64 `yaml:"max_spec_bytes"`
	// Headers are added to every request, as for [RESTTool.Headers].
	Headers map[string]string `yaml:"headers"`
	// Catalog is how the source's tools are listed: [CatalogTools] lists
	// one tool per operation; [CatalogSearch] lists three meta-tools,
	// <Name>__search, <Name>__describe and <Name>__call, that find,
	// describe and call the operations' tools, which stay out of
	// tools/list. Default (empty) defaults.catalog.
	Catalog Catalog `yaml:"catalog"`
	// Timeout, Retry and MaxResponseBytes apply to every operation, as for
	// a [RESTTool].
	Timeout          Duration `yaml:"timeout"`
	Retry            *Retry   `yaml:"retry"`
	MaxResponseBytes int64    `yaml:"max_response_bytes"`
	// Cache keeps the results of the source's GET and HEAD operations for
	// a while (see [Cache]); its other operations are never cached.
	// Default none.
	Cache *Cache `yaml:"cache"`
}

// Catalog is how a source's tools are listed to clients.
type Catalog string

const (
	// CatalogTools lists one tool per operation (the default).
	CatalogTools Catalog = "tools"
	// CatalogSearch lists three meta-tools instead: search, describe and
	// call, for sources with more tools than a model should read.
	CatalogSearch Catalog = "search"
)

// catalogs lists the valid [Catalog] values, for error messages.
var catalogs = []Catalog{CatalogTools, CatalogSearch}

// Valid reports whether c is a known catalog mode or empty (the default).
func (c Catalog) Valid() bool { return c == "" || slices.Contains(catalogs, c) }

// catalog checks the catalog mode at path.
func (c *checker) catalog(path string, v Catalog) {
	if !v.Valid() {
		c.fail(path, quoteShort(string(v)), "must be %s or %s; search serves the source as three meta-tools (search, describe, call)", CatalogTools, CatalogSearch)
	}
}

// GatewayCatalog is how the endpoint lists the gateway's tools as a whole
// (docs/catalog.md).
type GatewayCatalog struct {
	// Mode is [CatalogTools] (each tool is listed) or [CatalogSearch]:
	// tools/list shows the meta-tools toolgate_search, toolgate_describe
	// and toolgate_call, which find, describe and call every tool, and
	// the tools Always names. Default (empty) tools.
	Mode Catalog `yaml:"mode"`
	// Always are globs of tool names listed in search mode besides the
	// meta-tools (toolgate_batch, a tool every conversation needs). A
	// tool of a source with catalog: search stays behind its source's
	// meta-tools. Default none.
	Always []string `yaml:"always"`
}

// Search reports whether the gateway lists its tools as the search
// meta-tools.
func (g GatewayCatalog) Search() bool { return g.Mode == CatalogSearch }

// gatewayCatalog checks the top-level catalog section, with the
// endpoints that may list the search meta-tools too.
func (c *checker) gatewayCatalog(g GatewayCatalog, endpoints []Endpoint) {
	if !g.Mode.Valid() {
		c.fail("catalog.mode", quoteShort(string(g.Mode)), "must be %s or %s; search lists three meta-tools (toolgate_search, toolgate_describe, toolgate_call) in place of every tool", CatalogTools, CatalogSearch)
	}
	if len(g.Always) > 0 && g.Mode != CatalogSearch && !slices.ContainsFunc(endpoints, func(e Endpoint) bool { return e.Catalog == CatalogSearch }) {
		c.fail("catalog.always", "", "lists tools besides the search meta-tools, so it needs catalog.mode: search (or an endpoint with catalog: search); set the mode or remove always")
	}
	c.globs("catalog.always", g.Always)
}

// restCatalogName names the rest tools' catalog under defaults.catalog:
// search (rest__search, rest__describe, rest__call).
const restCatalogName = "rest"

// restCatalogNames checks that, when defaults.catalog: search serves the
// rest tools behind rest__search, rest__describe and rest__call, no
// source and no rest tool takes those names.
func (c *checker) restCatalogNames(cfg *Config) {
	if cfg.Defaults.Catalog != CatalogSearch || len(cfg.Rest) == 0 {
		return
	}
	const why = "with defaults.catalog: search the rest tools are served as rest__search, rest__describe and rest__call"
	for i, o := range cfg.OpenAPI {
		if o.Name == restCatalogName {
			c.fail(fmt.Sprintf("openapi[%d].name", i), quoteShort(o.Name), "is taken: %s; rename the source", why)
		}
	}
	for i, u := range cfg.Upstreams {
		if u.Name == restCatalogName {
			c.fail(fmt.Sprintf("upstreams[%d].name", i), quoteShort(u.Name), "is taken: %s; rename the upstream", why)
		}
	}
	for i, t := range cfg.Rest {
		if strings.HasPrefix(t.Name, restCatalogName+"__") {
			c.fail(fmt.Sprintf("rest[%d].name", i), quoteShort(t.Name), "is under the rest__ prefix: %s; rename the tool", why)
		}
	}
}

// complete fills in, between decoding and validation, what the file left
// out of the rest and openapi sections, and normalises what it wrote:
// methods in upper case (empty is GET), max_response_bytes defaulted, each
// retry field the file left out taken from defaults.retry, and relative
// spec paths resolved against file's directory. present reports whether
// the file gave a key path a value (one that decoded).
func complete(cfg *Config, file string, present func(path string) bool) {
	for i := range cfg.Rest {
		t := &cfg.Rest[i]
		p := fmt.Sprintf("rest[%d]", i)
		t.Method = strings.ToUpper(t.Method)
		if t.Method == "" {
			t.Method = "GET"
		}
		if !present(p + ".max_response_bytes") {
			t.MaxResponseBytes = defaultMaxResponseBytes
		}
		inheritRetry(t.Retry, cfg.Defaults.Retry, p+".retry", present)
		completeCache(t.Cache, p+".cache", present)
	}
	for i := range cfg.OpenAPI {
		o := &cfg.OpenAPI[i]
		p := fmt.Sprintf("openapi[%d]", i)
		if !present(p + ".max_response_bytes") {
			o.MaxResponseBytes = defaultMaxResponseBytes
		}
		if !present(p + ".max_spec_bytes") {
			o.MaxSpecBytes = defaultMaxSpecBytes
		}
		inheritRetry(o.Retry, cfg.Defaults.Retry, p+".retry", present)
		completeCache(o.Cache, p+".cache", present)
		o.Spec = resolveSpec(o.Spec, file)
	}
}

// inheritRetry copies into r each field of def that the file did not write
// under path. r may be nil.
func inheritRetry(r *Retry, def Retry, path string, present func(string) bool) {
	if r == nil {
		return
	}
	if !present(path + ".attempts") {
		r.Attempts = def.Attempts
	}
	if !present(path + ".initial_backoff") {
		r.InitialBackoff = def.InitialBackoff
	}
	if !present(path + ".max_backoff") {
		r.MaxBackoff = def.MaxBackoff
	}
	if !present(path + ".on") {
		r.On = slices.Clone(def.On)
	}
}

// resolveSpec resolves a relative spec path against the directory of the
// config file; URLs, absolute paths and the embedded default's paths stay
// as they are.
func resolveSpec(spec, file string) string {
	if spec == "" || strings.Contains(spec, "://") || filepath.IsAbs(spec) || file == EmbeddedSource {
		return spec
	}
	return filepath.Join(filepath.Dir(file), spec)
}

// restSections checks what config owns of the rest and openapi sections:
// the shape of input_schema, the spec location, the call limits and
// defaults.retry. The rest (names, URL templates, methods, headers, hosts,
// globs, base URLs) is checked by the packages that own those rules when
// the gateway builds the tools; see [Config.Locate].
func (c *checker) restSections(cfg *Config) {
	c.retry("defaults.retry", &cfg.Defaults.Retry)
	c.catalog("defaults.catalog", cfg.Defaults.Catalog)
	c.gatewayCatalog(cfg.Catalog, cfg.Endpoints)
	c.restCatalogNames(cfg)
	for i, o := range cfg.OpenAPI {
		p := fmt.Sprintf("openapi[%d]", i)
		if c.broken[p] {
			continue
		}
		c.spec(p+".spec", o.Spec)
		c.callLimits(p, o.Timeout, o.Retry, o.MaxResponseBytes)
		c.catalog(p+".catalog", o.Catalog)
		if o.Cache != nil {
			c.cache(p+".cache", o.Cache)
		}
		if o.MaxSpecBytes < 0 || o.MaxSpecBytes > maxMaxSpecBytes {
			c.fail(p+".max_spec_bytes", strconv.FormatInt(o.MaxSpecBytes, 10), "must be between 1 and %d (1 GiB); leave it out for the default, %d (16 MiB)", maxMaxSpecBytes, defaultMaxSpecBytes)
		}
	}
	for i, t := range cfg.Rest {
		p := fmt.Sprintf("rest[%d]", i)
		if c.broken[p] {
			continue
		}
		if t.InputSchema != nil && !isJSONObject(t.InputSchema) {
			c.fail(p+".input_schema", "", "must be a mapping (a JSON Schema object), like {type: object, properties: {id: {type: string}}}")
		}
		c.callLimits(p, t.Timeout, t.Retry, t.MaxResponseBytes)
		c.restCache(p, t)
	}
}

// callLimits checks the timeout, retry and max_response_bytes of the rest
// tool or openapi source at path.
func (c *checker) callLimits(path string, timeout Duration, r *Retry, maxBytes int64) {
	if timeout < 0 {
		c.fail(path+".timeout", timeout.String(), "must be positive, like 10s; leave it out to use defaults.timeout")
	}
	if r != nil {
		c.retry(path+".retry", r)
	}
	if maxBytes < 1 || maxBytes > maxResponseBytes {
		c.fail(path+".max_response_bytes", strconv.FormatInt(maxBytes, 10), "must be between 1 and %d (1 GiB)", maxResponseBytes)
	}
}

// retry checks the retry policy at path.
func (c *checker) retry(path string, r *Retry) {
	if r.Attempts < 1 || r.Attempts > maxRetryAttempts {
		c.fail(path+".attempts", strconv.Itoa(r.Attempts), "must be between 1 and %d (1 means no retries)", maxRetryAttempts)
	}
	initialOK, maxOK := r.InitialBackoff > 0, r.MaxBackoff > 0
	if !initialOK {
		c.fail(path+".initial_backoff", r.InitialBackoff.String(), "must be positive, like 100ms")
	}
	if !maxOK {
		c.fail(path+".max_backoff", r.MaxBackoff.String(), "must be positive, like 5s")
	}
	if initialOK && maxOK && r.InitialBackoff > r.MaxBackoff {
		c.fail(path+".initial_backoff", r.InitialBackoff.String(), "must not exceed max_backoff (%s); lower it or raise max_backoff", r.MaxBackoff)
	}
	for i, class := range r.On {
		p := fmt.Sprintf("%s.on[%d]", path, i)
		switch {
		case slices.Contains(retryableClasses, class):
		case slices.Contains(neverRetried, class):
			c.fail(p, quoteShort(class), "is never retried: the same call would fail the same way; remove it")
		default:
			c.fail(p, quoteShort(class), "must be one of %s", strings.Join(retryableClasses, ", "))
		}
	}
}

// spec checks an openapi source's spec location at path.
func (c *checker) spec(path, spec string) {
	if spec == "" {
		c.fail(path, "", "is required; write a file path (relative to this file) or an http(s) URL, like examples/petstore.yaml")
		return
	}
	if !strings.Contains(spec, "://") {
		return // a file path; the gateway reads it
	}
	u, err := url.Parse(spec)
	if err != nil || !httpScheme(u.Scheme) || u.Host == "" {
		c.fail(path, quoteShort(spec), "must be a file path or an http or https URL, like https://api.example.com/openapi.yaml")
	}
}

func httpScheme(s string) bool { return strings.EqualFold(s, "http") || strings.EqualFold(s, "https") }

// isJSONObject reports whether raw, valid JSON, is an object.
func isJSONObject(raw json.RawMessage) bool {
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c == '{'
	}
	return false
}
