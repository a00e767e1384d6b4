package gateway

import (
	"context"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/gateway/internal/loopstep"
	"github.com/toolgate/toolgate/internal/canonjson"
	"github.com/toolgate/toolgate/internal/loopguard"
)

// LoopWarningMetaKey is the _meta key under which a warned call's result
// carries the loop guard's warning when it could not be appended as a
// text part (an upstream result toolgate could not decode).
const LoopWarningMetaKey = loopstep.WarningMetaKey

// newLoopGuard returns the loop guard's state for cfg's guards.loop.
func newLoopGuard(cfg *config.Config) *loopguard.Guard {
	return loopguard.New(loopstep.Options(cfg.Guards, cfg.Threads))
}

// guard is the loop guard step (gateway/internal/loopstep has what its
// actions do, internal/loopguard the rule). One-call threads are not
// tracked: they make a single call. Nor are the calls of a
// toolgate_batch: the model asked for them all at once, to run in
// parallel, so identical ones are no loop; the batch itself is a call
// like any other.
func (g *Gateway) guard(next Handler) Handler {
	// A reload that changes guards.loop builds the chain again.
	step := loopstep.New(g.loops, g.settings().guards.Loop,
		func(r *executors.Result) *executors.Result { return (*executors.Result)((*Result)(r).decoded()) },
		func(err error) *executors.Result { return (*executors.Result)(errorResult(err)) })
	if step == nil {
		return next
	}
	return func(ctx context.Context, c *Call) (*Result, error) {
		if _, inBatch := callFrom(ctx); inBatch || c.oneShot {
			return next(ctx, c)
		}
		lc := &loopstep.Call{Tool: c.Tool.Name, Thread: c.Thread, Raw: c.Raw, Args: c.Args,
			Elicit: c.elicit, AskTimeout: g.dispatcher.Timeout(c.Tool)}
		res, err := step.Run(ctx, lc, func(ctx context.Context) (*executors.Result, error) {
			res, err := next(ctx, c)
			return (*executors.Result)(res), err
		})
		return (*Result)(res), err
	}
}

// argsSum hashes the call's arguments (canonjson.ArgsSum): the raw
// bytes the client sent when there are any, else Args encoded.
func argsSum(c *Call) ([32]byte, error) {
	return canonjson.ArgsSum(c.Raw, c.Args)
}
