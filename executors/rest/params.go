package rest

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"maps"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/internal/httpheader"
	"github.com/toolgate/toolgate/registry"
)

// Parameter locations of a [Param].
const (
	InPath   = "path"
	InQuery  = "query"
	InHeader = "header"
	InCookie = "cookie"
)

// Serialization styles of a [Param] and a [PartEncoding], as OpenAPI
// names them.
const (
	StyleSimple         = "simple"
	StyleLabel          = "label"
	StyleMatrix         = "matrix"
	StyleForm           = "form"
	StyleSpaceDelimited = "spaceDelimited"
	StylePipeDelimited  = "pipeDelimited"
	StyleDeepObject     = "deepObject"
)

// Param is one parameter sent by OpenAPI's serialization rules: its
// argument, a string, number, bool, array or object, is written per Style
// and Explode. An absent or null argument sends nothing (a path
// parameter's is an error).
type Param struct {
	// Name is the parameter's name on the wire. Required.
	Name string
	// In is where it goes: [InPath], [InQuery], [InHeader] or [InCookie].
	// A path parameter's Arg must appear in URL as {Arg}.
	In string
	// Arg is the argument holding the value. Required.
	Arg string
	// Style is how the value is written; empty means the location's
	// default (simple for path and header, form for query and cookie).
	// Path: simple, label, matrix. Query: form, spaceDelimited,
	// pipeDelimited, deepObject. Header: simple. Cookie: form.
	Style string
	// Explode writes each array item or object member separately. Nil
	// means true for form, false for the others.
	Explode *bool
	// AllowReserved sends a query value's reserved characters
	// (:/?#[]@!$&'()*+,;=) unescaped.
	AllowReserved bool
	// JSON sends the value as compact JSON text (a parameter described by
	// content application/json), escaped for its location.
	JSON bool
}

// Payload sends one argument as a request body in a media type other
// than JSON (JSON bodies are [Spec.Body] templates).
type Payload struct {
	// Arg is the argument holding the body. An absent argument sends no
	// body.
	Arg string
	// Kind is how the argument is written: [PayloadForm] (an object, as
	// application/x-www-form-urlencoded), [PayloadMultipart] (an object,
	// one part per member), [PayloadText] (a string, as it is) or
	// [PayloadBinary] (a base64 string, decoded).
	Kind string
	// ContentType is the media type sent; empty means the Kind's
	// (multipart's gets its boundary).
	ContentType string
	// Encoding says how each member of a form or multipart object is
	// written; a member without one gets the defaults.
	Encoding map[string]PartEncoding
}

// Kinds of a [Payload].
const (
	PayloadForm      = "form"
	PayloadMultipart = "multipart"
	PayloadText      = "text"
	PayloadBinary    = "binary"
)

// PartEncoding is how one member of a form or multipart body is written.
type PartEncoding struct {
	// ContentType is a JSON media type to send the member as JSON text
	// (form) or the part's Content-Type (multipart). Empty means
	// text/plain for scalars, application/json for objects and arrays,
	// and application/octet-stream for files.
	ContentType string
	// Style and Explode are as for a query [Param] (form only); the
	// defaults are form, exploded.
	Style   string
	Explode *bool
	// File marks a multipart member whose value is base64 file content
	// (an array of them for several files): each is a part with a
	// filename.
	File bool
}

// defaultStyle is In's style when Param.Style is empty.
func defaultStyle(in string) string {
	if in == InQuery || in == InCookie {
		return StyleForm
	}
	return StyleSimple
}

// styles lists the styles each location allows.
var styles = map[string][]string{
	InPath:   {StyleSimple, StyleLabel, StyleMatrix},
	InQuery:  {StyleForm, StyleSpaceDelimited, StylePipeDelimited, StyleDeepObject},
	InHeader: {StyleSimple},
	InCookie: {StyleForm},
}

// compiledParam is a Param with its defaults filled in.
type compiledParam struct {
	Param
	explode bool
}

