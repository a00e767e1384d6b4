package agent

import (
	"encoding/json"
	"strings"
)

// Role says who a [Message] is from.
type Role string

// The four roles of a conversation.
const (
	RoleSystem    Role = "system"    // instructions; providers receive them as the system prompt
	RoleUser      Role = "user"      // the person or host program
	RoleAssistant Role = "assistant" // the model
	RoleTool      Role = "tool"      // the result of one tool call
)

// PartType is the type of one [Part].
type PartType string

// The types of content part.
const (
	PartText     PartType = "text"     // Text holds the text
	PartThinking PartType = "thinking" // Text holds the model's reasoning, Signature its provider signature
	PartImage    PartType = "image"    // URL holds an http(s) URL or a data: URL (base64)
	PartJSON     PartType = "json"     // JSON holds a JSON value (tool results)
)

// Part is one piece of a message's content. Which fields matter depends
// on Type.
type Part struct {
	Type PartType `json:"type"`
	// Text is the text of a text part and the reasoning of a thinking part.
	Text string `json:"text,omitempty"`
	// Signature is the provider's signature of a thinking part (or, from
	// Gemini, its thought signature of a text part). Anthropic and Gemini
	// require it back, unchanged, with the part it signs; it is kept and
	// sent so.
	Signature string `json:"signature,omitempty"`
	// Redacted holds a thinking part the provider sent encrypted (Anthropic's
	// redacted_thinking data); Text is then empty.
	Redacted string `json:"redacted,omitempty"`
	// URL locates an image part: an http(s) URL, or a data URL
	// ("data:image/png;base64,...") for inline bytes.
	URL string `json:"url,omitempty"`
	// JSON is the value of a JSON part.
	JSON json.RawMessage `json:"json,omitempty"`
	// Citations are the provider's citations of a text part, each its
	// citation object as JSON.
	Citations []json.RawMessage `json:"citations,omitempty"`
}

// Text returns a text part.
func Text(s string) Part { return Part{Type: PartText, Text: s} }

// Image returns an image part for url, an http(s) or data: URL.
func Image(url string) Part { return Part{Type: PartImage, URL: url} }

// JSONPart returns a JSON part holding v, which must be valid JSON.
func JSONPart(v json.RawMessage) Part { return Part{Type: PartJSON, JSON: v} }

// ToolCall is a model's request to call a tool.
type ToolCall struct {
	// ID identifies the call; its result names it in [ToolResult.CallID].
	ID string `json:"id"`
	// Name is the tool's name as the model wrote it.
	Name string `json:"name"`
	// Arguments is the arguments object as JSON text, exactly as streamed
	// (it may be malformed; [Step] answers such a call with an isError
	// result).
	Arguments string `json:"arguments"`
	// Signature is Gemini's thought signature of the call, which must go
	// back with it on the next request; other providers send none.
	Signature string `json:"signature,omitempty"`
}

// ToolResult is the outcome of one tool call.
type ToolResult struct {
	// CallID is the [ToolCall.ID] of the call this answers.
	CallID string `json:"call_id"`
	// Name is the tool that ran (after name repair), for display.
	Name string `json:"name,omitempty"`
	// Content is the result: text, image and JSON parts.
	Content []Part `json:"content"`
	// IsError marks a failed call; the model sees Content as the error.
	IsError bool `json:"is_error,omitempty"`
}

// Text returns the text of r's text and JSON parts, one per line.
func (r ToolResult) Text() string { return partsText(r.Content, true) }

// Message is one turn of a conversation.
type Message struct {
	Role Role `json:"role"`
	// Parts are the content: text, thinking and image parts (any role but
	// tool).
	Parts []Part `json:"parts,omitempty"`
	// ToolCalls are the calls an assistant message makes, in the order the
	// model made them.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// Result is what a tool message carries: the outcome of one call.
	Result *ToolResult `json:"result,omitempty"`
}

// UserText returns a user message holding text.
func UserText(text string) Message { return Message{Role: RoleUser, Parts: []Part{Text(text)}} }

// SystemText returns a system message holding text.
func SystemText(text string) Message { return Message{Role: RoleSystem, Parts: []Part{Text(text)}} }

// ToolMessage returns the tool message that carries r.
func ToolMessage(r ToolResult) Message { return Message{Role: RoleTool, Result: &r} }

// Text returns the text of m: its text parts concatenated (a tool
// message's: its result's text and JSON parts, one per line). Thinking is
// not text.
func (m Message) Text() string {
	if m.Result != nil {
		return m.Result.Text()
	}
	return partsText(m.Parts, false)
}

// Thinking returns the text of m's thinking parts, concatenated.
func (m Message) Thinking() string {
	var b strings.Builder
	for _, p := range m.Parts {
		if p.Type == PartThinking {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// Empty reports whether m has no content: no parts with anything in them,
// no tool calls and no result.
func (m Message) Empty() bool {
	if len(m.ToolCalls) > 0 || m.Result != nil {
		return false
	}
	for _, p := range m.Parts {
		if p.Text != "" || p.Signature != "" || p.Redacted != "" || p.URL != "" || len(p.JSON) > 0 {
			return false
		}
	}
	return true
}

// partsText joins the text of parts: concatenated, or one per line with
// JSON parts included when lines is true.
func partsText(parts []Part, lines bool) string {
	var b strings.Builder
	for _, p := range parts {
		var s string
		switch {
		case p.Type == PartText:
			s = p.Text
		case p.Type == PartJSON && lines:
			s = string(p.JSON)
		default:
			continue
		}
		if lines && b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(s)
	}
	return b.String()
}

// History is a conversation, oldest message first. It is a plain slice:
// append to it, range over it; its methods answer common queries.
type History []Message

// Last returns the last n messages (all of them when there are fewer),
// sharing h's array.
func (h History) Last(n int) History {
	if n <= 0 {
		return nil
	}
	return h[max(len(h)-n, 0):]
}

// ByRole returns, in a new slice, the messages whose role is role.
func (h History) ByRole(role Role) History {
	var out History
	for _, m := range h {
		if m.Role == role {
			out = append(out, m)
		}
	}
	return out
}

// Range returns messages from index i up to but not including j, clamped
// to h's bounds, sharing h's array.
func (h History) Range(i, j int) History {
	i, j = max(i, 0), min(j, len(h))
	if i >= j {
		return nil
	}
	return h[i:j]
}

// LastAssistant returns the last assistant message and true, or a zero
// Message and false when there is none.
func (h History) LastAssistant() (Message, bool) {
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].Role == RoleAssistant {
			return h[i], true
		}
	}
	return Message{}, false
}
