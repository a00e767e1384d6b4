package gateway

import (
	"bytes"
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/json"
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

// argsSum hashes the call's arguments as canonical JSON: the raw bytes the
// client sent when there are any, else Args encoded. Absent and null
// arguments are {}, as the validate step has it.
func argsSum(c *Call) ([32]byte, error) {
	raw := c.Raw
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		raw = nil
	}
	if raw == nil {
		b, err := json.Marshal(c.Args)
		if err != nil {
			return [32]byte{}, err
		}
		raw = b
	}
	if isCanonical(raw) {
		return sha256.Sum256(raw), nil
	}
	canon, err := canonicalJSON(raw)
	if err != nil {
		return [32]byte{}, err
	}
	return sha256.Sum256(canon), nil
}

// isCanonical reports whether data is already exactly what canonicalJSON
// makes of it, for a common subset: no whitespace, strings of printable
// ASCII without escapes, integers without trailing zeros (10 is 1e1 in
// canonical form), the literals, and objects with their keys in strictly
// ascending order. It reports false for anything else, which
// canonicalJSON then rewrites. A model's arguments are usually in this
// subset, so argsSum hashes them without decoding them (issue 16:
// canonicalJSON took 19 allocations for {"message":"hello"}).
func isCanonical(data []byte) bool {
	n, ok := canonValue(data, 0, 0)
	return ok && n == len(data)
}

// canonMaxDepth bounds the nesting isCanonical follows; deeper values go
// to canonicalJSON.
const canonMaxDepth = 32

// canonValue checks the value at d[i:] and returns the index after it.
func canonValue(d []byte, i, depth int) (int, bool) {
	if i >= len(d) {
		return i, false
	}
	switch c := d[i]; {
	case c == '{':
		if depth >= canonMaxDepth {
			return i, false
		}
		if i+1 < len(d) && d[i+1] == '}' {
			return i + 2, true
		}
		var prev []byte
		for i++; ; i++ {
			j, ok := canonString(d, i)
			if !ok {
				return j, false
			}
			key := d[i+1 : j-1]
			if prev != nil && bytes.Compare(prev, key) >= 0 {
				return j, false // out of order, or a duplicate (the last would win)
			}
			prev = key
			if j >= len(d) || d[j] != ':' {
				return j, false
			}
			if i, ok = canonValue(d, j+1, depth+1); !ok || i >= len(d) {
				return i, false
			}
			if d[i] == '}' {
				return i + 1, true
			}
			if d[i] != ',' {
				return i, false
			}
		}
	case c == '[':
		if depth >= canonMaxDepth {
			return i, false
		}
		if i+1 < len(d) && d[i+1] == ']' {
			return i + 2, true
		}
		for i++; ; i++ {
			var ok bool
			if i, ok = canonValue(d, i, depth+1); !ok || i >= len(d) {
				return i, false
			}
			if d[i] == ']' {
				return i + 1, true
			}
			if d[i] != ',' {
				return i, false
			}
		}
	case c == '"':
		return canonString(d, i)
	case c == 't':
		return canonLiteral(d, i, "true")
	case c == 'f':
		return canonLiteral(d, i, "false")
	case c == 'n':
		return canonLiteral(d, i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		return canonInteger(d, i)
	}
	return i, false
}

// canonString checks the string at d[i:]: printable ASCII, no escapes.
func canonString(d []byte, i int) (int, bool) {
	if i >= len(d) || d[i] != '"' {
		return i, false
	}
	for i++; i < len(d); i++ {
		switch c := d[i]; {
		case c == '"':
			return i + 1, true
		case c < 0x20 || c > 0x7e || c == '\\':
			return i, false
		}
	}
	return i, false
}

func canonLiteral(d []byte, i int, lit string) (int, bool) {
	if len(d)-i < len(lit) || string(d[i:i+len(lit)]) != lit {
		return i, false
	}
	return i + len(lit), true
}

// canonInteger checks the number at d[i:]: 0, or an integer with no
// leading or trailing zeros and no fraction or exponent (-0 is 0).
func canonInteger(d []byte, i int) (int, bool) {
	neg := d[i] == '-'
	if neg {
		i++
	}
	start := i
	for i < len(d) && d[i] >= '0' && d[i] <= '9' {
		i++
	}
	switch {
	case i == start:
		return i, false
	case d[start] == '0' && (i-start > 1 || neg):
		return i, false
	case d[i-1] == '0' && i-start > 1:
		return i, false
	case i < len(d) && (d[i] == '.' || d[i] == 'e' || d[i] == 'E'):
		return i, false
	}
	return i, true
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

// canonicalJSON and canonicalNumber are the loop guard's canonical form
// of arguments (internal/canonjson, shared with the agent's loop guard).
var (
	canonicalJSON   = canonjson.JSON
	canonicalNumber = canonjson.Number
)
