package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/gateway/internal/mcpwire"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

// BatchToolName is the name of the meta-tool that runs several calls in
// parallel (config batch_tool: true).
const BatchToolName = "toolgate_batch"

// maxBatchCalls caps the calls of one toolgate_batch.
const maxBatchCalls = 100

// batchToolSchema is toolgate_batch's input schema.
var batchToolSchema = json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "calls": {
      "type": "array",
      "description": "The calls to make, at most %d. Each runs as if called alone: its arguments are validated against its tool's schema.",
      "minItems": 1,
      "maxItems": %d,
      "items": {
        "type": "object",
        "properties": {
          "tool": {"type": "string", "minLength": 1, "description": "The tool's name, as in tools/list."},
          "arguments": {"type": "object", "description": "The tool's arguments. Default {}."}
        },
        "required": ["tool"],
        "additionalProperties": false
      }
    },
    "max_parallel": {"type": "integer", "minimum": 1, "maximum": %d, "description": "How many calls may run at once. Default all of them (within the gateway's own limits)."}
  },
  "required": ["calls"],
  "additionalProperties": false
}`, maxBatchCalls, maxBatchCalls, maxBatchCalls))

// batchOutcome is one call's outcome in toolgate_batch's result.
type batchOutcome struct {
	Tool              string          `json:"tool"`
	Status            string          `json:"status"` // ok or error
	Class             string          `json:"class,omitempty"`
	DurationMS        float64         `json:"duration_ms"`
	Content           json.RawMessage `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
}

// batchResult is toolgate_batch's structuredContent.
type batchResult struct {
	Results []batchOutcome `json:"results"`
	OK      int            `json:"ok"`
	Failed  int            `json:"failed"`
}

// batchSource is the source of toolgate_batch.
const batchSource = "toolgate"

// batchTimeout bounds a whole toolgate_batch, as a backstop only: each of
// its calls runs under its own tool's deadline.
const batchTimeout = 24 * time.Hour

// addBatchTool registers toolgate_batch: a tool listed and validated like
// any other whose executor runs each of its calls through the pipeline.
func (g *Gateway) addBatchTool() error {
	t := registry.Tool{
		Name:  BatchToolName,
		Title: "Run several tool calls in parallel",
		Description: "Runs several tool calls at once and returns every outcome, in the order given: " +
			"each with its status (ok or error), error class, duration and content. One failure never hides the others. " +
			"Use it for independent calls; calls that depend on each other's results must be made one after another.",
		Kind:        registry.Stateless,
		Source:      batchSource,
		InputSchema: batchToolSchema,
		Timeout:     batchTimeout,
	}
	return g.register(executors.Bound{Tool: t, Exec: batchExec{g}})
}

