package agent_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/agent"
	"github.com/toolgate/toolgate/retry"
)

// geminiSig is the thought signature the recorded Gemini streams carry.
const geminiSig = "BwgJCgsMDQ4PEBESExQVFhcYGRobHB0e"

// geminiChunk renders one streamed GenerateContentResponse as its SSE line.
func geminiChunk(candidate map[string]any, usage map[string]any) string {
	j, err := json.Marshal(map[string]any{"candidates": []any{candidate}, "usageMetadata": usage, "modelVersion": "gemini-test", "responseId": "r1"})
	if err != nil {
		panic(err)
	}
	return "data: " + string(j) + "\n\n"
}

// TestGeminiRun runs two steps against Gemini's recorded stream format:
// the request goes to streamGenerateContent with alt=sse; the second
// carries the first turn's text and its function call with its thought
// signature (without the made-up ID), then the function response named
// after the call, the system prompt as the system instruction, and the
// tool as a function declaration with its JSON Schema.
func TestGeminiRun(t *testing.T) {
	f := newFakeProvider(t, "gemini", script(t, "gemini", "tool_then_text"), script(t, "gemini", "plain_text"))
	ts := &fakeTools{fns: map[string]func(agent.ToolCall) (string, error){"lookup": func(agent.ToolCall) (string, error) { return "sunny", nil }}}
	r := agent.NewRunner(f.provider(), ts, agent.Params{System: "be brief", Messages: []agent.Message{agent.UserText("weather in Rome?")}}, nil)
	final, err := r.RunUntilDone(t.Context())
	if err != nil || final.Text() != "Hello, world!" {
		t.Fatalf("final = %q, %v", final.Text(), err)
	}
	if got, want := f.URLs()[0], "/v1beta/models/gemini-test:streamGenerateContent?alt=sse"; got != want {
		t.Errorf("request URI = %q, want %q", got, want)
	}
	var body map[string]any
	decode(t, f.Requests()[1], &body)
	want := map[string]any{
		"contents": []any{
			map[string]any{"role": "user", "parts": []any{map[string]any{"text": "weather in Rome?"}}},
			map[string]any{"role": "model", "parts": []any{
				map[string]any{"text": "Looking it up."},
				map[string]any{"functionCall": map[string]any{"name": "lookup", "args": map[string]any{"city": "Rome"}}, "thoughtSignature": geminiSig},
			}},
			map[string]any{"role": "user", "parts": []any{
				map[string]any{"functionResponse": map[string]any{"name": "lookup", "response": map[string]any{"output": "sunny"}}},
			}},
		},
		"systemInstruction": map[string]any{"role": "user", "parts": []any{map[string]any{"text": "be brief"}}},
		"tools": []any{map[string]any{"functionDeclarations": []any{map[string]any{
			"name": "lookup", "description": "test tool lookup", "parametersJsonSchema": map[string]any{"type": "object"}}}}},
	}
	for key, w := range want {
		if diff := cmp.Diff(w, body[key]); diff != "" {
			t.Errorf("second request's %s (-want +got):\n%s", key, diff)
		}
	}
	calls := ts.Calls()
	if len(calls) != 1 || !strings.HasPrefix(calls[0].ID, "gemini_call_") {
		t.Errorf("calls = %+v, want one with a made-up ID", calls)
	}
}

