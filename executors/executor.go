package executors

import (
	"context"
	"encoding/json"

	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

// Executor runs the calls of one tool: each tool is bound to its own
// executor when it is registered ([Bound]). Execute must honour ctx: when
// ctx is done it returns promptly with ctx's error (wrapped or classified).
// A failure is returned as an error, preferably a *retry.Error; executors
// never build error results themselves.
type Executor interface {
	Execute(ctx context.Context, call Call) (Result, error)
}

// Call is one validated tool call.
type Call struct {
	// Tool is the resolved tool definition. It is never nil.
	Tool *registry.Tool
	// Args are the decoded arguments. They have passed the tool's input
	// schema; a call without arguments has an empty, non-nil map.
	Args map[string]any
	// Raw is the arguments exactly as the client sent them, or nil when the
	// call came without arguments. Proxying executors forward it unchanged.
	Raw json.RawMessage
	// Thread is the thread the call runs in; never empty.
	Thread string
	// Progress, when not nil, reports progress to the calling client (it
	// asked for progress notifications). total is 0 when unknown. It is
	// safe to call from any goroutine until Execute returns.
	Progress func(progress, total float64, message string)
	// Retry is how the call may be retried and the backend it goes to
	// (its breaker and retry budget). The caller sets it (gateway computes
	// one Plan per tool); the zero Plan retries nothing and has no backend.
	// The [Dispatcher] retries by it, and hands it on to executors that run
	// their own retry loop ([SelfRetrying]); other executors see the zero
	// Plan.
	Retry retry.Plan
	// OnAttempt, when not nil, is told of each attempt the call makes, with
	// its number, from 1, just before it starts: by the [Dispatcher] before
	// each Execute call, or, for a [SelfRetrying] executor, by the executor
	// before each of its attempts (the Dispatcher then leaves it to it).
	// Other executors never call it. It runs on the goroutine that makes
	// the attempt and must not block. Nil means nobody is listening.
	OnAttempt func(n int)
}

// Bound is a tool definition with the executor that runs its calls.
type Bound struct {
	Tool registry.Tool
	Exec Executor
}

// SelfRetrying is implemented by executors that retry within Execute (the
// REST executor's HTTP client does). For them the [Dispatcher] makes one
// Execute call, handing on [Call.Retry] as the caller set it, and the
// executor must admit every attempt through Retry.Backend, record its
// outcome, ask Retry.Decide after each failure (its only retry decision),
// and report its attempts under [AttemptsMetaKey] as the Dispatcher does.
type SelfRetrying interface {
	Executor
	// RetriesItself reports whether Execute runs its own retry loop.
	RetriesItself() bool
}
