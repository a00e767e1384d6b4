// Package mcpwire is how toolgate's tools and results are written in MCP's
// terms, and how an upstream's result is read back: a registry tool as an
// mcp.Tool, an executors.Result as a CallToolResult (an upstream's result
// forwarded as it came where nothing changed it, text results encoded
// directly, anything else through mcp-go's types).
package mcpwire

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"maps"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/registry"
)

var objectSchema = json.RawMessage(`{"type":"object"}`)

// Tool converts a registry tool to mcp-go's type. Schemas are passed as
// raw bytes: mcp.ToolInputSchema models only part of JSON Schema and would
// drop keywords (MCPGO.md §5).
func Tool(t *registry.Tool) mcp.Tool {
	in := t.InputSchema
	if len(in) == 0 {
		in = objectSchema
	}
	var meta *mcp.Meta
	if t.UpstreamName != "" {
		meta = &mcp.Meta{AdditionalFields: map[string]any{registry.UpstreamNameMetaKey: t.UpstreamName}}
	}
	return mcp.Tool{
		Meta:            meta,
		Name:            t.Name,
		Title:           t.Title,
		Description:     t.Description,
		RawInputSchema:  in,
		RawOutputSchema: t.OutputSchema,
		Annotations: mcp.ToolAnnotation{
			Title:           t.Annotations.Title,
			ReadOnlyHint:    t.Annotations.ReadOnlyHint,
			DestructiveHint: t.Annotations.DestructiveHint,
			IdempotentHint:  t.Annotations.IdempotentHint,
			OpenWorldHint:   t.Annotations.OpenWorldHint,
		},
	}
}

// Result maps a result to mcp-go's type.
func Result(r *executors.Result) *mcp.CallToolResult {
	if r.Passthrough != nil {
		return passthroughResult(r)
	}
	out := &mcp.CallToolResult{Content: make([]mcp.Content, 0, len(r.Content)), StructuredContent: r.Structured, IsError: r.IsError}
	for _, c := range r.Content {
		out.Content = append(out.Content, wireContent(c))
	}
	if len(r.Meta) > 0 {
		out.Meta = &mcp.Meta{AdditionalFields: maps.Clone(r.Meta)}
	}
	return out
}

// passthroughResult is an upstream server's result with r.Meta merged
// into its _meta.
func passthroughResult(r *executors.Result) *mcp.CallToolResult {
	var out mcp.CallToolResult
	if err := json.Unmarshal(r.Passthrough, &out); err != nil {
		// mcp-go's types cannot represent it (an unknown content type,
		// say): give the model the JSON rather than nothing.
		out = mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(string(r.Passthrough))}}
	}
	if len(r.Meta) > 0 {
		if out.Meta == nil {
			out.Meta = &mcp.Meta{}
		}
		if out.Meta.AdditionalFields == nil {
			out.Meta.AdditionalFields = map[string]any{}
		}
		maps.Copy(out.Meta.AdditionalFields, r.Meta)
	}
	if out.Content == nil {
		out.Content = []mcp.Content{}
	}
	return &out
}

// JSON is r as the JSON of the CallToolResult its client gets.
func JSON(r *executors.Result) (json.RawMessage, error) {
	if raw := rawResult(r); raw != nil {
		return raw, nil
	}
	return json.Marshal(Result(r))
}

// rawResult is r as the JSON of its CallToolResult when it can be had
// without mcp-go's types: an upstream's result forwarded as it came (no
// Meta to merge into it), or a result of text parts encoded directly
// (textResult); nil otherwise. That saves a decoding and an encoding of
// every proxied result, and the map-based encoding of mcp-go's result type
// for the others.
func rawResult(r *executors.Result) json.RawMessage {
	if r.Passthrough != nil {
		if len(r.Meta) > 0 {
			return nil
		}
		// An object with content, as the upstream sent it: the front does
		// not check the parts of an upstream's result, as a proxy.
		if raw := bytes.TrimSpace(r.Passthrough); len(raw) > 0 && raw[0] == '{' && bytes.Contains(raw, []byte(`"content"`)) {
			return raw
		}
		return nil
	}
	b, _ := textResult(r)
	return b
}

