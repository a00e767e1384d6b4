package schemas

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/textcut"
)

// maxQuoted is how many bytes of a value a message shows.
const maxQuoted = 80

// truncate cuts s to at most n bytes on a rune boundary, marking the cut
// with "…".
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return textcut.Prefix(s, n) + "…"
}

// quote returns s double-quoted, cut to maxQuoted bytes first.
func quote(s string) string {
	return strconv.Quote(truncate(s, maxQuoted))
}

// renderValue writes a decoded JSON value the way JSON would, quoted
// strings and long values cut to maxQuoted bytes.
func renderValue(v any) string {
	switch v := v.(type) {
	case string:
		return quote(v)
	case json.Number:
		return truncate(string(v), maxQuoted)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	case nil:
		return "null"
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "(a value)"
	}
	return truncate(strings.TrimSuffix(b.String(), "\n"), maxQuoted)
}

// clean makes a message safe to show: valid UTF-8 and bounded in length.
func clean(s string) string {
	return truncate(strings.ToValidUTF8(s, "\uFFFD"), maxMessage)
}

// parseQuoted reads one string quoted the way jsonschema/v5 quotes values
// ('…', Go escapes, `"` unescaped, `'` escaped) starting at s[i], which
// must be the opening quote. It returns the decoded string and the index
// just past the closing quote.
func parseQuoted(s string, i int) (string, int, bool) {
	if i >= len(s) || s[i] != '\'' {
		return "", 0, false
	}
	var b strings.Builder
	b.WriteByte('"')
	for j := i + 1; j < len(s); j++ {
		switch c := s[j]; c {
		case '\\':
			if j+1 >= len(s) {
				return "", 0, false
			}
			if s[j+1] == '\'' {
				b.WriteByte('\'')
			} else {
				b.WriteByte('\\')
				b.WriteByte(s[j+1])
			}
			j++
		case '"':
			b.WriteString(`\"`)
		case '\'':
			b.WriteByte('"')
			v, err := strconv.Unquote(b.String())
			if err != nil {
				return "", 0, false
			}
			return v, j + 1, true
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, false
}

// parseQuotedList parses "'a', 'b'" as written by jsonschema/v5.
func parseQuotedList(s string) ([]string, bool) {
	var out []string
	i := 0
	for {
		v, next, ok := parseQuoted(s, i)
		if !ok {
			return nil, false
		}
		out = append(out, v)
		if next == len(s) {
			return out, true
		}
		if !strings.HasPrefix(s[next:], ", ") {
			return nil, false
		}
		i = next + 2
	}
}

// requote rewrites every value jsonschema/v5 single-quoted in msg as a
// double-quoted, truncated string. A quote opens only at the start or
// after a space or '(' so that apostrophes in words are left alone.
func requote(msg string) string {
	if !strings.Contains(msg, "'") {
		return msg
	}
	var b strings.Builder
	for i := 0; i < len(msg); {
		if msg[i] == '\'' && (i == 0 || msg[i-1] == ' ' || msg[i-1] == '(') {
			if v, next, ok := parseQuoted(msg, i); ok {
				b.WriteString(quote(v))
				i = next
				continue
			}
		}
		b.WriteByte(msg[i])
		i++
	}
	return b.String()
}

// cleanPointer turns a jsonschema/v5 location (tokens URL-path-escaped on
// top of RFC 6901 escaping) into an RFC 6901 pointer, cutting tokens longer
// than maxQuoted bytes.
func cleanPointer(p string) string {
	if p == "" {
		return ""
	}
	needs := strings.IndexByte(p, '%') >= 0 || !utf8.ValidString(p)
	if !needs {
		last := 0
		for i := 0; i <= len(p); i++ {
			if i == len(p) || p[i] == '/' {
				if i-last > maxQuoted+1 {
					needs = true
					break
				}
				last = i
			}
		}
	}
	if !needs {
		return p
	}
	toks := strings.Split(p, "/")
	for i, t := range toks {
		if strings.IndexByte(t, '%') >= 0 {
			if u, err := url.PathUnescape(t); err == nil {
				t = u
			}
		}
		toks[i] = truncate(strings.ToValidUTF8(t, "\uFFFD"), maxQuoted)
	}
	return strings.Join(toks, "/")
}

// escapeToken escapes one RFC 6901 reference token.
func escapeToken(t string) string {
	if !strings.ContainsAny(t, "~/") {
		return t
	}
	return strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1")
}

func unescapeToken(t string) string {
	if !strings.Contains(t, "~") {
		return t
	}
	return strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
}

// lastToken returns the last reference token of pointer p, unescaped.
func lastToken(p string) string {
	return unescapeToken(p[strings.LastIndexByte(p, '/')+1:])
}

// lookup resolves the RFC 6901 pointer p in doc.
func lookup(doc any, p string) (any, bool) {
	if p == "" {
		return doc, true
	}
	if p[0] != '/' {
		return nil, false
	}
	cur := doc
	for t := range strings.SplitSeq(p[1:], "/") {
		t = unescapeToken(t)
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[t]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}
