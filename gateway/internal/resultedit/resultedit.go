// Package resultedit edits the texts of a tool result: its text parts,
// embedded text resources and, when asked, the strings of its structured
// content, an upstream's passed-through MCP JSON included, and appends a
// text part. The hooks (gateway/internal/hooks: redact, truncate) and
// thread handles (gateway/internal/handles: the handle's notice) edit
// results through it, so that a passed-through result is read one way.
// It imports no toolgate package but executors.
package resultedit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/toolgate/toolgate/executors"
)

// Structured says whether [Texts] applies its edit to the strings of a
// result's structured content.
type Structured int

const (
	// KeepStructured leaves structured content whole.
	KeepStructured Structured = iota
	// EditStructured applies the edit to every string of structured
	// content (object keys are left alone).
	EditStructured
)

// Texts returns a copy of res whose texts (text parts, embedded text
// resources), in order, are text's results, whose structured content has
// text applied to its strings under EditStructured, and with a text part
// appended when notice is not empty. An upstream's passed-through JSON is
// decoded, edited the same way and encoded again, so nothing in it
// escapes the edit; it is kept byte for byte when nothing changed. res is
// not changed. The error says that a passed-through result or the
// structured content could not be read.
func Texts(res *executors.Result, text func(string) string, structured Structured, notice string) (*executors.Result, error) {
	out := *res
	if res.Passthrough != nil {
		raw, err := editPassthrough(res.Passthrough, text, structured, notice)
		if err != nil {
			return nil, err
		}
		out.Passthrough = raw
		return &out, nil
	}
	out.Content = slices.Clone(res.Content)
	for i, p := range out.Content {
		if p.Type == executors.TextContent || p.Type == executors.ResourceContent {
			out.Content[i].Text = text(p.Text)
		}
	}
	if structured == EditStructured && res.Structured != nil {
		v, err := genericJSON(res.Structured)
		if err != nil {
			return nil, fmt.Errorf("encoding the structured content: %v", err)
		}
		out.Structured = mapStrings(v, text)
	}
	if notice != "" {
		out.Content = append(out.Content, executors.Content{Type: executors.TextContent, Text: notice})
	}
	return &out, nil
}

// Append returns a copy of res with a text part notice appended (to an
// upstream's passed-through JSON as it sent it); the error says that a
// passed-through result could not be read.
func Append(res *executors.Result, notice string) (*executors.Result, error) {
	return Texts(res, func(s string) string { return s }, KeepStructured, notice)
}

// editPassthrough is Texts for an MCP CallToolResult as JSON.
func editPassthrough(raw json.RawMessage, text func(string) string, structured Structured, notice string) (json.RawMessage, error) {
	var m map[string]any
	if err := decodeNumbers(raw, &m); err != nil {
		return nil, fmt.Errorf("decoding the upstream's result: %v", err)
	}
	changed := false
	tracked := func(s string) string {
		t := text(s)
		if t != s {
			changed = true
		}
		return t
	}
	edit := func(obj map[string]any) {
		if s, ok := obj["text"].(string); ok {
			obj["text"] = tracked(s)
		}
	}
	parts, _ := m["content"].([]any)
	for _, p := range parts {
		part, ok := p.(map[string]any)
		if !ok {
			continue
		}
		switch part["type"] {
		case "text":
			edit(part)
		case "resource":
			if r, ok := part["resource"].(map[string]any); ok {
				edit(r)
			}
		}
	}
	if sc := m["structuredContent"]; structured == EditStructured && sc != nil {
		m["structuredContent"] = mapStrings(sc, tracked)
	}
	if notice != "" {
		m["content"], changed = append(parts, map[string]any{"type": "text", "text": notice}), true
	}
	if !changed {
		return raw, nil
	}
	return json.Marshal(m)
}

// genericJSON returns v as decoded from its JSON (maps, slices, strings,
// json.Number, bools, nil).
func genericJSON(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	err = decodeNumbers(b, &out)
	return out, err
}

func decodeNumbers(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return d.Decode(v)
}

// mapStrings returns v, a value decoded from JSON, with f applied to
// every string value (object keys are left alone), in new maps and slices.
func mapStrings(v any, f func(string) string) any {
	switch x := v.(type) {
	case string:
		return f(x)
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = mapStrings(e, f)
		}
		return m
	case []any:
		a := make([]any, len(x))
		for i, e := range x {
			a[i] = mapStrings(e, f)
		}
		return a
	}
	return v
}
