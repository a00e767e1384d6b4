package agent

import (
	"fmt"
	"slices"
)

// Price is what a model's tokens cost, in a currency of the caller's
// choice (USD, say) per million tokens.
type Price struct {
	Input, Output, CacheRead, CacheWrite float64
}

// Prices is a price table by model name, the model as the provider
// reported it (or as requested); the "" entry, when present, prices every
// model the table does not name.
type Prices map[string]Price

// cost returns what u cost with the price of model, or an
// *[UnknownPriceError].
func (p Prices) cost(model string, u Usage) (float64, error) {
	pr, ok := p[model]
	if !ok {
		if pr, ok = p[""]; !ok {
			return 0, &UnknownPriceError{Model: model}
		}
	}
	return (float64(u.InputTokens)*pr.Input + float64(u.OutputTokens)*pr.Output +
		float64(u.CacheReadTokens)*pr.CacheRead + float64(u.CacheWriteTokens)*pr.CacheWrite) / 1e6, nil
}

// EndReason says why a run ended.
type EndReason string

// The reasons a run ends.
const (
	EndRunning        EndReason = ""                // the run has not ended
	EndDone           EndReason = "done"            // the model finished its work
	EndMaxIterations  EndReason = "max_iterations"  // RunnerOptions.MaxIterations steps were made
	EndReturnDirectly EndReason = "return_directly" // a ReturnDirectly tool answered
	EndStopCondition  EndReason = "stop_condition"  // a StopWhen condition was met
	EndError          EndReason = "error"           // an error ended it ([Runner.Done] returns it)
)

// Outcome is what a run did, for accounting and for why it ended.
type Outcome struct {
	// Reason says why the run ended.
	Reason EndReason
	// Condition names the StopWhen condition met (EndStopCondition).
	Condition string
	// Result is the result of the ReturnDirectly tool (EndReturnDirectly).
	Result *ToolResult
	// Output is the final answer validated against the output schema
	// ([RunnerOptions.Output]), when there is one.
	Output []byte
	// Steps counts the model calls of the run (summaries included).
	Steps int
	// Usage totals the tokens of every model call of the run.
	Usage Usage
	// Cost totals their cost by [RunnerOptions.Prices]; zero without one.
	Cost float64
}

// RunState is what a [StopCondition] decides from: the run so far.
type RunState struct {
	// Step is the number of the step just made, from 1.
	Step int
	// Last is that step.
	Last *StepResult
	// Usage and Cost are the run's totals so far.
	Usage Usage
	Cost  float64
}

// StopCondition ends a run normally, after a step, when Met says so; the
// run's [Outcome] then names it. The constructors below are the common
// ones; a caller's own is a StopCondition literal.
type StopCondition struct {
	// Name names the condition in [Outcome.Condition].
	Name string
	// Met decides from the run so far.
	Met func(RunState) bool
}

// MaxTokens stops a run once it has used n tokens or more in all
// (cache tokens included).
func MaxTokens(n int64) StopCondition {
	return StopCondition{Name: fmt.Sprintf("max_tokens(%d)", n), Met: func(s RunState) bool { return s.Usage.Total() >= n }}
}

// MaxCost stops a run once it has cost c or more; it needs
// [RunnerOptions.Prices].
func MaxCost(c float64) StopCondition {
	return StopCondition{Name: fmt.Sprintf("max_cost(%g)", c), Met: func(s RunState) bool { return s.Cost >= c }}
}

// HasToolCall stops a run after a step that called the tool name (its
// result is in the history).
func HasToolCall(name string) StopCondition {
	return StopCondition{Name: "has_tool_call(" + name + ")", Met: func(s RunState) bool {
		return s.Last != nil && slices.ContainsFunc(s.Last.ToolCalls, func(c ToolCall) bool { return c.Name == name })
	}}
}

// FinishReasonIs stops a run after a step the model stopped for r.
func FinishReasonIs(r StopReason) StopCondition {
	return StopCondition{Name: "finish_reason_is(" + string(r) + ")", Met: func(s RunState) bool { return s.Last != nil && s.Last.StopReason == r }}
}
