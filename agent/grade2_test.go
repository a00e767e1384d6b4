package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/agent"
)

// TestRequestControl: tool choice, sampling, stop sequences, the user id,
// the output schema and cache breakpoints reach each provider's request
// in its own fields; top_k, which OpenAI lacks, is a typed error.
func TestRequestControl(t *testing.T) {
	topP, topK := 0.5, int64(40)
	req := func() *agent.Request {
		return &agent.Request{
			System:   "sys",
			Tools:    []agent.ToolSpec{{Name: "echo"}, {Name: "other"}},
			Messages: []agent.Message{agent.UserText("one"), {Role: agent.RoleAssistant, Parts: []agent.Part{agent.Text("two")}}, agent.UserText("three")},
			Options: agent.ModelOptions{TopP: &topP, StopSequences: []string{"END"}, User: "u-1",
				ToolChoice: agent.ToolChoice{Mode: agent.ToolChoiceTool, Name: "echo"}},
			Output: &agent.OutputSchema{Schema: json.RawMessage(`{"type":"object"}`)},
			Cache:  agent.CacheHints{System: true, Tools: true, History: 2},
		}
	}
	t.Run("anthropic", func(t *testing.T) {
		f := newFakeProvider(t, "anthropic", streamed("anthropic", turn{text: "hi"}))
		r := req()
		r.Options.TopK = &topK
		if _, err := agent.Generate(t.Context(), f.provider(), r, nil); err != nil {
			t.Fatal(err)
		}
		var body struct {
			ToolChoice    map[string]any    `json:"tool_choice"`
			TopP          float64           `json:"top_p"`
			TopK          int64             `json:"top_k"`
			StopSequences []string          `json:"stop_sequences"`
			Metadata      map[string]string `json:"metadata"`
			System        []struct {
				Text         string         `json:"text"`
				CacheControl map[string]any `json:"cache_control"`
			} `json:"system"`
			Tools []struct {
				CacheControl map[string]any `json:"cache_control"`
			} `json:"tools"`
			Messages []struct {
				Content []struct {
					CacheControl map[string]any `json:"cache_control"`
				} `json:"content"`
			} `json:"messages"`
		}
		decode(t, f.Requests()[0], &body)
		if body.ToolChoice["type"] != "tool" || body.ToolChoice["name"] != "echo" || body.TopP != 0.5 || body.TopK != 40 ||
			!cmp.Equal(body.StopSequences, []string{"END"}) || body.Metadata["user_id"] != "u-1" {
			t.Errorf("request fields = %+v", body)
		}
		if len(body.System) != 1 || body.System[0].CacheControl == nil || !strings.Contains(body.System[0].Text, "JSON Schema") {
			t.Errorf("system = %+v, want the schema told and a cache breakpoint", body.System)
		}
		if body.Tools[0].CacheControl != nil || body.Tools[1].CacheControl == nil {
			t.Errorf("tools = %+v, want a breakpoint on the last", body.Tools)
		}
		if len(body.Messages) != 3 || body.Messages[1].Content[0].CacheControl == nil || body.Messages[2].Content[0].CacheControl != nil {
			t.Errorf("messages = %+v, want a breakpoint on the second (History: 2) only", body.Messages)
		}
	})
	t.Run("openai", func(t *testing.T) {
		f := newFakeProvider(t, "openai", streamed("openai", turn{text: "hi"}))
		if _, err := agent.Generate(t.Context(), f.provider(), req(), nil); err != nil {
			t.Fatal(err)
		}
		var body struct {
			ToolChoice     map[string]any `json:"tool_choice"`
			TopP           float64        `json:"top_p"`
			Stop           []string       `json:"stop"`
			User           string         `json:"user"`
			ResponseFormat map[string]any `json:"response_format"`
		}
		decode(t, f.Requests()[0], &body)
		if fn, _ := body.ToolChoice["function"].(map[string]any); fn["name"] != "echo" || body.TopP != 0.5 || !cmp.Equal(body.Stop, []string{"END"}) ||
			body.User != "u-1" || body.ResponseFormat["type"] != "json_schema" {
			t.Errorf("request fields = %+v", body)
		}
		r := req()
		r.Options.TopK = &topK
		_, err := agent.Generate(t.Context(), f.provider(), r, &agent.GenerateOptions{Retry: noRetry})
		if ue, ok := errors.AsType[*agent.UnsupportedError](err); !ok || ue.Option != "top_k" {
			t.Errorf("top_k on openai: err = %v, want an UnsupportedError", err)
		}
	})
}

