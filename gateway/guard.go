package gateway

import (
	"container/list"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/internal/canonjson"
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
	// least recently used beyond that. A thread's state is its last call
	// (tool name and a hash of its arguments) and count, about 100 bytes.
	loopThreadsPerInstance = 10
	loopMinThreads         = 1000
	// loopMaxAllowed caps the calls one thread's user allowed always; past
	// it the oldest is forgotten and will be asked about again.
	loopMaxAllowed = 64
)

// guard is the loop guard step: a thread that repeats the same call
// (tool and canonical arguments) more than guards.loop.threshold times in
// a row gets the tool's action for each further repeat: block, warn or
// ask. One-call threads are not tracked: they make a single call. Nor are
// the calls of a toolgate_batch: the model asked for them all at once, to
// run in parallel, so identical ones are no loop; the batch itself is a
// call like any other.
func (g *Gateway) guard(next Handler) Handler {
	lc := g.cfg.Guards.Loop
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
			g.loops.forget(c.Thread)
			return next(ctx, c)
		}
		count, allowed := g.loops.see(c.Thread, c.Tool.Name, sum, g.loopCap())
		if action == config.LoopOff || count <= lc.Threshold || allowed {
			return next(ctx, c)
		}
		switch action {
		case config.LoopWarn:
			res, err := next(ctx, c)
			if err == nil && res != nil {
				res = withLoopWarning(res, loopNotice(c.Tool.Name, count))
			}
			return res, err
		case config.LoopAsk:
			switch g.askLoop(ctx, c, count) {
			case loopAllowAlways:
				g.loops.allow(c.Thread, c.Tool.Name, sum)
				return next(ctx, c)
			case loopAllowOnce:
				return next(ctx, c)
			}
		}
		return errorResult(retry.Errorf(retry.Validation, "%s; the call was not run", loopNotice(c.Tool.Name, count))), nil
	}
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

func (g *Gateway) loopCap() int {
	return max(g.cfg.Threads.MaxInstances*loopThreadsPerInstance, loopMinThreads)
}

// loopNotice tells the model what it repeats.
func loopNotice(tool string, count int) string {
	return fmt.Sprintf("loop guard: this is call %d in a row of tool %q with the same arguments in this thread; "+
		"repeating it will not give a different result, so change your approach (other arguments, another tool, or ask the user)", count, tool)
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
	msg := fmt.Sprintf("The model has called tool %q with the same arguments %d times in a row. Run it again?", c.Tool.Name, count)
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

// loopTracker holds the loop guard's state: per thread, the last call and
// how many times in a row it was made. It keeps at most a given number of
// threads, forgetting the least recently used. Its zero value is ready to
// use; it is safe for concurrent use.
type loopTracker struct {
	mu      sync.Mutex               // guards threads and lru
	threads map[string]*list.Element // thread → its element in lru (*loopState)
	lru     list.List                // most recently used first
}

type loopState struct {
	thread  string
	tool    string
	sum     [32]byte
	count   int
	allowed []loopCall // calls the user allowed always, oldest first
}

type loopCall struct {
	tool string
	sum  [32]byte
}

// see records a call of tool with arguments hashing to sum in thread, and
// returns how many times in a row the thread has now made it, and whether
// the user allowed it always. It keeps at most limit threads.
func (t *loopTracker) see(thread, tool string, sum [32]byte, limit int) (count int, allowed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.threads == nil {
		t.threads = map[string]*list.Element{}
	}
	var s *loopState
	if e, ok := t.threads[thread]; ok {
		t.lru.MoveToFront(e)
		s = e.Value.(*loopState)
	} else {
		s = &loopState{thread: thread}
		t.threads[thread] = t.lru.PushFront(s)
		for t.lru.Len() > limit {
			old := t.lru.Back()
			t.lru.Remove(old)
			delete(t.threads, old.Value.(*loopState).thread)
		}
	}
	if s.tool == tool && s.sum == sum && s.count > 0 {
		s.count++
	} else {
		s.tool, s.sum, s.count = tool, sum, 1
	}
	return s.count, slices.Contains(s.allowed, loopCall{tool, sum})
}

// allow stops the guard acting on the call in thread, if the thread is
// still tracked.
func (t *loopTracker) allow(thread, tool string, sum [32]byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.threads[thread]
	if !ok {
		return
	}
	s := e.Value.(*loopState)
	k := loopCall{tool, sum}
	if slices.Contains(s.allowed, k) {
		return
	}
	if len(s.allowed) >= loopMaxAllowed {
		s.allowed = slices.Delete(s.allowed, 0, 1)
	}
	s.allowed = append(s.allowed, k)
}

// forget drops thread's state; called when the thread ends.
func (t *loopTracker) forget(thread string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.threads[thread]; ok {
		t.lru.Remove(e)
		delete(t.threads, thread)
	}
}

// len returns how many threads are tracked.
func (t *loopTracker) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.threads)
}
