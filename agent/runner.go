package agent

import (
	"context"
	"errors"
	"iter"
	"slices"
	"sync"
	"time"

	"github.com/toolgate/toolgate/retry"
)

// DefaultMaxIterations is [RunnerOptions.MaxIterations] when zero.
const DefaultMaxIterations = 20

// DefaultMaxConsecutiveToolFailures is
// [RunnerOptions.MaxConsecutiveToolFailures] when zero.
const DefaultMaxConsecutiveToolFailures = 3

// ErrStopped is what [Runner.Done] returns when the consumer of
// [Runner.Steps] stopped iterating before the run ended.
var ErrStopped = errors.New("agent: the run was stopped by its consumer before it ended")

// Params are what a [Runner] sends with each step. The caller may change
// them between steps with [Runner.SetParams] and [Runner.PushMessages].
type Params struct {
	// System is the system prompt.
	System string
	// Messages is the conversation; the runner appends each step's
	// assistant message and tool results.
	Messages []Message
	// Tools, when not nil, are the tools offered to the model instead of
	// the toolset's whole list.
	Tools []ToolSpec
	// Model are the model's settings.
	Model ModelOptions
}

// AutoEnhance is a one-time follow-up: when the model first stops without
// calling a tool and When says so, Prompt is pushed as a user message and
// the run goes on.
type AutoEnhance struct {
	// Prompt is the user message pushed.
	Prompt string
	// When decides from the step that ended without tool calls; nil
	// means always.
	When func(s *StepResult) bool
}

// RunnerOptions configure a [Runner]. The zero value (or nil) works.
type RunnerOptions struct {
	// MaxIterations caps the steps of a run; zero means
	// [DefaultMaxIterations]. Reaching it ends the run normally, the
	// history so far kept, with [EndMaxIterations] as its
	// [Outcome.Reason] (the SDKs' behaviour); MaxIterationsIsError makes it
	// end with a *[MaxIterationsError] instead.
	MaxIterations        int
	MaxIterationsIsError bool
	// MaxConsecutiveToolFailures ends the run with a *[ToolFailuresError]
	// after that many steps in a row whose results include an error;
	// zero means [DefaultMaxConsecutiveToolFailures], negative no limit.
	MaxConsecutiveToolFailures int
	// LoopGuard stops the model from repeating a call; the zero value is
	// on (a notice at the fourth identical call in a row, after three that
	// returned the same result).
	LoopGuard LoopGuard
	// AutoEnhance, when not nil, is the one-time follow-up.
	AutoEnhance *AutoEnhance
	// PrepareStep, when not nil, is called before each step with the
	// step's number (from 1) and the request about to be sent, which it
	// may change (system prompt, tools, model options) for this step
	// only; an error ends the run with it.
	PrepareStep func(ctx context.Context, step int, req *Request) error
	// CompactAt is the context size in tokens (the last step's input,
	// cache writes, cache reads and output) at or above which Compact is
	// called; zero means never.
	CompactAt int64
	// Compact, when not nil, may replace the history (a summary of it,
	// say) once a step's context reaches CompactAt; its error ends the
	// run. It is the hook for custom strategies; [Compaction] is the
	// built-in summariser.
	Compact func(ctx context.Context, history []Message, usage Usage) ([]Message, error)
	// Compaction, when not nil, is the built-in summariser: past its
	// threshold the model summarises the history, which the summary then
	// replaces. It is used when Compact is nil.
	Compaction *Compaction
	// StopWhen ends the run normally after the first step that meets one
	// of its conditions ([MaxTokens], [MaxCost], [HasToolCall],
	// [FinishReasonIs], or the caller's own).
	StopWhen []StopCondition
	// Prices, when not nil, prices each step by its model, for
	// [Outcome.Cost] and [MaxCost]; a step whose model it does not price
	// ends the run with an *[UnknownPriceError].
	Prices Prices
	// ToolTimeout bounds each tool call (zero: none); ToolTimeouts bounds
	// the tools it names instead. A call past it is answered with an
	// isError result of class timeout.
	ToolTimeout  time.Duration
	ToolTimeouts map[string]time.Duration
	// ReturnDirectly names tools whose successful result ends the run
	// ([EndReturnDirectly]; the result is in [Outcome.Result]) instead
	// of going back to the model.
	ReturnDirectly []string
	// ContinueOnPermission lets a run go on after a tool answered with a
	// permission-class error; by default the run ends with a
	// *[PermissionError] after that step.
	ContinueOnPermission bool
	// RepairToolCall, when not nil, gets one chance to fix a call whose
	// arguments are malformed or break its input schema before it is
	// answered with an isError result; [ModelRepair] asks the model.
	RepairToolCall RepairFunc
	// Output, when not nil, is the JSON Schema the final answer must
	// match: it is sent to the provider, the answer is validated, and a
	// violating one gets one repair round; [Outcome.Output] holds it.
	Output *OutputSchema
	// PromptCache places prompt-cache breakpoints (Anthropic) on the
	// system prompt, the tools and the history so far, at each step.
	PromptCache bool
	// MaxTools caps the tools sent per request; zero means the
	// provider's own cap when it has one ([ToolLimiter]). Past it, the
	// model is offered a tool-search tool and the most relevant tools.
	MaxTools int
	// Journal, when not nil, records the history as it is committed, so
	// that a run can be resumed from it ([OpenJournal]).
	Journal *Journal
	// OnIteration, when not nil, is called after each step's model call
	// with the step's number and result.
	OnIteration func(step int, s *StepResult)
	// OnToolCall, when not nil, receives each tool call as it completes
	// in the stream, before name repair and the loop guard.
	OnToolCall func(ToolCall)
	// OnToolResult, when not nil, receives each result as its call
	// finishes (concurrently for parallel calls).
	OnToolResult func(ToolResult)
	// OnToolState, when not nil, receives each call's state changes.
	OnToolState func(ToolCall, ToolState)
	// OnPart, when not nil, receives every raw stream fragment.
	OnPart func(Fragment)
	// Events, when not nil, receives stream events.
	Events *Events
	// Retry is the model calls' retry policy; nil means [DefaultRetry].
	Retry *retry.Policy
	// MaxParallel bounds the tool calls running at once in one step; zero
	// means [DefaultMaxParallel].
	MaxParallel int
}

