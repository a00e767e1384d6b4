package tests

// OpenTelemetry tracing (docs/tracing.md), end to end: a real OTLP/HTTP
// receiver decoding the official protobufs, the real binary, a REST
// backend and an upstream MCP server built with mcp-go's server package.

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP trace receiver: it decodes each export
// with the official collector types and keeps the spans.
type otlpReceiver struct {
	URL string

	mu    sync.Mutex
	spans []*tracepb.Span // guarded by mu
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		var in coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &in)
		}
		if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" || err != nil {
			t.Errorf("OTLP receiver: %s %s (%s): %v; want a protobuf POST to /v1/traces", req.Method, req.URL.Path, req.Header.Get("Content-Type"), err)
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range in.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				r.spans = append(r.spans, ss.Spans...)
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

func (r *otlpReceiver) Spans() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...)
}

// traceSeen is what a backend saw of the trace context: the traceparent
// header and, for the upstream, the traceparent in the call's _meta.
type traceSeen struct {
	mu     sync.Mutex
	header []string // guarded by mu
	meta   []string // guarded by mu
	// reads is what the upstream saw of its resources/read requests.
	reads *traceSeen
}

func (s *traceSeen) add(header, meta string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.header = append(s.header, header)
	s.meta = append(s.meta, meta)
}

func (s *traceSeen) get() (header, meta []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.header...), append([]string(nil), s.meta...)
}

type headerKey struct{}

// tracedUpstreamDoc is the URI of tracedUpstream's one resource.
const tracedUpstreamDoc = "test://traced/doc"

// tracedUpstream is an MCP server with one tool, echo, and one resource,
// tracedUpstreamDoc, that records the traceparent of each call's (and
// each resources/read's, in reads) HTTP request and _meta.
func tracedUpstream(t *testing.T) (string, *traceSeen) {
	seen := &traceSeen{reads: &traceSeen{}}
	s := mcpserver.NewMCPServer("traced-upstream", "1", mcpserver.WithResourceCapabilities(false, false))
	s.AddResource(mcp.NewResource(tracedUpstreamDoc, "doc"), func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		meta := ""
		if req.Params.Meta != nil {
			meta, _ = req.Params.Meta.AdditionalFields["traceparent"].(string)
		}
		h, _ := ctx.Value(headerKey{}).(string)
		seen.reads.add(h, meta)
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: tracedUpstreamDoc, Text: "the doc"}}, nil
	})
	s.AddTool(mcp.NewTool("echo", mcp.WithString("text")), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		meta := ""
		if req.Params.Meta != nil {
			meta, _ = req.Params.Meta.AdditionalFields["traceparent"].(string)
		}
		h, _ := ctx.Value(headerKey{}).(string)
		seen.add(h, meta)
		return mcp.NewToolResultText("echoed"), nil
	})
	h := mcpserver.NewStreamableHTTPServer(s, mcpserver.WithHTTPContextFunc(func(ctx context.Context, r *http.Request) context.Context {
		return context.WithValue(ctx, headerKey{}, r.Header.Get("traceparent"))
	}))
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), stopTimeout)
		defer cancel()
		_ = h.Shutdown(ctx)
		srv.Close()
	})
	return srv.URL + "/mcp", seen
}

