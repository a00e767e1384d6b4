package threadctx

import "context"

// threadKey is the context key of the thread ID. Being unexported and of its
// own type, it cannot collide with another package's key.
type threadKey struct{}

// WithThread returns a copy of ctx that carries the thread ID id.
func WithThread(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, threadKey{}, id)
}

// ThreadFrom returns the thread ID that [WithThread] stored in ctx, and
// whether ctx carries one at all (an empty ID set with WithThread is
// reported as present).
func ThreadFrom(ctx context.Context) (string, bool) {
	id, ok := ctx.Value(threadKey{}).(string)
	return id, ok
}
