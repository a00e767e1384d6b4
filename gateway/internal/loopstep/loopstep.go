package loopstep

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/internal/canonjson"
	"github.com/toolgate/toolgate/internal/loopguard"
	"github.com/toolgate/toolgate/retry"
)

// WarningMetaKey is the _meta key under which a warned call's result
// carries the loop guard's warning when it could not be appended as a
// text part (an upstream result that could not be decoded).
const WarningMetaKey = "toolgate/loop_warning"

// errorClassMetaKey is the _meta key naming an error result's class:
// gateway.ErrorClassMetaKey, which gateway's TestLoopWarningPassthrough
// holds it to.
const errorClassMetaKey = "toolgate/error_class"

// The answers the step offers when it asks the user (guards.loop action
// ask), as the enum of the requested schema's "decision" property.
const (
	AllowOnce   = "allow_once"
	AllowAlways = "allow_always"
	Deny        = "deny"
)

const (
	// threadsPerInstance and minThreads size the loop guard's memory: it
	// tracks at most max(threads.max_instances × threadsPerInstance,
	// minThreads) threads, forgetting the least recently used beyond
	// that (loopguard.Options.MaxThreads).
	threadsPerInstance = 10
	minThreads         = 1000
)

// Options are the loop guard's options under guards and threads.
func Options(guards config.Guards, threads config.Threads) *loopguard.Options {
	return &loopguard.Options{
		Threshold:  guards.Loop.Threshold,
		MaxThreads: max(threads.MaxInstances*threadsPerInstance, minThreads),
	}
}

// Enabled reports whether any tool's loop guard action is other than
// off.
func Enabled(lc config.LoopGuard) bool {
	if lc.Action != config.LoopOff && lc.Action != "" {
		return true
	}
	for _, a := range lc.Tools {
		if a != config.LoopOff {
			return true
		}
	}
	return false
}

// Call is what the step knows of a call.
type Call struct {
	// Tool is the tool's name, as resolved.
	Tool string
	// Thread is the thread the call runs in.
	Thread string
	// Raw are the arguments' JSON bytes as the caller sent them, or nil;
	// Args the arguments decoded. Their hash identifies the call.
	Raw  json.RawMessage
	Args map[string]any
	// Elicit asks the calling client's user a question; nil when the
	// client cannot be asked.
	Elicit func(ctx context.Context, message string, schema map[string]any) (action string, content map[string]any, err error)
	// AskTimeout bounds the question: a user who never answers does not
	// hold the call for ever, only as long as the call itself may run.
	AskTimeout time.Duration
}

// Next runs the call the step guards.
type Next func(context.Context) (*executors.Result, error)

// Step is the loop guard step for one guards.loop configuration.
type Step struct {
	guard  *loopguard.Guard
	loop   config.LoopGuard
	decode func(*executors.Result) *executors.Result
	refuse func(error) *executors.Result
}

// New returns the step of lc over g's state, or nil when lc acts on no
// tool. decode reads an upstream's raw result (Passthrough) into content
// parts, returning its argument when it has none or it cannot be read;
// refuse is the result of a call the step does not run, for its error.
func New(g *loopguard.Guard, lc config.LoopGuard, decode func(*executors.Result) *executors.Result, refuse func(error) *executors.Result) *Step {
	if !Enabled(lc) {
		return nil
	}
	return &Step{guard: g, loop: lc, decode: decode, refuse: refuse}
}

// Run runs c through next unless the guard acts on it. A thread that
// makes the same call (tool and canonical arguments) guards.loop.threshold
// times in a row, each returning the same result, gets the tool's action
// for each further identical call: block, warn or ask. A call whose
// result changes (a clock, a status being polled) is never acted on.
func (s *Step) Run(ctx context.Context, c *Call, next Next) (*executors.Result, error) {
	action := s.loop.ActionFor(c.Tool)
	sum, err := canonjson.ArgsSum(c.Raw, c.Args)
	if err != nil {
		// Validated arguments always encode; treat the call as new.
		s.guard.Forget(c.Thread)
		return next(ctx)
	}
	call := loopguard.Call{Tool: c.Tool, Args: sum}
	// Every call counts, those of a tool whose action is off too: it
	// ends another call's streak. Its result needs no hash.
	count, act := s.guard.Check(c.Thread, call)
	if action == config.LoopOff {
		return next(ctx)
	}
	if !act {
		return s.run(ctx, c, call, next)
	}
	switch action {
	case config.LoopWarn:
		res, err := s.run(ctx, c, call, next)
		if err == nil && res != nil {
			res = s.withWarning(res, Notice(s.guard, c.Tool, count))
		}
		return res, err
	case config.LoopAsk:
		switch s.ask(ctx, c, count) {
		case AllowAlways:
			s.guard.Allow(c.Thread, call)
			return s.run(ctx, c, call, next)
		case AllowOnce:
			return s.run(ctx, c, call, next)
		}
	}
	return s.refuse(retry.Errorf(retry.Validation, "%s; the call was not run", Notice(s.guard, c.Tool, count))), nil
}

