package agent_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/agent"
)

// call is a tool call of a scripted turn.
func call(id, name, args string) agent.ToolCall {
	return agent.ToolCall{ID: id, Name: name, Arguments: args}
}

// echoTools has one tool, echo, that answers with its arguments, and
// counts its runs.
func echoTools(runs *atomic.Int32) *fakeTools {
	return &fakeTools{fns: map[string]func(agent.ToolCall) (string, error){
		"echo": func(c agent.ToolCall) (string, error) {
			if runs != nil {
				runs.Add(1)
			}
			return "echo " + c.Arguments, nil
		},
		"fail": func(agent.ToolCall) (string, error) { return "", errors.New("execution: broken") },
	}}
}

// sentMessages decodes the messages of request body b as role:text lines
// (tool results as "tool:<text>"), for either provider.
func sentMessages(t *testing.T, kind string, b []byte) []string {
	t.Helper()
	var out []string
	if kind == "anthropic" {
		var body struct {
			Messages []struct {
				Role    string `json:"role"`
				Content []struct {
					Type    string `json:"type"`
					Text    string `json:"text"`
					Name    string `json:"name"`
					Content []struct {
						Text string `json:"text"`
					} `json:"content"`
				} `json:"content"`
			} `json:"messages"`
		}
		decode(t, b, &body)
		for _, m := range body.Messages {
			for _, c := range m.Content {
				switch c.Type {
				case "text":
					out = append(out, m.Role+":"+c.Text)
				case "tool_use":
					out = append(out, m.Role+":call "+c.Name)
				case "tool_result":
					var s []string
					for _, x := range c.Content {
						s = append(s, x.Text)
					}
					out = append(out, "tool:"+strings.Join(s, "\n"))
				}
			}
		}
		return out
	}
	var body struct {
		Messages []struct {
			Role      string `json:"role"`
			Content   any    `json:"content"`
			ToolCalls []struct {
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	decode(t, b, &body)
	for _, m := range body.Messages {
		if s, ok := m.Content.(string); ok && s != "" {
			out = append(out, m.Role+":"+s)
		}
		for _, c := range m.ToolCalls {
			out = append(out, m.Role+":call "+c.Function.Name)
		}
	}
	return out
}

func TestRunnerRunsUntilTheModelStops(t *testing.T) {
	for _, kind := range providers {
		t.Run(kind, func(t *testing.T) {
			f := newFakeProvider(t, kind,
				streamed(kind, turn{text: "Let me echo.", calls: []agent.ToolCall{call("c1", "echo", `{"n":1}`), call("c2", "echo", `{"n":2}`)}}),
				streamed(kind, turn{calls: []agent.ToolCall{call("c3", "echo", `{"n":3}`)}}),
				streamed(kind, turn{text: "All done."}),
			)
			var iterations []int
			r := agent.NewRunner(f.provider(), echoTools(nil), agent.Params{System: "be brief", Messages: []agent.Message{agent.UserText("echo thrice")}},
				&agent.RunnerOptions{OnIteration: func(step int, _ *agent.StepResult) { iterations = append(iterations, step) }})
			final, err := r.RunUntilDone(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if final.Text() != "All done." {
				t.Errorf("final = %q", final.Text())
			}
			if diff := cmp.Diff([]int{1, 2, 3}, iterations); diff != "" {
				t.Errorf("OnIteration mismatch (-want +got):\n%s", diff)
			}
			want := []string{"user:echo thrice", "assistant:Let me echo.", "assistant:call echo", "assistant:call echo", "tool:echo {\"n\":1}", "tool:echo {\"n\":2}", "assistant:call echo", "tool:echo {\"n\":3}"}
			reqs := f.Requests()
			got := sentMessages(t, kind, reqs[2])
			if kind == "openai" {
				// Chat Completions sends the system prompt as a message.
				want = append([]string{"system:be brief"}, want...)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("third request's messages mismatch (-want +got):\n%s", diff)
			}
			if n := len(r.History()); n != 7 {
				t.Errorf("history has %d messages, want 7 (user, 3 assistant, 3 tool)", n)
			}
		})
	}
}

// TestRunnerMaxIterations: reaching the cap ends the run normally with
// the history and a reason (the SDKs' behaviour); MaxIterationsIsError
// keeps the typed error for callers who want it.
func TestRunnerMaxIterations(t *testing.T) {
	for _, asError := range []bool{false, true} {
		t.Run(fmt.Sprint("error=", asError), func(t *testing.T) {
			var replies []reply
			for i := range 3 {
				replies = append(replies, streamed("anthropic", turn{calls: []agent.ToolCall{call(fmt.Sprint("c", i), "echo", fmt.Sprintf(`{"i":%d}`, i))}}))
			}
			f := newFakeProvider(t, "anthropic", replies...)
			r := agent.NewRunner(f.provider(), echoTools(nil), agent.Params{Messages: []agent.Message{agent.UserText("loop")}},
				&agent.RunnerOptions{MaxIterations: 3, MaxIterationsIsError: asError})
			_, err := r.RunUntilDone(t.Context())
			if asError {
				if me, ok := errors.AsType[*agent.MaxIterationsError](err); !ok || me.Max != 3 {
					t.Fatalf("RunUntilDone() error = %v, want a MaxIterationsError of 3", err)
				}
			} else {
				if err != nil {
					t.Fatalf("RunUntilDone() error = %v, want the run to end normally at the cap", err)
				}
				if got := r.Outcome(); got.Reason != agent.EndMaxIterations || got.Steps != 3 {
					t.Errorf("Outcome() = %+v, want reason max_iterations after 3 steps", got)
				}
			}
			if n := len(r.History()); n != 7 {
				t.Errorf("history has %d messages, want the 7 so far", n)
			}
		})
	}
}

func TestRunnerMaxConsecutiveToolFailures(t *testing.T) {
	f := newFakeProvider(t, "anthropic",
		streamed("anthropic", turn{calls: []agent.ToolCall{call("c1", "fail", `{"i":1}`)}}),
		streamed("anthropic", turn{calls: []agent.ToolCall{call("c2", "echo", `{"i":2}`), call("c3", "fail", `{"i":3}`)}}),
	)
	r := agent.NewRunner(f.provider(), echoTools(nil), agent.Params{Messages: []agent.Message{agent.UserText("go")}}, &agent.RunnerOptions{MaxConsecutiveToolFailures: 2})
	_, err := r.RunUntilDone(t.Context())
	if fe, ok := errors.AsType[*agent.ToolFailuresError](err); !ok || fe.Steps != 2 {
		t.Fatalf("RunUntilDone() error = %v, want a ToolFailuresError after 2 steps", err)
	}
}

func TestRunnerLoopGuard(t *testing.T) {
	same := func(id string) reply {
		return streamed("anthropic", turn{calls: []agent.ToolCall{call(id, "echo", `{"a": 1, "b": 2}`)}})
	}
	// The same call with its keys in another order, other spacing and its
	// numbers spelt otherwise (2.0 is 2, as for the gateway's loop guard).
	reordered := streamed("anthropic", turn{calls: []agent.ToolCall{call("c4", "echo", `{"b":2.0,"a":1e0}`)}})
	reordered3 := streamed("anthropic", turn{calls: []agent.ToolCall{call("c3", "echo", `{"b":2.0,"a":1e0}`)}})
	done := streamed("anthropic", turn{text: "done"})
	tests := []struct {
		name        string
		guard       agent.LoopGuard
		replies     []reply
		wantRuns    int32
		wantAsked   int32
		wantBlocked bool // the last call was answered by the loop guard
		wantErr     bool
	}{
		// Three calls return the same echo; the fourth, the same call
		// spelt otherwise, is the loop.
		{"notice", agent.LoopGuard{}, []reply{same("c1"), same("c2"), same("c3"), reordered, done}, 3, 0, true, false},
		{"stop", agent.LoopGuard{Action: agent.LoopStop}, []reply{same("c1"), same("c2"), same("c3"), reordered}, 3, 0, true, true},
		{"ask allows once", agent.LoopGuard{Action: agent.LoopAsk, Threshold: 1, Ask: func(context.Context, agent.ToolCall, int) agent.LoopDecision { return agent.AllowOnce }},
			[]reply{same("c1"), same("c2"), reordered3, done}, 3, 2, false, false},
		{"ask allows always", agent.LoopGuard{Action: agent.LoopAsk, Threshold: 1, Ask: func(context.Context, agent.ToolCall, int) agent.LoopDecision { return agent.AllowAlways }},
			[]reply{same("c1"), same("c2"), reordered3, done}, 3, 1, false, false},
		{"ask denies", agent.LoopGuard{Action: agent.LoopAsk, Ask: func(context.Context, agent.ToolCall, int) agent.LoopDecision { return agent.Deny }},
			[]reply{same("c1"), same("c2"), same("c3"), reordered, done}, 3, 1, true, false},
		{"off", agent.LoopGuard{Threshold: -1}, []reply{same("c1"), same("c2"), same("c3"), reordered, done}, 4, 0, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeProvider(t, "anthropic", tc.replies...)
			var runs atomic.Int32
			var asked atomic.Int32
			if ask := tc.guard.Ask; ask != nil {
				tc.guard.Ask = func(ctx context.Context, c agent.ToolCall, n int) agent.LoopDecision {
					asked.Add(1)
					return ask(ctx, c, n)
				}
			}
			var mu sync.Mutex
			var results []agent.ToolResult
			r := agent.NewRunner(f.provider(), echoTools(&runs), agent.Params{Messages: []agent.Message{agent.UserText("go")}},
				&agent.RunnerOptions{LoopGuard: tc.guard, MaxConsecutiveToolFailures: -1, OnToolResult: func(res agent.ToolResult) {
					mu.Lock()
					results = append(results, res)
					mu.Unlock()
				}})
			_, err := r.RunUntilDone(t.Context())
			if le, isLoop := errors.AsType[*agent.LoopError](err); isLoop != tc.wantErr || (err != nil && !isLoop) {
				t.Fatalf("RunUntilDone() error = %v, want a LoopError: %v", err, tc.wantErr)
			} else if isLoop && (le.Tool != "echo" || le.Count != 4) {
				t.Errorf("LoopError = %+v, want echo, call 4", le)
			}
			if got := asked.Load(); got != tc.wantAsked {
				t.Errorf("Ask was called %d times, want %d", got, tc.wantAsked)
			}
			if got := runs.Load(); got != tc.wantRuns {
				t.Errorf("the tool ran %d times, want %d", got, tc.wantRuns)
			}
			mu.Lock()
			last := results[len(results)-1]
			mu.Unlock()
			if blocked := last.IsError && strings.Contains(last.Text(), "loop guard"); blocked != tc.wantBlocked {
				t.Errorf("last result = %v %q; want blocked by the loop guard: %v", last.IsError, last.Text(), tc.wantBlocked)
			}
		})
	}
}

func TestRunnerRepairsToolNames(t *testing.T) {
	f := newFakeProvider(t, "anthropic",
		streamed("anthropic", turn{calls: []agent.ToolCall{call("c1", "ECHO", `{}`), call("c2", "weather", `{}`)}}),
		streamed("anthropic", turn{text: "done"}),
	)
	var runs atomic.Int32
	r := agent.NewRunner(f.provider(), echoTools(&runs), agent.Params{Messages: []agent.Message{agent.UserText("go")}}, nil)
	if _, err := r.RunUntilDone(t.Context()); err != nil {
		t.Fatal(err)
	}
	if runs.Load() != 1 {
		t.Errorf("echo ran %d times, want 1 (ECHO repaired to echo)", runs.Load())
	}
	h := r.History()
	unknown := h[len(h)-2].Result // the results follow the assistant message in call order
	if !unknown.IsError || !strings.Contains(unknown.Text(), `unknown tool "weather"`) || !strings.Contains(unknown.Text(), "echo, fail") {
		t.Errorf("the unknown tool's result = %v %q, want an isError listing the available tools", unknown.IsError, unknown.Text())
	}
}

func TestRunnerRepairsAMissingNamespace(t *testing.T) {
	f := newFakeProvider(t, "openai",
		streamed("openai", turn{calls: []agent.ToolCall{call("c1", "read-file", `{}`)}}),
		streamed("openai", turn{text: "done"}),
	)
	var got []string
	tools := &fakeTools{fns: map[string]func(agent.ToolCall) (string, error){
		"fs__read_file": func(c agent.ToolCall) (string, error) { got = append(got, c.Name); return "contents", nil },
	}}
	r := agent.NewRunner(f.provider(), tools, agent.Params{Messages: []agent.Message{agent.UserText("go")}}, nil)
	if _, err := r.RunUntilDone(t.Context()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"fs__read_file"}, got); diff != "" {
		t.Errorf("calls mismatch (-want +got):\n%s", diff)
	}
}

func TestRunnerAutoEnhanceOnce(t *testing.T) {
	f := newFakeProvider(t, "anthropic",
		streamed("anthropic", turn{text: "Draft."}),
		streamed("anthropic", turn{text: "Improved."}),
	)
	var asked int
	r := agent.NewRunner(f.provider(), nil, agent.Params{Messages: []agent.Message{agent.UserText("write")}}, &agent.RunnerOptions{
		AutoEnhance: &agent.AutoEnhance{Prompt: "Check your work.", When: func(s *agent.StepResult) bool { asked++; return true }},
	})
	final, err := r.RunUntilDone(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if final.Text() != "Improved." || asked != 1 {
		t.Errorf("final = %q after %d questions, want Improved. after 1", final.Text(), asked)
	}
	got := sentMessages(t, "anthropic", f.Requests()[1])
	if diff := cmp.Diff([]string{"user:write", "assistant:Draft.", "user:Check your work."}, got); diff != "" {
		t.Errorf("second request mismatch (-want +got):\n%s", diff)
	}
}

func TestRunnerPushMessagesBetweenSteps(t *testing.T) {
	for _, kind := range providers {
		t.Run(kind, func(t *testing.T) {
			f := newFakeProvider(t, kind,
				streamed(kind, turn{calls: []agent.ToolCall{call("c1", "echo", `{}`)}}),
				streamed(kind, turn{text: "Noted."}),
			)
			r := agent.NewRunner(f.provider(), echoTools(nil), agent.Params{Messages: []agent.Message{agent.UserText("go")}}, nil)
			for s, err := range r.Steps(t.Context()) {
				if err != nil {
					t.Fatal(err)
				}
				if len(s.ToolCalls) > 0 {
					r.PushMessages(agent.UserText("also mind the cat"))
				}
			}
			got := sentMessages(t, kind, f.Requests()[1])
			if last := got[len(got)-1]; last != "user:also mind the cat" {
				t.Errorf("the second request ends with %q, want the pushed message; all: %q", last, got)
			}
		})
	}
}

// TestRunnerMutatedStep changes the params while a step runs (a pushed
// message, or SetParams): the step's assistant message and results are
// not appended, its tools run once however often its results are asked
// for, and the next request carries the change.
func TestRunnerMutatedStep(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(r *agent.Runner)
		want   []string // the second request's messages
		system string   // the second request's system prompt
	}{
		{"PushMessages", func(r *agent.Runner) { r.PushMessages(agent.UserText("change of plan")) }, []string{"user:go", "user:change of plan"}, "base"},
		{"SetParams", func(r *agent.Runner) { r.SetParams(func(p *agent.Params) { p.System = "new plan" }) }, []string{"user:go"}, "new plan"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeProvider(t, "anthropic",
				streamed("anthropic", turn{calls: []agent.ToolCall{call("c1", "echo", `{}`)}}),
				streamed("anthropic", turn{text: "Fine."}),
			)
			var runs atomic.Int32
			var r *agent.Runner
			r = agent.NewRunner(f.provider(), echoTools(&runs), agent.Params{System: "base", Messages: []agent.Message{agent.UserText("go")}}, &agent.RunnerOptions{
				OnToolCall: func(agent.ToolCall) { tc.mutate(r) },
			})
			for s, err := range r.Steps(t.Context()) {
				if err != nil {
					t.Fatal(err)
				}
				for range 2 {
					if _, err := s.ToolResults(t.Context()); err != nil {
						t.Fatal(err)
					}
				}
			}
			if n := runs.Load(); n != 1 {
				t.Errorf("the tool ran %d times, want once", n)
			}
			got := sentMessages(t, "anthropic", f.Requests()[1])
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("second request mismatch (-want +got):\n%s", diff)
			}
			var body struct {
				System []struct {
					Text string `json:"text"`
				} `json:"system"`
			}
			decode(t, f.Requests()[1], &body)
			if len(body.System) != 1 || body.System[0].Text != tc.system {
				t.Errorf("second request's system = %+v, want %q", body.System, tc.system)
			}
		})
	}
}

