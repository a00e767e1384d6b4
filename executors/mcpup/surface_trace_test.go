package mcpup

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/mcp"
	"go.opentelemetry.io/otel/trace"
)

// TestWithTraceMeta: a relayed request's params get the trace context of
// the span in ctx in their _meta, whatever form the client's _meta came
// in, keeping its other keys; the caller's params are never changed, and
// without a trace, or for params that are no object, nothing is added.
func TestWithTraceMeta(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	traced := trace.ContextWithRemoteSpanContext(t.Context(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	const want = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		params any
		want   any
	}{
		{"no _meta", traced, map[string]any{"uri": "u"},
			map[string]any{"uri": "u", "_meta": map[string]any{"traceparent": want}}},
		{"the client's traceparent replaced, its other keys kept", traced,
			map[string]any{"uri": "u", "_meta": map[string]any{"traceparent": "00-old-old-01", "k": "v"}},
			map[string]any{"uri": "u", "_meta": map[string]any{"traceparent": want, "k": "v"}}},
		{"_meta as the front decodes it", traced,
			map[string]any{"uri": "u", "_meta": &mcp.Meta{ProgressToken: "p1"}},
			map[string]any{"uri": "u", "_meta": map[string]any{"traceparent": want, "progressToken": "p1"}}},
		{"untraced", t.Context(), map[string]any{"uri": "u"}, map[string]any{"uri": "u"}},
		{"not an object", traced, []any{1}, []any{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := cmp.Diff(nil, tc.params)
			got := withTraceMeta(tc.ctx, tc.params)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("withTraceMeta (-want +got):\n%s", d)
			}
			if after := cmp.Diff(nil, tc.params); after != before {
				t.Errorf("withTraceMeta changed the caller's params: %v", tc.params)
			}
		})
	}
}
