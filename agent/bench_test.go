package agent_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/toolgate/toolgate/agent"
)

// loopProvider answers every call with the same turn, in process: the
// benchmarks measure agent's own work, not HTTP or JSON of an SDK.
type loopProvider struct{ turn []agent.Fragment }

func (p *loopProvider) Stream(ctx context.Context, req *agent.Request, emit func(agent.Fragment)) (*agent.StreamEnd, error) {
	stop := agent.StopEnd
	for _, f := range p.turn {
		if f.Type == agent.FragToolCall {
			stop = agent.StopToolUse
		}
		emit(f)
	}
	return &agent.StreamEnd{ID: "msg", StopReason: stop, Usage: agent.Usage{InputTokens: 10, OutputTokens: 5}}, nil
}

// noopTools has tools that return at once, or after delay.
type noopTools struct{ delay time.Duration }

func (noopTools) Tools(context.Context) ([]agent.ToolSpec, error) {
	return []agent.ToolSpec{{Name: "noop"}}, nil
}

func (n noopTools) Call(ctx context.Context, c agent.ToolCall) (agent.ToolResult, error) {
	if n.delay > 0 {
		t := time.NewTimer(n.delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return agent.ToolResult{}, ctx.Err()
		}
	}
	return agent.ToolResult{Content: []agent.Part{agent.Text("ok")}}, nil
}

// toolTurn is a streamed turn with n tool calls, each with arguments in
// two fragments.
func toolTurn(n int) []agent.Fragment {
	var fs []agent.Fragment
	for i := range n {
		fs = append(fs,
			agent.Fragment{Type: agent.FragToolCall, Index: i, ID: fmt.Sprint("call_", i), Name: "noop", Text: `{"i":`},
			agent.Fragment{Type: agent.FragToolArgs, Index: i, Text: fmt.Sprintf(`%d}`, i)},
			agent.Fragment{Type: agent.FragBlockStop, Index: i})
	}
	return fs
}

// BenchmarkStepOverhead measures the loop's own cost per step with no-op
// tools: "stream" is the baseline (the provider's fragments delivered to
// a callback that does nothing), "step" a whole Step with one tool call and
// its result, "runner" one step of a Runner (history, guard, repair
// included). Compare allocs/op and the ratio to the baseline.
func BenchmarkStepOverhead(b *testing.B) {
	p := &loopProvider{turn: toolTurn(1)}
	req := &agent.Request{Messages: []agent.Message{agent.UserText("go")}, Tools: []agent.ToolSpec{{Name: "noop"}}}
	b.Run("stream", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := p.Stream(b.Context(), req, func(agent.Fragment) {}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("step", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s, err := agent.Step(b.Context(), p, noopTools{}, req, nil)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.ToolResults(b.Context()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("runner", func(b *testing.B) {
		b.ReportAllocs()
		const steps = 10
		for b.Loop() {
			r := agent.NewRunner(p, noopTools{}, agent.Params{Messages: []agent.Message{agent.UserText("go")}},
				&agent.RunnerOptions{MaxIterations: steps, MaxIterationsIsError: true, LoopGuard: agent.LoopGuard{Threshold: -1}})
			if _, err := r.RunUntilDone(b.Context()); err == nil {
				b.Fatal("want the iteration cap")
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*steps), "ns/step")
	})
}

// BenchmarkParallelTools streams one turn with n tool calls of 100 ms each:
// the step takes about one tool's time, not n. The x-tool metric is the
// step's time over one tool's 100 ms.
func BenchmarkParallelTools(b *testing.B) {
	const delay = 100 * time.Millisecond
	for _, n := range []int{1, 4, 16} {
		b.Run(fmt.Sprint("tools=", n), func(b *testing.B) {
			p := &loopProvider{turn: toolTurn(n)}
			req := &agent.Request{Tools: []agent.ToolSpec{{Name: "noop"}}}
			opts := &agent.StepOptions{MaxParallel: n}
			for b.Loop() {
				s, err := agent.Step(b.Context(), p, noopTools{delay: delay}, req, opts)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.ToolResults(b.Context()); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed())/float64(b.N)/float64(delay), "x-tool")
		})
	}
}
