package agent

import (
	"context"
	"encoding/json"
)

// Provider makes streamed model calls. Implementations: [Anthropic],
// [OpenAI], [OpenAIResponses] and [Gemini]. A Provider must be safe for concurrent use.
type Provider interface {
	// Stream makes one streamed model call for req and calls emit with
	// each fragment, in stream order, from the calling goroutine; it
	// returns once the stream has ended. A stream that ends without the
	// provider's end-of-message marker is an error of class network (or
	// unavailable, when the provider said it was overloaded; or timeout,
	// when it stopped sending for longer than its idle timeout). Errors are
	// classified *retry.Error values: rate_limited (with RetryAfter),
	// unavailable, network, permission, validation, ...
	Stream(ctx context.Context, req *Request, emit func(Fragment)) (*StreamEnd, error)
}

// Request is what one model call sends.
type Request struct {
	// System is the system prompt; empty means none. System messages in
	// Messages are added to it.
	System string
	// Tools are the tools the model may call.
	Tools []ToolSpec
	// Messages is the conversation so far.
	Messages []Message
	// Options are the model's settings for this call.
	Options ModelOptions
	// Output, when not nil, is the JSON Schema the final answer must
	// match (structured output): OpenAI enforces it with response_format,
	// Gemini with responseJsonSchema, Anthropic is told it in the system
	// prompt; [Runner] validates it.
	Output *OutputSchema
	// Cache says where to put prompt-cache breakpoints (Anthropic's
	// cache_control; OpenAI and Gemini cache by themselves and report it
	// in Usage).
	Cache CacheHints
}

// OutputSchema is a JSON Schema the final answer must match.
type OutputSchema struct {
	// Name names the schema for the provider ("answer" when empty).
	Name string
	// Schema is the JSON Schema document.
	Schema json.RawMessage
}

// CacheHints place prompt-cache breakpoints: after the system prompt,
// after the tools, and after the first History messages (the prefix that
// stays the same from one step to the next). The zero value places none.
type CacheHints struct {
	System, Tools bool
	History       int
}

// ToolChoiceMode says whether and which tool the model must call.
type ToolChoiceMode string

// The tool choices.
const (
	ToolChoiceAuto     ToolChoiceMode = "auto"     // the model decides (the default)
	ToolChoiceNone     ToolChoiceMode = "none"     // no tool call
	ToolChoiceRequired ToolChoiceMode = "required" // at least one tool call
	ToolChoiceTool     ToolChoiceMode = "tool"     // a call of ToolChoice.Name
)

// ToolChoice constrains the model's tool calls; the zero value is auto.
type ToolChoice struct {
	Mode ToolChoiceMode
	// Name is the tool to call, for ToolChoiceTool.
	Name string
}

// ModelOptions are the settings of a model call. A zero field means the
// provider's default.
type ModelOptions struct {
	// Model overrides the provider's model for this call.
	Model string
	// MaxTokens bounds the output. Zero means the provider's default
	// ([AnthropicOptions.MaxTokens]; none for OpenAI).
	MaxTokens int64
	// Temperature, when not nil, sets the sampling temperature.
	Temperature *float64
	// ThinkingBudget, when positive, turns on extended thinking with this
	// many tokens (Anthropic, where it must be below MaxTokens; Gemini,
	// which then also returns its thought summaries).
	ThinkingBudget int64
	// TopP, when not nil, sets nucleus sampling.
	TopP *float64
	// TopK, when not nil, samples from the K likeliest tokens (Anthropic
	// and Gemini; OpenAI has none: an *[UnsupportedError]).
	TopK *int64
	// StopSequences end the output where one of them appears.
	StopSequences []string
	// ToolChoice constrains the tool calls; the zero value is auto.
	ToolChoice ToolChoice
	// User identifies the end user to the provider (Anthropic's
	// metadata.user_id, OpenAI's user), for abuse monitoring; Gemini has
	// none: an *[UnsupportedError].
	User string
}