// textResult encodes a result of text parts (with its structured content
// and _meta) as Result and mcp-go's encoding would, without building
// mcp-go's types (whose encoding goes through a map); false for any other
// part.
func textResult(r *executors.Result) (json.RawMessage, bool) {
	b := append(make([]byte, 0, 64), `{"content":[`...)
	for i, c := range r.Content {
		if c.Type != executors.TextContent && c.Type != "" {
			return nil, false
		}
		if i > 0 {
			b = append(b, ',')
		}
		text, err := json.Marshal(c.Text)
		if err != nil {
			return nil, false
		}
		b = append(append(append(b, `{"type":"text","text":`...), text...), '}')
	}
	b = append(b, ']')
	if r.Structured != nil {
		sc, err := json.Marshal(r.Structured)
		if err != nil {
			return nil, false
		}
		b = append(append(b, `,"structuredContent":`...), sc...)
	}
	if r.IsError {
		b = append(b, `,"isError":true`...)
	}
	if len(r.Meta) > 0 {
		meta, err := json.Marshal(r.Meta)
		if err != nil {
			return nil, false
		}
		b = append(append(b, `,"_meta":`...), meta...)
	}
	return append(b, '}'), true
}

func wireContent(c executors.Content) mcp.Content {
	switch c.Type {
	case executors.ImageContent:
		return mcp.NewImageContent(base64.StdEncoding.EncodeToString(c.Data), c.MIMEType)
	case executors.AudioContent:
		return mcp.NewAudioContent(base64.StdEncoding.EncodeToString(c.Data), c.MIMEType)
	case executors.ResourceLinkContent:
		return mcp.NewResourceLink(c.URI, c.Name, c.Description, c.MIMEType)
	case executors.ResourceContent:
		if c.Data != nil {
			return mcp.NewEmbeddedResource(mcp.BlobResourceContents{URI: c.URI, MIMEType: c.MIMEType, Blob: base64.StdEncoding.EncodeToString(c.Data)})
		}
		return mcp.NewEmbeddedResource(mcp.TextResourceContents{URI: c.URI, MIMEType: c.MIMEType, Text: c.Text})
	default:
		return mcp.NewTextContent(c.Text)
	}
}

// Encode returns r as the JSON of an MCP CallToolResult, as a
// client receives it.
func Encode(r *executors.Result) ([]byte, error) {
	return json.Marshal(Result(r))
}

// ContentJSON returns r's content array and structured content (nil when
// it has none) as MCP JSON.
func ContentJSON(r *executors.Result) (content, structured json.RawMessage, err error) {
	w := Result(r)
	if content, err = json.Marshal(w.Content); err != nil {
		return nil, nil, err
	}
	if len(w.RawStructuredContent) > 0 {
		structured = w.RawStructuredContent
	} else if w.StructuredContent != nil {
		if structured, err = json.Marshal(w.StructuredContent); err != nil {
			return nil, nil, err
		}
	}
	return content, structured, nil
}

// Decode reads an MCP CallToolResult's JSON (an upstream's result)
// into toolgate's result: content parts, structured content and isError;
// Passthrough keeps raw. A content part toolgate has no type for becomes a
// text part holding its JSON.
func Decode(raw json.RawMessage) (executors.Result, error) {
	var in mcp.CallToolResult
	if err := json.Unmarshal(raw, &in); err != nil {
		return executors.Result{}, err
	}
	out := executors.Result{Passthrough: raw, IsError: in.IsError, Structured: in.StructuredContent}
	for _, c := range in.Content {
		out.Content = append(out.Content, contentOf(c))
	}
	return out, nil
}

func contentOf(c mcp.Content) executors.Content {
	switch x := c.(type) {
	case mcp.TextContent:
		return executors.Content{Type: executors.TextContent, Text: x.Text}
	case mcp.ImageContent:
		if b, err := base64.StdEncoding.DecodeString(x.Data); err == nil {
			return executors.Content{Type: executors.ImageContent, Data: b, MIMEType: x.MIMEType}
		}
	case mcp.AudioContent:
		if b, err := base64.StdEncoding.DecodeString(x.Data); err == nil {
			return executors.Content{Type: executors.AudioContent, Data: b, MIMEType: x.MIMEType}
		}
	case mcp.ResourceLink:
		return executors.Content{Type: executors.ResourceLinkContent, URI: x.URI, Name: x.Name, Description: x.Description, MIMEType: x.MIMEType}
	case mcp.EmbeddedResource:
		switch r := x.Resource.(type) {
		case mcp.TextResourceContents:
			return executors.Content{Type: executors.ResourceContent, URI: r.URI, MIMEType: r.MIMEType, Text: r.Text}
		case mcp.BlobResourceContents:
			if b, err := base64.StdEncoding.DecodeString(r.Blob); err == nil {
				return executors.Content{Type: executors.ResourceContent, URI: r.URI, MIMEType: r.MIMEType, Data: b}
			}
		}
	}
	b, _ := json.Marshal(c)
	return executors.Content{Type: executors.TextContent, Text: string(b)}
}
