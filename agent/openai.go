package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"
)

// OpenAIOptions configure [NewOpenAI].
type OpenAIOptions struct {
	// Model names the model, e.g. "gpt-4.1"; required.
	Model string
	// APIKey is the key; empty means the environment's OPENAI_API_KEY. A
	// key is required unless BaseURL is set: local compatible servers
	// often need none.
	APIKey string
	// BaseURL is the API's base URL (ending in /v1 for most compatible
	// servers); empty means OpenAI's.
	BaseURL string
	// HTTPClient makes the requests; nil means http.DefaultClient.
	HTTPClient *http.Client
	// IdleTimeout abandons a call that receives nothing (no response
	// headers, no chunk) for this long, with an error of class timeout;
	// zero means [DefaultIdleTimeout], negative never.
	IdleTimeout time.Duration
}

// OpenAI is a [Provider] for OpenAI-compatible Chat Completions, through
// the official SDK: streaming and parallel tool calls; a compatible
// server's reasoning_content deltas become thinking parts. The SDK's own
// retries are off. It is safe for concurrent use.
type OpenAI struct{ openaiBase }

// openaiBase is what both OpenAI APIs' providers hold.
type openaiBase struct {
	client openai.Client
	model  string
	idle   time.Duration
	key    string // redacted from errors
}

var _ Provider = (*OpenAI)(nil)

// NewOpenAI returns an OpenAI provider. It fails with an error wrapping
// [ErrNoAPIKey] when there is no key and no base URL.
func NewOpenAI(o OpenAIOptions) (*OpenAI, error) {
	b, err := newOpenAIBase(o)
	if err != nil {
		return nil, err
	}
	return &OpenAI{b}, nil
}

// newOpenAIBase is the client both OpenAI APIs' providers use, with the
// key it sends (o's, else $OPENAI_API_KEY) and o's model and idle timeout.
func newOpenAIBase(o OpenAIOptions) (openaiBase, error) {
	key := cmp.Or(o.APIKey, os.Getenv("OPENAI_API_KEY"))
	if key == "" && o.BaseURL == "" {
		return openaiBase{}, fmt.Errorf("openai: %w: set OPENAI_API_KEY (or a base URL for a local server)", ErrNoAPIKey)
	}
	if o.Model == "" {
		return openaiBase{}, errors.New("openai: no model: name one, e.g. gpt-4.1")
	}
	opts := []option.RequestOption{option.WithAPIKey(key), option.WithMaxRetries(0)}
	if o.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(o.BaseURL))
	}
	if o.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(o.HTTPClient))
	}
	return openaiBase{client: openai.NewClient(opts...), model: o.Model, idle: o.IdleTimeout, key: key}, nil
}

// The block indexes of an OpenAI stream: reasoning is block 0, text block
// 1, and tool call i (the API's index) block i+2.
const (
	openaiReasoningBlock = 0
	openaiTextBlock      = 1
	openaiFirstToolBlock = 2
)

// MaxTools implements [ToolLimiter]: both OpenAI APIs take at most 128
// tools.
func (p *openaiBase) MaxTools() int { return 128 }

// finish ends a stream whose last error is streamErr: the idle watch's
// error when it cut the stream, else the stream's (the key redacted), else
// a cut stream's when it ended before its last event, want; else end.
func (p *openaiBase) finish(ctx context.Context, w *idleWatch, streamErr error, finished bool, want string, end *StreamEnd) (*StreamEnd, error) {
	if ie := w.err("openai"); ie != nil && ctx.Err() == nil {
		return nil, ie
	}
	if streamErr != nil {
		return nil, redactKey(openaiError(ctx, streamErr), p.key)
	}
	if !finished {
		return nil, cutError("openai", want)
	}
	return end, nil
}