// TestRunnerStructuredOutput: a final answer that breaks the output
// schema gets one repair round; a schema that does not compile is a
// typed error before any model call.
func TestRunnerStructuredOutput(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"answer":{"type":"integer"}},"required":["answer"]}`)
	f := newFakeProvider(t, "openai", streamed("openai", turn{text: `{"answer":"forty-two"}`}), streamed("openai", turn{text: `{"answer":42}`}))
	r := agent.NewRunner(f.provider(), nil, agent.Params{Messages: []agent.Message{agent.UserText("answer")}}, &agent.RunnerOptions{Output: &agent.OutputSchema{Schema: schema}})
	if _, err := r.RunUntilDone(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := string(r.Outcome().Output); got != `{"answer":42}` {
		t.Errorf("Output = %s", got)
	}
	sent := sentMessages(t, "openai", f.Requests()[1])
	if last := sent[len(sent)-1]; !strings.Contains(last, "/answer") {
		t.Errorf("the repair request ends with %q, want the violation", last)
	}

	f2 := newFakeProvider(t, "openai", streamed("openai", turn{text: `nope`}), streamed("openai", turn{text: `still nope`}))
	r2 := agent.NewRunner(f2.provider(), nil, agent.Params{Messages: []agent.Message{agent.UserText("answer")}}, &agent.RunnerOptions{Output: &agent.OutputSchema{Schema: schema}})
	if _, err := r2.RunUntilDone(t.Context()); !isType[*agent.OutputError](err) {
		t.Errorf("two bad answers: err = %v, want an OutputError", err)
	}

	bad := agent.NewRunner(f.provider(), nil, agent.Params{Messages: []agent.Message{agent.UserText("x")}}, &agent.RunnerOptions{Output: &agent.OutputSchema{Schema: json.RawMessage(`{"type":"nonsense"}`)}})
	if _, err := bad.RunUntilDone(t.Context()); !isType[*agent.OutputSchemaError](err) {
		t.Errorf("a broken schema: err = %v, want an OutputSchemaError", err)
	}
}

func isType[E error](err error) bool {
	_, ok := errors.AsType[E](err)
	return ok
}

// manyTools is a Toolset of n tools, tool_000 ... with descriptions; one
// of them, the weather one, is what the task needs.
type manyTools struct {
	n   int
	ran atomic.Value // the name of the last tool run
}

func (m *manyTools) Tools(context.Context) ([]agent.ToolSpec, error) {
	out := make([]agent.ToolSpec, m.n)
	for i := range m.n {
		desc := fmt.Sprintf("manages inventory records of warehouse %d", i)
		if i == 287 {
			desc = "reports the current weather forecast for a city"
		}
		out[i] = agent.ToolSpec{Name: fmt.Sprintf("tool_%03d", i), Description: desc, InputSchema: json.RawMessage(`{"type":"object"}`)}
	}
	return out, nil
}

func (m *manyTools) Call(_ context.Context, c agent.ToolCall) (agent.ToolResult, error) {
	m.ran.Store(c.Name)
	return agent.ToolResult{Content: []agent.Part{agent.Text("sunny")}}, nil
}

// TestRunnerBigToolset: against 312 tools, every OpenAI request carries at
// most 128; the model searches, the tool it finds is sent next and runs,
// and the run completes.
func TestRunnerBigToolset(t *testing.T) {
	f := newFakeProvider(t, "openai",
		streamed("openai", turn{calls: []agent.ToolCall{call("s1", agent.ToolSearchName, `{"query":"weather forecast"}`)}}),
		streamed("openai", turn{calls: []agent.ToolCall{call("w1", "tool_287", `{"city":"Berlin"}`)}}),
		streamed("openai", turn{text: "Sunny in Berlin."}),
	)
	ts := &manyTools{n: 312}
	r := agent.NewRunner(f.provider(), ts, agent.Params{Messages: []agent.Message{agent.UserText("What is the weather in Berlin?")}}, nil)
	if _, err := r.RunUntilDone(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, _ := ts.ran.Load().(string); got != "tool_287" {
		t.Errorf("ran %q, want tool_287", got)
	}
	for i, b := range f.Requests() {
		var body struct {
			Tools []struct {
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tools"`
		}
		decode(t, b, &body)
		if len(body.Tools) > 128 || len(body.Tools) == 0 {
			t.Errorf("request %d has %d tools, want 1..128", i, len(body.Tools))
		}
		if body.Tools[0].Function.Name != agent.ToolSearchName {
			t.Errorf("request %d's first tool is %q, want the search tool", i, body.Tools[0].Function.Name)
		}
		if i == 1 && !strings.Contains(string(b), `"tool_287"`) {
			t.Errorf("the request after the search lacks the tool it found")
		}
	}
	t.Run("nothing found", func(t *testing.T) {
		f := newFakeProvider(t, "openai",
			streamed("openai", turn{calls: []agent.ToolCall{call("s1", agent.ToolSearchName, `{"query":"zebra"}`)}}),
			streamed("openai", turn{text: "none"}))
		r := agent.NewRunner(f.provider(), &manyTools{n: 312}, agent.Params{Messages: []agent.Message{agent.UserText("x")}}, nil)
		if _, err := r.RunUntilDone(t.Context()); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(f.Requests()[1]), `No tool matches`) {
			t.Errorf("the search that found nothing did not say so")
		}
	})
}

