package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/internal/httpheader"
	"github.com/toolgate/toolgate/registry"
)

// DefaultMaxResponseBytes is the response body kept when
// [Spec.MaxResponseBytes] is zero.
const DefaultMaxResponseBytes int64 = 1 << 20

// methodIdempotent reports whether method is one a REST tool may use
// (known) and whether it is idempotent by default.
func methodIdempotent(method string) (idempotent, known bool) {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete, http.MethodOptions:
		return true, true
	case http.MethodPost, http.MethodPatch:
		return false, true
	}
	return false, false
}

// tool is a compiled Spec. It is immutable once built.
type tool struct {
	name       string
	method     string
	url        urlTemplate
	headers    []headerParam // sorted by name
	body       *bodyNode     // nil: no body
	jsonCT     bool          // set Content-Type: application/json
	params     []compiledParam
	payload    *Payload // nil: none
	idempotent bool
	subject    string // names the tool in retry messages
	maxBytes   int64
	hosts      hostSet
	secrets    *strings.Replacer // nil: no secrets
}

type headerParam struct {
	name  string // canonical
	value template
}

// compile validates s and builds its tool and registry definition. Every
// problem is reported (joined with [errors.Join]), each a
// *[registry.FieldError] naming the Spec field by its configuration key
// ("name", "method", "url", "query.<key>", "headers.<name>", "body",
// "allowed_hosts[i]", ...) with a message that says what to write instead
// and never shows the value; FieldError.Value holds it unless it contains
// one of s.Secrets.
func compile(s Spec) (*tool, registry.Tool, error) {
	c := &compiler{s: s, t: &tool{name: s.Name}}
	c.name()
	c.method()
	sample := c.urlAndQuery()
	c.headers()
	c.body()
	c.params()
	c.payload()
	schema := c.inputSchema()
	c.limits()
	c.hosts(sample)
	if err := errors.Join(c.errs...); err != nil {
		return nil, registry.Tool{}, err
	}
	t := c.t
	readOnly := t.method == http.MethodGet || t.method == http.MethodHead
	return t, registry.Tool{
		Name:        s.Name,
		Title:       s.Title,
		Description: s.Description,
		Kind:        registry.REST,
		Source:      s.Source,
		InputSchema: schema,
		Annotations: registry.Annotations{
			ReadOnlyHint:   &readOnly,
			IdempotentHint: &t.idempotent,
			OpenWorldHint:  new(true),
		},
		Timeout:    s.Timeout,
		Idempotent: t.idempotent,
	}, nil
}

// compiler is a Spec being compiled: each of its methods checks and
// builds one part of the tool, in the order compile reports problems.
type compiler struct {
	s     Spec
	t     *tool
	errs  []error
	names []string // placeholders, for a derived schema
}

// shown returns v, or "" when it holds one of the Spec's secrets.
func (c *compiler) shown(v string) string {
	if containsSecret(v, c.s.Secrets) {
		return ""
	}
	return v
}

// bad reports a problem with field, whose value is value.
func (c *compiler) bad(field, value, msg string) {
	c.errs = append(c.errs, &registry.FieldError{Field: field, Value: c.shown(value), Msg: msg})
}

// name checks the tool's name and source.
func (c *compiler) name() {
	s := c.s
	switch {
	case s.Name == "":
		c.bad("name", "", "is required; name the tool, like get_weather")
	case registry.ValidateName(s.Name) != nil:
		c.errs = append(c.errs, &registry.FieldError{Field: "name", Value: c.shown(s.Name), Err: registry.ErrInvalidName,
			Msg: fmt.Sprintf("must be 1 to %d characters from A-Z a-z 0-9 _ . -, like get_weather", registry.MaxNameLen)})
	}
	if s.Source == "" {
		c.errs = append(c.errs, errors.New(`source is empty; write "rest:<name>" or "openapi:<source>"`))
	}
}

// method sets the tool's method (GET by default) and whether it is
// idempotent.
func (c *compiler) method() {
	t := c.t
	t.method = strings.ToUpper(c.s.Method)
	if t.method == "" {
		t.method = http.MethodGet
	}
	idempotent, known := methodIdempotent(t.method)
	if !known {
		c.bad("method", c.s.Method, "must be one of "+methodList)
	}
	t.idempotent = idempotent
	if c.s.Idempotent != nil {
		t.idempotent = *c.s.Idempotent
	}
}

