// Package redact hides secrets, the values a configuration took from the
// environment, in the encodings toolgate itself gives them: raw,
// query-escaped, path-escaped, and standard base64 (padded or not), the
// encoding of HTTP Basic credentials. executors/rest and executors/mcpup
// share it, so both scrub results, errors and logs by one rule.
//
// It imports no toolgate package.
package redact

import (
	"cmp"
	"encoding/base64"
	"net/url"
	"slices"
	"strings"
)

// Redacted is what a secret is replaced by.
const Redacted = "[redacted]"

// minEncodedLen is the length of the shortest secret whose base64 forms
// are replaced. The base64 of a shorter value is a few letters that occur
// in ordinary text; replacing them would garble it and hide nothing worth
// hiding (the raw value is still replaced).
const minEncodedLen = 6

// encodings returns the forms of secret that toolgate may send or show: the
// secret itself, query- and path-escaped, and (when it has at least
// minEncodedLen bytes) its standard base64, padded and unpadded. It
// returns nil for an empty secret.
func encodings(secret string) []string {
	if secret == "" {
		return nil
	}
	fs := []string{secret, url.QueryEscape(secret), url.PathEscape(secret)}
	if len(secret) >= minEncodedLen {
		fs = append(fs, base64Forms(secret)...)
	}
	return fs
}

// BasicAuth returns the forms of the credentials net/http sends for a URL
// with userinfo u (Authorization: Basic base64(user:password)): that
// base64, padded and unpadded. It returns nil when u is nil.
func BasicAuth(u *url.Userinfo) []string {
	if u == nil {
		return nil
	}
	pw, _ := u.Password()
	return base64Forms(u.Username() + ":" + pw)
}

func base64Forms(s string) []string {
	return []string{base64.StdEncoding.EncodeToString([]byte(s)), base64.RawStdEncoding.EncodeToString([]byte(s))}
}

// NewReplacer returns a replacer of every form of each secret (the
// secret itself, query- and path-escaped, and from 6 bytes on its
// standard base64, padded and unpadded), and of each of the extra
// strings as they are, by [Redacted]; nil when
// there is nothing to replace. Longer forms are tried first, so a secret
// that contains another is replaced whole. A Replacer is safe for
// concurrent use.
func NewReplacer(secrets []string, extra ...string) *strings.Replacer {
	var forms []string
	for _, s := range secrets {
		forms = append(forms, encodings(s)...)
	}
	for _, s := range extra {
		if s != "" {
			forms = append(forms, s)
		}
	}
	if len(forms) == 0 {
		return nil
	}
	slices.SortFunc(forms, func(a, b string) int {
		return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b))
	})
	forms = slices.Compact(forms)
	pairs := make([]string, 0, 2*len(forms))
	for _, f := range forms {
		pairs = append(pairs, f, Redacted)
	}
	return strings.NewReplacer(pairs...)
}
