package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
)

// DefaultAnthropicMaxTokens is [AnthropicOptions.MaxTokens] when zero: the
// Messages API requires a bound.
const DefaultAnthropicMaxTokens = 8192

// AnthropicOptions configure [NewAnthropic].
type AnthropicOptions struct {
	// Model names the model, e.g. "claude-sonnet-4-5"; required.
	Model string
	// APIKey is the key; empty means the environment's ANTHROPIC_API_KEY.
	APIKey string
	// BaseURL is the API's base URL; empty means Anthropic's.
	BaseURL string
	// MaxTokens bounds each response; zero means
	// [DefaultAnthropicMaxTokens]. [ModelOptions.MaxTokens] overrides it.
	MaxTokens int64
	// HTTPClient makes the requests; nil means http.DefaultClient.
	HTTPClient *http.Client
	// IdleTimeout abandons a call that receives nothing (no response
	// headers, no stream event, not even a ping) for this long, with an
	// error of class timeout; zero means [DefaultIdleTimeout], negative
	// never.
	IdleTimeout time.Duration
}

// Anthropic is a [Provider] for the Anthropic Messages API, through the
// official SDK: streaming, tools, extended thinking with signatures. The
// SDK's own retries are off: model calls retry through [Generate]'s
// policy only. It is safe for concurrent use.
type Anthropic struct {
	client    anthropic.Client
	model     string
	maxTokens int64
	idle      time.Duration
	key       string // redacted from errors
}

var _ Provider = (*Anthropic)(nil)

// NewAnthropic returns an Anthropic provider. It fails with an error
// wrapping [ErrNoAPIKey] when there is no key.
func NewAnthropic(o AnthropicOptions) (*Anthropic, error) {
	key := o.APIKey
	if key == "" {
		key = os.Getenv("ANTHROPIC_API_KEY")
	}
	if key == "" {
		return nil, fmt.Errorf("anthropic: %w: set ANTHROPIC_API_KEY", ErrNoAPIKey)
	}
	if o.Model == "" {
		return nil, errors.New("anthropic: no model: name one, e.g. claude-sonnet-4-5")
	}
	opts := []option.RequestOption{option.WithoutEnvironmentDefaults(), option.WithAPIKey(key), option.WithMaxRetries(0)}
	if o.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(o.BaseURL))
	}
	if o.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(o.HTTPClient))
	}
	mt := o.MaxTokens
	if mt <= 0 {
		mt = DefaultAnthropicMaxTokens
	}
	return &Anthropic{client: anthropic.NewClient(opts...), model: o.Model, maxTokens: mt, idle: o.IdleTimeout, key: key}, nil
}

// Stream implements [Provider]. Fragment indexes are the API's content
// block indexes.
func (a *Anthropic) Stream(ctx context.Context, req *Request, emit func(Fragment)) (*StreamEnd, error) {
	params, err := a.params(req)
	if err != nil {
		return nil, err
	}
	w := newIdleWatch(a.idle)
	stream := a.client.Messages.NewStreaming(ctx, params, option.WithMiddleware(w.middleware))
	defer stream.Close()
	end := &StreamEnd{}
	stopped := false
	kinds := make(map[int64]string, 4)
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "message_start":
			end.ID, end.Model = ev.Message.ID, string(ev.Message.Model)
			u := ev.Message.Usage
			end.Usage = Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CacheReadTokens: u.CacheReadInputTokens, CacheWriteTokens: u.CacheCreationInputTokens}
		case "content_block_start":
			cb := ev.ContentBlock
			i := int(ev.Index)
			kinds[ev.Index] = cb.Type
			switch cb.Type {
			case "text":
				emit(Fragment{Type: FragText, Index: i, Text: cb.Text})
			case "thinking":
				emit(Fragment{Type: FragThinking, Index: i, Text: cb.Thinking})
				if cb.Signature != "" {
					emit(Fragment{Type: FragSignature, Index: i, Text: cb.Signature})
				}
			case "redacted_thinking":
				emit(Fragment{Type: FragRedacted, Index: i, Text: cb.Data})
			case "tool_use":
				emit(Fragment{Type: FragToolCall, Index: i, ID: cb.ID, Name: cb.Name})
			}
		case "content_block_delta":
			d := ev.Delta
			i := int(ev.Index)
			switch d.Type {
			case "text_delta":
				emit(Fragment{Type: FragText, Index: i, Text: d.Text})
			case "thinking_delta":
				emit(Fragment{Type: FragThinking, Index: i, Text: d.Thinking})
			case "signature_delta":
				emit(Fragment{Type: FragSignature, Index: i, Text: d.Signature})
			case "input_json_delta":
				if kinds[ev.Index] == "tool_use" {
					emit(Fragment{Type: FragToolArgs, Index: i, Text: d.PartialJSON})
				}
			case "citations_delta":
				emit(Fragment{Type: FragCitation, Index: i, Text: d.Citation.RawJSON()})
			}
		case "content_block_stop":
			emit(Fragment{Type: FragBlockStop, Index: int(ev.Index)})
		case "message_delta":
			end.StopReason = anthropicStop(ev.Delta.StopReason)
			if u := ev.Usage; u.OutputTokens > 0 || u.InputTokens > 0 {
				end.Usage.OutputTokens = u.OutputTokens
				if u.InputTokens > 0 {
					end.Usage.InputTokens = u.InputTokens
				}
			}
		case "message_stop":
			stopped = true
		}
	}
	if err := stream.Err(); err != nil {
		if ie := w.err("anthropic"); ie != nil && ctx.Err() == nil {
			return nil, ie
		}
		return nil, redactKey(anthropicError(ctx, err), a.key)
	}
	if ie := w.err("anthropic"); ie != nil && ctx.Err() == nil {
		return nil, ie
	}
	if !stopped {
		return nil, cutError("anthropic", "message_stop")
	}
	return end, nil
}

