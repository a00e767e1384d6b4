package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

// OpenAIResponses is a [Provider] for OpenAI's Responses API, through the
// official SDK: streamed output items (text, reasoning summaries, function
// calls with fragmented arguments), usage with cached tokens, incomplete
// responses as truncated turns. Each call sends the whole history (no
// stored state: store is off). The SDK's own retries are off. It is safe
// for concurrent use.
type OpenAIResponses struct{ openaiBase }

var _ Provider = (*OpenAIResponses)(nil)

// NewOpenAIResponses returns a Responses API provider; the options are
// [OpenAI]'s. It fails with an error wrapping [ErrNoAPIKey] when there is
// no key and no base URL.
func NewOpenAIResponses(o OpenAIOptions) (*OpenAIResponses, error) {
	b, err := newOpenAIBase(o)
	if err != nil {
		return nil, err
	}
	return &OpenAIResponses{b}, nil
}

// Stream implements [Provider]. Fragment indexes are the API's output
// indexes.
func (p *OpenAIResponses) Stream(ctx context.Context, req *Request, emit func(Fragment)) (*StreamEnd, error) {
	params, err := p.params(req)
	if err != nil {
		return nil, err
	}
	w := newIdleWatch(p.idle)
	stream := p.client.Responses.NewStreaming(ctx, params, option.WithMiddleware(w.middleware))
	defer stream.Close()
	end := &StreamEnd{}
	finished, calls := false, false
	for stream.Next() {
		ev := stream.Current()
		i := int(ev.OutputIndex)
		switch ev.Type {
		case "response.created":
			end.ID, end.Model = ev.Response.ID, string(ev.Response.Model)
		case "response.output_item.added":
			if ev.Item.Type == "function_call" {
				calls = true
				emit(Fragment{Type: FragToolCall, Index: i, ID: ev.Item.CallID, Name: ev.Item.Name, Text: ev.Item.Arguments.OfString})
			}
		case "response.output_text.delta", "response.refusal.delta":
			emit(Fragment{Type: FragText, Index: i, Text: ev.Delta})
		case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
			emit(Fragment{Type: FragThinking, Index: i, Text: ev.Delta})
		case "response.function_call_arguments.delta":
			emit(Fragment{Type: FragToolArgs, Index: i, Text: ev.Delta})
		case "response.output_item.done":
			emit(Fragment{Type: FragBlockStop, Index: i})
		case "response.completed", "response.incomplete":
			finished = true
			end.StopReason = responsesStop(ev.Response.IncompleteDetails.Reason, calls)
			u := ev.Response.Usage
			cached := u.InputTokensDetails.CachedTokens
			end.Usage = Usage{InputTokens: u.InputTokens - cached, OutputTokens: u.OutputTokens, CacheReadTokens: cached}
		case "response.failed", "error":
			msg := cmp.Or(ev.Message, ev.Response.Error.Message, "the response failed")
			return nil, redactKey(statusError("openai", 0, nil, "api_error", msg), p.key)
		}
	}
	return p.finish(ctx, w, stream.Err(), finished, "response.completed", end)
}

// responsesStop maps an incomplete response's reason, or a complete one.
func responsesStop(incomplete string, calls bool) StopReason {
	switch incomplete {
	case "max_output_tokens":
		return StopLength
	case "content_filter":
		return StopFiltered
	case "":
		if calls {
			return StopToolUse
		}
		return StopEnd
	}
	return StopReason(incomplete)
}