// urlAndQuery compiles the URL and query, and returns the URL with every
// placeholder filled (nil when it is invalid).
func (c *compiler) urlAndQuery() *url.URL {
	u, sample, err := parseURL(c.s.URL, c.s.Query)
	if err != nil {
		// parseURL never shows the URL; the caller may.
		for _, fe := range fieldErrors(err) {
			if fe.Field == "url" && c.s.URL != "" {
				fe.Value = c.shown(c.s.URL)
			}
		}
		c.errs = append(c.errs, err)
		return sample
	}
	c.t.url = u
	for _, seg := range u.segments {
		c.names = append(c.names, seg.args()...)
	}
	for _, q := range u.query {
		c.names = append(c.names, q.value.args()...)
	}
	return sample
}

// headers compiles the headers, sorted by name.
func (c *compiler) headers() {
	if err := ValidateHeaders(c.s.Headers); err != nil {
		c.errs = append(c.errs, err)
		return
	}
	for _, name := range slices.Sorted(maps.Keys(c.s.Headers)) {
		v, err := parseTemplate(c.s.Headers[name])
		if err != nil {
			c.errs = append(c.errs, &registry.FieldError{Field: registry.FieldPath("headers", name), Msg: err.Error()})
			continue
		}
		c.t.headers = append(c.t.headers, headerParam{name: http.CanonicalHeaderKey(name), value: v})
		c.names = append(c.names, v.args()...)
	}
}

// body compiles the JSON body template, if any (JSON null is none).
func (c *compiler) body() {
	if len(c.s.Body) == 0 || bytes.Equal(bytes.TrimSpace(c.s.Body), []byte("null")) {
		return
	}
	b, err := parseBody(c.s.Body)
	if err != nil {
		c.errs = append(c.errs, err)
		return
	}
	c.t.body = b
	c.names = b.args(c.names)
	c.t.jsonCT = !slices.ContainsFunc(c.t.headers, func(h headerParam) bool { return h.name == "Content-Type" })
}

// params compiles the serialized parameters, if any.
func (c *compiler) params() {
	if len(c.s.Params) == 0 {
		return
	}
	var pathArgs []string
	for _, seg := range c.t.url.segments {
		pathArgs = append(pathArgs, seg.args()...)
	}
	ps, perrs := compileParams(c.s.Params, pathArgs)
	c.errs = append(c.errs, perrs...)
	c.t.params = ps
	for _, p := range ps {
		c.names = append(c.names, p.Arg)
	}
}

// payload checks the non-JSON body, if any.
func (c *compiler) payload() {
	if c.s.Payload == nil {
		return
	}
	switch err := checkPayload(c.s.Payload); {
	case err != nil:
		c.errs = append(c.errs, err)
	case c.t.body != nil:
		c.bad("payload", "", "must not be set with body; send one or the other")
	default:
		p := *c.s.Payload
		c.t.payload = &p
		c.names = append(c.names, p.Arg)
	}
}

// inputSchema returns the Spec's input schema, checked to be a JSON
// object, or one derived from the placeholders.
func (c *compiler) inputSchema() json.RawMessage {
	schema := c.s.InputSchema
	if schema == nil {
		return deriveSchema(c.names)
	}
	var obj map[string]any
	if err := json.Unmarshal(schema, &obj); err != nil || obj == nil {
		c.bad("input_schema", "", `must be a JSON object (a JSON Schema), like {"type":"object","properties":{"id":{"type":"string"}}}; or leave it out to derive one`)
	}
	return schema
}

// limits checks max_response_bytes and timeout, and names the tool for
// retry messages.
func (c *compiler) limits() {
	s, t := c.s, c.t
	switch {
	case s.MaxResponseBytes < 0:
		c.bad("max_response_bytes", strconv.FormatInt(s.MaxResponseBytes, 10), fmt.Sprintf("must be a positive number of bytes, or 0 for the default (%d)", DefaultMaxResponseBytes))
	case s.MaxResponseBytes == 0:
		t.maxBytes = DefaultMaxResponseBytes
	default:
		t.maxBytes = s.MaxResponseBytes
	}
	if s.Timeout < 0 {
		c.bad("timeout", s.Timeout.String(), "must be positive, like 30s, or 0 for the default")
	}
	t.subject = fmt.Sprintf("tool %q", s.Name)
}

