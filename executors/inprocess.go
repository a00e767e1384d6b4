package executors

import "context"

// StatelessFunc implements a stateless tool. args have passed the tool's
// input schema. A failure is returned as an error, ideally a *retry.Error
// whose class tells the model what went wrong. A StatelessFunc is the
// [Executor] of its tool.
type StatelessFunc func(ctx context.Context, args map[string]any) (Result, error)

var _ Executor = StatelessFunc(nil)

// Execute calls f with the call's arguments.
func (f StatelessFunc) Execute(ctx context.Context, call Call) (Result, error) {
	return f(ctx, call.Args)
}

// Instance is one thread's instance of a stateful tool. If it implements
// io.Closer, Close is called exactly once when the instance is discarded.
type Instance interface {
	Call(ctx context.Context, args map[string]any) (Result, error)
}

// Factory creates the instances of a stateful tool.
type Factory struct {
	// New creates the instance for thread. It is called lazily, on the
	// first call of the tool in the thread, at most once at a time per
	// thread. Required.
	New func(ctx context.Context, thread string) (Instance, error)
	// Concurrent declares an instance safe for concurrent calls. When false
	// (the default), calls on one instance are serialized.
	Concurrent bool
	// MaxBytes is a size hint: the most one instance may hold, as the
	// tool bounds it (the scratchpad's 1 MiB of notes, say). Each
	// instance is charged it against its principal's
	// threads.max_bytes_per_principal for as long as it lives, so that
	// one principal opening threads cannot pin memory without bound
	// (issue 31); past it the principal's least recently used idle
	// instance is evicted. Zero (the default): not counted; only
	// threads.max_instances bounds the instances.
	MaxBytes int64
}