func (p *OpenAIResponses) params(req *Request) (responses.ResponseNewParams, error) {
	params := responses.ResponseNewParams{Model: shared.ResponsesModel(cmp.Or(req.Options.Model, p.model)), Store: openai.Bool(false)}
	o := req.Options
	switch {
	case o.TopK != nil:
		return params, &UnsupportedError{Provider: "openai responses", Option: "top_k"}
	case len(o.StopSequences) > 0:
		return params, &UnsupportedError{Provider: "openai responses", Option: "stop sequences"}
	}
	if o.MaxTokens > 0 {
		params.MaxOutputTokens = openai.Int(o.MaxTokens)
	}
	if o.Temperature != nil {
		params.Temperature = openai.Float(*o.Temperature)
	}
	if o.TopP != nil {
		params.TopP = openai.Float(*o.TopP)
	}
	if o.User != "" {
		params.User = openai.String(o.User)
	}
	switch o.ToolChoice.Mode {
	case ToolChoiceNone, ToolChoiceRequired, ToolChoiceAuto:
		params.ToolChoice.OfToolChoiceMode = openai.Opt(responses.ToolChoiceOptions(o.ToolChoice.Mode))
	case ToolChoiceTool:
		params.ToolChoice.OfFunctionTool = &responses.ToolChoiceFunctionParam{Name: o.ToolChoice.Name}
	}
	system, input := ResponsesInput(req.System, req.Messages)
	if system != "" {
		params.Instructions = openai.String(system)
	}
	params.Input.OfInputItemList = input
	for _, t := range req.Tools {
		schema := map[string]any{"type": "object"}
		if len(t.InputSchema) > 0 {
			var m map[string]any
			if json.Unmarshal(t.InputSchema, &m) == nil && m != nil {
				schema = m
			}
		}
		tool := responses.ToolParamOfFunction(t.Name, schema, false)
		if t.Description != "" {
			tool.OfFunction.Description = openai.String(t.Description)
		}
		params.Tools = append(params.Tools, tool)
	}
	if req.Output != nil {
		var schema map[string]any
		if err := json.Unmarshal(req.Output.Schema, &schema); err != nil {
			return params, fmt.Errorf("openai: the output schema is not a JSON object: %w", err)
		}
		params.Text.Format = responses.ResponseFormatTextConfigParamOfJSONSchema(cmp.Or(req.Output.Name, "answer"), schema)
	}
	return params, nil
}

// ResponsesInput converts a system prompt and a history to the Responses
// API's instructions and input items: user and assistant text as messages
// (user images as input_image parts), each tool call a function_call item,
// each tool result a function_call_output item (text and JSON parts as
// text). Thinking is left out: without stored state the API takes no
// reasoning back unencrypted.
func ResponsesInput(system string, history []Message) (string, responses.ResponseInputParam) {
	sys := []string{}
	if system != "" {
		sys = append(sys, system)
	}
	var out responses.ResponseInputParam
	for _, m := range history {
		switch m.Role {
		case RoleSystem:
			sys = append(sys, m.Text())
		case RoleUser:
			out = append(out, responsesUser(m))
		case RoleAssistant:
			if t := m.Text(); t != "" {
				out = append(out, responses.ResponseInputItemParamOfMessage(t, responses.EasyInputMessageRoleAssistant))
			}
			for _, c := range m.ToolCalls {
				out = append(out, responses.ResponseInputItemParamOfFunctionCall(c.Arguments, c.ID, c.Name))
			}
		case RoleTool:
			if m.Result == nil {
				continue
			}
			item := responses.ResponseInputItemParamOfFunctionCallOutput(m.Result.Text())
			item.OfFunctionCallOutput.CallID = openai.String(m.Result.CallID)
			out = append(out, item)
		}
	}
	return strings.Join(sys, "\n\n"), out
}

func responsesUser(m Message) responses.ResponseInputItemUnionParam {
	if !hasImage(m.Parts) {
		return responses.ResponseInputItemParamOfMessage(m.Text(), responses.EasyInputMessageRoleUser)
	}
	var parts responses.ResponseInputMessageContentListParam
	for _, p := range m.Parts {
		switch p.Type {
		case PartText:
			parts = append(parts, responses.ResponseInputContentParamOfInputText(p.Text))
		case PartJSON:
			parts = append(parts, responses.ResponseInputContentParamOfInputText(string(p.JSON)))
		case PartImage:
			img := responses.ResponseInputImageParam{Detail: responses.ResponseInputImageDetailAuto, ImageURL: openai.String(p.URL)}
			parts = append(parts, responses.ResponseInputContentUnionParam{OfInputImage: &img})
		}
	}
	return responses.ResponseInputItemParamOfMessage(parts, responses.EasyInputMessageRoleUser)
}
