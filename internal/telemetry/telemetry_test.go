package telemetry

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace/noop"
)

const (
	headerParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	metaParent   = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
)

// TestStartRequestParent: a request's _meta trace context wins over its
// HTTP header's (it names the one message); without _meta the header's
// is taken; a nil Tracer takes nothing and costs nothing.
func TestStartRequestParent(t *testing.T) {
	tr := NewTracer(noop.NewTracerProvider(), func() uint64 { return 0 }, func(context.Context) error { return nil })
	h := http.Header{"Traceparent": {headerParent}}
	tests := []struct {
		name string
		meta map[string]any
		want string
	}{
		{"meta wins", map[string]any{"traceparent": metaParent}, "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"header", nil, "0af7651916cd43dd8448eb211c80319c"},
		{"meta not a string", map[string]any{"traceparent": 7}, "0af7651916cd43dd8448eb211c80319c"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, _ := tr.StartRequest(t.Context(), h, tc.meta, "tools/call x")
			if got := TraceID(ctx); got != tc.want {
				t.Errorf("TraceID = %q, want %q", got, tc.want)
			}
			// Passed on: the headers and _meta of outgoing requests.
			out := http.Header{}
			Inject(ctx, out)
			parent, _ := Meta(ctx)
			if !strings.Contains(out.Get("traceparent"), tc.want) || !strings.Contains(parent, tc.want) {
				t.Errorf("passed on header %q, _meta %q; want trace %s", out.Get("traceparent"), parent, tc.want)
			}
		})
	}
	var off *Tracer
	ctx, span := off.StartRequest(t.Context(), h, nil, "tools/call x")
	if span.Recording() || TraceID(ctx) != "" || Traced(ctx) {
		t.Error("a nil Tracer took the trace context: tracing off must not propagate")
	}
	out := http.Header{}
	Inject(ctx, out)
	if len(out) != 0 {
		t.Errorf("Inject without a trace set %v", out)
	}
}

// BenchmarkOff is what an instrumentation point costs with tracing off.
func BenchmarkOff(b *testing.B) {
	var off *Tracer
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		c, s := off.Start(ctx, "execute_tool x", Internal)
		_, q := Child(c, "queue wait", Internal)
		q.End()
		s.End()
	}
}
