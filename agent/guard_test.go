package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/toolgate/toolgate/agent"
	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/internal/loopguard/loopguardtest"
	"github.com/toolgate/toolgate/registry"
)

// pollRun runs a Runner whose model calls the tool status with {} once
// per step, calls times, then stops; it returns, for each call, whether
// the tool ran. The tool's i-th run answers answers[i]
// (loopguardtest.Answer).
func pollRun(t *testing.T, guard agent.LoopGuard, answers []string, calls int) []bool {
	t.Helper()
	replies := make([]reply, 0, calls+1)
	for i := range calls {
		replies = append(replies, streamed("anthropic", turn{calls: []agent.ToolCall{call(fmt.Sprint("c", i+1), "status", `{}`)}}))
	}
	replies = append(replies, streamed("anthropic", turn{text: "done"}))
	f := newFakeProvider(t, "anthropic", replies...)
	var runs atomic.Int32
	tools := &fakeTools{fns: map[string]func(agent.ToolCall) (string, error){
		"status": func(agent.ToolCall) (string, error) {
			text, failed := loopguardtest.Answer(answers[runs.Add(1)-1])
			if failed {
				return "", errors.New(text)
			}
			return text, nil
		},
	}}
	var mu sync.Mutex // guards ran
	ran := map[string]bool{}
	r := agent.NewRunner(f.provider(), tools, agent.Params{Messages: []agent.Message{agent.UserText("poll")}},
		&agent.RunnerOptions{LoopGuard: guard, MaxConsecutiveToolFailures: -1, MaxIterations: calls + 1,
			OnToolResult: func(res agent.ToolResult) {
				refused := res.IsError && strings.Contains(res.Text(), "loop guard")
				mu.Lock()
				ran[res.CallID] = !refused
				mu.Unlock()
			}})
	if _, err := r.RunUntilDone(t.Context()); err != nil {
		t.Fatalf("RunUntilDone() error = %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	out := make([]bool, calls)
	for i := range out {
		out[i] = ran[fmt.Sprint("c", i+1)]
	}
	if got := int(runs.Load()); got != strings.Count(fmt.Sprint(out), "true") {
		t.Fatalf("the tool ran %d times, but %v calls were answered as run", got, out)
	}
	return out
}

// TestRunnerLoopGuardPolling runs the loop guard's scenarios
// (loopguardtest), as the gateway's TestLoopGuardPolling does: the same
// call returning another result each time is polling, not a loop.
func TestRunnerLoopGuardPolling(t *testing.T) {
	for _, sc := range loopguardtest.Scenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			got := pollRun(t, agent.LoopGuard{Threshold: sc.Threshold}, sc.Answers, len(sc.Runs))
			if fmt.Sprint(got) != fmt.Sprint(sc.Runs) {
				t.Errorf("calls run = %v, want %v", got, sc.Runs)
			}
		})
	}
}

// TestLoopGuardThresholdAsGateway: a threshold means the same to the
// agent's loop guard as to the gateway's guards.loop.threshold: the first
// call acted on is the same one, the one after threshold identical calls.
func TestLoopGuardThresholdAsGateway(t *testing.T) {
	for _, threshold := range []int{1, 2, 3, 5} {
		t.Run(fmt.Sprint(threshold), func(t *testing.T) {
			calls := threshold + 2
			// The gateway's guard, on a tool that answers alike each time.
			cfg, err := config.Default(nil)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Builtin = nil
			cfg.Guards.Loop = config.LoopGuard{Threshold: threshold, Action: config.LoopBlock}
			g, err := gateway.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { g.Close() })
			if err := g.RegisterStateless(registry.Tool{Name: "status"}, func(context.Context, map[string]any) (executors.Result, error) {
				return executors.Text("pending"), nil
			}); err != nil {
				t.Fatal(err)
			}
			gwFirst := 0
			for i := 1; i <= calls && gwFirst == 0; i++ {
				res, err := g.Call(t.Context(), "status", json.RawMessage(`{}`), map[string]any{gateway.ThreadMetaKey: "t"})
				if err != nil {
					t.Fatal(err)
				}
				if res.IsError {
					gwFirst = i
				}
			}
			// The agent's guard, on a tool that answers alike each time.
			answers := make([]string, calls)
			for i := range answers {
				answers[i] = "pending"
			}
			agentFirst := 0
			for i, ran := range pollRun(t, agent.LoopGuard{Threshold: threshold}, answers, calls) {
				if !ran {
					agentFirst = i + 1
					break
				}
			}
			if gwFirst != agentFirst || gwFirst != threshold+1 {
				t.Errorf("threshold %d: the gateway first acts on call %d, the agent on call %d; want both on call %d",
					threshold, gwFirst, agentFirst, threshold+1)
			}
		})
	}
}
