package executors

import (
	"encoding/json"

	"github.com/toolgate/toolgate/retry"
)

// ContentType is the type of one content block of a result, as MCP names it.
type ContentType string

// The content types of MCP tool results.
const (
	TextContent         ContentType = "text"
	ImageContent        ContentType = "image"
	AudioContent        ContentType = "audio"
	ResourceLinkContent ContentType = "resource_link"
	ResourceContent     ContentType = "resource" // an embedded resource
)

// Content is one block of a tool result. Which fields matter depends on Type:
// Text for text (and for a text embedded resource); Data and MIMEType for
// image, audio and a blob embedded resource (Data holds the raw bytes, not
// base64); URI (and Name, Description, MIMEType) for resource links and
// embedded resources.
type Content struct {
	Type        ContentType
	Text        string
	Data        []byte
	MIMEType    string
	URI         string
	Name        string
	Description string
}

// Result is what a successful tool execution returns.
type Result struct {
	// Content is the unstructured result shown to the model.
	Content []Content
	// Structured, when not nil, becomes the result's structuredContent. It
	// must marshal to a JSON object.
	Structured any
	// IsError marks a result that reports a failure in the tool's own words
	// (an upstream MCP server's isError result, say). Executors report their
	// own failures as errors instead.
	IsError bool
	// Class is the failure's class when the gateway turned an error into
	// this result (IsError is then true); empty otherwise. Executors leave
	// it empty and return their failures as errors.
	Class retry.Class
	// Meta, when not nil, is merged into the result's _meta.
	Meta map[string]any
	// Passthrough, when not nil, is a complete MCP CallToolResult as an
	// upstream MCP server sent it; gateway forwards it unchanged (with Meta
	// merged into its _meta) and ignores Content and Structured. IsError
	// must say what the passed-through result's isError says.
	Passthrough json.RawMessage
}

// Text returns a result holding one text block.
func Text(s string) Result {
	return Result{Content: []Content{{Type: TextContent, Text: s}}}
}

// Structured returns a result whose structuredContent is v and whose text
// block is text, or v marshalled to JSON when text is empty (the MCP spec
// asks servers to send a text copy of structured content).
func Structured(v any, text string) Result {
	if text == "" {
		b, err := json.Marshal(v)
		if err == nil {
			text = string(b)
		}
	}
	return Result{Content: []Content{{Type: TextContent, Text: text}}, Structured: v}
}
