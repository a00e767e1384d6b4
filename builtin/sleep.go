package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

func sleepTool() registry.Tool {
	return registry.Tool{
		Name:  "sleep",
		Title: "Sleep",
		Description: "Waits for the given number of milliseconds (0 to 60000) and then returns, doing " +
			"nothing else. It exists for testing timeouts, cancellation and graceful shutdown; a call " +
			"that is cancelled or times out ends early with that error.",
		Kind:   registry.Stateless,
		Source: source,
		InputSchema: json.RawMessage(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "ms": {
      "type": "integer",
      "minimum": 0,
      "maximum": 60000,
      "description": "How long to wait, in milliseconds."
    }
  },
  "required": ["ms"],
  "additionalProperties": false
}`),
		Annotations: registry.Annotations{
			Title:           "Sleep",
			ReadOnlyHint:    ptr(true),
			DestructiveHint: ptr(false),
			IdempotentHint:  ptr(true),
			OpenWorldHint:   ptr(false),
		},
		Idempotent: true,
	}
}

// sleepMaxMS is the longest sleep allowed, in milliseconds. The schema says
// so too; the check stays for embedders that call the function directly
// with Go integers, which no schema has seen.
const sleepMaxMS = 60000

// sleepArgs are sleep's arguments.
type sleepArgs struct {
	MS int64 `json:"ms"`
}

// sleep is the sleep tool's StatelessFunc. When ctx is done first it returns
// ctx.Err() unwrapped, so the gateway classifies the failure as cancelled or
// timeout.
func sleep(ctx context.Context, args map[string]any) (executors.Result, error) {
	a, err := decode[sleepArgs]("sleep", args)
	if err != nil {
		return executors.Result{}, err
	}
	if a.MS < 0 || a.MS > sleepMaxMS {
		return executors.Result{}, retry.Errorf(retry.Validation, "sleep: argument \"ms\" must be 0 to %d", sleepMaxMS)
	}
	if err := ctx.Err(); err != nil {
		return executors.Result{}, err
	}
	t := time.NewTimer(time.Duration(a.MS) * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return executors.Result{}, ctx.Err()
	case <-t.C:
		return executors.Text(fmt.Sprintf("slept %d ms", a.MS)), nil
	}
}
