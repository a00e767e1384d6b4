package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/internal/canonjson"
	"github.com/toolgate/toolgate/internal/loopguard"
	"github.com/toolgate/toolgate/retry"
)

// LoopWarningMetaKey is the _meta key under which a warned call's result
// carries the loop guard's warning when it could not be appended as a
// text part (an upstream result toolgate could not decode).
const LoopWarningMetaKey = "toolgate/loop_warning"

// The answers the loop guard offers when it asks the user (guards.loop
// action ask), as the enum of the requested schema's "decision" property.
const (
	loopAllowOnce   = "allow_once"
	loopAllowAlways = "allow_always"
	loopDeny        = "deny"
)

const (
	// loopThreadsPerInstance and loopMinThreads size the loop guard's
	// memory: it tracks at most max(threads.max_instances ×
	// loopThreadsPerInstance, loopMinThreads) threads, forgetting the
	// least recently used beyond that (loopguard.Options.MaxThreads).
	loopThreadsPerInstance = 10
	loopMinThreads         = 1000
)

// newLoopGuard returns the loop guard's state for cfg's guards.loop.
func newLoopGuard(cfg *config.Config) *loopguard.Guard {
	return loopguard.New(loopOptions(cfg.Guards, cfg.Threads))
}

// loopOptions are the loop guard's options under guards and threads.
func loopOptions(guards config.Guards, threads config.Threads) *loopguard.Options {
	return &loopguard.Options{
		Threshold:  guards.Loop.Threshold,
		MaxThreads: max(threads.MaxInstances*loopThreadsPerInstance, loopMinThreads),
	}
}

// guard is the loop guard step (internal/loopguard has the rule): a
// thread that makes the same call (tool and canonical arguments)
// guards.loop.threshold times in a row, each returning the same result,
// gets the tool's action for each further identical call: block, warn or
// ask. A call whose result changes (a clock, a status being polled) is
// never acted on. One-call threads are not tracked: they make a single
// call. Nor are the calls of a toolgate_batch: the model asked for them
// all at once, to run in parallel, so identical ones are no loop; the
// batch itself is a call like any other.
func (g *Gateway) guard(next Handler) Handler {
	lc := g.settings().guards.Loop // a reload that changes it builds the chain again
	if !loopEnabled(lc) {
		return next
	}
	return func(ctx context.Context, c *Call) (*Result, error) {
		if _, inBatch := callFrom(ctx); inBatch || c.oneShot {
			return next(ctx, c)
		}
		action := lc.ActionFor(c.Tool.Name)
		sum, err := argsSum(c)
		if err != nil {
			// Validated arguments always encode; treat the call as new.
			g.loops.Forget(c.Thread)
			return next(ctx, c)
		}
		call := loopguard.Call{Tool: c.Tool.Name, Args: sum}
		// Every call counts, those of a tool whose action is off too: it
		// ends another call's streak. Its result needs no hash.
		count, act := g.loops.Check(c.Thread, call)
		if action == config.LoopOff {
			return next(ctx, c)
		}
		if !act {
			return g.loopRun(ctx, c, call, next)
		}
		switch action {
		case config.LoopWarn:
			res, err := g.loopRun(ctx, c, call, next)
			if err == nil && res != nil {
				res = withLoopWarning(res, g.loopNotice(c.Tool.Name, count))
			}
			return res, err
		case config.LoopAsk:
			switch g.askLoop(ctx, c, count) {
			case loopAllowAlways:
				g.loops.Allow(c.Thread, call)
				return g.loopRun(ctx, c, call, next)
			case loopAllowOnce:
				return g.loopRun(ctx, c, call, next)
			}
		}
		return errorResult(retry.Errorf(retry.Validation, "%s; the call was not run", g.loopNotice(c.Tool.Name, count))), nil
	}
}

// loopNotice tells the model what it repeats and what to do instead.
func (g *Gateway) loopNotice(tool string, count int) string {
	return g.loops.Notice(tool, count) + "; change your approach (other arguments, another tool, or ask the user)"
}

// loopRun runs c and tells the loop guard what it returned: the result
// as next returns it, before a warning is added.
func (g *Gateway) loopRun(ctx context.Context, c *Call, call loopguard.Call, next Handler) (*Result, error) {
	res, err := next(ctx, c)
	g.loops.Done(c.Thread, call, resultSum(res, err))
	return res, err
}

// resultSum hashes what a call returned, as the model sees it: its
// isError and class, and its parts and structured content, or the
// upstream's result as it sent it (so an upstream whose result's _meta
// differs at each call is never seen looping); an error by its text. The
// result's own Meta (attempts, the error class) is toolgate's bookkeeping
// and left out.
func resultSum(res *Result, err error) [32]byte {
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

// loopEnabled reports whether any tool's loop guard action is other than
// off.
func loopEnabled(lc config.LoopGuard) bool {
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

// withLoopWarning appends notice to res as a text part. An upstream's
// result (Passthrough) is decoded into content parts first, so the
// warning reaches the model; only if it cannot be decoded does the notice
// go into _meta under [LoopWarningMetaKey] instead.
func withLoopWarning(res *Result, notice string) *Result {
	d := res.decoded()
	out := *d
	if out.Passthrough != nil {
		if d == res && len(res.Content) == 0 { // could not be read: keep its bytes
			out.Meta = mergeMeta(out.Meta, LoopWarningMetaKey, notice)
			return &out
		}
		if out.IsError {
			// The class the upstream's _meta named, before its JSON goes.
			out.Meta = mergeMeta(out.Meta, ErrorClassMetaKey, string(out.Class))
		}
		out.Passthrough = nil
	}
	out.Content = append(slices.Clip(out.Content), Content{Type: executors.TextContent, Text: "toolgate " + notice})
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

// askLoop asks the calling client's user whether to run a repeated call,
// and returns one of loopAllowOnce, loopAllowAlways or loopDeny. A client
// that cannot be asked, an answer other than accept, an unknown decision
// and a failure to ask all deny.
func (g *Gateway) askLoop(ctx context.Context, c *Call, count int) string {
	if c.elicit == nil {
		return loopDeny
	}
	msg := fmt.Sprintf("The model has called tool %q with the same arguments %d times in a row, and the last %d returned the same result. Run it again?",
		c.Tool.Name, count, g.settings().guards.Loop.Threshold)
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"decision": map[string]any{
				"type":        "string",
				"title":       "Decision",
				"description": "allow_once runs this call; allow_always stops asking about this call in this conversation; deny refuses it",
				"enum":        []string{loopAllowOnce, loopAllowAlways, loopDeny},
			},
		},
		"required": []string{"decision"},
	}
	// A user who never answers does not hold the call for ever: the
	// question waits at most as long as the call itself may run.
	ctx, cancel := context.WithTimeout(ctx, g.dispatcher.Timeout(c.Tool))
	defer cancel()
	action, content, err := c.elicit(ctx, msg, schema)
	if err != nil || action != "accept" {
		return loopDeny
	}
	switch d, _ := content["decision"].(string); d {
	case loopAllowOnce, loopAllowAlways:
		return d
	}
	return loopDeny
}

// argsSum hashes the call's arguments (canonjson.ArgsSum): the raw
// bytes the client sent when there are any, else Args encoded.
func argsSum(c *Call) ([32]byte, error) {
	return canonjson.ArgsSum(c.Raw, c.Args)
}