// hosts sets the hosts the tool may reach (sample's, the URL filled in,
// by default) and the secrets its messages hide, sample's userinfo among
// them.
func (c *compiler) hosts(sample *url.URL) {
	hosts, herrs := parseHosts(c.s.AllowedHosts, sample)
	for _, fe := range herrs {
		fe.Value = c.shown(fe.Value)
		c.errs = append(c.errs, fe)
	}
	c.t.hosts = hosts
	var user *url.Userinfo
	if sample != nil {
		user = sample.User
	}
	c.t.secrets = secretReplacer(c.s.Secrets, user)
}

// methodList is the methods a REST tool may use, for messages.
const methodList = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"

// containsSecret reports whether v holds one of secrets.
func containsSecret(v string, secrets []string) bool {
	return slices.ContainsFunc(secrets, func(s string) bool { return s != "" && strings.Contains(v, s) })
}

// fieldErrors lists the *registry.FieldError leaves of err, a tree of
// joined errors.
func fieldErrors(err error) []*registry.FieldError {
	var out []*registry.FieldError
	switch x := err.(type) {
	case *registry.FieldError:
		out = append(out, x)
	case interface{ Unwrap() []error }:
		for _, e := range x.Unwrap() {
			out = append(out, fieldErrors(e)...)
		}
	}
	return out
}

// ValidateHeaders checks headers sent with every request of a tool (a
// REST tool's [Spec.Headers], an OpenAPI source's headers) by
// [httpheader.Check]'s rule. Every problem is a *[registry.FieldError] for
// field "headers.<name>", joined with [errors.Join]; none shows a value
// (header values are often credentials). A name given twice has a
// *[httpheader.DuplicateError] as its Err. Nil means the headers are
// valid.
func ValidateHeaders(h map[string]string) error {
	var errs []error
	for _, p := range httpheader.Check(h) {
		errs = append(errs, &registry.FieldError{Field: registry.FieldPath("headers", p.Name), Key: p.Key, Value: p.Value, Msg: p.Msg, Err: p.Err})
	}
	return errors.Join(errs...)
}

// deriveSchema returns the input schema of a spec without one: every
// placeholder a required string, nothing else allowed.
func deriveSchema(names []string) json.RawMessage {
	slices.Sort(names)
	names = slices.Compact(names)
	var b bytes.Buffer
	b.WriteString(`{"type":"object","properties":{`)
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Quote(n)) // names are [A-Za-z0-9_.-]: Go and JSON quoting agree
		b.WriteString(`:{"type":"string"}`)
	}
	b.WriteString(`}`)
	if len(names) > 0 {
		b.WriteString(`,"required":[`)
		for i, n := range names {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Quote(n))
		}
		b.WriteString(`]`)
	}
	b.WriteString(`,"additionalProperties":false}`)
	return b.Bytes()
}

// hostSet is the hosts a tool's requests and redirects may reach.
type hostSet []hostEntry

// hostEntry matches a host name (lowercase, IPv6 without brackets) on
// port, or on any port when port is empty.
type hostEntry struct {
	host string
	port string
}

// parseHosts returns the allowed hosts: the entries, or when there are
// none the host and effective port of the tool's URL (target; nil when the
// URL is invalid), which must be allowed. Each problem is for field
// "allowed_hosts[i]" (Value the entry) or "allowed_hosts".
func parseHosts(entries []string, target *url.URL) (hostSet, []*registry.FieldError) {
	var hs hostSet
	var errs []*registry.FieldError
	for i, e := range entries {
		if !validHost(e) {
			errs = append(errs, &registry.FieldError{Field: fmt.Sprintf("allowed_hosts[%d]", i), Value: e,
				Msg: "must be a host or host:port with no scheme or path, like api.example.com or 127.0.0.1:9000"})
			continue
		}
		u, _ := url.Parse("//" + e)
		hs = append(hs, hostEntry{host: strings.ToLower(u.Hostname()), port: u.Port()})
	}
	switch {
	case target == nil:
	case len(entries) == 0:
		hs = hostSet{{host: strings.ToLower(target.Hostname()), port: effectivePort(target)}}
	case len(errs) == 0 && !hs.allows(target):
		errs = append(errs, &registry.FieldError{Field: "allowed_hosts",
			Msg: "does not allow the host (and port) of url, where every call goes; add it, like api.example.com or 127.0.0.1:9000"})
	}
	return hs, errs
}

// allows reports whether u's host and port are in hs.
func (hs hostSet) allows(u *url.URL) bool {
	host, port := strings.ToLower(u.Hostname()), effectivePort(u)
	return slices.ContainsFunc(hs, func(e hostEntry) bool {
		return e.host == host && (e.port == "" || e.port == port)
	})
}

func effectivePort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}
