package agent_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/agent"
)

// TestStepStartsToolsWhileStreaming proves a tool starts before the stream
// ends: the fake server holds the rest of the stream at a barrier that
// only the first tool's start releases. The first call also finishes
// last, and the results still come back in call order.
func TestStepStartsToolsWhileStreaming(t *testing.T) {
	for _, kind := range providers {
		t.Run(kind, func(t *testing.T) {
			f := newFakeProvider(t, kind, script(t, kind, "parallel_tools"))
			started := f.barrier("A started")
			// Paris finishes once Oslo's result has been reported (a
			// result is reported after its tool returns, on the call's own
			// goroutine, so "after Oslo's tool returned" would race the
			// report). Were results reported in call order, Paris would
			// wait in vain, give up, and be reported first.
			osloReported := make(chan struct{})
			tools := &fakeTools{fns: map[string]func(agent.ToolCall) (string, error){
				"lookup": func(c agent.ToolCall) (string, error) {
					if strings.Contains(c.Arguments, "Paris") {
						close(started)
						select {
						case <-osloReported:
						case <-time.After(10 * time.Second):
						}
						return "Paris: sunny", nil
					}
					return "Oslo: snow", nil
				},
			}}
			var mu sync.Mutex
			var finished []string
			s, err := agent.Step(t.Context(), f.provider(), tools, &agent.Request{Messages: []agent.Message{agent.UserText("weather?")}}, &agent.StepOptions{
				OnToolResult: func(r agent.ToolResult) {
					mu.Lock()
					finished = append(finished, r.Text())
					mu.Unlock()
					if r.Text() == "Oslo: snow" {
						close(osloReported)
					}
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			results, err := s.ToolResults(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			got := make([]string, len(results))
			for i, r := range results {
				got[i] = r.Text()
				if r.CallID != s.ToolCalls[i].ID {
					t.Errorf("result %d answers %q, want %q", i, r.CallID, s.ToolCalls[i].ID)
				}
			}
			if diff := cmp.Diff([]string{"Paris: sunny", "Oslo: snow"}, got); diff != "" {
				t.Errorf("ToolResults in call order mismatch (-want +got):\n%s", diff)
			}
			mu.Lock()
			defer mu.Unlock()
			if diff := cmp.Diff([]string{"Oslo: snow", "Paris: sunny"}, finished); diff != "" {
				t.Errorf("OnToolResult order (as they finished) mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStepToolFailuresBecomeResults(t *testing.T) {
	calls := []agent.ToolCall{
		{ID: "c1", Name: "missing", Arguments: `{}`},
		{ID: "c2", Name: "fail", Arguments: `{}`},
		{ID: "c3", Name: "boom", Arguments: `{}`},
		{ID: "c4", Name: "fail", Arguments: `[1]`},
		{ID: "c5", Name: "ok", Arguments: `{"x":1}`},
	}
	for _, kind := range providers {
		t.Run(kind, func(t *testing.T) {
			f := newFakeProvider(t, kind, streamed(kind, turn{calls: calls}))
			tools := &fakeTools{fns: map[string]func(agent.ToolCall) (string, error){
				"fail": func(agent.ToolCall) (string, error) { return "", errors.New("execution: it broke") },
				"boom": func(agent.ToolCall) (string, error) { panic("kaboom") },
				"ok":   func(agent.ToolCall) (string, error) { return "fine", nil },
			}}
			var mu sync.Mutex
			states := map[string][]agent.ToolState{}
			s, err := agent.Step(t.Context(), f.provider(), tools, &agent.Request{}, &agent.StepOptions{
				OnToolState: func(c agent.ToolCall, st agent.ToolState) {
					mu.Lock()
					states[c.ID] = append(states[c.ID], st)
					mu.Unlock()
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			results, err := s.ToolResults(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			want := []struct {
				isError bool
				text    string
			}{
				{true, `unknown tool "missing"`},
				{true, "it broke"},
				{true, `internal: the tool "boom" panicked: kaboom`},
				{true, "not a JSON object"},
				{false, "fine"},
			}
			if len(results) != len(want) {
				t.Fatalf("got %d results, want %d", len(results), len(want))
			}
			for i, w := range want {
				if results[i].IsError != w.isError || !strings.Contains(results[i].Text(), w.text) {
					t.Errorf("result %d = %v %q, want isError %v containing %q", i, results[i].IsError, results[i].Text(), w.isError, w.text)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if diff := cmp.Diff([]agent.ToolState{agent.ToolPending, agent.ToolRunning, agent.ToolCompleted}, states["c5"]); diff != "" {
				t.Errorf("states of a good call mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]agent.ToolState{agent.ToolPending, agent.ToolError}, states["c4"]); diff != "" {
				t.Errorf("states of a call with bad arguments mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStepMalformedArgumentsAreAnErrorResult(t *testing.T) {
	for _, kind := range providers {
		t.Run(kind, func(t *testing.T) {
			f := newFakeProvider(t, kind, script(t, kind, "malformed_args"))
			tools := &fakeTools{fns: map[string]func(agent.ToolCall) (string, error){"lookup": func(agent.ToolCall) (string, error) { return "ran", nil }}}
			s, err := agent.Step(t.Context(), f.provider(), tools, &agent.Request{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			results, _ := s.ToolResults(t.Context())
			if len(results) != 1 || !results[0].IsError || !strings.Contains(results[0].Text(), "not a JSON object") {
				t.Errorf("results = %+v, want one isError result about the arguments", results)
			}
			if n := len(tools.Calls()); n != 0 {
				t.Errorf("the tool ran %d times, want 0", n)
			}
		})
	}
}

func TestStepTruncatedTurnExecutesNothing(t *testing.T) {
	for _, kind := range providers {
		t.Run(kind, func(t *testing.T) {
			f := newFakeProvider(t, kind, script(t, kind, "max_tokens"))
			tools := &fakeTools{fns: map[string]func(agent.ToolCall) (string, error){"lookup": func(agent.ToolCall) (string, error) { return "ran", nil }}}
			s, err := agent.Step(t.Context(), f.provider(), tools, &agent.Request{}, nil)
			te, ok := errors.AsType[*agent.TruncatedError](err)
			if !ok || te.Reason != agent.StopLength {
				t.Fatalf("Step() error = %v, want a TruncatedError for length", err)
			}
			if s == nil || s.Message.Text() != "I will write the file." {
				t.Fatalf("Step() result = %+v, want the truncated message", s)
			}
			if results, _ := s.ToolResults(t.Context()); len(results) != 0 {
				t.Errorf("ToolResults() = %+v, want none", results)
			}
			if n := len(tools.Calls()); n != 0 {
				t.Errorf("the tool ran %d times, want 0", n)
			}
		})
	}
}

// truncProvider streams a turn, waiting at fragment wait until gate is
// closed, and says it stopped for stop.
type truncProvider struct {
	turn []agent.Fragment
	wait int
	gate chan struct{}
	stop agent.StopReason
}

func (p *truncProvider) Stream(ctx context.Context, req *agent.Request, emit func(agent.Fragment)) (*agent.StreamEnd, error) {
	for i, f := range p.turn {
		if i == p.wait {
			select {
			case <-p.gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		emit(f)
	}
	return &agent.StreamEnd{ID: "msg", StopReason: p.stop}, nil
}

// TestStepTruncatedTurnCancelsAStartedCall: a call complete in the stream
// has started before the turn turns out truncated (tools start while the
// model streams); Step cancels it through its context, waits for it, and
// reports no result for it. The half call after it never starts.
func TestStepTruncatedTurnCancelsAStartedCall(t *testing.T) {
	for _, stop := range []agent.StopReason{agent.StopLength, agent.StopRefusal, agent.StopFiltered} {
		t.Run(string(stop), func(t *testing.T) {
			running := make(chan struct{})
			// The stream goes on only once the whole call runs.
			p := &truncProvider{stop: stop, wait: 2, gate: running, turn: []agent.Fragment{
				{Type: agent.FragToolCall, Index: 0, ID: "whole", Name: "wait", Text: `{"a":1}`},
				{Type: agent.FragBlockStop, Index: 0},
				{Type: agent.FragToolCall, Index: 1, ID: "half", Name: "wait", Text: `{"a":`},
			}}
			var started []string
			var cancelled atomic.Bool
			tools := &toolFunc{fn: func(ctx context.Context, c agent.ToolCall) (agent.ToolResult, error) {
				started = append(started, c.ID) // one call only: no race
				close(running)
				select {
				case <-ctx.Done():
					cancelled.Store(true)
				case <-time.After(barrierTimeout):
				}
				return agent.ToolResult{}, ctx.Err()
			}}
			s, err := agent.Step(t.Context(), p, tools, &agent.Request{}, nil)
			if te, ok := errors.AsType[*agent.TruncatedError](err); !ok || te.Reason != stop {
				t.Fatalf("Step() error = %v, want a TruncatedError for %s", err, stop)
			}
			if !cancelled.Load() {
				t.Error("the started call's context was not cancelled")
			}
			if diff := cmp.Diff([]string{"whole"}, started); diff != "" {
				t.Errorf("started calls mismatch (-want +got):\n%s", diff)
			}
			if results, _ := s.ToolResults(t.Context()); len(results) != 0 {
				t.Errorf("ToolResults() = %+v, want none", results)
			}
		})
	}
}
