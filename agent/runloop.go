package agent

import (
	"context"
	"errors"
	"slices"
	"strings"
)

// runLoop is the state of one run of a [Runner]'s loop.
type runLoop struct {
	r        *Runner
	o        *RunnerOptions
	ctx      context.Context
	yield    func(*StepResult, error) bool
	g        *guard
	sel      *toolSelector
	out      *outputCheck
	stepOpts *StepOptions
	maxIter  int
	maxFail  int
	failures int
	enhanced bool
	final    Message
	context  int64 // the last step's context size in tokens
}

// loop runs the steps and returns the final message and what ended the
// run. An error of a model call comes wrapped in a *providerError.
func (r *Runner) loop(ctx context.Context, yield func(*StepResult, error) bool) (Message, error) {
	o := &r.opts
	l := &runLoop{r: r, o: o, ctx: ctx, yield: yield, g: newGuard(o.LoopGuard), maxIter: o.MaxIterations, maxFail: o.MaxConsecutiveToolFailures}
	if l.maxIter <= 0 {
		l.maxIter = DefaultMaxIterations
	}
	if l.maxFail == 0 {
		l.maxFail = DefaultMaxConsecutiveToolFailures
	}
	l.sel = newToolSelector(o.MaxTools, r.p)
	var err error
	if l.out, err = newOutputCheck(o.Output); err != nil {
		return l.fail(nil, err)
	}
	l.stepOpts = r.stepOptions(ctx, l.g, l.sel)
	if err := l.syncJournal(); err != nil {
		return l.fail(nil, err)
	}
	if _, err := r.answerPending(ctx, l.stepOpts); err != nil {
		return l.fail(nil, err)
	}
	return l.run()
}

// run makes the steps.
func (l *runLoop) run() (Message, error) {
	for step := 1; ; step++ {
		if step > l.maxIter {
			if l.o.MaxIterationsIsError {
				return l.fail(nil, &MaxIterationsError{Max: l.maxIter})
			}
			return l.end(EndMaxIterations, nil)
		}
		if err := l.compactIfDue(); err != nil {
			return l.fail(nil, err)
		}
		s, err := l.step(step)
		if err != nil {
			return l.fail(s, err)
		}
		results, err := l.commit(step, s)
		if err != nil {
			return l.fail(nil, err)
		}
		if !l.yield(s, nil) {
			return l.final, ErrStopped
		}
		if done, err := l.decide(step, s, results); done || err != nil {
			if err != nil {
				return l.fail(nil, err)
			}
			return l.final, nil
		}
	}
}

func (l *runLoop) fail(s *StepResult, err error) (Message, error) {
	l.yield(s, unwrapProvider(err))
	return l.final, err
}

// end ends the run normally for reason.
func (l *runLoop) end(reason EndReason, set func(*Outcome)) (Message, error) {
	l.r.mu.Lock()
	l.r.outcome.Reason = reason
	if set != nil {
		set(&l.r.outcome)
	}
	l.r.mu.Unlock()
	return l.final, nil
}

// step builds the step's request and makes the step.
func (l *runLoop) step(n int) (*StepResult, error) {
	r, o := l.r, l.o
	r.mu.Lock()
	r.mutated = false
	req := Request{System: r.params.System, Tools: r.params.Tools, Messages: slices.Clone(r.params.Messages), Options: r.params.Model, Output: o.Output}
	r.mu.Unlock()
	if err := l.syncJournal(); err != nil {
		return nil, err
	}
	if req.Tools == nil && r.ts != nil {
		tools, err := r.ts.Tools(l.ctx)
		if err != nil {
			return nil, err
		}
		req.Tools = tools
	}
	all := req.Tools
	req.Tools = l.sel.offer(all, req.Messages)
	if o.PrepareStep != nil {
		if err := o.PrepareStep(l.ctx, n, &req); err != nil {
			return nil, err
		}
	}
	if req.Tools == nil {
		req.Tools = []ToolSpec{} // listed already: keep Step from listing again
	}
	if len(req.Tools) < len(all) && l.sel.limited(all) {
		l.g.setTools(all) // a tool the model found by search is callable
	} else {
		l.g.setTools(req.Tools)
	}
	if o.PromptCache {
		req.Cache = CacheHints{System: true, Tools: true, History: len(req.Messages)}
	}
	if j := o.Journal; j != nil {
		j.hold()
	}
	s, err := Step(l.ctx, r.p, r.ts, &req, l.stepOpts)
	if s != nil {
		l.final = s.Message
	}
	if j := o.Journal; j != nil {
		var a *Message
		if err == nil {
			a = &s.Message
		}
		if jerr := j.release(a); jerr != nil && err == nil {
			err = jerr
		}
	}
	if err != nil {
		if _, truncated := errors.AsType[*TruncatedError](err); !truncated && l.ctx.Err() == nil {
			err = &providerError{err: err}
		}
		return s, err
	}
	return s, nil
}

