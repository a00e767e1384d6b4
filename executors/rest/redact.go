package rest

import (
	"net/url"
	"strings"

	"github.com/toolgate/toolgate/internal/redact"
)

// redacted replaces a secret in everything the executor returns or logs.
const redacted = redact.Redacted

// secretReplacer returns a replacer of every non-empty secret, in each
// encoding toolgate gives it (see [redact.NewReplacer]), and of the Basic
// credentials net/http builds from user, the userinfo of the tool's URL
// (nil: none), by [redacted]; nil when there is nothing to replace. So a
// backend that echoes the request's Authorization header shows neither
// the password nor its base64.
func secretReplacer(secrets []string, user *url.Userinfo) *strings.Replacer {
	return redact.NewReplacer(secrets, redact.BasicAuth(user)...)
}

// redact returns s with t's secrets replaced.
func (t *tool) redact(s string) string {
	if t.secrets == nil {
		return s
	}
	return t.secrets.Replace(s)
}

// redactValue returns v, a value decoded from JSON, with t's secrets
// replaced in every string and object key. It builds new maps and slices
// only when t has secrets.
func (t *tool) redactValue(v any) any {
	if t.secrets == nil {
		return v
	}
	return replaceValue(t.secrets, v)
}

// replaceValue returns v, a value decoded from JSON, with r's replacements
// made in every string and object key, in new maps and slices.
func replaceValue(r *strings.Replacer, v any) any {
	switch v := v.(type) {
	case string:
		return r.Replace(v)
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[r.Replace(k)] = replaceValue(r, e)
		}
		return m
	case []any:
		a := make([]any, len(v))
		for i, e := range v {
			a[i] = replaceValue(r, e)
		}
		return a
	}
	return v
}

// displayURL returns u as errors and logs show it: without userinfo,
// query or fragment, and with t's secrets replaced.
func (t *tool) displayURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	c := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	return t.redact(c.String())
}