// TestGeminiRequestControls maps the model options: sampling, bounds,
// stop sequences, thinking, tool choice (FunctionCallingConfig modes and
// allowed names) and structured output (a JSON Schema with the JSON media
// type); the end user, which the API has no field for, is a typed error.
func TestGeminiRequestControls(t *testing.T) {
	temp, topP, topK := 0.25, 0.5, int64(40)
	schema := json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"]}`)
	choices := []struct {
		choice agent.ToolChoice
		want   any
	}{
		{agent.ToolChoice{Mode: agent.ToolChoiceTool, Name: "lookup"}, map[string]any{"functionCallingConfig": map[string]any{"mode": "ANY", "allowedFunctionNames": []any{"lookup"}}}},
		{agent.ToolChoice{Mode: agent.ToolChoiceRequired}, map[string]any{"functionCallingConfig": map[string]any{"mode": "ANY"}}},
		{agent.ToolChoice{Mode: agent.ToolChoiceNone}, map[string]any{"functionCallingConfig": map[string]any{"mode": "NONE"}}},
		{agent.ToolChoice{Mode: agent.ToolChoiceAuto}, map[string]any{"functionCallingConfig": map[string]any{"mode": "AUTO"}}},
		{agent.ToolChoice{}, nil},
	}
	for _, tc := range choices {
		t.Run(string(tc.choice.Mode), func(t *testing.T) {
			f := newFakeProvider(t, "gemini", script(t, "gemini", "plain_text"))
			opts := agent.ModelOptions{Model: "other-model", MaxTokens: 4000, Temperature: &temp, TopP: &topP, TopK: &topK,
				StopSequences: []string{"END"}, ThinkingBudget: 2048, ToolChoice: tc.choice}
			req := &agent.Request{Messages: []agent.Message{agent.UserText("hi")}, Options: opts, Output: &agent.OutputSchema{Schema: schema},
				Tools: []agent.ToolSpec{{Name: "lookup", InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)}}}
			if _, err := agent.Generate(t.Context(), f.provider(), req, &agent.GenerateOptions{Retry: noRetry}); err != nil {
				t.Fatal(err)
			}
			if got := f.URLs()[0]; !strings.HasPrefix(got, "/v1beta/models/other-model:") {
				t.Errorf("request URI = %q, want the model of the options", got)
			}
			var body map[string]any
			decode(t, f.Requests()[0], &body)
			wantGen := map[string]any{"maxOutputTokens": 4000.0, "temperature": 0.25, "topP": 0.5, "topK": 40.0, "stopSequences": []any{"END"},
				"thinkingConfig":   map[string]any{"includeThoughts": true, "thinkingBudget": 2048.0},
				"responseMimeType": "application/json", "responseJsonSchema": map[string]any{"type": "object",
					"properties": map[string]any{"answer": map[string]any{"type": "string"}}, "required": []any{"answer"}}}
			if diff := cmp.Diff(wantGen, body["generationConfig"]); diff != "" {
				t.Errorf("generationConfig (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, body["toolConfig"]); diff != "" {
				t.Errorf("toolConfig (-want +got):\n%s", diff)
			}
		})
	}
	f := newFakeProvider(t, "gemini")
	_, err := agent.Generate(t.Context(), f.provider(), &agent.Request{Options: agent.ModelOptions{User: "u1"}}, &agent.GenerateOptions{Retry: noRetry})
	if ue, ok := errors.AsType[*agent.UnsupportedError](err); !ok || ue.Option != "user" {
		t.Errorf("user: err = %v, want an UnsupportedError", err)
	}
}

