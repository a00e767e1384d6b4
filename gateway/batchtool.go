package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/executors"
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

// addBatchTool registers toolgate_batch. The tool is listed and validated
// like any other, but execute runs it itself (runBatch): it never reaches
// the dispatcher.
func (g *Gateway) addBatchTool() error {
	t := registry.Tool{
		Name:  BatchToolName,
		Title: "Run several tool calls in parallel",
		Description: "Runs several tool calls at once and returns every outcome, in the order given: " +
			"each with its status (ok or error), error class, duration and content. One failure never hides the others. " +
			"Use it for independent calls; calls that depend on each other's results must be made one after another.",
		Source:      "toolgate",
		InputSchema: batchToolSchema,
	}
	err := g.RegisterStateless(t, func(context.Context, map[string]any) (executors.Result, error) {
		return executors.Result{}, retry.Errorf(retry.Internal, "%s is run by the gateway, not dispatched", BatchToolName)
	})
	if err != nil {
		return err
	}
	g.batchTool, _ = g.reg.Get(BatchToolName)
	return nil
}

// runBatch runs the calls of one toolgate_batch (its arguments have passed
// the schema) in thread, each through the whole pipeline, at most
// max_parallel at once, and waits for all of them. progress, when not nil,
// is told as each call finishes.
func (g *Gateway) runBatch(ctx context.Context, args map[string]any, sessThread, thread string, progress func(float64, float64, string)) (executors.Result, error) {
	calls, _ := args["calls"].([]any)
	limit := len(calls)
	if v, ok := args["max_parallel"]; ok {
		if n, ok := intArg(v); ok && n >= 1 {
			limit = min(limit, n)
		}
	}
	// The calls share the batch's per-session (or per-thread) slots: more
	// at once would only wait in the queue, or fail as rate_limited when
	// max_queue leaves no room, the batch defeating itself.
	if per := g.cfg.Defaults.MaxParallelPerSession; per >= 1 {
		limit = min(limit, per)
	}
	outcomes := make([]batchOutcome, len(calls))
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	var done atomic.Int64
	for i, c := range calls {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			start, settled := time.Now(), false
			// A panic here would end the process: nothing up this
			// goroutine's stack recovers. It fails this call alone.
			defer func() {
				if p := recover(); p != nil {
					m, _ := c.(map[string]any)
					name, _ := m["tool"].(string)
					g.logger.Error("batch call panicked", "tool", name, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
					if !settled {
						outcomes[i] = outcome(name, start, errorResult(retry.Errorf(retry.Internal,
							"the call failed unexpectedly (panic) inside %s; the gateway logged the details", BatchToolName)))
					}
				}
			}()
			outcomes[i] = g.batchCall(ctx, c.(map[string]any), sessThread, thread)
			settled = true
			if progress != nil {
				n := done.Add(1)
				progress(float64(n), float64(len(calls)), fmt.Sprintf("%s: %s", outcomes[i].Tool, outcomes[i].Status))
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
	b, err := json.Marshal(res)
	if err != nil {
		return executors.Result{}, retry.Wrap(retry.Internal, "encoding the batch result", err)
	}
	return executors.Result{
		Content:    []executors.Content{{Type: executors.TextContent, Text: string(b)}},
		Structured: json.RawMessage(b),
	}, nil
}

// batchCall runs one call of a batch and describes its outcome.
func (g *Gateway) batchCall(ctx context.Context, c map[string]any, sessThread, thread string) batchOutcome {
	name, _ := c["tool"].(string)
	start := time.Now()
	var res *mcp.CallToolResult
	t, err := g.reg.Resolve(name, g.cfg.Guards.NameRepair)
	switch {
	case err != nil:
		g.metrics.unknownTools.Inc()
		res = errorResult(retry.Wrap(retry.NotFound, "", err))
	case t == g.batchTool:
		res = errorResult(retry.Errorf(retry.Validation, "%s cannot run inside %s; list its calls in the outer batch", BatchToolName, BatchToolName))
	default:
		name = t.Name
		args := c["arguments"]
		var raw json.RawMessage
		if args != nil {
			raw, _ = json.Marshal(args) // it came from JSON
		}
		res = g.run(ctx, t, args, raw, nil, sessThread, thread, nil)
	}
	return outcome(name, start, res)
}

// outcome describes the result res of a call of tool name that started at
// start.
func outcome(name string, start time.Time, res *mcp.CallToolResult) batchOutcome {
	o := batchOutcome{Tool: name, Status: "ok", DurationMS: float64(time.Since(start).Microseconds()) / 1000}
	if res.IsError {
		o.Status, o.Class = "error", string(retry.Execution)
		if res.Meta != nil {
			if cl, ok := res.Meta.AdditionalFields[ErrorClassMetaKey].(string); ok {
				o.Class = cl
			}
		}
	}
	o.Content, _ = json.Marshal(res.Content)
	if res.StructuredContent != nil {
		o.StructuredContent, _ = json.Marshal(res.StructuredContent)
	}
	return o
}

// intArg reads an integer argument decoded from JSON.
func intArg(v any) (int, bool) {
	switch n := v.(type) {
	case float64:
		if n == float64(int(n)) {
			return int(n), true
		}
	case json.Number:
		i, err := n.Int64()
		return int(i), err == nil
	case int:
		return n, true
	}
	return 0, false
}