// compileParams checks ps against the URL's path placeholders.
func compileParams(ps []Param, pathArgs []string) ([]compiledParam, []error) {
	var out []compiledParam
	var errs []error
	for i, p := range ps {
		field := fmt.Sprintf("params[%d]", i)
		bad := func(msg string) { errs = append(errs, &registry.FieldError{Field: field, Value: p.Name, Msg: msg}) }
		allowed, ok := styles[p.In]
		style := p.Style
		if style == "" {
			style = defaultStyle(p.In)
		}
		switch {
		case p.Name == "":
			bad("has no name; name the parameter")
			continue
		case !ok:
			bad(fmt.Sprintf("is in %q; write path, query, header or cookie", p.In))
			continue
		case !validPlaceholder(p.Arg):
			bad("takes its value from an argument whose name is not 1 to 64 characters from A-Z a-z 0-9 _ . -")
			continue
		case !slices.Contains(allowed, style):
			bad(fmt.Sprintf("has style %q; a %s parameter's style is one of %s", style, p.In, strings.Join(allowed, ", ")))
			continue
		case p.In == InPath && !slices.Contains(pathArgs, p.Arg):
			bad(fmt.Sprintf("is a path parameter but the URL has no {%s}", p.Arg))
			continue
		case p.In == InHeader && len(httpheader.Check(map[string]string{p.Name: ""})) > 0:
			bad("is a header whose name is not an HTTP token")
			continue
		}
		p.Style = style
		explode := style == StyleForm || style == StyleDeepObject
		if p.Explode != nil {
			explode = *p.Explode
		}
		out = append(out, compiledParam{Param: p, explode: explode})
	}
	return out, errs
}

// checkPayload checks a Payload.
func checkPayload(p *Payload) error {
	switch {
	case !validPlaceholder(p.Arg):
		return &registry.FieldError{Field: "payload.arg", Msg: "must be 1 to 64 characters from A-Z a-z 0-9 _ . -"}
	case !slices.Contains([]string{PayloadForm, PayloadMultipart, PayloadText, PayloadBinary}, p.Kind):
		return &registry.FieldError{Field: "payload.kind", Value: p.Kind, Msg: "must be form, multipart, text or binary"}
	case p.ContentType != "" && !httpheader.ValidValue(p.ContentType):
		return &registry.FieldError{Field: "payload.content_type", Msg: "must not contain control characters"}
	}
	return nil
}

// preEscaped is a path argument already serialized and escaped: a
// template writes it as it is.
type preEscaped string

// unreserved reports whether c is left as it is in every location.
func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

