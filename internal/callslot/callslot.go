// Package callslot lets a tool call give back its concurrency slot while
// it waits for its client, and take one again once the client has
// answered (issue 31): a call whose upstream asked the client something
// (sampling, elicitation, roots; for a 2026-07-28 client an
// input_required result waiting for its retry) uses none of toolgate's
// capacity, and must not keep other principals' calls waiting.
//
// The gateway's concurrency limiter puts a [Holder] in the call's context;
// whoever makes the call wait for its client (the upstream relay) brackets
// the wait with [Park]. It imports nothing beyond the standard library.
package callslot

import "context"

// Holder is a call's hold on its concurrency slot.
type Holder interface {
	// Park gives the slot back until resume is called; calls may nest
	// (the slot is given back by the first and taken again by the last
	// resume). resume waits for a slot, as long as ctx allows; its error
	// is ctx's when ctx ends first, and the call then holds no slot.
	Park() (resume func(ctx context.Context) error)
}

type holderKey struct{}

// With returns ctx carrying h.
func With(ctx context.Context, h Holder) context.Context {
	return context.WithValue(ctx, holderKey{}, h)
}

// Park gives back the slot of the call whose context ctx is, if it holds
// one, until resume; without a [Holder] in ctx it does nothing and resume
// returns nil at once.
func Park(ctx context.Context) (resume func(ctx context.Context) error) {
	if h, ok := ctx.Value(holderKey{}).(Holder); ok {
		return h.Park()
	}
	return func(context.Context) error { return nil }
}