func anthropicStop(r anthropic.StopReason) StopReason {
	switch r {
	case anthropic.StopReasonEndTurn:
		return StopEnd
	case anthropic.StopReasonToolUse:
		return StopToolUse
	case anthropic.StopReasonMaxTokens, anthropic.StopReasonModelContextWindowExceeded:
		return StopLength
	case anthropic.StopReasonRefusal:
		return StopRefusal
	case anthropic.StopReasonStopSequence:
		return StopSequence
	case anthropic.StopReasonPauseTurn:
		return StopPaused
	}
	return StopReason(r)
}

// anthropicError classifies an error of the SDK.
func anthropicError(ctx context.Context, err error) error {
	if ae, ok := errors.AsType[*anthropic.Error](err); ok {
		var body struct {
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		_ = json.Unmarshal([]byte(ae.RawJSON()), &body)
		var h http.Header
		if ae.Response != nil {
			h = ae.Response.Header
		}
		return statusError("anthropic", ae.StatusCode, h, body.Error.Type, body.Error.Message)
	}
	return transportError(ctx, "anthropic", err)
}

// params converts req to the SDK's request.
func (a *Anthropic) params(req *Request) (anthropic.MessageNewParams, error) {
	p := anthropic.MessageNewParams{Model: anthropic.Model(a.model), MaxTokens: a.maxTokens}
	o := req.Options
	if o.Model != "" {
		p.Model = anthropic.Model(o.Model)
	}
	if o.MaxTokens > 0 {
		p.MaxTokens = o.MaxTokens
	}
	if o.Temperature != nil {
		p.Temperature = anthropic.Float(*o.Temperature)
	}
	if o.ThinkingBudget > 0 {
		p.Thinking = anthropic.ThinkingConfigParamOfEnabled(o.ThinkingBudget)
	}
	if o.TopP != nil {
		p.TopP = anthropic.Float(*o.TopP)
	}
	if o.TopK != nil {
		p.TopK = anthropic.Int(*o.TopK)
	}
	p.StopSequences = o.StopSequences
	if o.User != "" {
		p.Metadata.UserID = anthropic.String(o.User)
	}
	switch o.ToolChoice.Mode {
	case ToolChoiceNone:
		p.ToolChoice = anthropic.ToolChoiceUnionParam{OfNone: &anthropic.ToolChoiceNoneParam{}}
	case ToolChoiceRequired:
		p.ToolChoice = anthropic.ToolChoiceUnionParam{OfAny: &anthropic.ToolChoiceAnyParam{}}
	case ToolChoiceTool:
		p.ToolChoice = anthropic.ToolChoiceParamOfTool(o.ToolChoice.Name)
	}
	system := req.System
	if req.Output != nil {
		// The Messages API has no schema-constrained output here: the
		// model is told the schema, and the Runner validates the answer.
		if system != "" {
			system += "\n\n"
		}
		system += "Your final answer must be only a JSON value matching this JSON Schema, with no other text:\n" + string(req.Output.Schema)
	}
	msgs, sys := AnthropicMessages(req.Messages)
	if sys != "" {
		if system != "" {
			system += "\n\n"
		}
		system += sys
	}
	if system != "" {
		p.System = []anthropic.TextBlockParam{{Text: system}}
		if req.Cache.System {
			p.System[0].CacheControl = anthropic.NewCacheControlEphemeralParam()
		}
	}
	p.Messages = msgs
	if k := req.Cache.History; k > 0 && k <= len(req.Messages) {
		cacheHistory(p.Messages, req.Messages[:k])
	}
	for _, t := range req.Tools {
		tp, err := anthropicTool(t)
		if err != nil {
			return p, err
		}
		p.Tools = append(p.Tools, anthropic.ToolUnionParam{OfTool: tp})
	}
	if n := len(p.Tools); n > 0 && req.Cache.Tools {
		p.Tools[n-1].OfTool.CacheControl = anthropic.NewCacheControlEphemeralParam()
	}
	return p, nil
}

// cacheHistory puts a cache breakpoint on the last block of prefix (the
// stable start of the history) in msgs, the whole history's conversion:
// the blocks of prefix come first in msgs, in the same places.
func cacheHistory(msgs []anthropic.MessageParam, prefix []Message) {
	pm, _ := AnthropicMessages(prefix)
	if len(pm) == 0 || len(pm) > len(msgs) {
		return
	}
	wi := len(pm) - 1
	bi := len(pm[wi].Content) - 1
	if bi < 0 || bi >= len(msgs[wi].Content) {
		return
	}
	if cc := msgs[wi].Content[bi].GetCacheControl(); cc != nil {
		*cc = anthropic.NewCacheControlEphemeralParam()
	}
}

// anthropicTool converts a tool spec; the schema's properties and required
// go in their fields, everything else in ExtraFields, so nothing is lost.
func anthropicTool(t ToolSpec) (*anthropic.ToolParam, error) {
	tp := &anthropic.ToolParam{Name: t.Name}
	if t.Description != "" {
		tp.Description = anthropic.String(t.Description)
	}
	if len(t.InputSchema) == 0 {
		return tp, nil
	}
	var schema map[string]any
	if err := json.Unmarshal(t.InputSchema, &schema); err != nil {
		return nil, fmt.Errorf("tool %q: its input schema is not a JSON object: %w", t.Name, err)
	}
	for k, v := range schema {
		switch k {
		case "type":
		case "properties":
			tp.InputSchema.Properties = v
		case "required":
			if list, ok := v.([]any); ok {
				for _, r := range list {
					if s, ok := r.(string); ok {
						tp.InputSchema.Required = append(tp.InputSchema.Required, s)
					}
				}
			}
		default:
			if tp.InputSchema.ExtraFields == nil {
				tp.InputSchema.ExtraFields = make(map[string]any)
			}
			tp.InputSchema.ExtraFields[k] = v
		}
	}
	return tp, nil
}

// AnthropicMessages converts a history to the Messages API's messages, and
// returns the text of its system messages apart (the API takes the system
// prompt as a parameter). Tool messages become tool_result blocks of a user
// message; consecutive messages of the same API role are merged into one,
// as the API requires roles to alternate. Thinking parts go back with
// their signatures; a tool call whose arguments are not a JSON object is
// sent with {} (its result says what was wrong).
func AnthropicMessages(history []Message) ([]anthropic.MessageParam, string) {
	var out []anthropic.MessageParam
	var system []string
	add := func(role anthropic.MessageParamRole, blocks []anthropic.ContentBlockParamUnion) {
		if len(blocks) == 0 {
			return
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			return
		}
		out = append(out, anthropic.MessageParam{Role: role, Content: blocks})
	}
	for _, m := range history {
		switch m.Role {
		case RoleSystem:
			system = append(system, m.Text())
		case RoleUser:
			add(anthropic.MessageParamRoleUser, anthropicParts(m.Parts))
		case RoleAssistant:
			blocks := anthropicParts(m.Parts)
			for _, c := range m.ToolCalls {
				args := json.RawMessage(c.Arguments)
				var obj map[string]json.RawMessage
				if json.Unmarshal(args, &obj) != nil || obj == nil {
					args = json.RawMessage(`{}`)
				}
				blocks = append(blocks, anthropic.NewToolUseBlock(c.ID, args, c.Name))
			}
			add(anthropic.MessageParamRoleAssistant, blocks)
		case RoleTool:
			if m.Result == nil {
				continue
			}
			r := m.Result
			tr := anthropic.ToolResultBlockParam{ToolUseID: r.CallID, IsError: anthropic.Bool(r.IsError)}
			for _, p := range r.Content {
				switch p.Type {
				case PartImage:
					if img := anthropicImage(p.URL); img != nil {
						tr.Content = append(tr.Content, anthropic.ToolResultBlockParamContentUnion{OfImage: img})
					}
				case PartJSON:
					tr.Content = append(tr.Content, anthropic.ToolResultBlockParamContentUnion{OfText: &anthropic.TextBlockParam{Text: string(p.JSON)}})
				case PartText:
					if p.Text != "" {
						tr.Content = append(tr.Content, anthropic.ToolResultBlockParamContentUnion{OfText: &anthropic.TextBlockParam{Text: p.Text}})
					}
				}
			}
			add(anthropic.MessageParamRoleUser, []anthropic.ContentBlockParamUnion{{OfToolResult: &tr}})
		}
	}
	return out, strings.Join(system, "\n\n")
}

func anthropicParts(parts []Part) []anthropic.ContentBlockParamUnion {
	var out []anthropic.ContentBlockParamUnion
	for _, p := range parts {
		switch p.Type {
		case PartText:
			if p.Text != "" {
				out = append(out, anthropic.NewTextBlock(p.Text))
			}
		case PartThinking:
			switch {
			case p.Redacted != "":
				out = append(out, anthropic.NewRedactedThinkingBlock(p.Redacted))
			case p.Signature != "":
				out = append(out, anthropic.NewThinkingBlock(p.Signature, p.Text))
			}
			// Thinking without a signature (from another provider) cannot
			// be sent back: the API would refuse it.
		case PartImage:
			if img := anthropicImage(p.URL); img != nil {
				out = append(out, anthropic.ContentBlockParamUnion{OfImage: img})
			}
		case PartJSON:
			out = append(out, anthropic.NewTextBlock(string(p.JSON)))
		}
	}
	return out
}

// anthropicImage converts an image URL: a data URL becomes a base64
// source, anything else a URL source.
func anthropicImage(url string) *anthropic.ImageBlockParam {
	if url == "" {
		return nil
	}
	if mediaType, data, ok := parseDataURL(url); ok {
		return &anthropic.ImageBlockParam{Source: anthropic.ImageBlockParamSourceUnion{
			OfBase64: &anthropic.Base64ImageSourceParam{Data: data, MediaType: anthropic.Base64ImageSourceMediaType(mediaType)}}}
	}
	return &anthropic.ImageBlockParam{Source: anthropic.ImageBlockParamSourceUnion{OfURL: &anthropic.URLImageSourceParam{URL: url}}}
}

// parseDataURL splits "data:<type>;base64,<data>".
func parseDataURL(u string) (mediaType, data string, ok bool) {
	rest, ok := strings.CutPrefix(u, "data:")
	if !ok {
		return "", "", false
	}
	head, data, ok := strings.Cut(rest, ",")
	if !ok {
		return "", "", false
	}
	mediaType, ok = strings.CutSuffix(head, ";base64")
	return mediaType, data, ok
}

// FromAnthropicMessages converts Messages API messages back to a history:
// the inverse of [AnthropicMessages] for what both sides have (text,
// thinking with its signature, redacted thinking, images, tool calls and
// tool results; a tool_result block becomes a tool message of its own).
// Blocks agent has no part for (documents, server tools, ...) are left
// out.
func FromAnthropicMessages(msgs []anthropic.MessageParam) []Message {
	var out []Message
	for _, m := range msgs {
		cur := Message{Role: RoleUser}
		if m.Role == anthropic.MessageParamRoleAssistant {
			cur.Role = RoleAssistant
		}
		flush := func() {
			if len(cur.Parts) > 0 || len(cur.ToolCalls) > 0 {
				out = append(out, cur)
			}
			cur = Message{Role: cur.Role}
		}
		for _, b := range m.Content {
			switch {
			case b.OfText != nil:
				cur.Parts = append(cur.Parts, Text(b.OfText.Text))
			case b.OfThinking != nil:
				cur.Parts = append(cur.Parts, Part{Type: PartThinking, Text: b.OfThinking.Thinking, Signature: b.OfThinking.Signature})
			case b.OfRedactedThinking != nil:
				cur.Parts = append(cur.Parts, Part{Type: PartThinking, Redacted: b.OfRedactedThinking.Data})
			case b.OfImage != nil:
				if u := fromAnthropicImage(b.OfImage); u != "" {
					cur.Parts = append(cur.Parts, Image(u))
				}
			case b.OfToolUse != nil:
				args, err := json.Marshal(b.OfToolUse.Input)
				if err != nil || string(args) == "null" {
					args = []byte("{}")
				}
				cur.ToolCalls = append(cur.ToolCalls, ToolCall{ID: b.OfToolUse.ID, Name: b.OfToolUse.Name, Arguments: string(args)})
			case b.OfToolResult != nil:
				flush()
				tr := b.OfToolResult
				r := ToolResult{CallID: tr.ToolUseID, IsError: tr.IsError.Value}
				for _, c := range tr.Content {
					switch {
					case c.OfText != nil:
						r.Content = append(r.Content, Text(c.OfText.Text))
					case c.OfImage != nil:
						if u := fromAnthropicImage(c.OfImage); u != "" {
							r.Content = append(r.Content, Image(u))
						}
					}
				}
				out = append(out, ToolMessage(r))
			}
		}
		flush()
	}
	return out
}

func fromAnthropicImage(img *anthropic.ImageBlockParam) string {
	switch s := img.Source; {
	case s.OfBase64 != nil:
		return "data:" + string(s.OfBase64.MediaType) + ";base64," + s.OfBase64.Data
	case s.OfURL != nil:
		return s.OfURL.URL
	}
	return ""
}
