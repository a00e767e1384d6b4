package agent_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/agent"
)

// TestRunnerCompaction: a step whose context passes the threshold only
// with its cache-read tokens counted makes the runner ask the model for a
// summary once; the next request carries the summary and none of the old
// turns, and the run finishes.
func TestRunnerCompaction(t *testing.T) {
	f := newFakeProvider(t, "anthropic",
		streamed("anthropic", turn{text: "Looking.", calls: []agent.ToolCall{call("c1", "echo", `{"n":1}`)}, in: 50, cacheRead: 400, out: 20}),
		streamed("anthropic", turn{text: "The user wants n echoed; echo said n=1.", out: 12}),
		streamed("anthropic", turn{text: "Done: n=1."}),
	)
	r := agent.NewRunner(f.provider(), echoTools(nil), agent.Params{System: "sys", Messages: []agent.Message{agent.UserText("echo n")}},
		&agent.RunnerOptions{Compaction: &agent.Compaction{Threshold: 300, Prompt: "SUMMARISE"}})
	final, err := r.RunUntilDone(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if final.Text() != "Done: n=1." {
		t.Errorf("final = %q", final.Text())
	}
	reqs := f.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model calls, want 3 (step, summary, step)", len(reqs))
	}
	summaryReq := sentMessages(t, "anthropic", reqs[1])
	if got := summaryReq[len(summaryReq)-1]; got != "user:SUMMARISE" {
		t.Errorf("the summary request ends with %q, want the prompt", got)
	}
	want := []string{"user:" + agent.SummaryPrefix + "The user wants n echoed; echo said n=1."}
	if diff := cmp.Diff(want, sentMessages(t, "anthropic", reqs[2])); diff != "" {
		t.Errorf("the request after compaction (-want +got):\n%s", diff)
	}
	if out := r.Outcome(); out.Steps != 3 || out.Reason != agent.EndDone {
		t.Errorf("Outcome() = %+v, want 3 model calls and done", out)
	}
}

// TestRunnerCompactionSummaryTooLarge: a summary no smaller than the
// threshold is a typed error and the history is kept.
func TestRunnerCompactionSummaryTooLarge(t *testing.T) {
	f := newFakeProvider(t, "anthropic",
		streamed("anthropic", turn{calls: []agent.ToolCall{call("c1", "echo", `{}`)}, in: 500}),
		streamed("anthropic", turn{text: "a very long summary", out: 900}),
	)
	r := agent.NewRunner(f.provider(), echoTools(nil), agent.Params{Messages: []agent.Message{agent.UserText("go")}},
		&agent.RunnerOptions{Compaction: &agent.Compaction{Threshold: 300}})
	_, err := r.RunUntilDone(t.Context())
	if ce, ok := errors.AsType[*agent.CompactionError](err); !ok || ce.Tokens != 900 {
		t.Fatalf("err = %v, want a CompactionError of 900 tokens", err)
	}
	if n := len(r.History()); n != 3 {
		t.Errorf("history has %d messages, want the 3 committed ones kept", n)
	}
}

// TestRunnerAccounting: usage totals across steps, cache tokens included,
// the cost by the caller's price table, and stop conditions that end the
// run normally with their name.
func TestRunnerAccounting(t *testing.T) {
	steps := func() []reply {
		return []reply{
			streamed("anthropic", turn{calls: []agent.ToolCall{call("c1", "echo", `{}`)}, in: 100, cacheRead: 1000, out: 10}),
			streamed("anthropic", turn{calls: []agent.ToolCall{call("c2", "fail", `{}`)}, in: 100, cacheRead: 1000, out: 10}),
			streamed("anthropic", turn{text: "done", in: 100, out: 10}),
		}
	}
	prices := agent.Prices{"claude-test": {Input: 3, Output: 15, CacheRead: 0.3}}
	t.Run("totals", func(t *testing.T) {
		f := newFakeProvider(t, "anthropic", steps()...)
		r := agent.NewRunner(f.provider(), echoTools(nil), agent.Params{Messages: []agent.Message{agent.UserText("go")}}, &agent.RunnerOptions{Prices: prices})
		if _, err := r.RunUntilDone(t.Context()); err != nil {
			t.Fatal(err)
		}
		out := r.Outcome()
		want := agent.Usage{InputTokens: 300, OutputTokens: 30, CacheReadTokens: 2000}
		if out.Usage != want || out.Steps != 3 {
			t.Errorf("Outcome() = %+v, want usage %+v over 3 steps", out, want)
		}
		if wantCost := (300*3 + 30*15 + 2000*0.3) / 1e6; fmt.Sprintf("%.9f", out.Cost) != fmt.Sprintf("%.9f", wantCost) {
			t.Errorf("cost = %v, want %v", out.Cost, wantCost)
		}
	})
	for _, tc := range []struct {
		cond  agent.StopCondition
		steps int
	}{
		{agent.MaxTokens(2000), 2},
		{agent.MaxCost(0.001), 2},
		{agent.HasToolCall("fail"), 2},
		{agent.FinishReasonIs(agent.StopToolUse), 1},
		{agent.StopCondition{Name: "mine", Met: func(s agent.RunState) bool { return s.Step == 1 }}, 1},
	} {
		t.Run(tc.cond.Name, func(t *testing.T) {
			f := newFakeProvider(t, "anthropic", steps()[:tc.steps]...)
			r := agent.NewRunner(f.provider(), echoTools(nil), agent.Params{Messages: []agent.Message{agent.UserText("go")}},
				&agent.RunnerOptions{Prices: prices, StopWhen: []agent.StopCondition{tc.cond}})
			if _, err := r.RunUntilDone(t.Context()); err != nil {
				t.Fatal(err)
			}
			if out := r.Outcome(); out.Reason != agent.EndStopCondition || out.Condition != tc.cond.Name || out.Steps != tc.steps {
				t.Errorf("Outcome() = %+v, want stopped by %s after %d steps", out, tc.cond.Name, tc.steps)
			}
		})
	}
	t.Run("a model missing from the price table", func(t *testing.T) {
		f := newFakeProvider(t, "anthropic", steps()[0])
		r := agent.NewRunner(f.provider(), echoTools(nil), agent.Params{Messages: []agent.Message{agent.UserText("go")}},
			&agent.RunnerOptions{Prices: agent.Prices{"other": {Input: 1}}})
		_, err := r.RunUntilDone(t.Context())
		if pe, ok := errors.AsType[*agent.UnknownPriceError](err); !ok || pe.Model != "claude-test" {
			t.Fatalf("err = %v, want an UnknownPriceError naming claude-test", err)
		}
		if n := len(r.History()); n != 3 {
			t.Errorf("history has %d messages, want the committed step kept (3)", n)
		}
	})
}

