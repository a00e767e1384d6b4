package agent_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/toolgate/toolgate/agent"
)

// gateTools has one tool, noop, that counts the calls running and blocks
// until release is closed.
type gateTools struct {
	release chan struct{}
	running atomic.Int32
	most    atomic.Int32
}

func (g *gateTools) Tools(context.Context) ([]agent.ToolSpec, error) {
	return []agent.ToolSpec{{Name: "noop"}}, nil
}

func (g *gateTools) Call(ctx context.Context, c agent.ToolCall) (agent.ToolResult, error) {
	n := g.running.Add(1)
	defer g.running.Add(-1)
	for {
		m := g.most.Load()
		if n <= m || g.most.CompareAndSwap(m, n) {
			break
		}
	}
	<-g.release
	return agent.ToolResult{Content: []agent.Part{agent.Text("ok")}}, nil
}

// TestStepBoundsParallelCalls: with MaxParallel 2, six calls of one turn
// never run more than two at a time, and all six finish. In a synctest
// bubble, synctest.Wait returns once every goroutine is blocked: the
// running calls on release, the others waiting for a slot; so the count
// of running calls at that moment is exact, not a race against a timer.
func TestStepBoundsParallelCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gateTools{release: make(chan struct{})}
		p := &loopProvider{turn: toolTurn(6)}
		s, err := agent.Step(t.Context(), p, g, &agent.Request{}, &agent.StepOptions{MaxParallel: 2})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := g.running.Load(); n != 2 {
			t.Errorf("%d calls running once all are blocked, want MaxParallel = 2", n)
		}
		close(g.release)
		results, err := s.ToolResults(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(results) != 6 {
			t.Errorf("got %d results, want 6", len(results))
		}
		if m := g.most.Load(); m != 2 {
			t.Errorf("at most %d calls ran at once, want 2", m)
		}
	})
}