func TestRunnerStepsConsumedOnce(t *testing.T) {
	f := newFakeProvider(t, "anthropic", streamed("anthropic", turn{text: "hi"}))
	r := agent.NewRunner(f.provider(), nil, agent.Params{Messages: []agent.Message{agent.UserText("hi")}}, nil)
	if _, err := r.RunUntilDone(t.Context()); err != nil {
		t.Fatal(err)
	}
	var got error
	for _, err := range r.Steps(t.Context()) {
		got = err
	}
	if !errors.Is(got, agent.ErrConsumed) {
		t.Errorf("second iteration yielded %v, want ErrConsumed", got)
	}
	if len(f.Requests()) != 1 {
		t.Errorf("the model was called %d times, want once", len(f.Requests()))
	}
}

func TestRunnerTruncatedTurnStops(t *testing.T) {
	f := newFakeProvider(t, "anthropic", script(t, "anthropic", "max_tokens"))
	var runs atomic.Int32
	r := agent.NewRunner(f.provider(), &fakeTools{fns: map[string]func(agent.ToolCall) (string, error){
		"lookup": func(agent.ToolCall) (string, error) { runs.Add(1); return "", nil }}}, agent.Params{Messages: []agent.Message{agent.UserText("go")}}, nil)
	_, err := r.RunUntilDone(t.Context())
	if _, ok := errors.AsType[*agent.TruncatedError](err); !ok {
		t.Fatalf("RunUntilDone() error = %v, want a TruncatedError", err)
	}
	if runs.Load() != 0 {
		t.Errorf("the tool ran %d times, want 0", runs.Load())
	}
}

