package telemetry

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The W3C trace-context keys, the same in HTTP headers and in _meta.
const (
	traceparent = "traceparent"
	tracestate  = "tracestate"
)

// Inject sets the traceparent (and tracestate) headers of ctx's span on
// h; it does nothing when ctx has no span. h must be the caller's own.
func Inject(ctx context.Context, h http.Header) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))
}

// Meta returns the traceparent and tracestate of ctx's span for a
// request's _meta; both "" when ctx has no span.
func Meta(ctx context.Context) (parent, state string) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return "", ""
	}
	m := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, m)
	return m[traceparent], m[tracestate]
}

// metaCarrier reads trace context from a request's _meta.
type metaCarrier map[string]any

func (m metaCarrier) Get(k string) string {
	s, _ := m[k].(string)
	return s
}

func (m metaCarrier) Set(k, v string) { m[k] = v }

func (m metaCarrier) Keys() []string {
	return []string{traceparent, tracestate}
}

// Traced reports whether ctx carries a trace (sampled or not): whether
// there is trace context to pass on.
func Traced(ctx context.Context) bool { return trace.SpanContextFromContext(ctx).IsValid() }
