package rest

import (
	"cmp"
	"net/url"
	"slices"
	"strings"
)

// redacted replaces a secret in everything the executor returns or logs.
const redacted = "[redacted]"

// secretReplacer returns a replacer of every non-empty secret, and of its
// query- and path-escaped forms, by [redacted]; nil when there are none.
// Longer secrets are tried first, so a secret that contains another is
// replaced whole.
func secretReplacer(secrets []string) *strings.Replacer {
	var forms []string
	for _, s := range secrets {
		if s == "" {
			continue
		}
		forms = append(forms, s, url.QueryEscape(s), url.PathEscape(s))
	}
	if len(forms) == 0 {
		return nil
	}
	slices.SortFunc(forms, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	forms = slices.Compact(forms)
	pairs := make([]string, 0, 2*len(forms))
	for _, f := range forms {
		pairs = append(pairs, f, redacted)
	}
	return strings.NewReplacer(pairs...)
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
