package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/agent"
	"github.com/toolgate/toolgate/retry"
)

func TestGenerate(t *testing.T) {
	text := func(s string) agent.Part { return agent.Text(s) }
	tests := []struct {
		name      string
		script    string
		want      agent.Message
		wantStop  agent.StopReason
		wantCalls []string // IDs OnToolCall received, in order
		wantErr   error    // an errors.Is target; or
		wantClass retry.Class
		wantType  func(error) bool
		// geminiWant, when not nil, is want for Gemini, which sends each
		// call whole, its arguments an object (re-encoded compact).
		geminiWant *agent.Message
	}{
		{
			name:     "plain text",
			script:   "plain_text",
			want:     agent.Message{Role: agent.RoleAssistant, Parts: []agent.Part{text("Hello, world!")}},
			wantStop: agent.StopEnd,
		},
		{
			name:   "thinking",
			script: "thinking",
			want: agent.Message{Role: agent.RoleAssistant, Parts: []agent.Part{
				{Type: agent.PartThinking, Text: "Let me think: 2 + 2 is 4."},
				text("The answer is 4."),
			}},
			wantStop: agent.StopEnd,
		},
		{
			name:   "tool call then text",
			script: "tool_then_text",
			want: agent.Message{Role: agent.RoleAssistant, Parts: []agent.Part{text("Looking it up.")},
				ToolCalls: []agent.ToolCall{{Name: "lookup", Arguments: `{"city": "Rome"}`}}},
			geminiWant: &agent.Message{Role: agent.RoleAssistant, Parts: []agent.Part{text("Looking it up.")},
				ToolCalls: []agent.ToolCall{{Name: "lookup", Arguments: `{"city":"Rome"}`}}},
			wantStop:  agent.StopToolUse,
			wantCalls: []string{"1"},
		},
		{
			name:   "malformed tool-call JSON is delivered at the end as streamed",
			script: "malformed_args",
			want: agent.Message{Role: agent.RoleAssistant,
				ToolCalls: []agent.ToolCall{{Name: "lookup", Arguments: `{"city": "Rome",,`}}},
			wantStop:  agent.StopToolUse,
			wantCalls: []string{"bad"},
		},
		{
			name:   "max_tokens with a half tool call delivers no call",
			script: "max_tokens",
			want: agent.Message{Role: agent.RoleAssistant, Parts: []agent.Part{text("I will write the file.")},
				ToolCalls: []agent.ToolCall{{Name: "lookup", Arguments: `{"city": "Lon`}}},
			geminiWant: &agent.Message{Role: agent.RoleAssistant, Parts: []agent.Part{text("I will write the file.")}},
			wantStop:   agent.StopLength,
		},
		{
			name:     "empty response",
			script:   "empty",
			wantType: func(err error) bool { _, ok := errors.AsType[*agent.EmptyResponseError](err); return ok },
		},
		{
			name:      "stream cut mid-way",
			script:    "cut",
			wantClass: retry.Network,
			wantType: func(err error) bool {
				ie, ok := errors.AsType[*agent.IncompleteError](err)
				return ok && ie.Received.Text() == "The first half"
			},
		},
		{
			name:      "an error event mid-stream",
			script:    "overloaded",
			wantClass: retry.Unavailable,
			wantType: func(err error) bool {
				ie, ok := errors.AsType[*agent.IncompleteError](err)
				return ok && ie.Received.Text() == "Partial"
			},
		},
	}
	for _, kind := range streamFormats {
		for _, tc := range tests {
			if kind == "gemini" && tc.script == "malformed_args" {
				continue // no JSON text to malform: TestGeminiMalformedFunctionCall
			}
			want := tc.want
			if kind == "gemini" && tc.geminiWant != nil {
				want = *tc.geminiWant
			}
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				f := newFakeProvider(t, kind, script(t, kind, tc.script))
				var calls []string
				var parts int
				res, err := agent.Generate(t.Context(), f.provider(), &agent.Request{Messages: []agent.Message{agent.UserText("hi")}}, &agent.GenerateOptions{
					OnPart:     func(agent.Fragment) { parts++ },
					OnToolCall: func(c agent.ToolCall) { calls = append(calls, c.ID) },
					Retry:      noRetry,
				})
				if tc.wantType != nil || tc.wantClass != "" {
					if err == nil {
						t.Fatalf("Generate() = %+v, want an error", res.Message)
					}
					if tc.wantType != nil && !tc.wantType(err) {
						t.Errorf("Generate() error = %v (%T), not of the expected type", err, err)
					}
					if tc.wantClass != "" && retry.Classify(err) != tc.wantClass {
						t.Errorf("Classify(Generate() error) = %v, want %v (error %v)", retry.Classify(err), tc.wantClass, err)
					}
					return
				}
				if err != nil {
					t.Fatalf("Generate() error = %v", err)
				}
				got := res.Message
				for i := range got.ToolCalls {
					got.ToolCalls[i].ID = ""
				}
				for i := range got.Parts {
					got.Parts[i].Signature = "" // checked below
				}
				for i := range got.ToolCalls {
					got.ToolCalls[i].Signature = "" // checked in TestGeminiThoughtSignatures
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("Generate() message mismatch (-want +got):\n%s", diff)
				}
				if res.StopReason != tc.wantStop {
					t.Errorf("Generate() stop = %q, want %q", res.StopReason, tc.wantStop)
				}
				if parts == 0 {
					t.Error("OnPart was never called")
				}
				if len(calls) != len(tc.wantCalls) {
					t.Errorf("OnToolCall got %v, want %d calls", calls, len(tc.wantCalls))
				}
				if res.Usage.InputTokens != 25 || res.Usage.OutputTokens == 0 {
					t.Errorf("Usage = %+v, want 25 input tokens and some output", res.Usage)
				}
			})
		}
	}
}

