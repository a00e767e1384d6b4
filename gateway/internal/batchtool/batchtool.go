// Package batchtool is toolgate_batch (config batch_tool: true): a
// meta-tool that runs several tool calls at once and returns every
// outcome in the order given, each with its status, error class,
// duration and content, one failure never hiding the others.
//
// The package owns the tool's definition and schema, its arguments, how
// many of its calls run at once (max_parallel, within the per-session
// slots they share), a panic of one call failing that call alone,
// progress as each call ends, and the batch's result. It does not know
// the pipeline: each call runs through a [Pipeline], which the gateway
// gives it for the batch's outer call (the batch's principal, session and
// thread). The package does not import gateway.
package batchtool

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/gateway/internal/mcpwire"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

// Name is the batch tool's name.
const Name = "toolgate_batch"

// maxCalls caps the calls of one batch.
const maxCalls = 100

// source is the batch tool's registry source.
const source = "toolgate"

// timeout bounds a whole batch, as a backstop only: each of its calls runs
// under its own tool's deadline.
const timeout = 24 * time.Hour

// schema is the batch tool's input schema.
var schema = json.RawMessage(fmt.Sprintf(`{
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
}`, maxCalls, maxCalls, maxCalls))

// Tool is the batch tool's definition: listed and validated like any
// other tool.
func Tool() registry.Tool {
	return registry.Tool{
		Name:  Name,
		Title: "Run several tool calls in parallel",
		Description: "Runs several tool calls at once and returns every outcome, in the order given: " +
			"each with its status (ok or error), error class, duration and content. One failure never hides the others. " +
			"Use it for independent calls; calls that depend on each other's results must be made one after another.",
		Kind:        registry.Stateless,
		Source:      source,
		InputSchema: schema,
		Timeout:     timeout,
	}
}

// Pipeline runs the calls of one batch; it is safe for concurrent use.
type Pipeline interface {
	// Call runs the call of the tool called name with arguments args (nil
	// when the call gave none) and returns the tool's name as resolved
	// and the call's result, an error result when the call failed; never
	// nil.
	Call(ctx context.Context, name string, args json.RawMessage) (tool string, res *executors.Result)
	// Failed is the error result of a call that failed with err.
	Failed(err error) *executors.Result
	// Class is the error class of res, an error result.
	Class(res *executors.Result) string
}

// Outcome is one call's outcome in the batch's result.
type Outcome struct {
	Tool              string          `json:"tool"`
	Status            string          `json:"status"` // ok or error
	Class             string          `json:"class,omitempty"`
	DurationMS        float64         `json:"duration_ms"`
	Content           json.RawMessage `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
}

// Result is the batch's structuredContent (and, encoded, its text).
type Result struct {
	Results []Outcome `json:"results"`
	OK      int       `json:"ok"`
	Failed  int       `json:"failed"`
}

// args are the batch's arguments, once they passed its schema.
type args struct {
	Calls []struct {
		Tool      string          `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"calls"`
	MaxParallel int `json:"max_parallel"`
}

// Run runs the calls of the batch ec through p, at most max_parallel at
// once and never more than perSession (when it is at least 1: the calls
// share the batch's per-session slots, so more at once would only queue,
// or fail as rate_limited, the batch defeating itself), and waits for all
// of them. Progress, when ec asks for it, is reported as each call ends.
// A call that panics is logged on logger (nil discards) and fails alone.
func Run(ctx context.Context, ec executors.Call, p Pipeline, perSession int, logger *slog.Logger) (executors.Result, error) {
	raw, err := json.Marshal(ec.Args)
	if err != nil {
		return executors.Result{}, retry.Wrap(retry.Internal, "reading the batch", err)
	}
	var a args
	if err := json.Unmarshal(raw, &a); err != nil {
		return executors.Result{}, retry.Wrap(retry.Internal, "reading the batch", err)
	}
	limit := len(a.Calls)
	if a.MaxParallel >= 1 {
		limit = min(limit, a.MaxParallel)
	}
	if perSession >= 1 {
		limit = min(limit, perSession)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	outcomes := make([]Outcome, len(a.Calls))
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	var done atomic.Int64
	for i, c := range a.Calls {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			start, settled := time.Now(), false
			// A panic here would end the process: nothing up this
			// goroutine's stack recovers. It fails this call alone.
			defer func() {
				if v := recover(); v != nil {
					logger.Error("batch call panicked", "tool", c.Tool, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
					if !settled {
						outcomes[i] = outcome(p, c.Tool, start, p.Failed(retry.Errorf(retry.Internal,
							"the call failed unexpectedly (panic) inside %s; the gateway logged the details", Name)))
					}
				}
			}()
			args := c.Arguments
			if string(args) == "null" {
				args = nil
			}
			tool, res := p.Call(ctx, c.Tool, args)
			outcomes[i] = outcome(p, tool, start, res)
			settled = true
			if ec.Progress != nil {
				n := done.Add(1)
				ec.Progress(float64(n), float64(len(a.Calls)), fmt.Sprintf("%s: %s", outcomes[i].Tool, outcomes[i].Status))
			}
		})
	}
	wg.Wait()
	res := Result{Results: outcomes}
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

// outcome describes the result res of a call of the tool called name that
// started at start.
func outcome(p Pipeline, name string, start time.Time, res *executors.Result) Outcome {
	o := Outcome{Tool: name, Status: "ok", DurationMS: float64(time.Since(start).Microseconds()) / 1000}
	if res.IsError {
		o.Status, o.Class = "error", p.Class(res)
	}
	o.Content, o.StructuredContent, _ = mcpwire.ContentJSON(res)
	return o
}
