package agent_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/agent"
	"github.com/toolgate/toolgate/retry"
)

// barrierTimeout bounds how long the fake server holds a stream at a
// barrier; a test whose barrier is never released fails instead of hanging.
const barrierTimeout = 10 * time.Second

// reply is one response of the fake provider.
type reply struct {
	status int               // 0 means 200 with an SSE body
	header map[string]string // extra response headers
	body   string            // the SSE script, or the error body
}

// fakeProvider is an httptest server that answers each model request with
// the next scripted reply, replaying SSE in the provider's recorded wire
// format, and records every request body. In a script, the SSE comment
// line ": wait NAME" flushes what came before and holds the rest until
// the test releases barrier NAME; ": cut" aborts the connection there.
type fakeProvider struct {
	t    *testing.T
	kind string // "anthropic", "openai", "responses" or "gemini"
	srv  *httptest.Server

	mu       sync.Mutex // guards replies, requests, urls and barriers
	replies  []reply
	requests []json.RawMessage
	urls     []string // the request URIs (path and query)
	barriers map[string]chan struct{}
}

func newFakeProvider(t *testing.T, kind string, replies ...reply) *fakeProvider {
	t.Helper()
	f := &fakeProvider{t: t, kind: kind, replies: replies, barriers: make(map[string]chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// barrier returns the channel that releases barrier name (close it).
func (f *fakeProvider) barrier(name string) chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch, ok := f.barriers[name]
	if !ok {
		ch = make(chan struct{})
		f.barriers[name] = ch
	}
	return ch
}

// URLs returns the request URIs received so far.
func (f *fakeProvider) URLs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.urls...)
}

// Requests returns the request bodies received so far.
func (f *fakeProvider) Requests() []json.RawMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]json.RawMessage(nil), f.requests...)
}

func (f *fakeProvider) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.requests = append(f.requests, body)
	f.urls = append(f.urls, r.URL.RequestURI())
	var rp reply
	ok := len(f.replies) > 0
	if ok {
		rp, f.replies = f.replies[0], f.replies[1:]
	}
	f.mu.Unlock()
	if !ok {
		f.t.Errorf("fake %s: unexpected request %d: %s", f.kind, len(f.Requests()), body)
		http.Error(w, `{"error":{"type":"api_error","message":"no more scripted replies"}}`, http.StatusInternalServerError)
		return
	}
	for k, v := range rp.header {
		w.Header().Set(k, v)
	}
	if rp.status != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rp.status)
		io.WriteString(w, rp.body)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	sc := bufio.NewScanner(strings.NewReader(rp.body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if name, ok := strings.CutPrefix(line, ": wait "); ok {
			fl.Flush()
			select {
			case <-f.barrier(name):
			case <-r.Context().Done():
				return
			case <-time.After(barrierTimeout):
				f.t.Errorf("fake %s: barrier %q was not released within %v", f.kind, name, barrierTimeout)
				return
			}
			continue
		}
		if line == ": cut" {
			fl.Flush()
			panic(http.ErrAbortHandler)
		}
		io.WriteString(w, line+"\n")
	}
	fl.Flush()
}

// provider returns an agent provider of f's kind pointed at f.
func (f *fakeProvider) provider() agent.Provider {
	f.t.Helper()
	var p agent.Provider
	var err error
	switch f.kind {
	case "anthropic":
		p, err = agent.NewAnthropic(agent.AnthropicOptions{Model: "claude-test", APIKey: "test-key", BaseURL: f.srv.URL})
	case "gemini":
		p, err = agent.NewGemini(agent.GeminiOptions{Model: "gemini-test", APIKey: "test-key", BaseURL: f.srv.URL})
	case "responses":
		p, err = agent.NewOpenAIResponses(agent.OpenAIOptions{Model: "gpt-test", APIKey: "test-key", BaseURL: f.srv.URL + "/v1"})
	default:
		p, err = agent.NewOpenAI(agent.OpenAIOptions{Model: "gpt-test", APIKey: "test-key", BaseURL: f.srv.URL + "/v1"})
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return p
}

// script reads testdata/<kind>/<name>.sse.
func script(t *testing.T, kind, name string) reply {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", kind, name+".sse"))
	if err != nil {
		t.Fatal(err)
	}
	return reply{body: string(b)}
}

// turn is one scripted model turn: text, then tool calls.
type turn struct {
	text  string
	calls []agent.ToolCall
	// stop overrides the stop reason (the provider's own word).
	stop string
	// in, cacheRead and out override the usage (100, 0, 20).
	in, cacheRead, out int
}

func (tr turn) usage() (in, cacheRead, out int) {
	in, out = 100, 20
	if tr.in > 0 {
		in = tr.in
	}
	if tr.out > 0 {
		out = tr.out
	}
	return in, tr.cacheRead, out
}

// streamed renders tr in kind's wire format, each call's arguments in two
// fragments.
func streamed(kind string, tr turn) reply {
	if kind == "anthropic" {
		return reply{body: anthropicSSE(tr)}
	}
	return reply{body: openaiSSE(tr)}
}

func sseEvent(b *strings.Builder, event string, data any) {
	j, err := json.Marshal(data)
	if err != nil {
		panic(err)
	}
	if event != "" {
		fmt.Fprintf(b, "event: %s\n", event)
	}
	fmt.Fprintf(b, "data: %s\n\n", j)
}

func halves(s string) (string, string) { return s[:len(s)/2], s[len(s)/2:] }

func anthropicSSE(tr turn) string {
	var b strings.Builder
	in, cacheRead, out := tr.usage()
	sseEvent(&b, "message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_test", "type": "message", "role": "assistant", "model": "claude-test", "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": in, "output_tokens": 1, "cache_read_input_tokens": cacheRead}}})
	i := 0
	if tr.text != "" {
		sseEvent(&b, "content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "text", "text": ""}})
		a, c := halves(tr.text)
		for _, piece := range []string{a, c} {
			sseEvent(&b, "content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "text_delta", "text": piece}})
		}
		sseEvent(&b, "content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
		i++
	}
	for _, c := range tr.calls {
		sseEvent(&b, "content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": map[string]any{}}})
		x, y := halves(c.Arguments)
		for _, piece := range []string{x, y} {
			sseEvent(&b, "content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": piece}})
		}
		sseEvent(&b, "content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
		i++
	}
	stop := "end_turn"
	if len(tr.calls) > 0 {
		stop = "tool_use"
	}
	if tr.stop != "" {
		stop = tr.stop
	}
	sseEvent(&b, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": out}})
	sseEvent(&b, "message_stop", map[string]any{"type": "message_stop"})
	return b.String()
}