// tracedBackend is a REST backend that records each request's
// traceparent.
func tracedBackend(t *testing.T) (string, *traceSeen) {
	seen := &traceSeen{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.add(r.Header.Get("traceparent"), "")
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, seen
}

func tracingConfig(collector, backend, upstream string, telemetry string) string {
	return fmt.Sprintf(`batch_tool: true
telemetry:
  %s
rest:
  - name: lookup
    description: Looks a word up.
    method: GET
    url: %s/lookup
    query: {q: "{q}"}
    input_schema:
      type: object
      properties: {q: {type: string}}
upstreams:
  - name: up
    transport: streamable-http
    url: %q
`, strings.ReplaceAll(fmt.Sprintf(telemetry, collector), "\n", "\n  "), backend, upstream)
}

// connectWith connects over streamable HTTP, sending header on every
// request.
func connectWith(t *testing.T, srv *server, header map[string]string) *client.Client {
	t.Helper()
	c, err := client.NewStreamableHttpClient(srv.URL+"/mcp", transport.WithHTTPHeaders(header))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = protocolVersion
	req.Params.ClientInfo = mcp.Implementation{Name: "toolgate-e2e", Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return c
}

// TestTracingOneConnectedTrace: one tools/call of toolgate_batch that
// calls a REST tool and an upstream tool, its trace context in _meta,
// reaches the collector as one connected trace; the backend and the
// upstream (in headers and in _meta) see that trace, each as the child of
// toolgate's client span; the log line carries trace_id; no span carries
// an argument value. A second call with the trace context in the HTTP
// header is traced under it too.
func TestTracingOneConnectedTrace(t *testing.T) {
	col := startOTLPReceiver(t)
	backend, backendSaw := tracedBackend(t)
	upstream, upstreamSaw := tracedUpstream(t)
	srv := startServe(t, tracingConfig(col.URL, backend, upstream, "endpoint: %s\nprotocol: http/protobuf")+"audit: {file: audit.jsonl}\n")
	c := connect(t, streamableHTTP, srv)
	waitTools(t, c, "lookup", "up__echo", "toolgate_batch")

	const (
		traceID   = "4bf92f3577b34da6a3ce929d0e0e4736"
		parentID  = "00f067aa0ba902b7"
		argSecret = "argument-value-never-in-a-span"
	)
	req := callRequest("toolgate_batch", map[string]any{"calls": []any{
		map[string]any{"tool": "lookup", "arguments": map[string]any{"q": argSecret}},
		map[string]any{"tool": "up__echo", "arguments": map[string]any{"text": argSecret}},
	}}, "")
	req.Params.Meta = &mcp.Meta{AdditionalFields: map[string]any{"traceparent": "00-" + traceID + "-" + parentID + "-01"}}
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	res, err := c.CallTool(ctx, req)
	cancel()
	if err != nil || res.IsError {
		t.Fatalf("toolgate_batch: %v %v", err, res)
	}

	// The same trace context in the HTTP header (no _meta).
	const headerTrace = "0af7651916cd43dd8448eb211c80319c"
	hc := connectWith(t, srv, map[string]string{"traceparent": "00-" + headerTrace + "-b7ad6b7169203331-01"})
	if res := mustCall(t, hc, "lookup", map[string]any{"q": "x"}, ""); res.IsError {
		t.Fatalf("lookup: %s", resultText(res))
	}

	// A resources/read relayed to the upstream, in the same trace.
	pollUntil(t, pollTimeout, "the upstream's resource listed", func() (bool, string) {
		ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
		defer cancel()
		res, err := c.ListResources(ctx, mcp.ListResourcesRequest{})
		return err == nil && len(res.Resources) == 1, fmt.Sprintf("resources/list: %v %v", res, err)
	})
	read := mcp.ReadResourceRequest{}
	read.Params.URI = tracedUpstreamDoc
	read.Params.Meta = &mcp.Meta{AdditionalFields: map[string]any{"traceparent": "00-" + traceID + "-" + parentID + "-01"}}
	ctx, cancel = context.WithTimeout(t.Context(), callTimeout)
	_, err = c.ReadResource(ctx, read)
	cancel()
	if err != nil {
		t.Fatalf("resources/read: %v", err)
	}

	_, _ = c.Close(), hc.Close() // before toolgate stops: their DELETEs reach it
	srv.Stop(t)                  // flushes the spans
	spans := col.Spans()
	byID := map[string]*tracepb.Span{}
	var inTrace []*tracepb.Span
	for _, s := range spans {
		if hex.EncodeToString(s.TraceId) == traceID {
			inTrace = append(inTrace, s)
			byID[hex.EncodeToString(s.SpanId)] = s
		}
	}
	names := map[string]*tracepb.Span{}
	for _, s := range inTrace {
		names[s.Name] = s
		// Connected: every span's parent is the caller's or another of
		// the trace.
		p := hex.EncodeToString(s.ParentSpanId)
		if _, ok := byID[p]; !ok && p != parentID {
			t.Errorf("span %q has parent %s, which is neither the caller's span nor one of the trace's", s.Name, p)
		}
		for _, a := range s.Attributes {
			if strings.Contains(a.Value.String(), argSecret) {
				t.Errorf("span %q attribute %s shows an argument value", s.Name, a.Key)
			}
		}
	}
	for _, want := range []string{"tools/call toolgate_batch", "execute_tool toolgate_batch", "execute_tool lookup", "execute_tool up__echo", "GET", "tools/call echo", "queue wait", "attempt"} {
		if names[want] == nil {
			t.Errorf("the trace has no span %q; spans: %v", want, spanNames(inTrace))
		}
	}
	if s := names["tools/call toolgate_batch"]; s != nil {
		if s.Kind != tracepb.Span_SPAN_KIND_SERVER || hex.EncodeToString(s.ParentSpanId) != parentID {
			t.Errorf("the MCP request span is %v under %x, want a server span under the caller's %s", s.Kind, s.ParentSpanId, parentID)
		}
		checkAttr(t, s, "mcp.method.name", "tools/call")
		checkAttr(t, s, "gen_ai.tool.name", "toolgate_batch")
	}
	if s := names["execute_tool up__echo"]; s != nil {
		checkAttr(t, s, "gen_ai.operation.name", "execute_tool")
		checkAttr(t, s, "toolgate.tool.kind", "mcp")
		checkAttr(t, s, "toolgate.outcome", "ok")
	}
	// The backend and the upstream saw the trace, under toolgate's
	// client spans.
	wantParent := func(what string, got []string, span *tracepb.Span) {
		t.Helper()
		if span == nil {
			return
		}
		want := "00-" + traceID + "-" + hex.EncodeToString(span.SpanId) + "-01"
		if len(got) == 0 || got[0] != want {
			t.Errorf("%s saw traceparent %q, want %q", what, got, want)
		}
	}
	// The relayed resources/read: a client span under toolgate's record
	// of it, whose context the upstream saw in the header and in _meta.
	var readSpan *tracepb.Span
	for _, sp := range inTrace {
		if sp.Name == "resources/read" && sp.Kind == tracepb.Span_SPAN_KIND_CLIENT {
			readSpan = sp
		}
	}
	if readSpan == nil {
		t.Errorf("the trace has no client span of the relayed resources/read; spans: %v", spanNames(inTrace))
	} else {
		checkAttr(t, readSpan, "mcp.method.name", "resources/read")
		checkAttr(t, readSpan, "toolgate.upstream", "up")
		if p := byID[hex.EncodeToString(readSpan.ParentSpanId)]; p == nil || p.Name != "execute_tool up__resources.read" {
			t.Errorf("the relayed resources/read's parent is %v, want toolgate's execute_tool up__resources.read", p)
		}
	}
	rh, rm := upstreamSaw.reads.get()
	wantParent("the upstream's resources/read (header)", rh, readSpan)
	wantParent("the upstream's resources/read (_meta)", rm, readSpan)
	bh, _ := backendSaw.get()
	wantParent("the REST backend", bh, names["GET"])
	uh, um := upstreamSaw.get()
	wantParent("the upstream (header)", uh, names["tools/call echo"])
	wantParent("the upstream (_meta)", um, names["tools/call echo"])
	if len(bh) < 2 || !strings.HasPrefix(bh[1], "00-"+headerTrace+"-") {
		t.Errorf("the backend saw %q for the call with a traceparent header, want trace %s", bh, headerTrace)
	}
	if !strings.Contains(srv.Stderr(), `"trace_id":"`+traceID+`"`) {
		t.Errorf("no tool call log line carries trace_id %s", traceID)
	}
	// The audit trail names each call's trace, the one whose traceparent
	// came as an HTTP header too.
	trail, err := os.ReadFile(filepath.Join(filepath.Dir(srv.ConfigPath), "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	traces := map[string][]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(trail)), "\n") {
		var rec struct {
			Tool    string `json:"tool"`
			TraceID string `json:"trace_id"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		traces[rec.Tool] = append(traces[rec.Tool], rec.TraceID)
	}
	if got := traces["lookup"]; len(got) != 2 || got[0] != traceID || got[1] != headerTrace {
		t.Errorf("the audit lines of lookup name traces %q, want %s (from _meta, in the batch) and %s (from the header)", got, traceID, headerTrace)
	}
}

func checkAttr(t *testing.T, s *tracepb.Span, key, want string) {
	t.Helper()
	for _, a := range s.Attributes {
		if a.Key == key {
			if got := a.Value.GetStringValue(); got != want {
				t.Errorf("span %q: %s = %q, want %q", s.Name, key, got, want)
			}
			return
		}
	}
	t.Errorf("span %q has no attribute %s", s.Name, key)
}

func spanNames(spans []*tracepb.Span) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

// TestTracingCollectorHangs: a collector that accepts connections and
// never answers costs no call anything: every call completes, the spans
// past the bounded queue are dropped and counted in
// toolgate_trace_spans_dropped_total, and the loss is logged once.
func TestTracingCollectorHangs(t *testing.T) {
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(hang.Close)
	t.Cleanup(func() { close(release) })
	backend, _ := tracedBackend(t)
	upstream, _ := tracedUpstream(t)
	srv := startServe(t, tracingConfig(hang.URL, backend, upstream, "endpoint: %s\nqueue_size: 4\nexport_timeout: 30s"))
	c := connect(t, streamableHTTP, srv)
	waitTools(t, c, "lookup")
	for i := range 20 {
		if res := mustCall(t, c, "lookup", map[string]any{"q": fmt.Sprint(i)}, ""); res.IsError {
			t.Fatalf("call %d: %s", i, resultText(res))
		}
	}
	pollUntil(t, pollTimeout, "dropped spans counted", func() (bool, string) {
		n := metricOrZero(scrape(t, srv.URL), "toolgate_trace_spans_dropped_total", nil)
		return n > 0, fmt.Sprintf("toolgate_trace_spans_dropped_total is %v after 20 calls with a queue of 4 and a hanging collector", n)
	})
	if n := strings.Count(srv.Stderr(), "trace spans dropped"); n != 1 {
		t.Errorf("the loss of spans was logged %d times, want once", n)
	}
}
