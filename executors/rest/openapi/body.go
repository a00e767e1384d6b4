package openapi

import (
	"encoding/json"
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

// requestBody adds rb, if the operation has one, to d: the input schema's
// property "body" (or "request_body" when a parameter took "body"), sent
// as JSON or as a [rest.Payload].
func (d *oapiDraft) requestBody(rb *openapi3.RequestBodyRef) *oapiSkip {
	if rb == nil || rb.Value == nil || len(rb.Value.Content) == 0 {
		return nil
	}
	prop := "body"
	if _, taken := d.props[prop]; taken {
		prop = "request_body"
		if _, taken := d.props[prop]; taken {
			return &oapiSkip{`parameters named "body" and "request_body" leave no property name for the request body`}
		}
	}
	mediaType, mt, kind := oapiBodyMedia(rb.Value.Content)
	schema := d.bodyEncoding(prop, mediaType, mt, kind)
	if m, ok := schema.(map[string]any); ok && rb.Value.Description != "" {
		if desc, had := m["description"].(string); had && kind == rest.PayloadBinary {
			m["description"] = rb.Value.Description + "\n\n" + desc
		} else {
			m["description"] = rb.Value.Description
		}
	}
	d.props[prop] = schema
	if rb.Value.Required {
		d.required = append(d.required, prop)
	}
	return nil
}

// bodyEncoding sets how the request body, argument prop, is sent in the
// chosen media type of kind (see [oapiBodyMedia]), and returns its schema.
func (d *oapiDraft) bodyEncoding(prop, mediaType string, mt *openapi3.MediaType, kind string) any {
	switch kind {
	case "json":
		schema := d.sc.ref(mt.Schema, 0, true)
		d.body = json.RawMessage(`"{` + prop + `}"`)
		if mediaType != "application/json" {
			d.setHeader("Content-Type", mediaType)
		}
		return schema
	case rest.PayloadForm, rest.PayloadMultipart:
		return d.formPayload(prop, mediaType, mt, kind)
	case rest.PayloadText:
		d.payload = &rest.Payload{Arg: prop, Kind: kind, ContentType: mediaType}
		return map[string]any{"type": "string"}
	}
	schema := map[string]any{"type": "string", "contentEncoding": "base64",
		"description": "The body's bytes (" + mediaType + "), in base64."}
	if strings.Contains(mediaType, "*") {
		mediaType = "application/octet-stream"
	}
	d.payload = &rest.Payload{Arg: prop, Kind: rest.PayloadBinary, ContentType: mediaType}
	return schema
}

// formPayload sets a form or multipart body's [rest.Payload], with each
// part's encoding and its files marked, and returns its schema.
func (d *oapiDraft) formPayload(prop, mediaType string, mt *openapi3.MediaType, kind string) any {
	schema := d.sc.ref(mt.Schema, 0, true)
	d.payload = &rest.Payload{Arg: prop, Kind: kind, Encoding: map[string]rest.PartEncoding{}}
	if kind == rest.PayloadForm {
		d.payload.ContentType = mediaType
	}
	for name, enc := range mt.Encoding {
		if enc != nil {
			d.payload.Encoding[name] = rest.PartEncoding{ContentType: enc.ContentType, Style: enc.Style, Explode: enc.Explode}
		}
	}
	if kind == rest.PayloadMultipart {
		oapiMarkFiles(mt.Schema, schema, d.payload.Encoding)
	}
	return schema
}
