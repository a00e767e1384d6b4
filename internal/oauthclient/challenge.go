package oauthclient

import (
	"net/http"
	"strings"
)

// Challenge is what a 401 or 403 answer's WWW-Authenticate header says
// (RFC 6750 section 3, RFC 9728 section 5.1).
type Challenge struct {
	// ResourceMetadata is the URL of the protected resource metadata, or "".
	ResourceMetadata string
	// Scope is the scopes the resource asks for, space-separated, or "".
	Scope string
	// Error is the error code, such as invalid_token or insufficient_scope.
	Error string
}

// Scopes returns c.Scope split on spaces.
func (c Challenge) Scopes() []string { return strings.Fields(c.Scope) }

// ParseChallenge reads the Bearer challenge of h's WWW-Authenticate
// headers. A missing or non-Bearer header gives the zero Challenge.
func ParseChallenge(h http.Header) Challenge {
	var c Challenge
	for _, v := range h.Values("WWW-Authenticate") {
		scheme, rest, _ := strings.Cut(strings.TrimSpace(v), " ")
		if !strings.EqualFold(scheme, "Bearer") {
			continue
		}
		for k, val := range authParams(rest) {
			switch strings.ToLower(k) {
			case "resource_metadata":
				c.ResourceMetadata = val
			case "scope":
				c.Scope = val
			case "error":
				c.Error = val
			}
		}
		return c
	}
	return c
}

// authParams parses the comma-separated key=value and key="quoted value"
// parameters of a challenge (RFC 9110 section 11.2).
func authParams(s string) map[string]string {
	out := map[string]string{}
	for s != "" {
		s = strings.TrimLeft(s, " \t,")
		k, rest, ok := strings.Cut(s, "=")
		if !ok {
			break
		}
		k = strings.TrimSpace(k)
		rest = strings.TrimLeft(rest, " \t")
		var val string
		if strings.HasPrefix(rest, `"`) {
			var b strings.Builder
			i := 1
			for ; i < len(rest) && rest[i] != '"'; i++ {
				if rest[i] == '\\' && i+1 < len(rest) {
					i++
				}
				b.WriteByte(rest[i])
			}
			val, s = b.String(), rest[min(i+1, len(rest)):]
		} else {
			val, s, _ = strings.Cut(rest, ",")
			val = strings.TrimSpace(val)
		}
		out[k] = val
	}
	return out
}
