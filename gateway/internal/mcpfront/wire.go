package mcpfront

import (
	"encoding/base64"
	"encoding/json"
	"maps"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/internal/jsonscan"
	"github.com/toolgate/toolgate/registry"
)

var objectSchema = json.RawMessage(`{"type":"object"}`)

// wireTool converts a registry tool to mcp-go's type. Schemas are passed as
// raw bytes: mcp.ToolInputSchema models only part of JSON Schema and would
// drop keywords (MCPGO.md §5).
func wireTool(t *registry.Tool) mcp.Tool {
	in := t.InputSchema
	if len(in) == 0 {
		in = objectSchema
	}
	return mcp.Tool{
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

// wireResult maps a result to mcp-go's type.
func wireResult(r *executors.Result) *mcp.CallToolResult {
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

// passthroughResult forwards an upstream server's result unchanged, with
// r.Meta merged into its _meta.
func passthroughResult(r *executors.Result) *mcp.CallToolResult {
	out, ok := rawResult(r.Passthrough)
	if !ok {
		if err := json.Unmarshal(r.Passthrough, &out); err != nil {
			// mcp-go cannot represent it (an unknown content type, say): give
			// the model the JSON rather than nothing.
			out = mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(string(r.Passthrough))}}
		}
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

// resultFields are the members of a CallToolResult that mcp-go reads (its
// UnmarshalJSON), with the content parts and the structured content left
// as JSON.
type resultFields struct {
	Meta              *mcp.Meta         `json:"_meta,omitempty"`
	ResultType        mcp.ResultType    `json:"resultType,omitempty"`
	Content           []json.RawMessage `json:"content"`
	StructuredContent json.RawMessage   `json:"structuredContent,omitempty"`
	IsError           bool              `json:"isError,omitempty"`
	InputRequests     mcp.InputRequests `json:"inputRequests,omitempty"`
	RequestState      string            `json:"requestState,omitempty"`
}

// rawResult reads an upstream's result for forwarding without decoding
// and encoding it again (issue 16): its text parts stay the upstream's
// JSON (rawText) and its structured content stays raw, which mcp-go
// encodes as it is (RawStructuredContent). It reports false for a result
// with another kind of part, or one mcp-go could not decode; the caller
// decodes those with mcp-go, as before. A text part is still decoded, so
// that one mcp-go would refuse is refused here too.
func rawResult(raw json.RawMessage) (mcp.CallToolResult, bool) {
	var in resultFields
	if json.Unmarshal(raw, &in) != nil {
		return mcp.CallToolResult{}, false
	}
	out := mcp.CallToolResult{IsError: in.IsError, RawStructuredContent: in.StructuredContent}
	out.Meta, out.ResultType = in.Meta, in.ResultType
	out.InputRequests, out.RequestState = in.InputRequests, in.RequestState
	if len(in.Content) > 0 {
		out.Content = make([]mcp.Content, len(in.Content))
		for i, part := range in.Content {
			var t mcp.TextContent
			if json.Unmarshal(part, &t) != nil || t.Type != mcp.ContentTypeText {
				return mcp.CallToolResult{}, false
			}
			out.Content[i] = rawText{TextContent: t, raw: part}
		}
	}
	return out, true
}

// rawReply is where the session fast path (serveSessionCall) takes a
// result's JSON: the tool's handler leaves an upstream's result here as
// the upstream wrote it (when forwardable), or a result of text parts
// encoded directly, returning rawTaken instead of converting it to
// mcp-go's type, and the fast path writes it into the response as it is.
// That saves a decoding and an encoding of every proxied result, and the
// map-based encoding of mcp-go's result type for the others (issue 16).
type rawReply struct {
	claimed atomic.Bool // by the first handler to see it
	result  json.RawMessage
}

type rawReplyKey struct{}

// rawTaken is what a handler returns when it left its result in the
// call's rawReply.
var rawTaken = &mcp.CallToolResult{}

// take keeps r as the JSON the client gets, when it can be had without
// mcp-go's types: a passthrough result forwardable as it is, or a result
// of text parts encoded directly (textResult).
func (rr *rawReply) take(r *executors.Result) bool {
	if r.Passthrough != nil {
		if len(r.Meta) > 0 || !forwardable(r.Passthrough) {
			return false // Meta is merged into the upstream's _meta
		}
		rr.result = r.Passthrough
		return true
	}
	b, ok := textResult(r)
	rr.result = b
	return ok
}

// textResult encodes a result of text parts (with its structured content
// and _meta) as wireResult and mcp-go's encoding would, without building
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

// forwardable reports whether an upstream's result reaches the client the
// same forwarded as it is as through mcp-go's types: an object of only the
// members mcp-go encodes again as they came (content, structuredContent,
// isError), each once and spelled as mcp-go spells them, with a content
// array of text parts (which rawResult forwards as they came) whose
// annotations mcp-go can read. A result with a _meta (which mcp-go
// decodes and encodes again, rounding numbers), a member twice (of which
// encoding/json keeps the last) or anything else takes the decoding path,
// as before.
func forwardable(raw json.RawMessage) bool {
	s := jsonscan.New(raw)
	textPart := func() bool {
		text, typ := false, false
		return s.Object(func(key []byte) bool {
			c, _ := s.Next()
			switch string(key) {
			case "type":
				v, ok := s.PlainString()
				typ = ok && string(v) == mcp.ContentTypeText
				return ok
			case "text":
				text = c == '"'
				return text && s.Value()
			case "annotations":
				start := s.Pos()
				var a mcp.Annotations
				return c == '{' && s.Value() && json.Unmarshal(raw[start:s.Pos()], &a) == nil
			case "_meta":
				return c == '{' && s.Value()
			}
			return false
		}) && text && typ
	}
	var seen uint8 // the members read, one bit each
	once := func(bit uint8) bool {
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		return true
	}
	const content, structured, isError = 1, 2, 4
	return s.Object(func(key []byte) bool {
		c, _ := s.Next()
		switch string(key) {
		case "content":
			return once(content) && s.Array(textPart)
		case "structuredContent":
			return once(structured) && c == '{' && s.Value()
		case "isError":
			return once(isError) && (c == 't' || c == 'f') && s.Value()
		}
		return false
	}) && seen&content != 0 && s.Done()
}

// rawText is a text part of an upstream's result, encoded as the upstream
// wrote it. TextContent (the part decoded) makes it an mcp.Content and
// serves readers of the part; only the encoding uses raw.
type rawText struct {
	mcp.TextContent
	raw json.RawMessage
}

// MarshalJSON returns the part as the upstream wrote it.
func (t rawText) MarshalJSON() ([]byte, error) { return t.raw, nil }

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

// EncodeResult returns r as the JSON of an MCP CallToolResult, as a
// client receives it.
func EncodeResult(r *executors.Result) ([]byte, error) {
	return json.Marshal(wireResult(r))
}

// ContentJSON returns r's content array and structured content (nil when
// it has none) as MCP JSON.
func ContentJSON(r *executors.Result) (content, structured json.RawMessage, err error) {
	w := wireResult(r)
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

// DecodeResult reads an MCP CallToolResult's JSON (an upstream's result)
// into toolgate's result: content parts, structured content and isError;
// Passthrough keeps raw. A content part toolgate has no type for becomes a
// text part holding its JSON.
func DecodeResult(raw json.RawMessage) (executors.Result, error) {
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