// TestGeminiThoughtSignatures keeps the signatures Gemini puts on a text
// part and on a function call, and sends each back on its part; thoughts
// come as thinking parts.
func TestGeminiThoughtSignatures(t *testing.T) {
	f := newFakeProvider(t, "gemini", script(t, "gemini", "thinking"), script(t, "gemini", "tool_then_text"), script(t, "gemini", "plain_text"))
	think, err := agent.Generate(t.Context(), f.provider(), &agent.Request{Messages: []agent.Message{agent.UserText("2+2?")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantThink := []agent.Part{{Type: agent.PartThinking, Text: "Let me think: 2 + 2 is 4."}, {Type: agent.PartText, Text: "The answer is 4.", Signature: geminiSig}}
	if diff := cmp.Diff(wantThink, think.Message.Parts); diff != "" {
		t.Errorf("thinking turn's parts (-want +got):\n%s", diff)
	}
	call, err := agent.Generate(t.Context(), f.provider(), &agent.Request{Messages: []agent.Message{agent.UserText("weather?")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := call.Message.ToolCalls[0].Signature; got != geminiSig {
		t.Fatalf("tool call signature = %q, want %q", got, geminiSig)
	}
	history := []agent.Message{agent.UserText("2+2?"), think.Message, agent.UserText("weather?"), call.Message,
		agent.ToolMessage(agent.ToolResult{CallID: call.Message.ToolCalls[0].ID, Content: []agent.Part{agent.Text("no data")}, IsError: true})}
	if _, err := agent.Generate(t.Context(), f.provider(), &agent.Request{Messages: history}, nil); err != nil {
		t.Fatal(err)
	}
	var body struct {
		Contents []struct {
			Role  string           `json:"role"`
			Parts []map[string]any `json:"parts"`
		} `json:"contents"`
	}
	decode(t, f.Requests()[2], &body)
	if len(body.Contents) != 5 {
		t.Fatalf("sent %d contents, want 5: %+v", len(body.Contents), body.Contents)
	}
	// Thinking without a signature is not sent back; the signed text is.
	if diff := cmp.Diff([]map[string]any{{"text": "The answer is 4.", "thoughtSignature": geminiSig}}, body.Contents[1].Parts); diff != "" {
		t.Errorf("thinking turn sent back as (-want +got):\n%s", diff)
	}
	if got := body.Contents[3].Parts[1]["thoughtSignature"]; got != geminiSig {
		t.Errorf("function call part sent back as %v, want its signature", body.Contents[3].Parts[1])
	}
	wantResp := map[string]any{"functionResponse": map[string]any{"name": "lookup", "response": map[string]any{"error": "no data"}}}
	if diff := cmp.Diff(wantResp, body.Contents[4].Parts[0]); diff != "" {
		t.Errorf("failed call's response (-want +got):\n%s", diff)
	}
}

// TestGeminiParallelCallIDs gives each call of a response without IDs its
// own stable ID, made of the response's ID and the call's place.
func TestGeminiParallelCallIDs(t *testing.T) {
	f := newFakeProvider(t, "gemini", script(t, "gemini", "parallel_tools"))
	close(f.barrier("A started"))
	res, err := agent.Generate(t.Context(), f.provider(), &agent.Request{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range res.Message.ToolCalls {
		ids = append(ids, c.ID)
	}
	want := []string{"gemini_call_Jq0rafLDBpGmxN8P1a2b3c_0", "gemini_call_Jq0rafLDBpGmxN8P1a2b3c_1"}
	if diff := cmp.Diff(want, ids); diff != "" {
		t.Errorf("call IDs (-want +got):\n%s", diff)
	}
	if res.StopReason != agent.StopToolUse {
		t.Errorf("stop = %q, want tool_use", res.StopReason)
	}
}

// TestGeminiMalformedFunctionCall: a call the model failed to write
// (finishReason MALFORMED_FUNCTION_CALL, no part) and a chunk whose call
// arguments are not an object are errors of class unavailable (asking
// again usually works) that say what happened.
func TestGeminiMalformedFunctionCall(t *testing.T) {
	for name, want := range map[string]string{
		"malformed_call": "no valid function call (finishReason MALFORMED_FUNCTION_CALL)",
		"malformed_args": "functionCall.args is a JSON string",
	} {
		t.Run(name, func(t *testing.T) {
			f := newFakeProvider(t, "gemini", script(t, "gemini", name))
			_, err := agent.Generate(t.Context(), f.provider(), &agent.Request{}, &agent.GenerateOptions{Retry: noRetry})
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("Generate() error = %v, want it to say %q", err, want)
			}
			if c := retry.Classify(err); c != retry.Unavailable {
				t.Errorf("Classify(%v) = %v, want unavailable", err, c)
			}
		})
	}
}

// TestGeminiUsageAndStops maps usage (the prompt count less the cached
// tokens is input, thoughts are output) and the finish reasons; a blocked
// prompt is a validation error.
func TestGeminiUsageAndStops(t *testing.T) {
	usage := map[string]any{"promptTokenCount": 100, "cachedContentTokenCount": 60, "candidatesTokenCount": 20, "thoughtsTokenCount": 30, "totalTokenCount": 150}
	text := map[string]any{"role": "model", "parts": []any{map[string]any{"text": "Some"}}}
	for _, tc := range []struct {
		finish string
		want   agent.StopReason
	}{{"STOP", agent.StopEnd}, {"MAX_TOKENS", agent.StopLength}, {"SAFETY", agent.StopFiltered}, {"RECITATION", agent.StopFiltered}, {"PROHIBITED_CONTENT", agent.StopFiltered}} {
		t.Run(tc.finish, func(t *testing.T) {
			f := newFakeProvider(t, "gemini", reply{body: geminiChunk(map[string]any{"content": text, "finishReason": tc.finish}, usage)})
			res, err := agent.Generate(t.Context(), f.provider(), &agent.Request{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.StopReason != tc.want {
				t.Errorf("stop = %q, want %q", res.StopReason, tc.want)
			}
			if want := (agent.Usage{InputTokens: 40, OutputTokens: 50, CacheReadTokens: 60}); res.Usage != want {
				t.Errorf("usage = %+v, want %+v", res.Usage, want)
			}
			if res.ID != "r1" || res.Model != "gemini-test" {
				t.Errorf("id %q, model %q", res.ID, res.Model)
			}
		})
	}
	blocked := `data: {"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":9,"totalTokenCount":9},"responseId":"r2"}` + "\n\n"
	f := newFakeProvider(t, "gemini", reply{body: blocked})
	_, err := agent.Generate(t.Context(), f.provider(), &agent.Request{}, &agent.GenerateOptions{Retry: noRetry})
	if retry.Classify(err) != retry.Validation || !strings.Contains(err.Error(), "blocked (blockReason SAFETY)") {
		t.Errorf("blocked prompt: err = %v, want a validation error naming the reason", err)
	}
}

// TestGeminiErrorDetails reads Google's error details: a 429's RetryInfo
// gives the wait when there is no Retry-After, and API_KEY_INVALID (a
// 400) is a permission error; a key the server echoes is redacted.
func TestGeminiErrorDetails(t *testing.T) {
	const key = "AIza-test-0123456789"
	f := newFakeProvider(t, "gemini",
		reply{status: http.StatusTooManyRequests, body: `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED",
			"details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generate_content_free_tier_requests"}]},
			{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37s"}]}}`},
		reply{status: http.StatusBadRequest, body: `{"error":{"code":400,"message":"API key not valid: ` + key + `","status":"INVALID_ARGUMENT",
			"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}`})
	p, err := agent.NewGemini(agent.GeminiOptions{Model: "gemini-test", APIKey: key, BaseURL: f.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, err = agent.Generate(t.Context(), p, &agent.Request{}, &agent.GenerateOptions{Retry: noRetry})
	re, ok := errors.AsType[*retry.Error](err)
	if !ok || re.Class != retry.RateLimited || re.RetryAfter != 37*time.Second || re.Status != 429 {
		t.Errorf("429: err = %#v, want rate_limited waiting 37s", err)
	}
	_, err = agent.Generate(t.Context(), p, &agent.Request{}, &agent.GenerateOptions{Retry: noRetry})
	if retry.Classify(err) != retry.Permission || !strings.Contains(err.Error(), "check the API key") {
		t.Errorf("invalid key: err = %v, want a permission error", err)
	}
	if strings.Contains(err.Error(), key) {
		t.Errorf("invalid key: err = %q, which holds the key", err)
	}
}

// TestGeminiNeedsAKey: without a key (and none in the environment) the
// provider says where to put one.
func TestGeminiNeedsAKey(t *testing.T) {
	t.Setenv("GEMINI_API_KEY", "")
	t.Setenv("GOOGLE_API_KEY", "")
	_, err := agent.NewGemini(agent.GeminiOptions{Model: "gemini-test"})
	if !errors.Is(err, agent.ErrNoAPIKey) || !strings.Contains(err.Error(), "GEMINI_API_KEY") {
		t.Errorf("NewGemini() error = %v, want ErrNoAPIKey naming GEMINI_API_KEY", err)
	}
	t.Setenv("GEMINI_API_KEY", "from-env")
	if _, err := agent.NewGemini(agent.GeminiOptions{Model: "gemini-test"}); err != nil {
		t.Errorf("NewGemini() with GEMINI_API_KEY set: %v", err)
	}
}
