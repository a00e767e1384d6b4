package agent

import (
	"context"
	"errors"
	"iter"
	"slices"
	"sync"

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
	// [DefaultMaxIterations]. Reaching it ends the run with a
	// *[MaxIterationsError], the history so far kept.
	MaxIterations int
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
	// CompactAt is the token count (input and output of the last step)
	// at or above which Compact is called; zero means never.
	CompactAt int64
	// Compact, when not nil, may replace the history (a summary of it,
	// say) once a step's usage reaches CompactAt; its error ends the run.
	Compact func(ctx context.Context, history []Message, usage Usage) ([]Message, error)
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

	mu       sync.Mutex // guards params, mutated, consumed, final and err
	params   Params
	mutated  bool // the params changed since the current step started
	consumed bool
	final    Message
	err      error
	done     chan struct{} // closed when the run ends
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
		r.mu.Unlock()
		close(r.done)
	}
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
	select {
	case <-r.done:
	default:
		select {
		case <-r.done:
		case <-ctx.Done():
			return Message{}, ctx.Err()
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.final, r.err
}

// loop runs the steps and returns the final message and what ended the run.
func (r *Runner) loop(ctx context.Context, yield func(*StepResult, error) bool) (final Message, err error) {
	o := &r.opts
	maxIter := o.MaxIterations
	if maxIter <= 0 {
		maxIter = DefaultMaxIterations
	}
	maxFail := o.MaxConsecutiveToolFailures
	if maxFail == 0 {
		maxFail = DefaultMaxConsecutiveToolFailures
	}
	g := newGuard(o.LoopGuard)
	stepOpts := &StepOptions{
		Generate: GenerateOptions{
			OnPart:     o.OnPart,
			OnToolCall: o.OnToolCall,
			Events:     o.Events,
			Retry:      o.Retry,
		},
		OnToolResult: func(res ToolResult) {
			g.done(res)
			if o.OnToolResult != nil {
				o.OnToolResult(res)
			}
		},
		OnToolState: o.OnToolState,
		MaxParallel: o.MaxParallel,
		Before: func(ctx context.Context, c ToolCall) (ToolCall, *ToolResult) {
			name, res := g.resolve(c.Name)
			if res != nil {
				return c, res
			}
			c.Name = name
			return c, g.check(ctx, c)
		},
	}
	fail := func(s *StepResult, err error) (Message, error) {
		yield(s, err)
		return final, err
	}
	failures := 0
	enhanced := false
	for step := 1; ; step++ {
		if step > maxIter {
			return fail(nil, &MaxIterationsError{Max: maxIter})
		}
		r.mu.Lock()
		r.mutated = false
		req := Request{System: r.params.System, Tools: r.params.Tools, Messages: slices.Clone(r.params.Messages), Options: r.params.Model}
		r.mu.Unlock()
		if req.Tools == nil && r.ts != nil {
			tools, err := r.ts.Tools(ctx)
			if err != nil {
				return fail(nil, err)
			}
			req.Tools = tools
		}
		if o.PrepareStep != nil {
			if err := o.PrepareStep(ctx, step, &req); err != nil {
				return fail(nil, err)
			}
		}
		if req.Tools == nil {
			req.Tools = []ToolSpec{} // listed already: keep Step from listing again
		}
		g.setTools(req.Tools)
		s, err := Step(ctx, r.p, r.ts, &req, stepOpts)
		if err != nil {
			if s != nil {
				final = s.Message
			}
			return fail(s, err)
		}
		final = s.Message
		if o.OnIteration != nil {
			o.OnIteration(step, s)
		}
		results, err := s.ToolResults(ctx)
		if err == nil {
			// Tools cancelled with the run may have returned before
			// ToolResults saw ctx end: a cancelled step commits nothing.
			err = ctx.Err()
		}
		if err != nil {
			return fail(nil, err)
		}
		r.mu.Lock()
		if !r.mutated {
			r.params.Messages = append(r.params.Messages, s.Message)
			for _, res := range results {
				r.params.Messages = append(r.params.Messages, ToolMessage(res))
			}
		}
		r.mu.Unlock()
		if slices.ContainsFunc(results, func(t ToolResult) bool { return t.IsError }) {
			failures++
		} else {
			failures = 0
		}
		if o.Compact != nil && o.CompactAt > 0 && s.Usage.InputTokens+s.Usage.OutputTokens >= o.CompactAt {
			if err := r.compact(ctx, s.Usage); err != nil {
				return fail(nil, err)
			}
		}
		if !yield(s, nil) {
			return final, ErrStopped
		}
		if g.stop != nil {
			return fail(nil, g.stop)
		}
		if maxFail > 0 && failures >= maxFail {
			return fail(nil, &ToolFailuresError{Steps: failures})
		}
		if len(s.ToolCalls) > 0 {
			continue
		}
		r.mu.Lock()
		mutated := r.mutated
		r.mu.Unlock()
		if mutated {
			continue // the caller added to the conversation: answer it
		}
		if ae := o.AutoEnhance; ae != nil && !enhanced && (ae.When == nil || ae.When(s)) {
			enhanced = true
			r.mu.Lock()
			r.params.Messages = append(r.params.Messages, UserText(ae.Prompt))
			r.mu.Unlock()
			continue
		}
		return final, nil
	}
}

// compact lets the Compact hook replace the history.
func (r *Runner) compact(ctx context.Context, u Usage) error {
	h := r.History()
	out, err := r.opts.Compact(ctx, h, u)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.params.Messages = slices.Clone(out)
	r.mu.Unlock()
	return nil
}