// TestRunnerToolTimeout: a tool past its timeout is cancelled and
// answered with a timeout result; the run goes on.
func TestRunnerToolTimeout(t *testing.T) {
	f := newFakeProvider(t, "anthropic",
		streamed("anthropic", turn{calls: []agent.ToolCall{call("c1", "slow", `{}`), call("c2", "echo", `{}`)}}),
		streamed("anthropic", turn{text: "ok"}),
	)
	ts := echoTools(nil)
	ts.ctxFns = map[string]func(ctx context.Context) (string, error){"slow": func(ctx context.Context) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	}}
	r := agent.NewRunner(f.provider(), ts, agent.Params{Messages: []agent.Message{agent.UserText("go")}},
		&agent.RunnerOptions{ToolTimeout: time.Minute, ToolTimeouts: map[string]time.Duration{"slow": 50 * time.Millisecond}})
	if _, err := r.RunUntilDone(t.Context()); err != nil {
		t.Fatal(err)
	}
	got := sentMessages(t, "anthropic", f.Requests()[1])
	if !containsPrefix(got, "tool:timeout: the tool \"slow\" did not finish within 50ms") {
		t.Errorf("second request %q lacks slow's timeout result", got)
	}
}

func containsPrefix(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

// TestRunnerReturnDirectly: a ReturnDirectly tool's result ends the run.
func TestRunnerReturnDirectly(t *testing.T) {
	f := newFakeProvider(t, "anthropic", streamed("anthropic", turn{calls: []agent.ToolCall{call("c1", "echo", `{"x":1}`)}}))
	r := agent.NewRunner(f.provider(), echoTools(nil), agent.Params{Messages: []agent.Message{agent.UserText("go")}},
		&agent.RunnerOptions{ReturnDirectly: []string{"echo"}})
	if _, err := r.RunUntilDone(t.Context()); err != nil {
		t.Fatal(err)
	}
	out := r.Outcome()
	if out.Reason != agent.EndReturnDirectly || out.Result == nil || out.Result.Text() != `echo {"x":1}` {
		t.Errorf("Outcome() = %+v, want ended by echo's result", out)
	}
}

// TestRunnerPermissionStops: a permission-class result ends the run with
// a PermissionError, unless the caller lets it go on.
func TestRunnerPermissionStops(t *testing.T) {
	denied := &fakeTools{fns: map[string]func(agent.ToolCall) (string, error){
		"secret": func(agent.ToolCall) (string, error) {
			return "", errors.New("permission: principal bob may not call secret")
		},
	}}
	t.Run("stops", func(t *testing.T) {
		f := newFakeProvider(t, "anthropic", streamed("anthropic", turn{calls: []agent.ToolCall{call("c1", "secret", `{}`)}}))
		r := agent.NewRunner(f.provider(), denied, agent.Params{Messages: []agent.Message{agent.UserText("go")}}, nil)
		_, err := r.RunUntilDone(t.Context())
		if pe, ok := errors.AsType[*agent.PermissionError](err); !ok || pe.Tool != "secret" {
			t.Fatalf("err = %v, want a PermissionError for secret", err)
		}
	})
	t.Run("goes on", func(t *testing.T) {
		f := newFakeProvider(t, "anthropic", streamed("anthropic", turn{calls: []agent.ToolCall{call("c1", "secret", `{}`)}}), streamed("anthropic", turn{text: "cannot"}))
		r := agent.NewRunner(f.provider(), denied, agent.Params{Messages: []agent.Message{agent.UserText("go")}}, &agent.RunnerOptions{ContinueOnPermission: true})
		if _, err := r.RunUntilDone(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}

// TestRunnerRunsAgainAfterAProviderError: a provider's failure ends the
// run but leaves the runner usable; the next run goes on from the
// history.
func TestRunnerRunsAgainAfterAProviderError(t *testing.T) {
	f := newFakeProvider(t, "anthropic",
		streamed("anthropic", turn{calls: []agent.ToolCall{call("c1", "echo", `{}`)}}),
		reply{status: 400, body: `{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}`},
		streamed("anthropic", turn{text: "recovered"}),
	)
	var runs atomic.Int32
	r := agent.NewRunner(f.provider(), echoTools(&runs), agent.Params{Messages: []agent.Message{agent.UserText("go")}}, &agent.RunnerOptions{Retry: noRetry})
	if _, err := r.RunUntilDone(t.Context()); err == nil {
		t.Fatal("the first run did not fail")
	}
	final, err := r.RunUntilDone(t.Context())
	if err != nil || final.Text() != "recovered" {
		t.Fatalf("second run = %q, %v; want it to go on and finish", final.Text(), err)
	}
	if runs.Load() != 1 {
		t.Errorf("echo ran %d times, want once", runs.Load())
	}
	if got := sentMessages(t, "anthropic", f.Requests()[2]); len(got) != 3 {
		t.Errorf("the second run sent %q, want the history of the first", got)
	}
}

// TestRunnerPauseTurnContinues: Anthropic's pause_turn without tool calls
// goes on with the paused message.
func TestRunnerPauseTurnContinues(t *testing.T) {
	f := newFakeProvider(t, "anthropic",
		streamed("anthropic", turn{text: "Working on it", stop: "pause_turn"}),
		streamed("anthropic", turn{text: " - done."}),
	)
	r := agent.NewRunner(f.provider(), nil, agent.Params{Messages: []agent.Message{agent.UserText("go")}}, nil)
	final, err := r.RunUntilDone(t.Context())
	if err != nil || final.Text() != " - done." {
		t.Fatalf("final = %q, %v", final.Text(), err)
	}
	if got := sentMessages(t, "anthropic", f.Requests()[1]); !cmp.Equal(got, []string{"user:go", "assistant:Working on it"}) {
		t.Errorf("the continuation sent %q", got)
	}
}

// TestRunnerGenerateToolResponse: a host pushes an assistant message with
// tool calls; the runner answers them (and only them) before its step.
func TestRunnerGenerateToolResponse(t *testing.T) {
	f := newFakeProvider(t, "anthropic", streamed("anthropic", turn{text: "thanks"}))
	var runs atomic.Int32
	pushed := agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{call("h1", "echo", `{"a":1}`), call("h2", "echo", `{"a":2}`)}}
	h := []agent.Message{agent.UserText("go"), pushed, agent.ToolMessage(agent.ToolResult{CallID: "h1", Content: []agent.Part{agent.Text("done before")}})}
	r := agent.NewRunner(f.provider(), echoTools(&runs), agent.Params{Messages: h}, nil)
	res, err := r.GenerateToolResponse(t.Context())
	if err != nil || len(res) != 1 || res[0].CallID != "h2" {
		t.Fatalf("GenerateToolResponse() = %+v, %v; want h2's result only", res, err)
	}
	if _, err := r.RunUntilDone(t.Context()); err != nil {
		t.Fatal(err)
	}
	if runs.Load() != 1 {
		t.Errorf("echo ran %d times, want once (h2)", runs.Load())
	}
	if n := len(r.History()); n != 5 {
		t.Errorf("history has %d messages, want 5", n)
	}
}

// TestRunnerRepairsMalformedArguments: a call whose arguments are cut
// JSON gets one model-driven repair round before it runs.
func TestRunnerRepairsMalformedArguments(t *testing.T) {
	f := newFakeProvider(t, "anthropic",
		streamed("anthropic", turn{calls: []agent.ToolCall{call("c1", "echo", `{"n":1,`)}}),
		streamed("anthropic", turn{text: "```json\n{\"n\":1}\n```"}),
		streamed("anthropic", turn{text: "ok"}),
	)
	ts := echoTools(nil)
	p := f.provider()
	r := agent.NewRunner(p, ts, agent.Params{Messages: []agent.Message{agent.UserText("go")}}, &agent.RunnerOptions{RepairToolCall: agent.ModelRepair(p, agent.ModelOptions{})})
	if _, err := r.RunUntilDone(t.Context()); err != nil {
		t.Fatal(err)
	}
	calls := ts.Calls()
	if len(calls) != 1 || calls[0].Arguments != `{"n":1}` {
		t.Fatalf("echo ran with %+v, want the repaired arguments once", calls)
	}
	if got := sentMessages(t, "anthropic", f.Requests()[1]); len(got) != 1 || !strings.Contains(got[0], "not a JSON object") {
		t.Errorf("the repair request sent %q, want the problem named", got)
	}
}