// TestRunnerJournalResume: a run cancelled while one of two parallel
// calls is still running resumes from its journal: the finished call's
// result is kept and not run again, only the other runs.
func TestRunnerJournalResume(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.jsonl")
	f := newFakeProvider(t, "anthropic",
		streamed("anthropic", turn{calls: []agent.ToolCall{call("c1", "fast", `{}`), call("c2", "slow", `{}`)}}),
		streamed("anthropic", turn{text: "both done"}),
	)
	var fastRuns, slowRuns atomic.Int32
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	fastDone := make(chan struct{})
	ts := &fakeTools{
		fns: map[string]func(agent.ToolCall) (string, error){"fast": func(agent.ToolCall) (string, error) { fastRuns.Add(1); return "fast done", nil }},
		ctxFns: map[string]func(context.Context) (string, error){"slow": func(callCtx context.Context) (string, error) {
			slowRuns.Add(1)
			if ctx.Err() == nil {
				<-callCtx.Done() // the first run is cancelled while this runs
				return "", callCtx.Err()
			}
			return "slow done", nil
		}},
	}
	j, err := agent.CreateJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	r := agent.NewRunner(f.provider(), ts, agent.Params{Messages: []agent.Message{agent.UserText("go")}}, &agent.RunnerOptions{
		Journal: j,
		OnToolResult: func(res agent.ToolResult) {
			if res.Name == "fast" {
				close(fastDone)
			}
		},
		OnIteration: func(int, *agent.StepResult) {
			// The stream has ended: a crash or Ctrl-C once fast's result
			// is committed, while slow has not finished.
			<-fastDone
			cancel()
		},
	})
	if _, err := r.RunUntilDone(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("first run: err = %v, want cancelled", err)
	}
	j.Close()

	j2, h, err := agent.OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	if len(h) != 3 {
		t.Fatalf("the journal holds %d messages, want user, assistant and fast's result", len(h))
	}
	r2 := agent.NewRunner(f.provider(), ts, agent.Params{Messages: h}, &agent.RunnerOptions{Journal: j2})
	final, err := r2.RunUntilDone(t.Context())
	if err != nil || final.Text() != "both done" {
		t.Fatalf("resumed run = %q, %v", final.Text(), err)
	}
	if fastRuns.Load() != 1 || slowRuns.Load() < 1 {
		t.Errorf("fast ran %d times, slow %d; want fast once and slow again on resume (only the unfinished call runs again)", fastRuns.Load(), slowRuns.Load())
	}
	got := sentMessages(t, "anthropic", f.Requests()[1])
	want := []string{"user:go", "assistant:call fast", "assistant:call slow", "tool:fast done", "tool:slow done"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the resumed request (-want +got):\n%s", diff)
	}
	_, h2, err := agent.OpenJournal(path)
	if err != nil || len(h2) != 5 {
		t.Errorf("the journal after the resumed run holds %d messages (%v), want 5", len(h2), err)
	}
}

