package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Toolset is what a model's tool calls run against: [GatewayToolset],
// [MCPToolset], or a host program's own. It must be safe for concurrent
// use: calls of one step run in parallel.
type Toolset interface {
	// Tools lists the tools the model may call.
	Tools(ctx context.Context) ([]ToolSpec, error)
	// Call runs call.Name with call.Arguments (a JSON object) and returns
	// its result; a tool's own failure is a result with IsError set. An
	// error means the call could not be made at all (unknown tool, broken
	// connection); [Step] turns it into an isError result.
	Call(ctx context.Context, call ToolCall) (ToolResult, error)
}

// ToolState is where one tool call is in its life.
type ToolState string

// A call moves pending → running → completed or error.
const (
	ToolPending   ToolState = "pending"   // complete in the stream, waiting for a slot
	ToolRunning   ToolState = "running"   // executing
	ToolCompleted ToolState = "completed" // finished with a result
	ToolError     ToolState = "error"     // finished with an isError result
)

// DefaultMaxParallel is how many tool calls of one step run at once when
// [StepOptions.MaxParallel] is zero.
const DefaultMaxParallel = 8

// StepOptions are the callbacks and settings of [Step]. The zero value (or
// nil) works.
type StepOptions struct {
	// Generate holds the model call's callbacks and retry policy.
	// Generate.OnToolCall, when set, is called before the call starts.
	Generate GenerateOptions
	// OnToolResult, when not nil, receives each result as its call
	// finishes, from the goroutine that ran it (calls run concurrently).
	OnToolResult func(ToolResult)
	// OnToolState, when not nil, receives each state change of each call,
	// possibly concurrently for different calls.
	OnToolState func(ToolCall, ToolState)
	// MaxParallel bounds the calls running at once; zero means
	// [DefaultMaxParallel].
	MaxParallel int
	// Before, when not nil, sees each complete call before it runs, in the
	// order calls complete, on the goroutine reading the stream. It
	// returns the call to run (its Name may be repaired) and, when not
	// nil, a result that answers the call without running it.
	Before func(ctx context.Context, call ToolCall) (ToolCall, *ToolResult)
	// ToolTimeout bounds each call's run; zero means no bound beyond ctx.
	// A call that takes longer is cancelled and answered with an isError
	// result of class timeout.
	ToolTimeout time.Duration
	// ToolTimeouts bounds the calls of the tools it names, instead of
	// ToolTimeout.
	ToolTimeouts map[string]time.Duration
	// Repair, when not nil, gets one chance to fix a call whose arguments
	// are not a JSON object, or (Check) break its tool's rules, before
	// it is answered with an isError result: it returns the call to run
	// instead, or an error to give up. It runs on the call's goroutine.
	Repair func(ctx context.Context, call ToolCall, problem error) (ToolCall, error)
	// Check, when not nil, validates a call's arguments object (its
	// schema, say) before it runs; a non-nil error is a problem Repair
	// may fix, else the call's isError result.
	Check func(call ToolCall) error
}

// StepResult is the outcome of one [Step]: the model's message, and the
// tool calls it made, which run in the background.
type StepResult struct {
	// ID is the provider's ID of the response.
	ID string
	// Message is the assistant message.
	Message Message
	// Model is the model that answered, as the provider reported it
	// (or as requested).
	Model string
	// Usage counts the model call's tokens.
	Usage Usage
	// StopReason says why the model stopped. When it is truncated
	// ([StopReason.Truncated]) no tool call is run.
	StopReason StopReason
	// ToolCalls are the message's tool calls, in the model's order.
	ToolCalls []ToolCall

	done    chan struct{}          // closed once every call has finished
	results map[string]*ToolResult // by call ID; written before done closes
}