// Notice tells the model what it repeats (the count-th identical call of
// tool, in g's words) and what to do instead.
func Notice(g *loopguard.Guard, tool string, count int) string {
	return g.Notice(tool, count) + "; change your approach (other arguments, another tool, or ask the user)"
}

// run runs the call and tells the guard what it returned: the result as
// next returns it, before a warning is added.
func (s *Step) run(ctx context.Context, c *Call, call loopguard.Call, next Next) (*executors.Result, error) {
	res, err := next(ctx)
	s.guard.Done(c.Thread, call, ResultSum(res, err))
	return res, err
}

// ResultSum hashes what a call returned, as the model sees it: its
// isError and class, and its parts and structured content, or the
// upstream's result as it sent it (so an upstream whose result's _meta
// differs at each call is never seen looping); an error by its text. The
// result's own Meta (attempts, the error class) is toolgate's bookkeeping
// and left out.
func ResultSum(res *executors.Result, err error) [32]byte {
	var d loopguard.Digest
	switch {
	case err != nil:
		d.Add("error")
		d.Add(err.Error())
	case res == nil:
		d.Add("none")
	case res.Passthrough != nil:
		d.Add("passthrough")
		d.AddBytes(res.Passthrough)
	default:
		d.Add("result")
		d.Add(strconv.FormatBool(res.IsError))
		d.Add(string(res.Class))
		for _, p := range res.Content {
			d.Add(string(p.Type))
			d.Add(p.Text)
			d.AddBytes(p.Data)
			d.Add(p.MIMEType)
			d.Add(p.URI)
			d.Add(p.Name)
			d.Add(p.Description)
		}
		if res.Structured != nil {
			b, err := json.Marshal(res.Structured)
			if err != nil {
				d.Add("unencodable " + err.Error())
			} else {
				d.AddBytes(b)
			}
		}
	}
	return d.Sum()
}

// withWarning appends notice to res as a text part. An upstream's result
// (Passthrough) is decoded into content parts first, so the warning
// reaches the model; only if it cannot be decoded does the notice go into
// _meta under [WarningMetaKey] instead.
func (s *Step) withWarning(res *executors.Result, notice string) *executors.Result {
	d := s.decode(res)
	out := *d
	if out.Passthrough != nil {
		if d == res && len(res.Content) == 0 { // could not be read: keep its bytes
			out.Meta = mergeMeta(out.Meta, WarningMetaKey, notice)
			return &out
		}
		if out.IsError {
			// The class the upstream's _meta named, before its JSON goes.
			out.Meta = mergeMeta(out.Meta, errorClassMetaKey, string(out.Class))
		}
		out.Passthrough = nil
	}
	out.Content = append(slices.Clip(out.Content), executors.Content{Type: executors.TextContent, Text: "toolgate " + notice})
	return &out
}

func mergeMeta(m map[string]any, k string, v any) map[string]any {
	out := maps.Clone(m)
	if out == nil {
		out = map[string]any{}
	}
	out[k] = v
	return out
}

// ask asks the calling client's user whether to run a repeated call, and
// returns one of AllowOnce, AllowAlways or Deny. A client that cannot be
// asked, an answer other than accept, an unknown decision and a failure
// to ask all deny.
func (s *Step) ask(ctx context.Context, c *Call, count int) string {
	if c.Elicit == nil {
		return Deny
	}
	msg := fmt.Sprintf("The model has called tool %q with the same arguments %d times in a row, and the last %d returned the same result. Run it again?",
		c.Tool, count, s.loop.Threshold)
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"decision": map[string]any{
				"type":        "string",
				"title":       "Decision",
				"description": "allow_once runs this call; allow_always stops asking about this call in this conversation; deny refuses it",
				"enum":        []string{AllowOnce, AllowAlways, Deny},
			},
		},
		"required": []string{"decision"},
	}
	ctx, cancel := context.WithTimeout(ctx, c.AskTimeout)
	defer cancel()
	action, content, err := c.Elicit(ctx, msg, schema)
	if err != nil || action != "accept" {
		return Deny
	}
	switch d, _ := content["decision"].(string); d {
	case AllowOnce, AllowAlways:
		return d
	}
	return Deny
}