// batchArgs are toolgate_batch's arguments, once they passed its schema.
type batchArgs struct {
	Calls []struct {
		Tool      string          `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"calls"`
	MaxParallel int `json:"max_parallel"`
}

// batchExec runs toolgate_batch. It is re-entrant: the pipeline gives it
// the batch's Call in its context, and each call of the batch goes through
// the whole pipeline in the batch's thread, session and principal.
type batchExec struct{ g *Gateway }

func (batchExec) reentrant() {}

var _ reentrantExecutor = batchExec{}

// Execute runs the calls of one toolgate_batch, at most max_parallel at
// once, and waits for all of them. Progress, when asked for, is reported
// as each call finishes.
func (b batchExec) Execute(ctx context.Context, ec executors.Call) (executors.Result, error) {
	g := b.g
	outer, ok := callFrom(ctx)
	if !ok {
		return executors.Result{}, retry.Errorf(retry.Internal, "%s ran outside the pipeline", BatchToolName)
	}
	raw, err := json.Marshal(ec.Args)
	if err != nil {
		return executors.Result{}, retry.Wrap(retry.Internal, "reading the batch", err)
	}
	var args batchArgs
	if err := json.Unmarshal(raw, &args); err != nil {
		return executors.Result{}, retry.Wrap(retry.Internal, "reading the batch", err)
	}
	limit := len(args.Calls)
	if args.MaxParallel >= 1 {
		limit = min(limit, args.MaxParallel)
	}
	// The calls share the batch's per-session (or per-thread) slots: more
	// at once would only wait in the queue, or fail as rate_limited when
	// max_queue leaves no room, the batch defeating itself.
	if per := g.settings().defaults.MaxParallelPerSession; per >= 1 {
		limit = min(limit, per)
	}
	outcomes := make([]batchOutcome, len(args.Calls))
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	var done atomic.Int64
	for i, c := range args.Calls {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			start, settled := time.Now(), false
			// A panic here would end the process: nothing up this
			// goroutine's stack recovers. It fails this call alone.
			defer func() {
				if p := recover(); p != nil {
					g.logger.Error("batch call panicked", "tool", c.Tool, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
					if !settled {
						outcomes[i] = outcome(c.Tool, start, errorResult(retry.Errorf(retry.Internal,
							"the call failed unexpectedly (panic) inside %s; the gateway logged the details", BatchToolName)))
					}
				}
			}()
			outcomes[i] = g.batchCall(ctx, outer, c.Tool, c.Arguments)
			settled = true
			if ec.Progress != nil {
				n := done.Add(1)
				ec.Progress(float64(n), float64(len(args.Calls)), fmt.Sprintf("%s: %s", outcomes[i].Tool, outcomes[i].Status))
			}
		})
	}
	wg.Wait()
	res := batchResult{Results: outcomes}
	for _, o := range outcomes {
		if o.Status == "ok" {
			res.OK++
		} else {
			res.Failed++
		}
	}
	out, err := json.Marshal(res)
	if err != nil {
		return executors.Result{}, retry.Wrap(retry.Internal, "encoding the batch result", err)
	}
	return executors.Result{
		Content:    []executors.Content{{Type: executors.TextContent, Text: string(out)}},
		Structured: json.RawMessage(out),
	}, nil
}

// batchCall runs one call of the batch outer through the pipeline and
// describes its outcome.
func (g *Gateway) batchCall(ctx context.Context, outer *Call, name string, args json.RawMessage) batchOutcome {
	start := time.Now()
	r, err := g.lookup(name)
	if err == nil && r.tool.Name != name && !outer.ident.Permits(r.tool.Name) {
		// Repaired to a tool the principal may not use: as unknown to it
		// as any name (issue 31, item 7).
		err = &registry.NotFoundError{Name: name, Available: -1}
	}
	if nf, ok := errors.AsType[*registry.NotFoundError](err); ok && outer.ident != nil && outer.ident.Policy != nil {
		err = nf.Visible(outer.ident.Permits) // suggestions and counts over its own tools only
	}
	if err != nil {
		return outcome(name, start, errorResult(retry.Wrap(retry.NotFound, "", err)))
	}
	if r.reentrant && r.tool.Name == BatchToolName {
		// A catalog's <source>__call re-enters too, and may run here: its
		// inner call takes its own slot.
		return outcome(r.tool.Name, start, errorResult(retry.Errorf(retry.Validation,
			"%s cannot run inside %s; list its calls in the outer batch", BatchToolName, BatchToolName)))
	}
	c := &Call{Name: name, route: r, Raw: args, Principal: outer.Principal, ident: outer.ident, Session: outer.Session, Thread: outer.Thread}
	if string(args) == "null" {
		c.Raw = nil
	}
	res, err := g.handle(ctx, c)
	if err != nil {
		res = errorResult(err)
	}
	return outcome(r.tool.Name, start, res)
}

// outcome describes the result res of a call of tool name that started at
// start.
func outcome(name string, start time.Time, res *Result) batchOutcome {
	o := batchOutcome{Tool: name, Status: "ok", DurationMS: float64(time.Since(start).Microseconds()) / 1000}
	if res.IsError {
		o.Status, o.Class = "error", string(res.Class)
		if cl, ok := res.Meta[ErrorClassMetaKey].(string); ok {
			o.Class = cl
		} else if o.Class == "" {
			o.Class = string(retry.Execution)
		}
	}
	o.Content, o.StructuredContent, _ = mcpwire.ContentJSON((*executors.Result)(res))
	return o
}