func TestGenerateKeepsTheThinkingSignature(t *testing.T) {
	f := newFakeProvider(t, "anthropic", script(t, "anthropic", "thinking"))
	res, err := agent.Generate(t.Context(), f.provider(), &agent.Request{Messages: []agent.Message{agent.UserText("2+2?")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	const sig = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"
	if got := res.Message.Parts[0].Signature; got != sig {
		t.Fatalf("thinking signature = %q, want %q", got, sig)
	}
	// The signature goes back with its thinking on the next request.
	f2 := newFakeProvider(t, "anthropic", script(t, "anthropic", "plain_text"))
	_, err = agent.Generate(t.Context(), f2.provider(), &agent.Request{Messages: []agent.Message{agent.UserText("2+2?"), res.Message, agent.UserText("thanks")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Messages []struct {
			Role    string `json:"role"`
			Content []struct {
				Type      string `json:"type"`
				Thinking  string `json:"thinking"`
				Signature string `json:"signature"`
			} `json:"content"`
		} `json:"messages"`
	}
	decode(t, f2.Requests()[0], &body)
	b := body.Messages[1].Content[0]
	if body.Messages[1].Role != "assistant" || b.Type != "thinking" || b.Signature != sig || b.Thinking != "Let me think: 2 + 2 is 4." {
		t.Errorf("the assistant message was sent back as %+v, want its thinking block with the signature", body.Messages[1])
	}
}

func TestGenerateParallelToolCallsInterleaved(t *testing.T) {
	for _, kind := range streamFormats {
		t.Run(kind, func(t *testing.T) {
			f := newFakeProvider(t, kind, script(t, kind, "parallel_tools"))
			release := f.barrier("A started")
			var calls []agent.ToolCall
			res, err := agent.Generate(t.Context(), f.provider(), &agent.Request{Messages: []agent.Message{agent.UserText("weather?")}}, &agent.GenerateOptions{
				OnToolCall: func(c agent.ToolCall) {
					calls = append(calls, c)
					if len(calls) == 1 {
						// The stream holds its second call's end until the
						// first call is delivered: this proves delivery
						// before the stream ends.
						close(release)
					}
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			want := []agent.ToolCall{{Name: "lookup", Arguments: `{"city": "Paris"}`}, {Name: "lookup", Arguments: `{"city": "Oslo"}`}}
			if kind == "gemini" {
				want = []agent.ToolCall{{Name: "lookup", Arguments: `{"city":"Paris"}`}, {Name: "lookup", Arguments: `{"city":"Oslo"}`}}
			}
			strip := func(cs []agent.ToolCall) []agent.ToolCall {
				out := slices.Clone(cs)
				for i := range out {
					out[i].ID, out[i].Signature = "", ""
				}
				return out
			}
			if diff := cmp.Diff(want, strip(calls)); diff != "" {
				t.Errorf("OnToolCall order mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want, strip(res.Message.ToolCalls)); diff != "" {
				t.Errorf("message tool calls mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGenerateRetriesRateLimitHonouringRetryAfter(t *testing.T) {
	for _, kind := range streamFormats {
		t.Run(kind, func(t *testing.T) {
			limited := reply{status: http.StatusTooManyRequests, header: map[string]string{"Retry-After": "1"},
				body: `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`}
			f := newFakeProvider(t, kind, limited, script(t, kind, "plain_text"))
			var attempts []time.Time
			var ev agent.Events
			ev.On(agent.EventConnect, func(agent.Event) { attempts = append(attempts, time.Now()) })
			// Without Retry-After the wait would be at most 1 ms.
			policy := &retry.Policy{Attempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Second, On: []retry.Class{retry.RateLimited}}
			res, err := agent.Generate(t.Context(), f.provider(), &agent.Request{Messages: []agent.Message{agent.UserText("hi")}}, &agent.GenerateOptions{Retry: policy, Events: &ev})
			if err != nil {
				t.Fatalf("Generate() error = %v, want success after a retry", err)
			}
			if got := res.Message.Text(); got != "Hello, world!" {
				t.Errorf("text = %q", got)
			}
			if n := len(f.Requests()); n != 2 {
				t.Fatalf("requests = %d, want 2", n)
			}
			if gap := attempts[1].Sub(attempts[0]); gap < time.Second {
				t.Errorf("retried after %v, want at least the 1s Retry-After asked", gap)
			}
		})
	}
}

func TestGenerateClassifiesProviderErrors(t *testing.T) {
	tests := []struct {
		status int
		want   retry.Class
	}{
		{http.StatusTooManyRequests, retry.RateLimited},
		{529, retry.Unavailable},
		{http.StatusServiceUnavailable, retry.Unavailable},
		{http.StatusUnauthorized, retry.Permission},
		{http.StatusBadRequest, retry.Validation},
	}
	for _, kind := range streamFormats {
		for _, tc := range tests {
			t.Run(kind+"/"+http.StatusText(tc.status), func(t *testing.T) {
				f := newFakeProvider(t, kind, reply{status: tc.status, body: `{"type":"error","error":{"type":"x","message":"no"}}`})
				_, err := agent.Generate(t.Context(), f.provider(), &agent.Request{Messages: []agent.Message{agent.UserText("hi")}}, &agent.GenerateOptions{Retry: noRetry})
				if got := retry.Classify(err); got != tc.want {
					t.Errorf("Classify(%v) = %v, want %v", err, got, tc.want)
				}
			})
		}
	}
}

func TestGenerateEvents(t *testing.T) {
	f := newFakeProvider(t, "anthropic", script(t, "anthropic", "thinking"))
	var ev agent.Events
	var got []agent.EventType
	var snapshots []string
	for _, typ := range []agent.EventType{agent.EventConnect, agent.EventThinking, agent.EventSignature, agent.EventContentBlock, agent.EventMessage, agent.EventFinalMessage, agent.EventEnd} {
		ev.On(typ, func(e agent.Event) { got = append(got, e.Type) })
	}
	ev.On(agent.EventText, func(e agent.Event) { snapshots = append(snapshots, e.Snapshot) })
	once := 0
	ev.Once(agent.EventContentBlock, func(agent.Event) { once++ })
	off := ev.On(agent.EventEnd, func(agent.Event) { t.Error("a handler removed with Off was called") })
	ev.Off(off)
	if _, err := agent.Generate(t.Context(), f.provider(), &agent.Request{}, &agent.GenerateOptions{Events: &ev}); err != nil {
		t.Fatal(err)
	}
	want := []agent.EventType{agent.EventConnect, agent.EventThinking, agent.EventThinking, agent.EventSignature, agent.EventContentBlock, agent.EventContentBlock,
		agent.EventMessage, agent.EventFinalMessage, agent.EventEnd}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"The answer is 4."}, snapshots); diff != "" {
		t.Errorf("text snapshots mismatch (-want +got):\n%s", diff)
	}
	if once != 1 {
		t.Errorf("a Once handler ran %d times, want 1", once)
	}
}

func TestGenerateToolInputEvents(t *testing.T) {
	f := newFakeProvider(t, "anthropic", reply{body: anthropicSSE(turn{calls: []agent.ToolCall{{ID: "t1", Name: "lookup", Arguments: `{"city": "Paris", "days": [1, 2]}`}}})})
	var ev agent.Events
	var parsed []any
	ev.On(agent.EventToolInput, func(e agent.Event) { parsed = append(parsed, e.Parsed) })
	if _, err := agent.Generate(t.Context(), f.provider(), &agent.Request{}, &agent.GenerateOptions{Events: &ev}); err != nil {
		t.Fatal(err)
	}
	want := []any{
		map[string]any{"city": "Paris"}, // `{"city": "Paris", "da` parses up to the last whole member
		map[string]any{"city": "Paris", "days": []any{1.0, 2.0}},
	}
	if diff := cmp.Diff(want, parsed); diff != "" {
		t.Errorf("parsed snapshots mismatch (-want +got):\n%s", diff)
	}
}

func TestGenerateAbortAndErrorEvents(t *testing.T) {
	t.Run("abort", func(t *testing.T) {
		f := newFakeProvider(t, "anthropic", script(t, "anthropic", "parallel_tools"))
		ctx, cancel := context.WithCancel(t.Context())
		var ev agent.Events
		var got []agent.EventType
		for _, typ := range []agent.EventType{agent.EventAbort, agent.EventError, agent.EventEnd} {
			ev.On(typ, func(e agent.Event) { got = append(got, e.Type) })
		}
		// The stream stops at its barrier; the first complete call cancels.
		_, err := agent.Generate(ctx, f.provider(), &agent.Request{}, &agent.GenerateOptions{Events: &ev, OnToolCall: func(agent.ToolCall) { cancel() }})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Generate() error = %v, want context.Canceled", err)
		}
		if diff := cmp.Diff([]agent.EventType{agent.EventAbort, agent.EventEnd}, got); diff != "" {
			t.Errorf("events mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("error", func(t *testing.T) {
		f := newFakeProvider(t, "openai", script(t, "openai", "cut"))
		var ev agent.Events
		var got []agent.EventType
		var text string
		for _, typ := range []agent.EventType{agent.EventAbort, agent.EventError, agent.EventEnd} {
			ev.On(typ, func(e agent.Event) { got = append(got, e.Type) })
		}
		ev.On(agent.EventText, func(e agent.Event) { text = e.Snapshot })
		if _, err := agent.Generate(t.Context(), f.provider(), &agent.Request{}, &agent.GenerateOptions{Events: &ev, Retry: noRetry}); err == nil {
			t.Fatal("Generate() succeeded on a cut stream")
		}
		if diff := cmp.Diff([]agent.EventType{agent.EventError, agent.EventEnd}, got); diff != "" {
			t.Errorf("events mismatch (-want +got):\n%s", diff)
		}
		if text != "The first half" {
			t.Errorf("text snapshot before the cut = %q", text)
		}
	})
}

// TestGenerateOpenAICompatibleQuirks: some compatible servers repeat a tool
// call's id and name in every fragment, or send no id at all.
func TestGenerateOpenAICompatibleQuirks(t *testing.T) {
	var b strings.Builder
	sseEvent(&b, "", openaiChunk(map[string]any{"role": "assistant"}, nil))
	for _, piece := range []string{`{"city":`, ` "Rome"}`} {
		sseEvent(&b, "", openaiChunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": "call_x", "type": "function", "function": map[string]any{"name": "lookup", "arguments": piece}}}}, nil))
	}
	sseEvent(&b, "", openaiChunk(map[string]any{"tool_calls": []any{map[string]any{"index": 1, "type": "function", "function": map[string]any{"name": "ping", "arguments": "{}"}}}}, nil))
	sseEvent(&b, "", openaiChunk(map[string]any{}, "tool_calls"))
	b.WriteString("data: [DONE]\n\n")
	f := newFakeProvider(t, "openai", reply{body: b.String()})
	res, err := agent.Generate(t.Context(), f.provider(), &agent.Request{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []agent.ToolCall{{ID: "call_x", Name: "lookup", Arguments: `{"city": "Rome"}`}, {ID: "call_3", Name: "ping", Arguments: `{}`}}
	if diff := cmp.Diff(want, res.Message.ToolCalls); diff != "" {
		t.Errorf("tool calls mismatch (-want +got):\n%s", diff)
	}
}

func TestGenerateSendsModelOptions(t *testing.T) {
	temp := 0.25
	opts := agent.ModelOptions{Model: "other-model", MaxTokens: 4000, Temperature: &temp, ThinkingBudget: 2048}
	tools := []agent.ToolSpec{{Name: "lookup", Description: "Looks up", InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"],"additionalProperties":false}`)}}
	for _, kind := range providers {
		t.Run(kind, func(t *testing.T) {
			f := newFakeProvider(t, kind, script(t, kind, "plain_text"))
			if _, err := agent.Generate(t.Context(), f.provider(), &agent.Request{System: "sys", Tools: tools, Options: opts}, nil); err != nil {
				t.Fatal(err)
			}
			var body map[string]any
			decode(t, f.Requests()[0], &body)
			check := func(key string, want any) {
				t.Helper()
				if diff := cmp.Diff(want, body[key]); diff != "" {
					t.Errorf("request %s mismatch (-want +got):\n%s", key, diff)
				}
			}
			check("model", "other-model")
			check("temperature", 0.25)
			check("stream", true)
			if kind == "anthropic" {
				check("max_tokens", 4000.0)
				check("thinking", map[string]any{"type": "enabled", "budget_tokens": 2048.0})
				check("system", []any{map[string]any{"type": "text", "text": "sys"}})
				check("tools", []any{map[string]any{"name": "lookup", "description": "Looks up", "input_schema": map[string]any{
					"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}, "required": []any{"q"}, "additionalProperties": false}}})
				return
			}
			check("max_completion_tokens", 4000.0)
			check("tools", []any{map[string]any{"type": "function", "function": map[string]any{"name": "lookup", "description": "Looks up", "parameters": map[string]any{
				"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}, "required": []any{"q"}, "additionalProperties": false}}}})
		})
	}
}