// ToolResults waits for every tool call of the step to finish and returns
// their results in call order. Results are computed once: every call
// returns the same results, and no call runs twice. A truncated step has no
// results. The error is ctx's when ctx ends first; the calls go on running.
func (s *StepResult) ToolResults(ctx context.Context) ([]ToolResult, error) {
	select {
	case <-s.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if s.StopReason.Truncated() {
		return nil, nil
	}
	out := make([]ToolResult, 0, len(s.ToolCalls))
	for _, c := range s.ToolCalls {
		if r, ok := s.results[c.ID]; ok {
			out = append(out, *r)
		}
	}
	return out, nil
}

// Step makes one model call ([Generate]) and starts running each tool call
// the moment it is complete in the stream, so tools run while the model is
// still streaming. It returns when the stream ends; the calls may still be
// running: [StepResult.ToolResults] waits for them.
//
// When req.Tools is nil, Step lists ts's tools. Tool failures (unknown
// tool, arguments that are not a JSON object, an error from ts, a panic)
// become isError results and never abort the step. Calls run in parallel,
// at most [StepOptions.MaxParallel] at once, under ctx: cancelling it
// cancels them. When the turn was truncated ([StopReason.Truncated]), the
// calls already started are cancelled and the step has no results; the
// returned error is then a *[TruncatedError] alongside the result. Any
// other error comes from Generate, after the calls it started have been
// cancelled and have finished.
func Step(ctx context.Context, p Provider, ts Toolset, req *Request, opts *StepOptions) (*StepResult, error) {
	if opts == nil {
		opts = &StepOptions{}
	}
	if req.Tools == nil && ts != nil {
		tools, err := ts.Tools(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing the tools: %w", err)
		}
		r := *req
		r.Tools = tools
		req = &r
	}
	par := opts.MaxParallel
	if par <= 0 {
		par = DefaultMaxParallel
	}
	runCtx, cancel := context.WithCancel(ctx)
	x := &executor{ts: ts, opts: opts, sem: make(chan struct{}, par), results: make(map[string]*ToolResult)}
	gen := opts.Generate
	userOnToolCall := gen.OnToolCall
	gen.OnToolCall = func(c ToolCall) {
		if userOnToolCall != nil {
			userOnToolCall(c)
		}
		x.start(runCtx, c)
	}
	res, err := Generate(ctx, p, req, &gen)
	if err != nil {
		cancel()
		x.wg.Wait()
		return nil, err
	}
	s := &StepResult{ID: res.ID, Model: res.Model, Message: res.Message, Usage: res.Usage, StopReason: res.StopReason,
		ToolCalls: res.Message.ToolCalls, done: make(chan struct{}), results: x.results}
	if res.StopReason.Truncated() {
		cancel()
		x.wg.Wait()
		close(s.done)
		return s, &TruncatedError{Reason: res.StopReason, Message: res.Message}
	}
	go func() {
		x.wg.Wait()
		cancel()
		close(s.done)
	}()
	return s, nil
}

// executor runs the tool calls of one step.
type executor struct {
	ts   Toolset
	opts *StepOptions
	sem  chan struct{}
	wg   sync.WaitGroup

	mu      sync.Mutex // guards results
	results map[string]*ToolResult
}

// start starts running c; it is called on the stream's goroutine.
func (x *executor) start(ctx context.Context, c ToolCall) {
	x.state(c, ToolPending)
	var answer *ToolResult
	if x.opts.Before != nil {
		c, answer = x.opts.Before(ctx, c)
	}
	x.wg.Go(func() {
		r := answer
		if r == nil {
			r = x.run(ctx, c)
		}
		r.CallID = c.ID
		if r.Name == "" {
			r.Name = c.Name
		}
		x.mu.Lock()
		x.results[c.ID] = r
		x.mu.Unlock()
		if r.IsError {
			x.state(c, ToolError)
		} else {
			x.state(c, ToolCompleted)
		}
		if x.opts.OnToolResult != nil {
			x.opts.OnToolResult(*r)
		}
	})
}

func (x *executor) state(c ToolCall, s ToolState) {
	if x.opts.OnToolState != nil {
		x.opts.OnToolState(c, s)
	}
}

// run waits for a slot and runs c, turning every failure into an isError
// result.
func (x *executor) run(ctx context.Context, c ToolCall) (r *ToolResult) {
	select {
	case x.sem <- struct{}{}:
		defer func() { <-x.sem }()
	case <-ctx.Done():
		return errorResult(fmt.Sprintf("cancelled: the call was not run (%v)", ctx.Err()))
	}
	c, problem := x.checked(ctx, c)
	if problem != "" {
		return errorResult(problem)
	}
	if x.ts == nil {
		return errorResult(fmt.Sprintf("not_found: unknown tool %q; no tools are available", c.Name))
	}
	x.state(c, ToolRunning)
	defer func() {
		if p := recover(); p != nil {
			// The one recover around code the host supplies (STYLE §11):
			// a panicking tool is a failed call, not a crashed agent.
			r = errorResult(fmt.Sprintf("internal: the tool %q panicked: %v", c.Name, p))
		}
	}()
	d := x.opts.ToolTimeout
	if t, ok := x.opts.ToolTimeouts[c.Name]; ok {
		d = t
	}
	callCtx := ctx
	if d > 0 {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	res, err := x.ts.Call(callCtx, c)
	if d > 0 && ctx.Err() == nil && errors.Is(callCtx.Err(), context.DeadlineExceeded) {
		return errorResult(fmt.Sprintf("timeout: the tool %q did not finish within %v and was cancelled; try smaller work or another tool", c.Name, d))
	}
	if err != nil {
		return errorResult(err.Error())
	}
	return &res
}

// checked returns c, repaired once by Repair when its arguments are not a
// JSON object or Check refuses them, or the problem that answers it.
func (x *executor) checked(ctx context.Context, c ToolCall) (ToolCall, string) {
	problem := argsProblem(c, x.opts.Check)
	if problem == nil {
		return c, ""
	}
	if x.opts.Repair != nil {
		if fixed, err := x.opts.Repair(ctx, c, problem); err == nil && argsProblem(fixed, x.opts.Check) == nil {
			fixed.ID = c.ID
			return fixed, ""
		}
	}
	return c, problem.Error()
}

// argsProblem says what is wrong with c's arguments, or nil.
func argsProblem(c ToolCall, check func(ToolCall) error) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(c.Arguments), &obj); err != nil || obj == nil {
		return fmt.Errorf("validation: the arguments of %q are not a JSON object (%s); call it again with a JSON object matching its input schema", c.Name, shortErr(err))
	}
	if check != nil {
		return check(c)
	}
	return nil
}

func shortErr(err error) string {
	if err == nil {
		return "it is null"
	}
	return err.Error()
}

func errorResult(text string) *ToolResult {
	return &ToolResult{Content: []Part{Text(text)}, IsError: true}
}

// runCalls runs calls outside a stream, as a step runs its calls, and
// returns their results in call order.
func runCalls(ctx context.Context, ts Toolset, calls []ToolCall, opts *StepOptions) []ToolResult {
	par := opts.MaxParallel
	if par <= 0 {
		par = DefaultMaxParallel
	}
	x := &executor{ts: ts, opts: opts, sem: make(chan struct{}, par), results: make(map[string]*ToolResult)}
	for _, c := range calls {
		x.start(ctx, c)
	}
	x.wg.Wait()
	out := make([]ToolResult, 0, len(calls))
	for _, c := range calls {
		if r, ok := x.results[c.ID]; ok {
			out = append(out, *r)
		}
	}
	return out
}