// commit waits for the step's results, appends them with its message to
// the history, and counts its usage.
func (l *runLoop) commit(n int, s *StepResult) ([]ToolResult, error) {
	if l.o.OnIteration != nil {
		l.o.OnIteration(n, s)
	}
	results, err := s.ToolResults(l.ctx)
	if err == nil {
		// Tools cancelled with the run may have returned before
		// ToolResults saw ctx end: a cancelled step commits nothing.
		err = l.ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	r := l.r
	r.mu.Lock()
	if !r.mutated {
		r.params.Messages = append(r.params.Messages, s.Message)
		for _, res := range results {
			r.params.Messages = append(r.params.Messages, ToolMessage(res))
		}
		if l.o.Journal != nil {
			l.o.Journal.mark(len(r.params.Messages))
		}
	} else if l.o.Journal != nil {
		l.o.Journal.mark(-1) // the journal has the step; the history does not
	}
	r.mu.Unlock()
	if slices.ContainsFunc(results, func(t ToolResult) bool { return t.IsError }) {
		l.failures++
	} else {
		l.failures = 0
	}
	u := s.Usage
	l.context = u.InputTokens + u.CacheWriteTokens + u.CacheReadTokens + u.OutputTokens
	return results, l.count(s.Model, u)
}

// count adds one model call's usage (and cost) to the run's totals.
func (l *runLoop) count(model string, u Usage) error {
	var c float64
	if l.o.Prices != nil {
		var err error
		if c, err = l.o.Prices.cost(model, u); err != nil {
			return err
		}
	}
	l.r.mu.Lock()
	defer l.r.mu.Unlock()
	l.r.outcome.Steps++
	l.r.outcome.Usage = l.r.outcome.Usage.Add(u)
	l.r.outcome.Cost += c
	return nil
}

// decide says whether the run ends after step s (and with what error).
func (l *runLoop) decide(n int, s *StepResult, results []ToolResult) (bool, error) {
	o := l.o
	if l.g.stop != nil {
		return true, l.g.stop
	}
	if err := permissionStop(results, o.ContinueOnPermission); err != nil {
		return true, err
	}
	for _, res := range results {
		if !res.IsError && slices.Contains(o.ReturnDirectly, res.Name) {
			l.end(EndReturnDirectly, func(out *Outcome) { out.Result = &res })
			return true, nil
		}
	}
	if met := l.condition(n, s); met != "" {
		l.end(EndStopCondition, func(out *Outcome) { out.Condition = met })
		return true, nil
	}
	if l.maxFail > 0 && l.failures >= l.maxFail {
		return true, &ToolFailuresError{Steps: l.failures}
	}
	if len(s.ToolCalls) > 0 || s.StopReason == StopPaused {
		return false, nil // a paused turn goes on where it stopped
	}
	l.r.mu.Lock()
	mutated := l.r.mutated
	l.r.mu.Unlock()
	if mutated {
		return false, nil // the caller added to the conversation: answer it
	}
	if again, err := l.checkOutput(s); again || err != nil {
		return err != nil, err
	}
	if ae := o.AutoEnhance; ae != nil && !l.enhanced && (ae.When == nil || ae.When(s)) {
		l.enhanced = true
		l.r.PushMessages(UserText(ae.Prompt))
		return false, nil
	}
	l.end(EndDone, nil)
	return true, nil
}

// condition returns the name of the first StopWhen condition met, or "".
func (l *runLoop) condition(n int, s *StepResult) string {
	if len(l.o.StopWhen) == 0 {
		return ""
	}
	out := l.r.Outcome()
	st := RunState{Step: n, Last: s, Usage: out.Usage, Cost: out.Cost}
	for _, c := range l.o.StopWhen {
		if c.Met(st) {
			return c.Name
		}
	}
	return ""
}

// permissionStop returns the *PermissionError of the first result of class
// permission, unless the caller lets the run go on.
func permissionStop(results []ToolResult, goOn bool) error {
	if goOn {
		return nil
	}
	for _, res := range results {
		if !res.IsError {
			continue
		}
		if text := res.Text(); strings.HasPrefix(text, "permission:") {
			return &PermissionError{Tool: res.Name, Message: strings.TrimSpace(strings.TrimPrefix(text, "permission:"))}
		}
	}
	return nil
}

// checkOutput validates the final answer against the output schema: it
// returns true to go on after pushing one repair request, or the error of
// an answer that still violates it.
func (l *runLoop) checkOutput(s *StepResult) (bool, error) {
	if l.out == nil {
		return false, nil
	}
	value, err := l.out.check(s.Message.Text())
	if err == nil {
		l.r.mu.Lock()
		l.r.outcome.Output = value
		l.r.mu.Unlock()
		return false, nil
	}
	if l.out.repaired {
		return false, err
	}
	l.out.repaired = true
	l.r.PushMessages(UserText(l.out.repairPrompt(err)))
	return true, nil
}

// stepOptions returns the options of the loop's steps.
func (r *Runner) stepOptions(ctx context.Context, g *guard, sel *toolSelector) *StepOptions {
	o := &r.opts
	so := &StepOptions{
		Generate: GenerateOptions{OnPart: o.OnPart, OnToolCall: o.OnToolCall, Events: o.Events, Retry: o.Retry},
		OnToolResult: func(res ToolResult) {
			g.done(res)
			if j := o.Journal; j != nil && ctx.Err() == nil {
				_ = j.result(ToolMessage(res)) // a write error is returned by the journal's next write
			}
			if o.OnToolResult != nil {
				o.OnToolResult(res)
			}
		},
		OnToolState:  o.OnToolState,
		MaxParallel:  o.MaxParallel,
		ToolTimeout:  o.ToolTimeout,
		ToolTimeouts: o.ToolTimeouts,
		Before: func(ctx context.Context, c ToolCall) (ToolCall, *ToolResult) {
			if res := sel.answer(c); res != nil {
				return c, res
			}
			name, res := g.resolve(c.Name)
			if res != nil {
				return c, res
			}
			c.Name = name
			return c, g.check(ctx, c)
		},
	}
	if o.RepairToolCall != nil {
		ck := newArgsChecker(sel)
		so.Check = ck.check
		so.Repair = func(ctx context.Context, c ToolCall, problem error) (ToolCall, error) {
			return o.RepairToolCall(ctx, c, sel.spec(c.Name), problem)
		}
	}
	return so
}

// pendingCalls returns the tool calls of the last assistant message of h
// that no tool message after it answers.
func pendingCalls(h []Message) []ToolCall {
	i := len(h) - 1
	for i >= 0 && h[i].Role == RoleTool {
		i--
	}
	if i < 0 || h[i].Role != RoleAssistant {
		return nil
	}
	answered := make(map[string]bool)
	for _, m := range h[i+1:] {
		answered[m.Result.CallID] = true
	}
	var out []ToolCall
	for _, c := range h[i].ToolCalls {
		if !answered[c.ID] {
			out = append(out, c)
		}
	}
	return out
}

// GenerateToolResponse answers the tool calls of the last assistant
// message that have no result yet (one a host pushed, or one whose run was
// cancelled or crashed): it runs them through the toolset, appends their
// results to the history, and returns them. With nothing to answer it
// returns nil. [Runner.Steps] does this itself before its first step.
func (r *Runner) GenerateToolResponse(ctx context.Context) ([]ToolResult, error) {
	g := newGuard(r.opts.LoopGuard)
	sel := newToolSelector(r.opts.MaxTools, r.p)
	return r.answerPending(ctx, r.stepOptions(ctx, g, sel))
}

func (r *Runner) answerPending(ctx context.Context, so *StepOptions) ([]ToolResult, error) {
	calls := pendingCalls(r.History())
	if len(calls) == 0 {
		return nil, nil
	}
	direct := *so
	direct.Before = nil // no stream to repair names against: the calls run as made
	results := runCalls(ctx, r.ts, calls, &direct)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.mu.Lock()
	for _, res := range results {
		r.params.Messages = append(r.params.Messages, ToolMessage(res))
	}
	if r.opts.Journal != nil {
		r.opts.Journal.mark(len(r.params.Messages))
	}
	r.mu.Unlock()
	return results, nil
}
