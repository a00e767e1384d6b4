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

	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
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

// reservedHeader reports the headers net/http sets from the request
// itself (canonical names): a value in the spec would be ignored or would
// break the framing.
func reservedHeader(canon string) bool {
	switch canon {
	case "Host", "Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive",
		"Proxy-Connection", "Te", "Trailer", "Upgrade":
		return true
	}
	return false
}

// tool is a compiled Spec. It is immutable once built.
type tool struct {
	name       string
	method     string
	url        urlTemplate
	headers    []headerParam // sorted by name
	body       *bodyNode     // nil: no body
	jsonCT     bool          // set Content-Type: application/json
	idempotent bool
	policy     retry.Policy // normalized
	subject    string       // names the tool in retry messages
	maxBytes   int64
	hosts      hostSet
	secrets    *strings.Replacer // nil: no secrets
}

type headerParam struct {
	name  string // canonical
	value template
}

// compile validates s and builds its tool and registry definition. Every
// problem is reported, each saying what to write instead.
func compile(s Spec) (*tool, registry.Tool, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if s.Name == "" {
		bad("name is empty; give the tool a name of A-Z a-z 0-9 _ . -")
	}
	if s.Source == "" {
		bad(`source is empty; write "rest:<name>" or "openapi:<source>"`)
	}

	t := &tool{name: s.Name, method: strings.ToUpper(s.Method)}
	if t.method == "" {
		t.method = http.MethodGet
	}
	idempotent, known := methodIdempotent(t.method)
	if !known {
		bad("method %q is not supported; write one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS", s.Method)
	}
	t.idempotent = idempotent
	if s.Idempotent != nil {
		t.idempotent = *s.Idempotent
	}

	var names []string // placeholders, for a derived schema
	u, sample, err := parseURL(s.URL, s.Query)
	if err != nil {
		errs = append(errs, err)
	} else {
		t.url = u
		for _, seg := range u.segments {
			names = append(names, seg.args()...)
		}
		for _, q := range u.query {
			names = append(names, q.value.args()...)
		}
	}

	for _, name := range slices.Sorted(maps.Keys(s.Headers)) {
		canon := http.CanonicalHeaderKey(name)
		switch {
		case !validHeaderName(name):
			bad("header name %q is invalid; a name is letters, digits and !#$%%&'*+-.^_`|~ only (placeholders go in values)", name)
			continue
		case reservedHeader(canon):
			bad("header %q is set by the HTTP client; remove it", name)
			continue
		case slices.ContainsFunc(t.headers, func(h headerParam) bool { return h.name == canon }):
			bad("header %q is given twice (names ignore case); keep one", name)
			continue
		}
		v, err := parseTemplate(s.Headers[name])
		if err != nil {
			bad("header %q: %w", name, err)
			continue
		}
		if !validHeaderValue(v.literal("")) {
			bad("header %q: the value contains a control character (CR, LF, NUL or another); write it on one line", name)
			continue
		}
		t.headers = append(t.headers, headerParam{name: canon, value: v})
		names = append(names, v.args()...)
	}

	if len(s.Body) > 0 && !bytes.Equal(bytes.TrimSpace(s.Body), []byte("null")) {
		b, err := parseBody(s.Body)
		if err != nil {
			errs = append(errs, err)
		} else {
			t.body = b
			names = b.args(names)
			t.jsonCT = !slices.ContainsFunc(t.headers, func(h headerParam) bool { return h.name == "Content-Type" })
		}
	}

	schema := s.InputSchema
	if schema == nil {
		schema = deriveSchema(names)
	} else {
		var obj map[string]any
		if err := json.Unmarshal(schema, &obj); err != nil || obj == nil {
			bad(`input schema is not a JSON object; write a JSON Schema such as {"type":"object","properties":{…}}, or leave it out to derive one`)
		}
	}

	switch {
	case s.MaxResponseBytes < 0:
		bad("max_response_bytes is %d; write a positive number of bytes, or 0 for the default (%d)", s.MaxResponseBytes, DefaultMaxResponseBytes)
	case s.MaxResponseBytes == 0:
		t.maxBytes = DefaultMaxResponseBytes
	default:
		t.maxBytes = s.MaxResponseBytes
	}
	if s.Timeout < 0 {
		bad("timeout is %s; write a positive duration such as 30s, or 0 for the default", s.Timeout)
	}
	if s.Retry.Attempts < 0 || s.Retry.InitialBackoff < 0 || s.Retry.MaxBackoff < 0 {
		bad("retry has a negative value; write attempts ≥ 1 and positive backoffs, or 0 for the defaults")
	}
	t.policy = retry.Policy{Attempts: s.Retry.Attempts, InitialBackoff: s.Retry.InitialBackoff, MaxBackoff: s.Retry.MaxBackoff, On: slices.Clone(s.Retry.On)}.Normalize()
	t.subject = fmt.Sprintf("tool %q", s.Name)

	if sample != nil {
		hosts, err := parseHosts(s.AllowedHosts, sample)
		if err != nil {
			errs = append(errs, err)
		}
		t.hosts = hosts
	}
	t.secrets = secretReplacer(s.Secrets)

	if err := errors.Join(errs...); err != nil {
		return nil, registry.Tool{}, err
	}
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
// none the host and effective port of the tool's URL, which must be
// allowed.
func parseHosts(entries []string, target *url.URL) (hostSet, error) {
	var hs hostSet
	var errs []error
	for _, e := range entries {
		u, err := url.Parse("//" + e)
		if err != nil || u.Host != e || e == "" || u.User != nil {
			errs = append(errs, fmt.Errorf("allowed host %q is not a host or host:port; write e.g. api.example.com or api.example.com:8443", e))
			continue
		}
		hs = append(hs, hostEntry{host: strings.ToLower(u.Hostname()), port: u.Port()})
	}
	if len(entries) == 0 {
		hs = hostSet{{host: strings.ToLower(target.Hostname()), port: effectivePort(target)}}
	} else if len(errs) == 0 && !hs.allows(target) {
		errs = append(errs, fmt.Errorf("the url's host %q is not in allowed_hosts; add it", target.Host))
	}
	return hs, errors.Join(errs...)
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
