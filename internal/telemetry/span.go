package telemetry

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Kinds of span, as OpenTelemetry names them.
const (
	Internal = trace.SpanKindInternal
	Server   = trace.SpanKindServer
	Client   = trace.SpanKindClient
)

// Span is one span being recorded, or none: the zero Span, which every
// helper returns when tracing is off or the trace is not sampled, does
// nothing. Set attributes only after checking [Span.Recording], so that
// building them costs nothing when it is false.
type Span struct{ s trace.Span }

// Recording reports whether sp records what is set on it.
func (sp Span) Recording() bool { return sp.s != nil }

// Str sets the string attribute k.
func (sp Span) Str(k, v string) {
	if sp.s != nil {
		sp.s.SetAttributes(attribute.String(k, v))
	}
}

// Int sets the integer attribute k.
func (sp Span) Int(k string, v int) {
	if sp.s != nil {
		sp.s.SetAttributes(attribute.Int(k, v))
	}
}

// Fail marks sp failed: error.type is class (toolgate's error class, or a
// code) and the status says msg, which must hold no secret.
func (sp Span) Fail(class, msg string) {
	if sp.s != nil {
		sp.s.SetAttributes(attribute.String("error.type", class))
		sp.s.SetStatus(codes.Error, msg)
	}
}

// End ends sp.
func (sp Span) End() {
	if sp.s != nil {
		sp.s.End()
	}
}

// Start starts a span of kind under ctx's span, or a new trace when ctx
// has none. Nil t: ctx and the zero Span.
func (t *Tracer) Start(ctx context.Context, name string, kind trace.SpanKind) (context.Context, Span) {
	if t == nil {
		return ctx, Span{}
	}
	return t.start(ctx, name, kind)
}

func (t *Tracer) start(ctx context.Context, name string, kind trace.SpanKind) (context.Context, Span) {
	ctx, s := t.tracer.Start(ctx, name, trace.WithSpanKind(kind))
	if !s.IsRecording() {
		return ctx, Span{}
	}
	return ctx, Span{s}
}

// StartRequest starts the server span of one incoming MCP request: its
// parent is the trace context of meta (the request's params._meta) if it
// has one, else of header (the HTTP request's; nil on stdio). Nil t: ctx
// and the zero Span.
func (t *Tracer) StartRequest(ctx context.Context, header http.Header, meta map[string]any, name string) (context.Context, Span) {
	if t == nil {
		return ctx, Span{}
	}
	if _, ok := meta[traceparent].(string); ok {
		ctx = propagation.TraceContext{}.Extract(ctx, metaCarrier(meta))
	} else if header != nil {
		ctx = propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(header))
	}
	return t.start(ctx, name, Server)
}

// Child starts a span of kind under ctx's span when that one is being
// recorded; otherwise it returns ctx and the zero Span. Executors use it:
// they hold no Tracer, and a call that is not traced costs them one
// context lookup.
func Child(ctx context.Context, name string, kind trace.SpanKind) (context.Context, Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, Span{}
	}
	ctx, s := parent.TracerProvider().Tracer(scope).Start(ctx, name, trace.WithSpanKind(kind))
	return ctx, Span{s}
}

// TraceID is the trace ctx's span belongs to, in hex, or "" for none.
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	return sc.TraceID().String()
}

// scope is the instrumentation scope of toolgate's spans.
const scope = "github.com/toolgate/toolgate"

// Tracer records toolgate's spans and exports them. A nil *Tracer is
// tracing off; its methods are safe on nil and for concurrent use.
// [Tracer.Close] flushes and stops the exporter. Package
// internal/telemetry/otlp builds the one toolgate uses.
type Tracer struct {
	tracer  trace.Tracer
	dropped func() uint64
	close   func(context.Context) error
}

// NewTracer returns a Tracer of tp's. dropped counts the spans the
// exporter lost; close flushes and stops it.
func NewTracer(tp trace.TracerProvider, dropped func() uint64, close func(context.Context) error) *Tracer {
	return &Tracer{tracer: tp.Tracer(scope), dropped: dropped, close: close}
}

// Dropped is how many spans were dropped so far: the export queue was
// full, or the collector refused or never answered an export. 0 on nil.
func (t *Tracer) Dropped() uint64 {
	if t == nil {
		return 0
	}
	return t.dropped()
}

// Close exports the spans still queued, within ctx, and stops the
// exporter: a collector that does not answer costs at most ctx's
// deadline. Safe on nil.
func (t *Tracer) Close(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.close(ctx)
}