func openaiChunk(delta map[string]any, finish any) map[string]any {
	return map[string]any{"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1700000000, "model": "gpt-test",
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
}

func openaiSSE(tr turn) string {
	var b strings.Builder
	sseEvent(&b, "", openaiChunk(map[string]any{"role": "assistant", "content": ""}, nil))
	if tr.text != "" {
		x, y := halves(tr.text)
		for _, piece := range []string{x, y} {
			sseEvent(&b, "", openaiChunk(map[string]any{"content": piece}, nil))
		}
	}
	for i, c := range tr.calls {
		x, y := halves(c.Arguments)
		sseEvent(&b, "", openaiChunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": x}}}}, nil))
		sseEvent(&b, "", openaiChunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": y}}}}, nil))
	}
	finish := "stop"
	if len(tr.calls) > 0 {
		finish = "tool_calls"
	}
	if tr.stop != "" {
		finish = tr.stop
	}
	in, cacheRead, out := tr.usage()
	sseEvent(&b, "", openaiChunk(map[string]any{}, finish))
	sseEvent(&b, "", map[string]any{"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1700000000, "model": "gpt-test", "choices": []any{},
		"usage": map[string]any{"prompt_tokens": in + cacheRead, "completion_tokens": out, "total_tokens": in + cacheRead + out,
			"prompt_tokens_details": map[string]any{"cached_tokens": cacheRead}}})
	b.WriteString("data: [DONE]\n\n")
	return b.String()
}

// fakeTools is a Toolset of scripted tools. Each tool's function gets the
// call and returns its text (an error makes an isError result).
type fakeTools struct {
	fns map[string]func(c agent.ToolCall) (string, error)
	// ctxFns are tools that see the call's context.
	ctxFns map[string]func(ctx context.Context) (string, error)

	mu    sync.Mutex // guards calls
	calls []agent.ToolCall
}

func (f *fakeTools) Tools(ctx context.Context) ([]agent.ToolSpec, error) {
	var out []agent.ToolSpec
	for name := range f.ctxFns {
		out = append(out, agent.ToolSpec{Name: name, Description: "test tool " + name, InputSchema: json.RawMessage(`{"type":"object"}`)})
	}
	for name := range f.fns {
		out = append(out, agent.ToolSpec{Name: name, Description: "test tool " + name, InputSchema: json.RawMessage(`{"type":"object"}`)})
	}
	slices.SortFunc(out, func(a, b agent.ToolSpec) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (f *fakeTools) Call(ctx context.Context, c agent.ToolCall) (agent.ToolResult, error) {
	f.mu.Lock()
	f.calls = append(f.calls, c)
	f.mu.Unlock()
	if fn, ok := f.ctxFns[c.Name]; ok {
		s, err := fn(ctx)
		if err != nil {
			return agent.ToolResult{}, err
		}
		return agent.ToolResult{Content: []agent.Part{agent.Text(s)}}, nil
	}
	fn, ok := f.fns[c.Name]
	if !ok {
		return agent.ToolResult{}, fmt.Errorf("unknown tool %q", c.Name)
	}
	s, err := fn(c)
	if err != nil {
		return agent.ToolResult{Content: []agent.Part{agent.Text(err.Error())}, IsError: true}, nil
	}
	return agent.ToolResult{Content: []agent.Part{agent.Text(s)}}, nil
}

// Calls returns the calls run so far.
func (f *fakeTools) Calls() []agent.ToolCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]agent.ToolCall(nil), f.calls...)
}

var providers = []string{"anthropic", "openai"}

// streamFormats are the providers whose recorded stream formats
// testdata holds: the two above, the OpenAI Responses API and Gemini.
var streamFormats = []string{"anthropic", "openai", "responses", "gemini"}

// noRetry is a retry policy that tries once.
var noRetry = &retry.Policy{Attempts: 1}

// decode unmarshals a request body.
func decode(t *testing.T, body json.RawMessage, v any) {
	t.Helper()
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("decoding the request %s: %v", body, err)
	}
}
