package agent

import (
	"encoding/base64"
	"encoding/json"
	"mime"
	"net/url"
	"path"
	"strings"

	"google.golang.org/genai"
)

// encodeSignature and decodeSignature convert a thought signature between
// the SDK's bytes and [Part.Signature]'s text: standard base64, as on the
// wire.
func encodeSignature(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func decodeSignature(s string) []byte {
	if s == "" {
		return nil
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil // not Gemini's: the API would refuse it
	}
	return b
}

// GeminiContents converts a history to the Gemini API's contents, and
// returns the text of its system messages apart (the API takes the system
// instruction as a setting). Assistant messages become "model" contents:
// text, thinking that carries a thought signature (thinking without one
// cannot be sent back) and a functionCall part per tool call, each with
// its signature. Tool messages become functionResponse parts of a "user"
// content ({"output": text}, or {"error": text} for a failed call; images
// as its inline parts), named after the call they answer. Consecutive
// contents of the same role are merged into one. A call ID made up for a
// call Gemini sent without one is not sent back.
func GeminiContents(history []Message) ([]*genai.Content, string) {
	var out []*genai.Content
	var system []string
	names := map[string]string{} // call ID -> tool name, for the responses
	add := func(role string, parts []*genai.Part) {
		if len(parts) == 0 {
			return
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Parts = append(out[n-1].Parts, parts...)
			return
		}
		out = append(out, &genai.Content{Role: role, Parts: parts})
	}
	for _, m := range history {
		switch m.Role {
		case RoleSystem:
			system = append(system, m.Text())
		case RoleUser:
			add(genai.RoleUser, geminiParts(m.Parts))
		case RoleAssistant:
			parts := geminiParts(m.Parts)
			for _, c := range m.ToolCalls {
				names[c.ID] = c.Name
				var args map[string]any
				if json.Unmarshal([]byte(c.Arguments), &args) != nil || args == nil {
					args = map[string]any{} // its result says what was wrong
				}
				parts = append(parts, &genai.Part{FunctionCall: &genai.FunctionCall{ID: geminiID(c.ID), Name: c.Name, Args: args},
					ThoughtSignature: decodeSignature(c.Signature)})
			}
			add(genai.RoleModel, parts)
		case RoleTool:
			if m.Result == nil {
				continue
			}
			add(genai.RoleUser, []*genai.Part{{FunctionResponse: geminiResponse(*m.Result, names)}})
		}
	}
	return out, strings.Join(system, "\n\n")
}

// geminiID is the ID to send back for a call: none for one made up here.
func geminiID(id string) string {
	if strings.HasPrefix(id, geminiCallPrefix) {
		return ""
	}
	return id
}

func geminiResponse(r ToolResult, names map[string]string) *genai.FunctionResponse {
	fr := &genai.FunctionResponse{ID: geminiID(r.CallID), Name: names[r.CallID]}
	if fr.Name == "" {
		fr.Name = r.Name
	}
	var text []string
	for _, p := range r.Content {
		switch p.Type {
		case PartText:
			text = append(text, p.Text)
		case PartJSON:
			text = append(text, string(p.JSON))
		case PartImage:
			if mediaType, data, ok := parseDataURL(p.URL); ok {
				if b, err := base64.StdEncoding.DecodeString(data); err == nil {
					fr.Parts = append(fr.Parts, &genai.FunctionResponsePart{InlineData: &genai.FunctionResponseBlob{MIMEType: mediaType, Data: b}})
					continue
				}
			}
			text = append(text, "[an image the tool returned cannot be shown here]")
		}
	}
	key := "output"
	if r.IsError {
		key = "error"
	}
	fr.Response = map[string]any{key: strings.Join(text, "\n")}
	return fr
}

func geminiParts(parts []Part) []*genai.Part {
	var out []*genai.Part
	for _, p := range parts {
		switch p.Type {
		case PartText:
			if p.Text != "" || p.Signature != "" {
				out = append(out, &genai.Part{Text: p.Text, ThoughtSignature: decodeSignature(p.Signature)})
			}
		case PartThinking:
			if sig := decodeSignature(p.Signature); sig != nil {
				out = append(out, &genai.Part{Text: p.Text, Thought: true, ThoughtSignature: sig})
			}
		case PartJSON:
			out = append(out, &genai.Part{Text: string(p.JSON)})
		case PartImage:
			out = append(out, geminiImage(p.URL))
		}
	}
	return out
}

// geminiImage converts an image URL: a data URL becomes inline data, an
// http(s) URL file data (its media type from its extension); one whose
// type cannot be told is named in a text part.
func geminiImage(u string) *genai.Part {
	if mediaType, data, ok := parseDataURL(u); ok {
		if b, err := base64.StdEncoding.DecodeString(data); err == nil {
			return &genai.Part{InlineData: &genai.Blob{MIMEType: mediaType, Data: b}}
		}
	}
	if pu, err := url.Parse(u); err == nil && (pu.Scheme == "http" || pu.Scheme == "https") {
		if t := mime.TypeByExtension(path.Ext(pu.Path)); strings.HasPrefix(t, "image/") {
			return &genai.Part{FileData: &genai.FileData{FileURI: u, MIMEType: t}}
		}
	}
	return &genai.Part{Text: "[image: " + u + "]"}
}

// FromGeminiContents converts Gemini contents back to a history: the
// inverse of [GeminiContents] for what both sides have (text, thoughts
// and thought signatures, inline and file images, function calls, and
// function responses, each a tool message of its own). Parts agent has no
// part for (code execution, server tools, ...) are left out.
func FromGeminiContents(contents []*genai.Content) []Message {
	var out []Message
	for _, c := range contents {
		cur := Message{Role: RoleUser}
		if c.Role == genai.RoleModel {
			cur.Role = RoleAssistant
		}
		flush := func() {
			if len(cur.Parts) > 0 || len(cur.ToolCalls) > 0 {
				out = append(out, cur)
			}
			cur = Message{Role: cur.Role}
		}
		for _, p := range c.Parts {
			sig := ""
			if len(p.ThoughtSignature) > 0 {
				sig = encodeSignature(p.ThoughtSignature)
			}
			switch {
			case p.FunctionCall != nil:
				args, err := json.Marshal(p.FunctionCall.Args)
				if err != nil || p.FunctionCall.Args == nil {
					args = []byte("{}")
				}
				cur.ToolCalls = append(cur.ToolCalls, ToolCall{ID: p.FunctionCall.ID, Name: p.FunctionCall.Name, Arguments: string(args), Signature: sig})
			case p.FunctionResponse != nil:
				flush()
				out = append(out, ToolMessage(fromGeminiResponse(p.FunctionResponse)))
			case p.Thought:
				cur.Parts = append(cur.Parts, Part{Type: PartThinking, Text: p.Text, Signature: sig})
			case p.InlineData != nil:
				cur.Parts = append(cur.Parts, Image("data:"+p.InlineData.MIMEType+";base64,"+base64.StdEncoding.EncodeToString(p.InlineData.Data)))
			case p.FileData != nil:
				cur.Parts = append(cur.Parts, Image(p.FileData.FileURI))
			case p.Text != "" || sig != "":
				cur.Parts = append(cur.Parts, Part{Type: PartText, Text: p.Text, Signature: sig})
			}
		}
		flush()
	}
	return out
}

func fromGeminiResponse(fr *genai.FunctionResponse) ToolResult {
	r := ToolResult{CallID: fr.ID, Name: fr.Name}
	v, ok := fr.Response["output"]
	if e, isErr := fr.Response["error"]; isErr {
		v, ok, r.IsError = e, true, true
	}
	switch s, isString := v.(string); {
	case ok && isString:
		r.Content = append(r.Content, Text(s))
	case len(fr.Response) > 0:
		b, _ := json.Marshal(fr.Response)
		r.Content = append(r.Content, Text(string(b)))
	}
	for _, p := range fr.Parts {
		if p.InlineData != nil {
			r.Content = append(r.Content, Image("data:"+p.InlineData.MIMEType+";base64,"+base64.StdEncoding.EncodeToString(p.InlineData.Data)))
		}
	}
	return r
}
