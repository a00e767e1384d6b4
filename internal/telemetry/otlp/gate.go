package otlp

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// gate is the bounded queue between ended spans and the collector. It
// passes spans to the SDK's batch processor while fewer than max are
// queued or being exported, and drops (and counts) the rest: the batch
// processor never blocks a call, but it drops silently, and it keeps
// waiting on a collector that hangs for the whole export timeout. The
// exporter it feeds (countingExporter) gives the slots back once an
// export ends, and counts what a failed export lost. The first loss is
// logged once; the count is toolgate_trace_spans_dropped_total.
type gate struct {
	max     int64
	pending atomic.Int64  // spans queued or being exported
	dropped atomic.Uint64 // spans lost, ever
	warned  atomic.Bool   // the loss was logged
	logger  *slog.Logger
	next    sdktrace.SpanProcessor // the batch processor
}

var _ sdktrace.SpanProcessor = (*gate)(nil)

func newGate(exp sdktrace.SpanExporter, max int, timeout time.Duration, logger *slog.Logger) *gate {
	g := &gate{max: int64(max), logger: logger}
	g.next = sdktrace.NewBatchSpanProcessor(&countingExporter{g: g, next: exp},
		sdktrace.WithMaxQueueSize(max), sdktrace.WithMaxExportBatchSize(min(max, 512)),
		sdktrace.WithExportTimeout(timeout))
	return g
}

// OnStart does nothing: the batch processor's OnStart does nothing too.
func (g *gate) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd queues s for export, or drops it when max spans are pending.
func (g *gate) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	if g.pending.Add(1) > g.max {
		g.pending.Add(-1)
		g.lose(1, "the export queue is full (telemetry.queue_size)")
		return
	}
	g.next.OnEnd(s)
}

// Shutdown exports what is queued, within ctx, and stops the exporter.
func (g *gate) Shutdown(ctx context.Context) error { return g.next.Shutdown(ctx) }

// ForceFlush exports what is queued, within ctx.
func (g *gate) ForceFlush(ctx context.Context) error { return g.next.ForceFlush(ctx) }

// lose counts n lost spans and, the first time, says so.
func (g *gate) lose(n int, why string) {
	g.dropped.Add(uint64(n))
	if g.warned.CompareAndSwap(false, true) {
		g.logger.Warn("trace spans dropped: the OpenTelemetry collector is down or slow; calls are unaffected, further losses are only counted in toolgate_trace_spans_dropped_total",
			slog.String("reason", why))
	}
}

// countingExporter frees the gate's slots after each export and counts
// the spans of a failed one as lost. It returns nil for a failure it
// counted: the SDK would log every failure again through otel's global
// error handler.
type countingExporter struct {
	g    *gate
	next sdktrace.SpanExporter
}

func (e *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.next.ExportSpans(ctx, spans)
	e.g.pending.Add(-int64(len(spans)))
	if err != nil {
		e.g.lose(len(spans), "exporting failed: "+err.Error())
	}
	return nil
}

func (e *countingExporter) Shutdown(ctx context.Context) error { return e.next.Shutdown(ctx) }
