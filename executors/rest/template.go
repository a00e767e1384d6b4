package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/registry"
)

// A template is text with {arg} placeholders, compiled once by Add.
// "{{" and "}}" stand for literal braces. Placeholder names are what MCP
// allows in a tool name and the openapi package produces for a property:
// [A-Za-z0-9_.-], 1 to 64 characters.
type template struct {
	parts []tmplPart
}

// tmplPart is a literal (arg == "") or a placeholder (arg != "").
type tmplPart struct {
	lit string
	arg string
}

const maxPlaceholder = 64

// errBraces is wrapped by parseTemplate's errors, with the fix to make.
var errBraces = errors.New(`write {name} for an argument and {{ or }} for a literal brace`)

// templateError is a template that does not compile. Its text says what is
// wrong and what to write instead, and never shows the template: it may
// hold a secret (a header value from the environment).
type templateError struct{ msg string }

func (e *templateError) Error() string { return e.msg }

// Unwrap returns errBraces.
func (e *templateError) Unwrap() error { return errBraces }

// The problems parseTemplate reports; urlProblem uses the same words.
const (
	msgUnclosed    = "has an unclosed {; close the placeholder, like {id}, or write {{ for a literal brace"
	msgEmptyName   = "has an empty placeholder {}; name the argument, like {id}"
	msgUnmatched   = "has a } that closes no placeholder; write }} for a literal brace"
	msgBadArgument = "has a placeholder whose name is not 1 to 64 characters from A-Z a-z 0-9 _ . -; name the argument, like {id}, or write {{ and }} for literal braces"
)