// Stream implements [Provider].
func (p *OpenAI) Stream(ctx context.Context, req *Request, emit func(Fragment)) (*StreamEnd, error) {
	params, err := p.params(req)
	if err != nil {
		return nil, err
	}
	w := newIdleWatch(p.idle)
	stream := p.client.Chat.Completions.NewStreaming(ctx, params, option.WithMiddleware(w.middleware))
	defer stream.Close()
	end := &StreamEnd{}
	finished := false
	tools := make(map[int64]bool, 4) // tool call indexes seen
	for stream.Next() {
		ch := stream.Current()
		if end.ID == "" {
			end.ID, end.Model = ch.ID, ch.Model
		}
		if u := ch.Usage; u.TotalTokens > 0 || u.PromptTokens > 0 {
			cached := u.PromptTokensDetails.CachedTokens // OpenAI caches by itself
			end.Usage = Usage{InputTokens: u.PromptTokens - cached, OutputTokens: u.CompletionTokens, CacheReadTokens: cached}
		}
		for _, c := range ch.Choices {
			if c.Index != 0 {
				continue
			}
			d := c.Delta
			if f, ok := d.JSON.ExtraFields["reasoning_content"]; ok {
				var s string
				if json.Unmarshal([]byte(f.Raw()), &s) == nil && s != "" {
					emit(Fragment{Type: FragThinking, Index: openaiReasoningBlock, Text: s})
				}
			}
			if d.Content != "" {
				emit(Fragment{Type: FragText, Index: openaiTextBlock, Text: d.Content})
			}
			if d.Refusal != "" {
				emit(Fragment{Type: FragText, Index: openaiTextBlock, Text: d.Refusal})
			}
			for _, tc := range d.ToolCalls {
				i := int(tc.Index) + openaiFirstToolBlock
				if !tools[tc.Index] || tc.ID != "" {
					tools[tc.Index] = true
					emit(Fragment{Type: FragToolCall, Index: i, ID: tc.ID, Name: tc.Function.Name, Text: tc.Function.Arguments})
					continue
				}
				emit(Fragment{Type: FragToolArgs, Index: i, Name: tc.Function.Name, Text: tc.Function.Arguments})
			}
			if c.FinishReason != "" {
				finished = true
				end.StopReason = openaiStop(c.FinishReason)
				for _, idx := range slices.Sorted(maps.Keys(tools)) {
					emit(Fragment{Type: FragBlockStop, Index: int(idx) + openaiFirstToolBlock})
				}
			}
		}
	}
	return p.finish(ctx, w, stream.Err(), finished, "a finish_reason", end)
}

func openaiStop(r string) StopReason {
	switch r {
	case "stop":
		return StopEnd
	case "tool_calls", "function_call":
		return StopToolUse
	case "length":
		return StopLength
	case "content_filter":
		return StopFiltered
	}
	return StopReason(r)
}

// openaiError classifies an error of the SDK.
func openaiError(ctx context.Context, err error) error {
	if oe, ok := errors.AsType[*openai.Error](err); ok {
		var h http.Header
		if oe.Response != nil {
			h = oe.Response.Header
		}
		return statusError("openai", oe.StatusCode, h, oe.Type, oe.Message)
	}
	if se, ok := errors.AsType[*ssestream.StreamError](err); ok {
		// An error sent inside the stream, after the 200.
		var body struct {
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		_ = json.Unmarshal(se.Event.Data, &body)
		typ := body.Error.Type
		if typ == "server_error" || typ == "" {
			typ = "api_error" // the provider failed mid-answer: unavailable
		}
		return statusError("openai", 0, nil, typ, body.Error.Message)
	}
	return transportError(ctx, "openai", err)
}

func (p *OpenAI) params(req *Request) (openai.ChatCompletionNewParams, error) {
	params := openai.ChatCompletionNewParams{Model: shared.ChatModel(p.model), Messages: OpenAIMessages(req.System, req.Messages)}
	o := req.Options
	if o.TopK != nil {
		return params, &UnsupportedError{Provider: "openai", Option: "top_k"}
	}
	if o.TopP != nil {
		params.TopP = openai.Float(*o.TopP)
	}
	if len(o.StopSequences) > 0 {
		params.Stop = openai.ChatCompletionNewParamsStopUnion{OfStringArray: o.StopSequences}
	}
	if o.User != "" {
		params.User = openai.String(o.User)
	}
	switch o.ToolChoice.Mode {
	case ToolChoiceNone, ToolChoiceRequired, ToolChoiceAuto:
		params.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String(string(o.ToolChoice.Mode))}
	case ToolChoiceTool:
		params.ToolChoice = openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: o.ToolChoice.Name})
	}
	if req.Output != nil {
		var schema map[string]any
		if err := json.Unmarshal(req.Output.Schema, &schema); err != nil {
			return params, fmt.Errorf("openai: the output schema is not a JSON object: %w", err)
		}
		name := cmp.Or(req.Output.Name, "answer")
		params.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: name, Schema: schema}}}
	}
	if o.Model != "" {
		params.Model = shared.ChatModel(o.Model)
	}
	if o.MaxTokens > 0 {
		params.MaxCompletionTokens = openai.Int(o.MaxTokens)
	}
	if o.Temperature != nil {
		params.Temperature = openai.Float(*o.Temperature)
	}
	params.StreamOptions.IncludeUsage = openai.Bool(true)
	for _, t := range req.Tools {
		fd := shared.FunctionDefinitionParam{Name: t.Name}
		if t.Description != "" {
			fd.Description = openai.String(t.Description)
		}
		schema := shared.FunctionParameters{"type": "object"}
		if len(t.InputSchema) > 0 {
			var m map[string]any
			if json.Unmarshal(t.InputSchema, &m) == nil && m != nil {
				schema = m
			}
		}
		fd.Parameters = schema
		params.Tools = append(params.Tools, openai.ChatCompletionFunctionTool(fd))
	}
	return params, nil
}

