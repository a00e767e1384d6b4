package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/internal/canonjson"
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
// [LoopGuard.Threshold] is zero: the third identical call in a row.
const DefaultLoopThreshold = 3

// LoopGuard stops a model that repeats itself: the same tool with the same
// canonical arguments (object keys sorted, whitespace dropped) Threshold
// times in a row in one run. The zero value is a notice at the third call.
type LoopGuard struct {
	// Threshold is how many identical calls in a row trigger the guard (at
	// the Threshold-th). Zero means [DefaultLoopThreshold]; negative turns
	// the guard off.
	Threshold int
	// Action is what the guard does; empty means [LoopNotice].
	Action LoopAction
	// Ask decides, for [LoopAsk], whether call (made count times in a
	// row) runs. It runs on the goroutine reading the model's stream. Nil
	// means [Deny].
	Ask func(ctx context.Context, call ToolCall, count int) LoopDecision
}

// guard is the per-run state of the loop guard and of tool-name repair.
// The runner's loop goroutine is its only user.
type guard struct {
	cfg     LoopGuard
	last    string // tool and canonical arguments of the last call
	count   int
	allowed map[string]bool // calls the Ask callback allowed always
	stop    *LoopError      // set when LoopStop fired

	names []string           // the tool names reg holds, sorted
	reg   *registry.Registry // the current tools, for name repair
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
	threshold := g.cfg.Threshold
	if threshold == 0 {
		threshold = DefaultLoopThreshold
	}
	if threshold < 0 {
		return nil
	}
	key := call.Name + "\x00" + canonicalArgs(call.Arguments)
	if key == g.last {
		g.count++
	} else {
		g.last, g.count = key, 1
	}
	if g.count < threshold || g.allowed[key] {
		return nil
	}
	notice := fmt.Sprintf("loop guard: this is call %d in a row of tool %q with the same arguments; "+
		"repeating it will not give a different result, so the call was not run: change your approach (other arguments, another tool, or answer with what you have)", g.count, call.Name)
	switch g.cfg.Action {
	case LoopStop:
		g.stop = &LoopError{Tool: call.Name, Count: g.count}
	case LoopAsk:
		d := Deny
		if g.cfg.Ask != nil {
			d = g.cfg.Ask(ctx, call, g.count)
		}
		switch d {
		case AllowAlways:
			if g.allowed == nil {
				g.allowed = make(map[string]bool)
			}
			g.allowed[key] = true
			return nil
		case AllowOnce:
			return nil
		}
	}
	return errorResult(notice)
}

// canonicalArgs returns the canonical form of a JSON arguments text, as
// the gateway's loop guard compares arguments (internal/canonjson): keys
// sorted, no insignificant whitespace, numbers by value (1 and 1.0 are the
// same). Text that is not JSON is returned as it is.
func canonicalArgs(s string) string {
	c, err := canonjson.JSON([]byte(s))
	if err != nil {
		return s
	}
	return string(c)
}