// TestJournalBadInput: a journal cut in the middle of a line, of another
// version, or not a journal is a typed error naming the line.
func TestJournalBadInput(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.jsonl")
	j, err := agent.CreateJournal(good)
	if err != nil {
		t.Fatal(err)
	}
	j.Close()
	data, _ := os.ReadFile(good)
	for name, tc := range map[string]struct {
		content string
		line    int
		version bool
	}{
		"truncated": {string(data) + `{"message":{"role":"us`, 2, false},
		"version":   {`{"journal":"toolgate-agent-journal","version":99}` + "\n", 1, true},
		"foreign":   {"hello\n", 1, false},
		"empty":     {"", 1, false},
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, name+".jsonl")
			os.WriteFile(p, []byte(tc.content), 0o600)
			_, _, err := agent.OpenJournal(p)
			je, ok := errors.AsType[*agent.JournalError](err)
			if !ok || je.Line != tc.line || errors.Is(err, agent.ErrJournalVersion) != tc.version {
				t.Errorf("OpenJournal = %v, want a JournalError at line %d (version: %v)", err, tc.line, tc.version)
			}
		})
	}
}

// TestEventsBlocksDeltasCitations: block start/stop and generic delta
// events frame every block, citations arrive as events and on the part,
// and the All iterator and Emitted see the same stream.
func TestEventsBlocksDeltasCitations(t *testing.T) {
	f := newFakeProvider(t, "anthropic", script(t, "anthropic", "citations"))
	ev := &agent.Events{}
	var seen []string
	ev.On(agent.EventAll, func(e agent.Event) {
		switch e.Type {
		case agent.EventBlockStart, agent.EventBlockStop:
			seen = append(seen, fmt.Sprintf("%s %d %s", e.Type, e.Index, e.Block))
		case agent.EventDelta:
			seen = append(seen, fmt.Sprintf("delta %d %s %q", e.Index, e.Block, e.Delta))
		case agent.EventCitation:
			seen = append(seen, fmt.Sprintf("citation %d %s", e.Index, e.Citation))
		}
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	all := make(chan []agent.EventType, 1)
	next := ev.All(ctx)
	ready := make(chan struct{})
	go func() {
		var types []agent.EventType
		close(ready)
		for e := range next {
			types = append(types, e.Type)
			if e.Type == agent.EventEnd {
				break
			}
		}
		all <- types
	}()
	<-ready
	final := ev.Emitted(agent.EventFinalMessage)
	res, err := agent.Generate(t.Context(), f.provider(), &agent.Request{Messages: []agent.Message{agent.UserText("cite")}}, &agent.GenerateOptions{Events: ev})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"block_start 0 text", `delta 0 text "The sky "`, `citation 0 {"type":"char_location","cited_text":"blue sky","document_index":0,"start_char_index":0,"end_char_index":8}`,
		`delta 0 text "is blue."`, "block_stop 0 text",
	}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if p := res.Message.Parts[0]; len(p.Citations) != 1 {
		t.Errorf("the text part has %d citations, want 1", len(p.Citations))
	}
	if e := <-final; e.Message == nil || e.Message.Text() != "The sky is blue." {
		t.Errorf("Emitted(final_message) = %+v", e)
	}
	types := <-all
	if len(types) < 6 || types[0] != agent.EventConnect || types[len(types)-1] != agent.EventEnd {
		t.Errorf("All yielded %v, want connect ... end", types)
	}
}
