package openapi

import (
	"maps"
	"mime"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/toolgate/toolgate/executors/rest"
)

// oapiBodyMedia picks the media type of a request body, by preference:
// JSON (application/json, then +json types, then */* and application/*,
// sent as application/json), form, multipart, text, then any other type
// (sent as bytes). kind is "json" or a [rest.Payload] kind.
func oapiBodyMedia(content openapi3.Content) (mediaType string, mt *openapi3.MediaType, kind string) {
	keys := slices.Sorted(maps.Keys(content))
	parsed := make(map[string]string, len(keys))
	for _, k := range keys {
		m, _, err := mime.ParseMediaType(k)
		if err != nil {
			m = strings.ToLower(strings.TrimSpace(k))
		}
		parsed[k] = m
	}
	pick := func(ok func(m string) bool) (string, bool) {
		for _, k := range keys {
			if content[k] != nil && ok(parsed[k]) {
				return k, true
			}
		}
		return "", false
	}
	rules := []struct {
		kind string
		ok   func(string) bool
		send func(string) string
	}{
		{"json", func(m string) bool { return m == "application/json" }, func(string) string { return "application/json" }},
		{"json", func(m string) bool { return strings.HasPrefix(m, "application/") && strings.HasSuffix(m, "+json") }, func(m string) string { return m }},
		{"json", func(m string) bool { return m == "*/*" || m == "application/*" || m == "" }, func(string) string { return "application/json" }},
		{rest.PayloadForm, func(m string) bool { return m == "application/x-www-form-urlencoded" }, func(m string) string { return m }},
		{rest.PayloadMultipart, func(m string) bool { return strings.HasPrefix(m, "multipart/") }, func(m string) string { return m }},
		{rest.PayloadText, func(m string) bool { return strings.HasPrefix(m, "text/") }, func(m string) string { return m }},
		{rest.PayloadBinary, func(string) bool { return true }, func(m string) string { return m }},
	}
	for _, r := range rules {
		if k, ok := pick(r.ok); ok {
			return r.send(parsed[k]), content[k], r.kind
		}
	}
	return "", nil, ""
}

// oapiMarkFiles marks the members of a multipart body that are files
// (type string with format binary or base64, or a contentMediaType, or
// an array of them) and describes them in the converted schema as base64
// strings.
func oapiMarkFiles(sr *openapi3.SchemaRef, converted any, enc map[string]rest.PartEncoding) {
	if sr == nil || sr.Value == nil {
		return
	}
	props, _ := func() (map[string]any, bool) {
		m, ok := converted.(map[string]any)
		if !ok {
			return nil, false
		}
		p, ok := m["properties"].(map[string]any)
		return p, ok
	}()
	isFile := func(s *openapi3.SchemaRef) bool {
		if s == nil || s.Value == nil {
			return false
		}
		v := s.Value
		return (v.Type == nil || v.Type.Includes(openapi3.TypeString)) &&
			(v.Format == "binary" || v.Format == "base64" || v.Format == "byte" || v.ContentMediaType != "" || v.ContentEncoding != "")
	}
	fileSchema := map[string]any{"type": "string", "contentEncoding": "base64", "description": "The file's bytes, in base64."}
	for name, p := range sr.Value.Properties {
		switch {
		case isFile(p):
			e := enc[name]
			e.File = true
			enc[name] = e
			if props != nil {
				props[name] = maps.Clone(fileSchema)
			}
		case p != nil && p.Value != nil && p.Value.Type.Includes(openapi3.TypeArray) && isFile(p.Value.Items):
			e := enc[name]
			e.File = true
			enc[name] = e
			if props != nil {
				props[name] = map[string]any{"type": "array", "items": maps.Clone(fileSchema)}
			}
		}
	}
}