// escapeStrict percent-encodes every byte of s but the unreserved ones;
// keep lists more bytes to leave as they are.
func escapeStrict(s, keep string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if unreserved(c) || strings.IndexByte(keep, c) >= 0 {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// reserved are RFC 3986's reserved characters, which allowReserved keeps.
const reserved = ":/?#[]@!$&'()*+,;="

// kv is one key and value, unescaped.
type kv struct{ k, v string }

// members returns an object's members sorted by key, as text.
func members(m map[string]any) []kv {
	out := make([]kv, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if m[k] == nil {
			continue
		}
		out = append(out, kv{k, argText(m[k])})
	}
	return out
}

// items returns an array's items as text.
func items(a []any) []string {
	out := make([]string, 0, len(a))
	for _, v := range a {
		if v != nil {
			out = append(out, argText(v))
		}
	}
	return out
}

// serializePath writes a path parameter's value, escaped, per its style.
func serializePath(p compiledParam, v any) string {
	esc := func(s string) string { return escapeStrict(s, "") }
	if p.JSON {
		v = jsonText(v)
	}
	var prefix, sep, kvSep string
	switch p.Style {
	case StyleLabel:
		prefix, sep = ".", ","
		if p.explode {
			sep = "."
		}
	case StyleMatrix:
		prefix, sep = ";"+esc(p.Name)+"=", ","
		if p.explode {
			sep = ";" + esc(p.Name) + "="
		}
	default:
		sep = ","
	}
	kvSep = ","
	if p.explode {
		kvSep = "="
	}
	var parts []string
	switch x := v.(type) {
	case []any:
		for _, s := range items(x) {
			parts = append(parts, esc(s))
		}
	case map[string]any:
		objSep := sep
		if p.Style == StyleMatrix && p.explode {
			prefix, objSep = ";", ";"
		}
		var b []string
		for _, m := range members(x) {
			b = append(b, esc(m.k)+kvSep+esc(m.v))
		}
		return prefix + strings.Join(b, objSep)
	default:
		parts = []string{esc(argText(v))}
	}
	return prefix + strings.Join(parts, sep)
}

// jsonText returns v as compact JSON text.
func jsonText(v any) string {
	b, err := marshalJSON(v)
	if err != nil {
		return argText(v)
	}
	return string(b)
}

// serializeQuery writes a query parameter's pairs, escaped, per its style.
func serializeQuery(p compiledParam, v any) []string {
	keep := ""
	if p.AllowReserved {
		keep = reserved
	}
	esc := func(s string) string { return escapeStrict(s, keep) }
	name := escapeStrict(p.Name, "")
	if p.JSON {
		return []string{name + "=" + esc(jsonText(v))}
	}
	switch x := v.(type) {
	case []any:
		if p.Style == StyleDeepObject {
			// As the style table says (docs/openapi.md): id[0]=3&id[1]=4,
			// which is what Stripe's expand and similar APIs expect;
			// id=3&id=4 would be a form parameter.
			var out []string
			deepObject(&out, name, x, esc)
			return out
		}
		its := items(x)
		if len(its) == 0 {
			return nil
		}
		if p.explode {
			out := make([]string, 0, len(its))
			for _, s := range its {
				out = append(out, name+"="+esc(s))
			}
			return out
		}
		sep := ","
		switch p.Style {
		case StyleSpaceDelimited:
			sep = "%20"
		case StylePipeDelimited:
			sep = "%7C"
		}
		parts := make([]string, len(its))
		for i, s := range its {
			parts[i] = esc(s)
		}
		return []string{name + "=" + strings.Join(parts, sep)}
	case map[string]any:
		if p.Style == StyleDeepObject {
			var out []string
			deepObject(&out, name, x, esc)
			return out
		}
		ms := members(x)
		if len(ms) == 0 {
			return nil
		}
		if p.explode {
			out := make([]string, 0, len(ms))
			for _, m := range ms {
				out = append(out, escapeStrict(m.k, "")+"="+esc(m.v))
			}
			return out
		}
		parts := make([]string, 0, 2*len(ms))
		for _, m := range ms {
			parts = append(parts, esc(m.k), esc(m.v))
		}
		return []string{name + "=" + strings.Join(parts, ",")}
	}
	return []string{name + "=" + esc(argText(v))}
}

// deepObject writes v under key as key[member]=value pairs, nested
// objects as key[a][b] and arrays as key[a][0].
func deepObject(out *[]string, key string, v any, esc func(string) string) {
	switch x := v.(type) {
	case nil:
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			deepObject(out, key+"["+escapeStrict(k, "")+"]", x[k], esc)
		}
	case []any:
		for i, e := range x {
			deepObject(out, key+"["+strconv.Itoa(i)+"]", e, esc)
		}
	default:
		*out = append(*out, key+"="+esc(argText(v)))
	}
}

// serializeHeader writes a header (simple style) or a cookie (form
// style) parameter's value.
func serializeSimple(p compiledParam, v any) string {
	if p.JSON {
		return jsonText(v)
	}
	switch x := v.(type) {
	case []any:
		return strings.Join(items(x), ",")
	case map[string]any:
		var parts []string
		for _, m := range members(x) {
			if p.explode {
				parts = append(parts, m.k+"="+m.v)
			} else {
				parts = append(parts, m.k, m.v)
			}
		}
		return strings.Join(parts, ",")
	}
	return argText(v)
}

// cookieValue escapes what a cookie value must not hold.
func cookieValue(s string) string {
	return escapeStrict(s, "!#$&'()*+-./:<=>?@[]^_`{|}~,")
}

// serializeCookie returns a cookie parameter's name=value pairs.
func serializeCookie(p compiledParam, v any) []string {
	name := cookieValue(p.Name)
	if p.JSON || !p.explode {
		return []string{name + "=" + cookieValue(serializeSimple(p, v))}
	}
	switch x := v.(type) {
	case []any:
		var out []string
		for _, s := range items(x) {
			out = append(out, name+"="+cookieValue(s))
		}
		return out
	case map[string]any:
		var out []string
		for _, m := range members(x) {
			out = append(out, cookieValue(m.k)+"="+cookieValue(m.v))
		}
		return out
	}
	return []string{name + "=" + cookieValue(argText(v))}
}

// applyParams serializes t's params for args: path values go into the
// returned args (as preEscaped), query pairs, headers and cookies into
// the other results.
func (t *tool) applyParams(args map[string]any) (out map[string]any, query []string, header http.Header, cookies []string, err error) {
	out = args
	cloned := false
	header = make(http.Header)
	for _, p := range t.params {
		v, present := args[p.Arg]
		if !present || v == nil {
			continue
		}
		switch p.In {
		case InPath:
			if !cloned {
				out, cloned = maps.Clone(args), true
			}
			out[p.Arg] = preEscaped(serializePath(p, v))
		case InQuery:
			query = append(query, serializeQuery(p, v)...)
		case InHeader:
			s := serializeSimple(p, v)
			if !httpheader.ValidValue(s) {
				return nil, nil, nil, nil, &controlCharError{header: p.Name}
			}
			header.Add(http.CanonicalHeaderKey(p.Name), s)
		case InCookie:
			cookies = append(cookies, serializeCookie(p, v)...)
		}
	}
	return out, query, header, cookies, nil
}

// payloadError is an argument a Payload cannot send.
type payloadError struct{ msg string }

func (e *payloadError) Error() string { return e.msg }

// encodePayload writes the body of p for args: its bytes and content
// type; ok is false when the argument is absent.
func encodePayload(p *Payload, args map[string]any) (body []byte, contentType string, ok bool, err error) {
	v, present := args[p.Arg]
	if !present || v == nil {
		return nil, "", false, nil
	}
	switch p.Kind {
	case PayloadText:
		return []byte(argText(v)), orDefault(p.ContentType, "text/plain; charset=utf-8"), true, nil
	case PayloadBinary:
		s, isStr := v.(string)
		if !isStr {
			return nil, "", false, &payloadError{fmt.Sprintf("argument %q must be a base64 string (the body's bytes)", p.Arg)}
		}
		b, err := decodeBase64(s)
		if err != nil {
			return nil, "", false, &payloadError{fmt.Sprintf("argument %q is not base64: %v; encode the body's bytes in base64", p.Arg, err)}
		}
		return b, orDefault(p.ContentType, "application/octet-stream"), true, nil
	}
	obj, isObj := v.(map[string]any)
	if !isObj {
		return nil, "", false, &payloadError{fmt.Sprintf("argument %q must be an object (one member per form field)", p.Arg)}
	}
	if p.Kind == PayloadForm {
		return []byte(encodeForm(p, obj)), orDefault(p.ContentType, "application/x-www-form-urlencoded"), true, nil
	}
	return encodeMultipart(p, obj)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// decodeBase64 accepts standard and URL-safe base64, padded or not.
func decodeBase64(s string) ([]byte, error) {
	s = strings.TrimRight(strings.Join(strings.Fields(s), ""), "=")
	if strings.ContainsAny(s, "-_") {
		return base64.RawURLEncoding.DecodeString(s)
	}
	return base64.RawStdEncoding.DecodeString(s)
}

// isJSONMedia reports whether a media type is JSON.
func isJSONMedia(ct string) bool {
	mt, _, _ := strings.Cut(strings.ToLower(ct), ";")
	mt = strings.TrimSpace(mt)
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// encodeForm writes obj as application/x-www-form-urlencoded.
func encodeForm(p *Payload, obj map[string]any) string {
	var pairs []string
	esc := func(s string) string { return strings.ReplaceAll(escapeStrict(s, ""), "%20", "+") }
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		v := obj[k]
		if v == nil {
			continue
		}
		enc := p.Encoding[k]
		if isJSONMedia(enc.ContentType) {
			pairs = append(pairs, esc(k)+"="+esc(jsonText(v)))
			continue
		}
		style := orDefault(enc.Style, StyleForm)
		cp := compiledParam{Param: Param{Name: k, In: InQuery, Style: style}, explode: enc.Explode == nil || *enc.Explode}
		for _, pair := range serializeQuery(cp, v) {
			// serializeQuery escapes for a query string (%20); a form
			// writes a space as +.
			pairs = append(pairs, strings.ReplaceAll(pair, "%20", "+"))
		}
	}
	return strings.Join(pairs, "&")
}

// encodeMultipart writes obj as multipart/form-data.
func encodeMultipart(p *Payload, obj map[string]any) ([]byte, string, bool, error) {
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	part := func(name, filename, ct string, data []byte) error {
		h := make(textproto.MIMEHeader)
		cd := fmt.Sprintf(`form-data; name="%s"`, quoteEscaper.Replace(name))
		if filename != "" {
			cd += fmt.Sprintf(`; filename="%s"`, quoteEscaper.Replace(filename))
		}
		h.Set("Content-Disposition", cd)
		if ct != "" {
			h.Set("Content-Type", ct)
		}
		pw, err := w.CreatePart(h)
		if err != nil {
			return err
		}
		_, err = pw.Write(data)
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		v := obj[k]
		if v == nil {
			continue
		}
		enc := p.Encoding[k]
		if enc.File {
			files := []any{v}
			if a, ok := v.([]any); ok {
				files = a
			}
			for _, f := range files {
				s, ok := f.(string)
				if !ok {
					return nil, "", false, &payloadError{fmt.Sprintf("member %q of argument %q must be a base64 string (the file's bytes)", k, p.Arg)}
				}
				data, err := decodeBase64(s)
				if err != nil {
					return nil, "", false, &payloadError{fmt.Sprintf("member %q of argument %q is not base64: %v; encode the file's bytes in base64", k, p.Arg, err)}
				}
				if err := part(k, k, orDefault(enc.ContentType, "application/octet-stream"), data); err != nil {
					return nil, "", false, err
				}
			}
			continue
		}
		var data []byte
		ct := enc.ContentType
		switch v.(type) {
		case map[string]any, []any:
			data = []byte(jsonText(v))
			ct = orDefault(ct, "application/json")
		default:
			data = []byte(argText(v))
		}
		if err := part(k, "", ct, data); err != nil {
			return nil, "", false, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, "", false, err
	}
	ct := w.FormDataContentType()
	return buf.Bytes(), ct, true, nil
}

// quoteEscaper escapes a multipart parameter value, as mime/multipart
// does.
var quoteEscaper = strings.NewReplacer("\\", "\\\\", `"`, "\\\"")
