package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/toolgate/toolgate/internal/canonjson"
	"github.com/toolgate/toolgate/internal/loopguard"
	"github.com/toolgate/toolgate/registry"
)

// LoopAction is what a [Runner]'s loop guard does with a repeated call.
type LoopAction string

// The loop guard's actions.
const (
	// LoopNotice does not run the call: its result is an isError notice
	// telling the model it is repeating itself. The run goes on.
	LoopNotice LoopAction = "notice"
	// LoopStop does not run the call and stops the run after this step
	// with a *[LoopError].
	LoopStop LoopAction = "stop"
	// LoopAsk asks [LoopGuard.Ask] what to do.
	LoopAsk LoopAction = "ask"
)

// LoopDecision is the answer of [LoopGuard.Ask].
type LoopDecision string

// The answers to a loop guard's question.
const (
	AllowOnce   LoopDecision = "allow_once"   // run this call
	AllowAlways LoopDecision = "allow_always" // run it, and never ask again about this call in this run
	Deny        LoopDecision = "deny"         // answer it with the loop notice, as LoopNotice does
)

// DefaultLoopThreshold is the loop guard's threshold when
// [LoopGuard.Threshold] is zero: it acts on the fourth identical call in
// a row after three that returned the same result.
const DefaultLoopThreshold = loopguard.DefaultThreshold

// LoopGuard stops a model that repeats itself: the same tool with the same
// canonical arguments (object keys sorted, whitespace dropped, numbers by
// value) Threshold times in a row in one run, each call returning the
// same result; the guard acts on the next identical call. A call that
// returns another result starts the count again, so a model polling a
// clock or a changing status is never stopped. It is the rule of the
// gateway's guards.loop, with the same meaning of Threshold. The zero
// value is a notice at the fourth identical call.
type LoopGuard struct {
	// Threshold is how many identical calls in a row, each returning the
	// same result, the model may make before the guard acts on the next
	// one. Zero means [DefaultLoopThreshold]; negative turns the guard
	// off.
	Threshold int
	// Action is what the guard does; empty means [LoopNotice].
	Action LoopAction
	// Ask decides, for [LoopAsk], whether call (made count times in a
	// row) runs. It runs on the goroutine reading the model's stream. Nil
	// means [Deny].
	Ask func(ctx context.Context, call ToolCall, count int) LoopDecision
}

// guard is the per-run state of the loop guard and of tool-name repair.
// The goroutine reading the model's stream checks calls (check, resolve);
// the goroutines running them report their results (done).
type guard struct {
	cfg   LoopGuard
	loops *loopguard.Guard // the run's one thread, ""; nil when the guard is off
	stop  *LoopError       // set when LoopStop fired; read between steps

	mu      sync.Mutex                // guards running
	running map[string]loopguard.Call // call ID → the call, for calls that run

	names []string           // the tool names reg holds, sorted
	reg   *registry.Registry // the current tools, for name repair
}

// newGuard returns a run's guard for cfg.
func newGuard(cfg LoopGuard) *guard {
	g := &guard{cfg: cfg, running: map[string]loopguard.Call{}}
	if cfg.Threshold >= 0 {
		g.loops = loopguard.New(&loopguard.Options{Threshold: cfg.Threshold})
	}
	return g
}

// setTools makes tools the ones names are repaired against.
func (g *guard) setTools(tools []ToolSpec) {
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	slices.Sort(names)
	if g.reg != nil && slices.Equal(names, g.names) {
		return
	}
	g.names = names
	g.reg = registry.New()
	for _, n := range names {
		// Names the registry refuses (not MCP-valid) are matched exactly
		// only; a failed Add adds nothing.
		_ = g.reg.Add(registry.Tool{Name: n, Kind: registry.Stateless, Source: "agent"})
	}
}

// resolve returns the registered name call.Name stands for, repaired for
// case, separators or a missing namespace; or an error result listing the
// available tools.
func (g *guard) resolve(name string) (string, *ToolResult) {
	if _, ok := slices.BinarySearch(g.names, name); ok {
		return name, nil
	}
	t, err := g.reg.Resolve(name, true)
	if err == nil {
		return t.Name, nil
	}
	var b strings.Builder
	b.WriteString("not_found: ")
	if nf, ok := errors.AsType[*registry.NotFoundError](err); ok && (nf.Ambiguous || len(nf.Suggestions) > 0) {
		b.WriteString(err.Error())
	} else {
		fmt.Fprintf(&b, "unknown tool %q", name)
	}
	if len(g.names) == 0 {
		b.WriteString("; no tools are available")
	} else {
		const maxListed = 50
		b.WriteString("; the available tools are: ")
		b.WriteString(strings.Join(g.names[:min(len(g.names), maxListed)], ", "))
		if n := len(g.names) - maxListed; n > 0 {
			fmt.Fprintf(&b, " and %d more", n)
		}
	}
	return "", errorResult(b.String())
}

// check records call and returns a result answering it when the guard
// keeps it from running.
func (g *guard) check(ctx context.Context, call ToolCall) *ToolResult {
	if g.loops == nil {
		return nil
	}
	c := loopguard.Call{Tool: call.Name, Args: canonjson.RawSum([]byte(call.Arguments))}
	count, act := g.loops.Check("", c)
	if !act {
		g.run(call.ID, c)
		return nil
	}
	switch g.cfg.Action {
	case LoopStop:
		g.stop = &LoopError{Tool: call.Name, Count: count}
	case LoopAsk:
		d := Deny
		if g.cfg.Ask != nil {
			d = g.cfg.Ask(ctx, call, count)
		}
		switch d {
		case AllowAlways:
			g.loops.Allow("", c)
			g.run(call.ID, c)
			return nil
		case AllowOnce:
			g.run(call.ID, c)
			return nil
		}
	}
	return errorResult(g.loops.Notice(call.Name, count) +
		", so the call was not run: change your approach (other arguments, another tool, or answer with what you have)")
}

// run notes that the call with ID id, c to the loop guard, runs.
func (g *guard) run(id string, c loopguard.Call) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.running[id] = c
}

// done tells the loop guard what a call that ran returned. It is called,
// from the goroutine that ran the call, before the step's results are
// complete, so the next step's calls are checked against it.
func (g *guard) done(res ToolResult) {
	g.mu.Lock()
	c, ok := g.running[res.CallID]
	delete(g.running, res.CallID)
	g.mu.Unlock()
	if !ok {
		return // answered without running: by the guard, or name repair
	}
	var d loopguard.Digest
	d.Add(strconv.FormatBool(res.IsError))
	for _, p := range res.Content {
		d.Add(string(p.Type))
		d.Add(p.Text)
		d.Add(p.URL)
		d.AddBytes(p.JSON)
	}
	g.loops.Done("", c, d.Sum())
}
