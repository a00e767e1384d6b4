package config

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"path"
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
	// maxToolNameLen is the longest tool name MCP allows.
	maxToolNameLen = 64
	// maxSourceNameLen is the longest openapi source name, so that
	// <name>__<operationId> keeps room for the operationId within
	// maxToolNameLen.
	maxSourceNameLen = 32
	// methodList is the methods a REST tool may use, for messages.
	methodList = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"
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
	// . -, without "__". Required; unique among the openapi sources.
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
	// Include lists operationId globs ([path.Match] syntax) to keep.
	// Default none, which keeps every operation.
	Include []string `yaml:"include"`
	// Exclude lists operationId globs to drop, after Include. Default none.
	Exclude []string `yaml:"exclude"`
	// Headers are added to every request, as for [RESTTool.Headers].
	Headers map[string]string `yaml:"headers"`
	// Timeout, Retry and MaxResponseBytes apply to every operation, as for
	// a [RESTTool].
	Timeout          Duration `yaml:"timeout"`
	Retry            *Retry   `yaml:"retry"`
	MaxResponseBytes int64    `yaml:"max_response_bytes"`
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
	}
	for i := range cfg.OpenAPI {
		o := &cfg.OpenAPI[i]
		p := fmt.Sprintf("openapi[%d]", i)
		if !present(p + ".max_response_bytes") {
			o.MaxResponseBytes = defaultMaxResponseBytes
		}
		inheritRetry(o.Retry, cfg.Defaults.Retry, p+".retry", present)
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

// restSections checks the rest and openapi sections and defaults.retry.
func (c *checker) restSections(cfg *Config) {
	c.retry("defaults.retry", &cfg.Defaults.Retry)

	sources := map[string]int{}
	for i, o := range cfg.OpenAPI {
		p := fmt.Sprintf("openapi[%d]", i)
		if c.broken[p] {
			continue
		}
		switch name := o.Name; {
		case name == "":
			c.fail(p+".name", "", "is required; name the source, like petstore (its tools are named petstore__<operationId>)")
		case !validToolName(name) || len(name) > maxSourceNameLen || strings.Contains(name, "__"):
			c.fail(p+".name", quoteShort(name), "must be 1 to %d characters from A-Z a-z 0-9 _ . - with no __, like petstore", maxSourceNameLen)
		default:
			if j, dup := sources[name]; dup {
				c.fail(p+".name", quoteShort(name), "duplicate source name, already used by openapi[%d]; rename one", j)
				break
			}
			sources[name] = i
		}
		c.spec(p+".spec", o.Spec)
		if o.BaseURL != "" {
			if msg := baseURLProblem(o.BaseURL); msg != "" {
				c.fail(p+".base_url", quoteShort(o.BaseURL), "%s", msg)
			}
		}
		c.globs(p+".include", o.Include, "an operationId")
		c.globs(p+".exclude", o.Exclude, "an operationId")
		c.headers(p+".headers", o.Headers)
		c.callLimits(p, o.Timeout, o.Retry, o.MaxResponseBytes)
	}

	names := map[string]int{}
	for i, t := range cfg.Rest {
		p := fmt.Sprintf("rest[%d]", i)
		if c.broken[p] {
			continue
		}
		c.toolName(p+".name", t.Name, names, i, cfg.OpenAPI)
		if m := strings.ToUpper(t.Method); m != "" && !validMethod(m) {
			c.fail(p+".method", quoteShort(t.Method), "must be one of %s", methodList)
		}
		if t.URL == "" {
			c.fail(p+".url", "", "is required; write an absolute URL, like http://127.0.0.1:9000/items/{id}")
		} else if msg := urlProblem(t.URL); msg != "" {
			c.fail(p+".url", quoteShort(t.URL), "%s", msg)
		}
		if _, empty := t.Query[""]; empty {
			c.failKey(childPath(p+".query", ""), "", "a query key must not be empty; name the parameter")
		}
		c.headers(p+".headers", t.Headers)
		if t.InputSchema != nil && !isJSONObject(t.InputSchema) {
			c.fail(p+".input_schema", "", "must be a mapping (a JSON Schema object), like {type: object, properties: {id: {type: string}}}")
		}
		c.callLimits(p, t.Timeout, t.Retry, t.MaxResponseBytes)
		for j, h := range t.AllowedHosts {
			if !validHost(h) {
				c.fail(fmt.Sprintf("%s.allowed_hosts[%d]", p, j), quoteShort(h), "must be a host or host:port with no scheme or path, like api.example.com or 127.0.0.1:9000")
			}
		}
	}
}

// toolName checks the name of rest[i] at path: present, well formed, not
// used by an earlier rest tool (names maps names to indexes), and clear of
// the openapi sources' prefixes.
func (c *checker) toolName(path, name string, names map[string]int, i int, sources []OpenAPISource) {
	switch {
	case name == "":
		c.fail(path, "", "is required; name the tool, like get_weather")
		return
	case !validToolName(name):
		c.fail(path, quoteShort(name), "must be 1 to %d characters from A-Z a-z 0-9 _ . -, like get_weather", maxToolNameLen)
		return
	}
	if j, dup := names[name]; dup {
		c.fail(path, quoteShort(name), "duplicate tool name, already used by rest[%d]; rename one", j)
		return
	}
	names[name] = i
	for j, o := range sources {
		if o.Name != "" && (name == o.Name || strings.HasPrefix(name, o.Name+"__")) {
			c.fail(path, quoteShort(name), "clashes with openapi[%d], whose tools are named %s__<operationId>; rename the tool or the source", j, o.Name)
			return
		}
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

// headers checks the header map at path. Values are never shown: they are
// often credentials, whether or not they came from the environment.
func (c *checker) headers(path string, h map[string]string) {
	// In file order, so that a duplicate is reported where it is repeated.
	names := slices.SortedFunc(maps.Keys(h), func(a, b string) int {
		pa, pb := c.keyAt[childPath(path, a)], c.keyAt[childPath(path, b)]
		return cmp.Or(cmp.Compare(pa.line, pb.line), cmp.Compare(pa.col, pb.col), strings.Compare(a, b))
	})
	first := map[string]string{}
	for _, name := range names {
		p := childPath(path, name)
		if !validToken(name) {
			c.failKey(p, quoteShort(name), "a header name must be an HTTP token (letters, digits and !#$%%&'*+-.^_`|~), like X-Api-Key")
			continue
		}
		if other, dup := first[strings.ToLower(name)]; dup {
			c.failKey(p, "", "duplicate header, also set as %s (header names ignore case); keep one", strconv.Quote(other))
			continue
		}
		first[strings.ToLower(name)] = name
		if strings.ContainsAny(h[name], "\r\n\x00") {
			c.fail(p, "", "a header value must not contain CR, LF or NUL; put it on one line")
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

// globs checks the list of globs at key path at; what names what the
// globs match ("an operationId", "a tool name").
func (c *checker) globs(at string, globs []string, what string) {
	for i, g := range globs {
		p := fmt.Sprintf("%s[%d]", at, i)
		if g == "" {
			c.fail(p, "", "is empty; write %s or a glob, like list*", what)
			continue
		}
		// path.Match checks the whole pattern even when the name does not
		// match, so any name will do.
		if _, err := path.Match(g, "x"); err != nil {
			c.fail(p, quoteShort(g), `is not a valid glob (* ? [a-z] and \ to escape, as in Go's path.Match); write \[ for a literal [`)
		}
	}
}

// urlProblem says what is wrong with a REST tool's URL template, or "" if
// nothing. The message never quotes the URL, which may have come from the
// environment.
func urlProblem(raw string) string {
	const placeholderMsg = "placeholders like {name} are allowed only in the path and query, not in the scheme, host or port; write them out, like http://127.0.0.1:9000/items/{id}"
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		head := raw
		if i := strings.IndexAny(raw, "/?#"); i >= 0 {
			head = raw[:i]
		}
		if strings.ContainsAny(head, "{}") {
			return placeholderMsg
		}
		return "must be an absolute http or https URL, like http://127.0.0.1:9000/items/{id}"
	}
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	if strings.ContainsAny(scheme, "{}") || strings.ContainsAny(authority, "{}") {
		return placeholderMsg
	}
	if !httpScheme(scheme) {
		return "the scheme must be http or https"
	}
	if strings.Contains(tail, "#") {
		return "must not have a #fragment (it is never sent); remove it"
	}
	filled, msg := fillPlaceholders(tail)
	if msg != "" {
		return msg
	}
	u, err := url.Parse(scheme + "://" + authority + filled)
	switch {
	case err != nil:
		return "is not a valid URL; write scheme://host[:port]/path, like http://127.0.0.1:9000/items/{id}"
	case u.Hostname() == "":
		return "must name a host, like http://127.0.0.1:9000/items/{id}"
	case strings.HasSuffix(u.Host, ":") || u.Port() != "" && !validPort(u.Port()):
		return "the port must be a number from 0 to 65535"
	}
	return ""
}

// fillPlaceholders replaces each {name} placeholder in s with "x" and each
// escaped brace ({{ or }}) with its percent-encoding, so that the result
// parses as a URL. msg says what is wrong with the placeholder syntax.
func fillPlaceholders(s string) (filled, msg string) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '{' && i+1 < len(s) && s[i+1] == '{':
			b.WriteString("%7B")
			i++
		case c == '}' && i+1 < len(s) && s[i+1] == '}':
			b.WriteString("%7D")
			i++
		case c == '{':
			end := strings.IndexAny(s[i+1:], "{}")
			if end < 0 || s[i+1+end] == '{' {
				return "", "has an unclosed {; close the placeholder, like {id}, or write {{ for a literal brace"
			}
			if end == 0 {
				return "", "has an empty placeholder {}; name the argument, like {id}"
			}
			b.WriteByte('x')
			i += end + 1
		case c == '}':
			return "", "has a } that closes no placeholder; write }} for a literal brace"
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), ""
}

// baseURLProblem says what is wrong with an openapi base_url, or "".
func baseURLProblem(raw string) string {
	if strings.ContainsAny(raw, "{}") {
		return "must not hold placeholders; write the server URL out, like http://127.0.0.1:9000/v1"
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil || !httpScheme(u.Scheme) || u.Opaque != "":
		return "must be an absolute http or https URL, like http://127.0.0.1:9000/v1"
	case u.Hostname() == "":
		return "must name a host, like http://127.0.0.1:9000/v1"
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(raw, "#"):
		return "must not have a query or fragment; operations add their own"
	case strings.HasSuffix(u.Host, ":") || u.Port() != "" && !validPort(u.Port()):
		return "the port must be a number from 0 to 65535"
	}
	return ""
}

func httpScheme(s string) bool { return strings.EqualFold(s, "http") || strings.EqualFold(s, "https") }

// validToolName reports whether name is a valid MCP tool name: 1 to 64
// characters from A-Z a-z 0-9 _ . -.
func validToolName(name string) bool {
	if name == "" || len(name) > maxToolNameLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

func validMethod(m string) bool {
	switch m {
	case "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS":
		return true
	}
	return false
}

// validToken reports whether s is an HTTP token (RFC 9110 section 5.6.2),
// the syntax of a header name.
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

// validHost reports whether h is a host or host:port, with no scheme,
// user info, path, query or fragment.
func validHost(h string) bool {
	if h == "" || strings.ContainsAny(h, "/?#@{} ") {
		return false
	}
	u, err := url.Parse("http://" + h)
	if err != nil || u.Host != h || u.Hostname() == "" || strings.HasSuffix(h, ":") {
		return false
	}
	return u.Port() == "" || validPort(u.Port())
}

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