// ToolSpec describes a tool to the model.
type ToolSpec struct {
	Name        string
	Description string
	// InputSchema is the JSON Schema of the arguments object; nil means
	// {"type":"object"}.
	InputSchema json.RawMessage
}

// FragmentType is the type of one streamed [Fragment].
type FragmentType string

// The fragments a provider streams.
const (
	// FragText is a text delta of block Index.
	FragText FragmentType = "text"
	// FragThinking is a thinking delta of block Index.
	FragThinking FragmentType = "thinking"
	// FragSignature is (a piece of) the signature of thinking block Index,
	// or of the text block or tool call Index it follows (Gemini's thought
	// signatures).
	FragSignature FragmentType = "signature"
	// FragRedacted is an encrypted thinking block (Text holds its data).
	FragRedacted FragmentType = "redacted_thinking"
	// FragToolCall starts tool call Index: ID and Name are set; Text may
	// hold the first piece of its arguments.
	FragToolCall FragmentType = "tool_call"
	// FragToolArgs is a piece of the arguments JSON of tool call Index.
	FragToolArgs FragmentType = "tool_args"
	// FragBlockStop says block Index is complete.
	FragBlockStop FragmentType = "block_stop"
	// FragCitation is a citation of text block Index (Text holds the
	// provider's citation object as JSON).
	FragCitation FragmentType = "citation"
)

// Fragment is one raw piece of a streamed response, as the provider sent
// it. Blocks are numbered by Index, per kind of block in the provider's
// own numbering (Anthropic numbers every content block; OpenAI numbers
// tool calls, and text is block 0); fragments of different blocks may
// interleave.
type Fragment struct {
	Type  FragmentType
	Index int
	// Text is the delta: text, thinking, signature, argument JSON or
	// redacted data.
	Text string
	// ID and Name identify a tool call (FragToolCall).
	ID, Name string
}

// StopReason says why the model stopped. The values are provider-neutral.
type StopReason string

// The reasons a model stops.
const (
	StopEnd       StopReason = "end"        // the model finished its turn
	StopToolUse   StopReason = "tool_use"   // the model wants its tool calls run
	StopLength    StopReason = "length"     // the output hit the token limit
	StopRefusal   StopReason = "refusal"    // the model refused
	StopFiltered  StopReason = "filtered"   // a content filter stopped it
	StopSequence  StopReason = "stop"       // a stop sequence matched
	StopPaused    StopReason = "pause_turn" // the provider paused a long turn
	StopUndefined StopReason = ""
)

// Truncated reports whether a turn that stopped for r is incomplete: for
// length, refusal or a content filter. A truncated turn's tool calls are
// never executed.
func (r StopReason) Truncated() bool {
	return r == StopLength || r == StopRefusal || r == StopFiltered
}

// Usage counts the tokens of a call, or of a run ([Runner.Outcome]).
// InputTokens counts the input not read from the cache, for every
// provider (OpenAI's prompt_tokens minus its cached_tokens), so that no
// token is counted twice.
type Usage struct {
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
}

// Add returns u plus v.
func (u Usage) Add(v Usage) Usage {
	return Usage{InputTokens: u.InputTokens + v.InputTokens, OutputTokens: u.OutputTokens + v.OutputTokens,
		CacheReadTokens: u.CacheReadTokens + v.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens + v.CacheWriteTokens}
}

// Total returns every token counted.
func (u Usage) Total() int64 {
	return u.InputTokens + u.OutputTokens + u.CacheReadTokens + u.CacheWriteTokens
}

// StreamEnd is what a provider knows once a stream has ended.
type StreamEnd struct {
	// ID is the provider's ID of the response.
	ID string
	// Model is the model that answered.
	Model string
	// StopReason says why the model stopped.
	StopReason StopReason
	// Usage counts the call's tokens, when the provider reports them.
	Usage Usage
}