// Runner runs the agent loop: it makes steps until one has no tool call.
// Iterate its steps with [Runner.Steps] (once), or call
// [Runner.RunUntilDone]. Between steps (or from a callback while one
// runs), [Runner.PushMessages] and [Runner.SetParams] change what the next
// step sends. A Runner is safe for concurrent use.
type Runner struct {
	p    Provider
	ts   Toolset
	opts RunnerOptions

	mu       sync.Mutex // guards params, mutated, consumed, final, err, done and outcome
	params   Params
	mutated  bool // the params changed since the current step started
	consumed bool
	final    Message
	err      error
	done     chan struct{} // closed when the run ends
	outcome  Outcome
}

// NewRunner returns a runner that drives p through the tools of ts (nil
// means no tools), starting from params.
func NewRunner(p Provider, ts Toolset, params Params, opts *RunnerOptions) *Runner {
	r := &Runner{p: p, ts: ts, done: make(chan struct{})}
	if opts != nil {
		r.opts = *opts
	}
	params.Messages = slices.Clone(params.Messages)
	r.params = params
	return r
}

// PushMessages appends msgs to the history the next step sends. Called
// while a step runs, it marks the params mutated: that step's assistant
// message and tool results are then not appended by the runner (its tool
// results, computed once, stay available from its [StepResult]).
func (r *Runner) PushMessages(msgs ...Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.params.Messages = append(r.params.Messages, msgs...)
	r.mutated = true
}

// SetParams lets fn change the params, under the runner's lock (fn must not
// call the runner). Like [Runner.PushMessages], it marks them mutated.
func (r *Runner) SetParams(fn func(p *Params)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fn(&r.params)
	r.mutated = true
}

// Params returns a copy of the current params.
func (r *Runner) Params() Params {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.params
	p.Messages = slices.Clone(p.Messages)
	p.Tools = slices.Clone(p.Tools)
	return p
}

// History returns a copy of the conversation so far.
func (r *Runner) History() History {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.params.Messages)
}

// Steps returns the run as an iterator of steps. It can be consumed once:
// ranging over it again (or over another Steps of the same runner) yields
// only [ErrConsumed]. Each step is yielded once its tool results are in
// and appended; an error ends the run and is the last thing yielded (a
// step yielded with an error is a truncated one). Breaking out of the loop
// ends the run. ctx bounds the whole run: when it ends, the run stops with
// what was done and ctx's error.
func (r *Runner) Steps(ctx context.Context) iter.Seq2[*StepResult, error] {
	return func(yield func(*StepResult, error) bool) {
		r.mu.Lock()
		if r.consumed {
			r.mu.Unlock()
			yield(nil, ErrConsumed)
			return
		}
		r.consumed = true
		r.mu.Unlock()
		final, err := r.loop(ctx, yield)
		r.mu.Lock()
		r.final, r.err = final, err
		if err != nil {
			r.outcome.Reason = EndError
		}
		done := r.done
		if rerunnable(err) {
			// The seed's and the SDK's rule: a provider's failure leaves
			// the runner usable; the next Steps goes on from the history.
			r.consumed = false
			r.done = make(chan struct{})
		}
		r.mu.Unlock()
		close(done)
	}
}

// rerunnable reports whether err, which ended a run, came from the model
// call: the run may then be run again from its history.
func rerunnable(err error) bool {
	var pe *providerError
	return errors.As(err, &pe)
}

// providerError marks an error of a step's model call inside the loop; the
// runner unwraps it before returning it.
type providerError struct{ err error }

func (e *providerError) Error() string { return e.err.Error() }
func (e *providerError) Unwrap() error { return e.err }

// Outcome returns why the run ended (EndRunning while it runs) and its
// totals so far.
func (r *Runner) Outcome() Outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.outcome
}

// RunUntilDone runs the loop to its end, unless someone already consumes
// [Runner.Steps], and returns the final assistant message and the error
// that ended the run ([Runner.Done]).
func (r *Runner) RunUntilDone(ctx context.Context) (Message, error) {
	r.mu.Lock()
	consumed := r.consumed
	r.mu.Unlock()
	if !consumed {
		for range r.Steps(ctx) {
		}
	}
	return r.Done(ctx)
}

// Done waits until the run has ended (or ctx ends) and returns the last
// assistant message and what ended the run: nil when the model finished,
// else the error ([MaxIterationsError], [ToolFailuresError], [LoopError],
// [TruncatedError], a provider's error, ctx's error, [ErrStopped]).
func (r *Runner) Done(ctx context.Context) (Message, error) {
	r.mu.Lock()
	done := r.done
	if !r.consumed && r.err != nil {
		// Ended by a provider's error and runnable again: that run is done.
		defer r.mu.Unlock()
		return r.final, unwrapProvider(r.err)
	}
	r.mu.Unlock()
	select {
	case <-done:
	default:
		select {
		case <-done:
		case <-ctx.Done():
			return Message{}, ctx.Err()
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.final, unwrapProvider(r.err)
}

func unwrapProvider(err error) error {
	if pe, ok := err.(*providerError); ok {
		return pe.err
	}
	return err
}
