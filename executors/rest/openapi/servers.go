package openapi

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/toolgate/toolgate/registry"
)

// oapiDocBase returns the base URL every operation's path is appended to,
// without a trailing slash: override, or else the first usable server URL
// (a relative one resolved against location when that is a URL).
func oapiDocBase(override string, servers openapi3.Servers, location string) (string, error) {
	if override != "" {
		if msg := baseURLProblem(override); msg != "" {
			return "", &registry.FieldError{Field: "base_url", Value: override, Msg: msg}
		}
		return strings.TrimRight(override, "/"), nil
	}
	var first string
	for _, sv := range servers {
		if sv == nil {
			continue
		}
		u := oapiServerURL(sv)
		if first == "" {
			first = sv.URL
		}
		if !oapiAbsolute(u) && strings.Contains(location, "://") && !strings.ContainsAny(u, "{}") {
			if lu, err := url.Parse(location); err == nil {
				if ref, err := url.Parse(u); err == nil {
					r := lu.ResolveReference(ref)
					r.RawQuery, r.Fragment, r.User = "", "", nil
					u = r.String()
				}
			}
		}
		if oapiAbsolute(u) {
			return strings.TrimRight(u, "/"), nil
		}
	}
	if first != "" {
		return "", fmt.Errorf("server URL %q: %w", first, ErrNoBaseURL)
	}
	return "", ErrNoBaseURL
}

// baseURLProblem says what is wrong with a Source's BaseURL, without
// showing it, or "".
func baseURLProblem(raw string) string {
	if strings.ContainsAny(raw, "{}") {
		return "must not hold placeholders; write the server URL out, like http://127.0.0.1:9000/v1"
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Opaque != "":
		return "must be an absolute http or https URL, like http://127.0.0.1:9000/v1"
	case u.Hostname() == "":
		return "must name a host, like http://127.0.0.1:9000/v1"
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(raw, "#"):
		return "must not have a query or fragment; operations add their own"
	case strings.HasSuffix(u.Host, ":"):
		return "the port must be a number from 0 to 65535"
	}
	if p := u.Port(); p != "" {
		if _, err := strconv.ParseUint(p, 10, 16); err != nil {
			return "the port must be a number from 0 to 65535"
		}
	}
	return ""
}

// oapiServerURL returns s's URL with its variables at their defaults (or
// their first enum value when they have no default).
func oapiServerURL(s *openapi3.Server) string {
	u := s.URL
	for name, v := range s.Variables {
		if v == nil {
			continue
		}
		val := v.Default
		if val == "" && len(v.Enum) > 0 {
			val = v.Enum[0]
		}
		u = strings.ReplaceAll(u, "{"+name+"}", val)
	}
	return u
}

// oapiAbsolute reports whether raw is an absolute http(s) URL with a host
// and nothing that would be taken for a placeholder.
func oapiAbsolute(raw string) bool {
	if strings.ContainsAny(raw, "{}") {
		return false
	}
	u, err := url.Parse(raw)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" &&
		u.RawQuery == "" && u.Fragment == ""
}

// opBase returns the (brace-escaped) base URL of one operation: the
// source's BaseURL, else the operation's or path item's first server
// (relative ones resolved against the document's), else the document's.
func (b *oapiBuilder) opBase(item *openapi3.PathItem, op *openapi3.Operation) (string, *oapiSkip) {
	servers := item.Servers
	if op.Servers != nil && len(*op.Servers) > 0 {
		servers = *op.Servers
	}
	if b.src.BaseURL != "" || len(servers) == 0 || servers[0] == nil {
		return oapiBraces.Replace(b.base), nil
	}
	raw := oapiServerURL(servers[0])
	if !oapiAbsolute(raw) {
		ref, err := url.Parse(raw)
		docBase, err2 := url.Parse(b.base + "/")
		if err != nil || err2 != nil || strings.ContainsAny(raw, "{}") {
			return "", &oapiSkip{fmt.Sprintf("server URL %q is not usable", servers[0].URL)}
		}
		raw = docBase.ResolveReference(ref).String()
		if !oapiAbsolute(raw) {
			return "", &oapiSkip{fmt.Sprintf("server URL %q is not usable", servers[0].URL)}
		}
	}
	return oapiBraces.Replace(strings.TrimRight(raw, "/")), nil
}