func TestRunnerPrepareStepAndCompaction(t *testing.T) {
	f := newFakeProvider(t, "anthropic",
		streamed("anthropic", turn{calls: []agent.ToolCall{call("c1", "echo", `{}`)}}),
		streamed("anthropic", turn{text: "done"}),
	)
	r := agent.NewRunner(f.provider(), echoTools(nil), agent.Params{System: "base", Messages: []agent.Message{agent.UserText("go")}}, &agent.RunnerOptions{
		PrepareStep: func(_ context.Context, step int, req *agent.Request) error {
			req.System = fmt.Sprintf("base, step %d", step)
			req.Tools = req.Tools[:1] // only echo
			return nil
		},
		CompactAt: 100,
		Compact: func(_ context.Context, h []agent.Message, u agent.Usage) ([]agent.Message, error) {
			return []agent.Message{agent.UserText(fmt.Sprintf("summary of %d messages", len(h)))}, nil
		},
	})
	if _, err := r.RunUntilDone(t.Context()); err != nil {
		t.Fatal(err)
	}
	var body struct {
		System []struct {
			Text string `json:"text"`
		} `json:"system"`
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	decode(t, f.Requests()[1], &body)
	if len(body.System) != 1 || body.System[0].Text != "base, step 2" || len(body.Tools) != 1 || body.Tools[0].Name != "echo" {
		t.Errorf("second request has system %+v and tools %+v, want PrepareStep's", body.System, body.Tools)
	}
	if diff := cmp.Diff([]string{"user:summary of 3 messages"}, sentMessages(t, "anthropic", f.Requests()[1])); diff != "" {
		t.Errorf("second request's messages mismatch (-want +got):\n%s", diff)
	}
}

func TestRunnerCancelStopsCleanly(t *testing.T) {
	f := newFakeProvider(t, "anthropic", streamed("anthropic", turn{calls: []agent.ToolCall{call("c1", "wait", `{}`)}}))
	ctx, cancel := context.WithCancel(t.Context())
	started := make(chan struct{})
	tools := &toolFunc{fn: func(ctx context.Context, c agent.ToolCall) (agent.ToolResult, error) {
		close(started)
		<-ctx.Done()
		return agent.ToolResult{}, ctx.Err()
	}}
	r := agent.NewRunner(f.provider(), tools, agent.Params{Messages: []agent.Message{agent.UserText("go")}}, nil)
	go func() {
		<-started
		cancel()
	}()
	_, err := r.RunUntilDone(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("RunUntilDone() error = %v, want context.Canceled", err)
	}
	if n := len(r.History()); n != 1 {
		t.Errorf("history has %d messages, want the 1 before the cancelled step", n)
	}
}

// toolFunc is a Toolset of one tool, "wait", run by fn.
type toolFunc struct {
	fn func(ctx context.Context, c agent.ToolCall) (agent.ToolResult, error)
}

func (f *toolFunc) Tools(context.Context) ([]agent.ToolSpec, error) {
	return []agent.ToolSpec{{Name: "wait"}}, nil
}

func (f *toolFunc) Call(ctx context.Context, c agent.ToolCall) (agent.ToolResult, error) {
	return f.fn(ctx, c)
}

// TestRunnerDoneWhileAnotherConsumes: while one goroutine ranges over
// Steps, RunUntilDone does not run the loop again: it waits (Done) for
// that run's end and returns its final message.
func TestRunnerDoneWhileAnotherConsumes(t *testing.T) {
	f := newFakeProvider(t, "anthropic",
		streamed("anthropic", turn{calls: []agent.ToolCall{call("c1", "echo", `{}`)}}),
		streamed("anthropic", turn{text: "Finished."}),
	)
	started := make(chan struct{})
	var once sync.Once
	r := agent.NewRunner(f.provider(), echoTools(nil), agent.Params{Messages: []agent.Message{agent.UserText("go")}}, &agent.RunnerOptions{
		OnIteration: func(int, *agent.StepResult) { once.Do(func() { close(started) }) },
	})
	var wg sync.WaitGroup
	var steps int
	wg.Go(func() {
		for _, err := range r.Steps(t.Context()) {
			if err != nil {
				t.Errorf("Steps yielded %v", err)
			}
			steps++
		}
	})
	<-started // the goroutine's run is under way
	final, err := r.RunUntilDone(t.Context())
	if err != nil || final.Text() != "Finished." {
		t.Errorf("RunUntilDone() = %q, %v; want the other run's %q, nil", final.Text(), err, "Finished.")
	}
	wg.Wait()
	if steps != 2 {
		t.Errorf("the consumer saw %d steps, want 2", steps)
	}
	if n := len(f.Requests()); n != 2 {
		t.Errorf("the model got %d requests, want 2 (one run)", n)
	}
	if m, err := r.Done(t.Context()); err != nil || m.Text() != "Finished." {
		t.Errorf("Done() after the end = %q, %v", m.Text(), err)
	}
}