// OpenAIMessages converts a system prompt and a history to Chat
// Completions messages. Each tool message becomes a "tool" message (its
// text and JSON parts as text; images, which tool messages cannot carry,
// are named by a note). Thinking parts are left out: Chat Completions takes
// no reasoning back.
func OpenAIMessages(system string, history []Message) []openai.ChatCompletionMessageParamUnion {
	var out []openai.ChatCompletionMessageParamUnion
	if system != "" {
		out = append(out, openai.SystemMessage(system))
	}
	for _, m := range history {
		switch m.Role {
		case RoleSystem:
			out = append(out, openai.SystemMessage(m.Text()))
		case RoleUser:
			if !hasImage(m.Parts) {
				out = append(out, openai.UserMessage(m.Text()))
				continue
			}
			var parts []openai.ChatCompletionContentPartUnionParam
			for _, p := range m.Parts {
				switch p.Type {
				case PartText:
					parts = append(parts, openai.TextContentPart(p.Text))
				case PartJSON:
					parts = append(parts, openai.TextContentPart(string(p.JSON)))
				case PartImage:
					parts = append(parts, openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: p.URL}))
				}
			}
			out = append(out, openai.UserMessage(parts))
		case RoleAssistant:
			a := openai.ChatCompletionAssistantMessageParam{}
			if t := m.Text(); t != "" {
				a.Content.OfString = openai.String(t)
			}
			for _, c := range m.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID:       c.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: c.Arguments},
					}})
			}
			out = append(out, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		case RoleTool:
			if m.Result == nil {
				continue
			}
			text := m.Result.Text()
			for _, p := range m.Result.Content {
				if p.Type == PartImage {
					text += "\n[an image the tool returned cannot be shown here]"
				}
			}
			out = append(out, openai.ToolMessage(strings.TrimPrefix(text, "\n"), m.Result.CallID))
		}
	}
	return out
}

func hasImage(parts []Part) bool {
	for _, p := range parts {
		if p.Type == PartImage {
			return true
		}
	}
	return false
}

// FromOpenAIMessages converts Chat Completions messages back to a system
// prompt (its system and developer messages, joined) and a history: the
// inverse of [OpenAIMessages] for what both sides have (text, images, tool
// calls, tool results as text).
func FromOpenAIMessages(msgs []openai.ChatCompletionMessageParamUnion) (system string, history []Message) {
	var sys []string
	for _, m := range msgs {
		switch {
		case m.OfSystem != nil:
			sys = append(sys, openaiText(m.OfSystem.Content.OfString.Value, m.OfSystem.Content.OfArrayOfContentParts))
		case m.OfDeveloper != nil:
			sys = append(sys, openaiText(m.OfDeveloper.Content.OfString.Value, m.OfDeveloper.Content.OfArrayOfContentParts))
		case m.OfUser != nil:
			u := Message{Role: RoleUser}
			if s := m.OfUser.Content.OfString; s.Valid() {
				u.Parts = append(u.Parts, Text(s.Value))
			}
			for _, p := range m.OfUser.Content.OfArrayOfContentParts {
				switch {
				case p.OfText != nil:
					u.Parts = append(u.Parts, Text(p.OfText.Text))
				case p.OfImageURL != nil:
					u.Parts = append(u.Parts, Image(p.OfImageURL.ImageURL.URL))
				}
			}
			history = append(history, u)
		case m.OfAssistant != nil:
			a := Message{Role: RoleAssistant}
			if s := m.OfAssistant.Content.OfString; s.Valid() && s.Value != "" {
				a.Parts = append(a.Parts, Text(s.Value))
			}
			for _, c := range m.OfAssistant.ToolCalls {
				if f := c.OfFunction; f != nil {
					a.ToolCalls = append(a.ToolCalls, ToolCall{ID: f.ID, Name: f.Function.Name, Arguments: f.Function.Arguments})
				}
			}
			history = append(history, a)
		case m.OfTool != nil:
			text := openaiText(m.OfTool.Content.OfString.Value, m.OfTool.Content.OfArrayOfContentParts)
			history = append(history, ToolMessage(ToolResult{CallID: m.OfTool.ToolCallID, Content: []Part{Text(text)}}))
		}
	}
	return strings.Join(sys, "\n\n"), history
}

func openaiText(s string, parts []openai.ChatCompletionContentPartTextParam) string {
	for _, p := range parts {
		s += p.Text
	}
	return s
}