// parseTemplate compiles s. Its error is a *templateError.
func parseTemplate(s string) (template, error) {
	var t template
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			t.parts = append(t.parts, tmplPart{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '{':
			if i+1 < len(s) && s[i+1] == '{' {
				lit.WriteByte('{')
				i++
				continue
			}
			end := strings.IndexByte(s[i+1:], '}')
			if end < 0 {
				return template{}, &templateError{msgUnclosed}
			}
			name := s[i+1 : i+1+end]
			switch {
			case name == "":
				return template{}, &templateError{msgEmptyName}
			case !validPlaceholder(name):
				return template{}, &templateError{msgBadArgument}
			}
			flush()
			t.parts = append(t.parts, tmplPart{arg: name})
			i += end + 1
		case '}':
			if i+1 < len(s) && s[i+1] == '}' {
				lit.WriteByte('}')
				i++
				continue
			}
			return template{}, &templateError{msgUnmatched}
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	return t, nil
}

func validPlaceholder(name string) bool {
	if name == "" || len(name) > maxPlaceholder {
		return false
	}
	for i := range len(name) {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// args lists t's placeholder names, in order, with repeats.
func (t template) args() []string {
	var out []string
	for _, p := range t.parts {
		if p.arg != "" {
			out = append(out, p.arg)
		}
	}
	return out
}

// hasArgs reports whether t holds a placeholder.
func (t template) hasArgs() bool {
	return slices.ContainsFunc(t.parts, func(p tmplPart) bool { return p.arg != "" })
}

// whole returns the name when t is exactly one placeholder.
func (t template) whole() (string, bool) {
	if len(t.parts) == 1 && t.parts[0].arg != "" {
		return t.parts[0].arg, true
	}
	return "", false
}

// literal returns t's text with every placeholder replaced by sub.
func (t template) literal(sub string) string {
	var b strings.Builder
	for _, p := range t.parts {
		if p.arg != "" {
			b.WriteString(sub)
		} else {
			b.WriteString(p.lit)
		}
	}
	return b.String()
}

// expand returns t with each placeholder replaced by esc(the argument's
// text) (esc nil: unchanged). ok is false, and missing names the first
// argument, when a placeholder's argument is absent or null.
func (t template) expand(args map[string]any, esc func(string) string) (s string, missing string, ok bool) {
	if len(t.parts) == 1 && t.parts[0].arg == "" {
		return t.parts[0].lit, "", true
	}
	var b strings.Builder
	for _, p := range t.parts {
		if p.arg == "" {
			b.WriteString(p.lit)
			continue
		}
		v, present := args[p.arg]
		if !present || v == nil {
			return "", p.arg, false
		}
		if pe, ok := v.(preEscaped); ok {
			b.WriteString(string(pe)) // a path Param, serialized by its style
			continue
		}
		text := argText(v)
		if esc != nil {
			text = esc(text)
		}
		b.WriteString(text)
	}
	return b.String(), "", true
}

// argText formats an argument for a URL, header or string: a string as
// itself, a number or bool as its JSON scalar, an object or array as
// compact JSON.
func argText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case bool:
		return strconv.FormatBool(v)
	case json.Number:
		return v.String()
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	}
	b, err := marshalJSON(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// marshalJSON is json.Marshal without HTML escaping: values go to APIs,
// not into web pages, and <, > and & must arrive as written.
func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// urlTemplate is a compiled Spec.URL plus Spec.Query.
type urlTemplate struct {
	// origin is scheme://[userinfo@]host[:port], literal.
	origin string
	// segments are the path's segments: the path is "/" + segments joined
	// by "/"; nil for an empty path. Literal text is already URL-escaped.
	segments []template
	// query holds the query's parameters in order: the URL's own, then
	// Spec.Query's sorted by key. Literal text is unescaped.
	query []queryParam
	// encoded is the order in which expand writes query: sorted by key,
	// stably, as url.Values.Encode would write them.
	encoded []int
}

type queryParam struct {
	key     string
	value   template
	escaped string // the key query-escaped, then "="
}

// parseURL compiles a URL template and the Spec.Query map. Every problem
// is reported, each a *[registry.FieldError] for field "url" or
// "query.<key>" whose Msg says what to write instead; none shows the URL
// (Value is left empty), which may have come from the environment.
func parseURL(raw string, query map[string]string) (urlTemplate, *url.URL, error) {
	var u urlTemplate
	var errs []error
	bad := func(msg string) { errs = append(errs, &registry.FieldError{Field: "url", Msg: msg}) }
	params, qerrs := queryParams(query)
	switch msg := urlProblem(raw); {
	case raw == "":
		bad("is required; write an absolute URL, like http://127.0.0.1:9000/items/{id}")
	case msg != "":
		bad(msg)
	}
	errs = append(errs, qerrs...)
	if len(errs) > 0 {
		return u, nil, errors.Join(errs...)
	}

	// urlProblem has checked the scheme and authority: neither holds a
	// brace, and there is no fragment.
	authEnd := len(raw)
	schemeEnd := strings.Index(raw, "://")
	if i := strings.IndexAny(raw[schemeEnd+3:], "/?"); i >= 0 {
		authEnd = schemeEnd + 3 + i
	}
	u.origin = raw[:authEnd]
	pathPart, queryPart, hasQuery := strings.Cut(raw[authEnd:], "?")
	if pathPart != "" {
		for seg := range strings.SplitSeq(pathPart[1:], "/") {
			t, err := parseTemplate(seg)
			if err != nil {
				bad(err.Error())
				continue
			}
			u.segments = append(u.segments, t)
		}
	}
	if hasQuery && queryPart != "" {
		u.query = parseQueryPart(queryPart, bad)
	}
	if len(errs) > 0 {
		return u, nil, errors.Join(errs...)
	}
	u.query = append(u.query, params...)
	for i := range u.query {
		u.query[i].escaped = url.QueryEscape(u.query[i].key) + "="
		u.encoded = append(u.encoded, i)
	}
	slices.SortStableFunc(u.encoded, func(i, j int) int { return strings.Compare(u.query[i].key, u.query[j].key) })

	// The URL with every placeholder filled must parse, so that the only
	// thing left to go wrong per call is the arguments.
	sample, err := url.Parse(u.origin + u.pathWith("x"))
	if err != nil {
		bad(msgNotURL)
		return u, nil, errors.Join(errs...)
	}
	return u, sample, nil
}

// parseQueryPart compiles the query of a URL template, key=value pairs
// separated by "&" whose values may hold placeholders, reporting each
// problem to bad.
func parseQueryPart(queryPart string, bad func(msg string)) []queryParam {
	var params []queryParam
	for pair := range strings.SplitSeq(queryPart, "&") {
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		if strings.ContainsAny(k, "{}") {
			bad("has a placeholder in a query key; placeholders are allowed in query values only, like ?q={q}")
			continue
		}
		key, err := url.QueryUnescape(k)
		if err != nil {
			bad("has a query key with an invalid %-escape; escape a literal % as %25")
			continue
		}
		t, err := parseTemplate(v)
		if err != nil {
			bad(err.Error())
			continue
		}
		for i, p := range t.parts {
			if p.arg == "" {
				if t.parts[i].lit, err = url.QueryUnescape(p.lit); err != nil {
					bad("has a query value with an invalid %-escape; escape a literal % as %25")
				}
			}
		}
		params = append(params, queryParam{key: key, value: t})
	}
	return params
}

// queryParams compiles the Spec.Query map, sorted by key. Every problem is
// a *[registry.FieldError] for "query.<key>".
func queryParams(query map[string]string) ([]queryParam, []error) {
	var params []queryParam
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(query)) {
		field := registry.FieldPath("query", k)
		if k == "" {
			errs = append(errs, &registry.FieldError{Field: field, Key: true, Msg: "a query key must not be empty; name the parameter"})
			continue
		}
		t, err := parseTemplate(query[k])
		if err != nil {
			errs = append(errs, &registry.FieldError{Field: field, Msg: err.Error()})
			continue
		}
		params = append(params, queryParam{key: k, value: t})
	}
	return params, errs
}

const (
	msgPlaceholderOrigin = "placeholders like {name} are allowed only in the path and query, not in the scheme, host or port; write them out, like http://127.0.0.1:9000/items/{id}"
	msgNotURL            = "is not a valid URL; write scheme://host[:port]/path, like http://127.0.0.1:9000/items/{id}"
)

// urlProblem says what is wrong with a REST tool's URL template, or "" if
// nothing. The message never quotes the URL, which may have come from the
// environment.
func urlProblem(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		head := raw
		if i := strings.IndexAny(raw, "/?#"); i >= 0 {
			head = raw[:i]
		}
		if strings.ContainsAny(head, "{}") {
			return msgPlaceholderOrigin
		}
		return "must be an absolute http or https URL, like http://127.0.0.1:9000/items/{id}"
	}
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	if strings.ContainsAny(scheme, "{}") || strings.ContainsAny(authority, "{}") {
		return msgPlaceholderOrigin
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
		return msgNotURL
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
				return "", msgUnclosed
			}
			if end == 0 {
				return "", msgEmptyName
			}
			b.WriteByte('x')
			i += end + 1
		case c == '}':
			return "", msgUnmatched
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), ""
}

func httpScheme(s string) bool { return strings.EqualFold(s, "http") || strings.EqualFold(s, "https") }

func validPort(p string) bool {
	_, err := strconv.ParseUint(p, 10, 16)
	return err == nil
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

// pathWith returns the path with every placeholder replaced by sub.
func (u *urlTemplate) pathWith(sub string) string {
	var b strings.Builder
	for _, s := range u.segments {
		b.WriteByte('/')
		b.WriteString(s.literal(sub))
	}
	return b.String()
}

// missingArgsError is a call whose arguments leave a path placeholder
// empty.
type missingArgsError struct {
	names []string
	empty bool
}

func (e *missingArgsError) Error() string {
	quoted := make([]string, len(e.names))
	for i, n := range e.names {
		quoted[i] = strconv.Quote(n)
	}
	if e.empty {
		return "path argument " + strings.Join(quoted, ", ") + " must not be empty"
	}
	s := "missing argument"
	if len(e.names) > 1 {
		s += "s"
	}
	return s + " " + strings.Join(quoted, ", ") + " (part of the URL path)"
}

// expand returns the request URL for args. Path values are path-escaped
// and a value that would make a segment "." or ".." is escaped to %2E so
// that it stays inside its segment. A query parameter whose placeholders
// name absent arguments is left out.
func (u *urlTemplate) expand(args map[string]any) (string, error) {
	var b strings.Builder
	b.Grow(len(u.origin) + 128)
	b.WriteString(u.origin)
	var missing []string
	empty := false
	for _, seg := range u.segments {
		b.WriteByte('/')
		s, _, ok := seg.expand(args, url.PathEscape)
		if !ok {
			for _, a := range seg.args() {
				if v, present := args[a]; (!present || v == nil) && !slices.Contains(missing, a) {
					missing = append(missing, a)
				}
			}
			continue
		}
		if seg.hasArgs() {
			switch {
			case s == "" && seg.literal("") == "":
				empty = true
				missing = append(missing, seg.args()...)
			case s == "." || s == "..":
				s = strings.ReplaceAll(s, ".", "%2E")
			}
		}
		b.WriteString(s)
	}
	if len(missing) > 0 {
		return "", &missingArgsError{names: missing, empty: empty}
	}
	// What url.Values.Encode writes, without building the Values.
	sep := byte('?')
	for _, i := range u.encoded {
		p := &u.query[i]
		if v, _, ok := p.value.expand(args, nil); ok {
			b.WriteByte(sep)
			b.WriteString(p.escaped)
			b.WriteString(url.QueryEscape(v))
			sep = '&'
		}
	}
	return b.String(), nil
}

// controlCharError reports a header value with a control character.
type controlCharError struct{ header string }

func (e *controlCharError) Error() string {
	return fmt.Sprintf("the value of header %q contains a control character (CR, LF, NUL or another); pass the argument without line breaks or control characters", e.header)
}

// bodyNode is one value of a compiled JSON body template.
type bodyNode struct {
	kind bodyKind
	lit  any          // bodyLiteral: a literal scalar (json.Number, bool, nil)
	str  template     // bodyString: a string, maybe with placeholders
	arg  string       // bodyArg: the argument whose JSON value this is
	obj  []bodyMember // bodyObject
	arr  []*bodyNode  // bodyArray
}

type bodyKind uint8

const (
	bodyLiteral bodyKind = iota
	bodyString
	bodyArg
	bodyObject
	bodyArray
)

type bodyMember struct {
	key string
	val *bodyNode
}

// parseBody compiles a JSON body template. Every problem is a
// *[registry.FieldError] for field "body" or a path within it
// ("body.user.name", "body.tags[0]").
func parseBody(raw json.RawMessage) (*bodyNode, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		// The decoder's message quotes the text; it is left out.
		return nil, &registry.FieldError{Field: "body", Msg: `is not JSON; write a JSON value, with "{arg}" strings where arguments go`}
	}
	if dec.More() {
		return nil, &registry.FieldError{Field: "body", Msg: `holds more than one JSON value; write one value, with "{arg}" strings where arguments go`}
	}
	return compileBody(v, "body")
}

func compileBody(v any, path string) (*bodyNode, error) {
	switch v := v.(type) {
	case string:
		t, err := parseTemplate(v)
		if err != nil {
			return nil, &registry.FieldError{Field: path, Msg: err.Error()}
		}
		if name, ok := t.whole(); ok {
			return &bodyNode{kind: bodyArg, arg: name}, nil
		}
		return &bodyNode{kind: bodyString, str: t}, nil
	case map[string]any:
		n := &bodyNode{kind: bodyObject}
		var errs []error
		for _, k := range slices.Sorted(maps.Keys(v)) {
			c, err := compileBody(v[k], registry.FieldPath(path, k))
			if err != nil {
				errs = append(errs, err)
				continue
			}
			n.obj = append(n.obj, bodyMember{key: k, val: c})
		}
		return n, errors.Join(errs...)
	case []any:
		n := &bodyNode{kind: bodyArray}
		var errs []error
		for i, e := range v {
			c, err := compileBody(e, path+"["+strconv.Itoa(i)+"]")
			if err != nil {
				errs = append(errs, err)
				continue
			}
			n.arr = append(n.arr, c)
		}
		return n, errors.Join(errs...)
	default:
		return &bodyNode{kind: bodyLiteral, lit: v}, nil
	}
}

// args appends the placeholder names of n to dst.
func (n *bodyNode) args(dst []string) []string {
	switch n.kind {
	case bodyString:
		dst = append(dst, n.str.args()...)
	case bodyArg:
		dst = append(dst, n.arg)
	case bodyObject:
		for _, m := range n.obj {
			dst = m.val.args(dst)
		}
	case bodyArray:
		for _, e := range n.arr {
			dst = e.args(dst)
		}
	}
	return dst
}

// expand returns n's value for args; ok is false when n is to be left
// out: a placeholder names an absent argument ("{arg}" alone keeps an
// explicit null; inside a longer string, null counts as absent).
func (n *bodyNode) expand(args map[string]any) (v any, ok bool) {
	switch n.kind {
	case bodyLiteral:
		return n.lit, true
	case bodyString:
		s, _, ok := n.str.expand(args, nil)
		return s, ok
	case bodyArg:
		v, ok := args[n.arg]
		return v, ok
	case bodyObject:
		m := make(map[string]any, len(n.obj))
		for _, mem := range n.obj {
			if v, ok := mem.val.expand(args); ok {
				m[mem.key] = v
			}
		}
		return m, true
	case bodyArray:
		a := make([]any, 0, len(n.arr))
		for _, e := range n.arr {
			if v, ok := e.expand(args); ok {
				a = append(a, v)
			}
		}
		return a, true
	}
	return nil, false
}

// stripURLErr returns the cause of a *url.Error, whose text repeats the
// whole URL.
func stripURLErr(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return ue.Err
	}
	return err
}
