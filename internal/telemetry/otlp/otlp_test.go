package otlp

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"go.uber.org/goleak"
	"google.golang.org/grpc"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/internal/telemetry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// hangingExporter blocks every export until released, as a collector
// that accepts the connection and never answers.
type hangingExporter struct {
	release chan struct{}
	mu      sync.Mutex
	got     int // spans handed to ExportSpans; guarded by mu
}

func (e *hangingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	e.got += len(spans)
	e.mu.Unlock()
	select {
	case <-e.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (e *hangingExporter) Shutdown(context.Context) error { return nil }

// TestGateDropsWhileCollectorHangs: with the exporter stuck, ending spans
// never blocks; past the queue bound they are dropped, counted, and the
// loss is logged once.
func TestGateDropsWhileCollectorHangs(t *testing.T) {
	exp := &hangingExporter{release: make(chan struct{})}
	var logs bytes.Buffer
	var logMu sync.Mutex
	g := newGate(exp, 4, time.Minute, slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &logMu}, nil)))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(g))
	tr := tp.Tracer("test")
	const n = 100
	for range n {
		_, s := tr.Start(t.Context(), "call")
		s.End() // must not block: the test would hang here
	}
	if d := g.dropped.Load(); d < n-4 {
		t.Errorf("dropped = %d of %d spans with a queue of 4, want at least %d", d, n, n-4)
	}
	close(exp.release)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 10*time.Second)
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	exp.mu.Lock()
	exported := exp.got
	exp.mu.Unlock()
	if exported+int(g.dropped.Load()) != n {
		t.Errorf("exported %d + dropped %d != %d spans ended", exported, g.dropped.Load(), n)
	}
	logMu.Lock()
	defer logMu.Unlock()
	if c := strings.Count(logs.String(), "trace spans dropped"); c != 1 {
		t.Errorf("the loss was logged %d times, want once:\n%s", c, logs.String())
	}
}

// TestGateCountsFailedExports: spans of an export that fails (the
// collector is down) are counted as dropped and free their slots.
func TestGateCountsFailedExports(t *testing.T) {
	exp := &hangingExporter{release: make(chan struct{})}
	g := newGate(exp, 8, time.Millisecond, slog.New(slog.DiscardHandler))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(g))
	_, s := tp.Tracer("test").Start(t.Context(), "call")
	s.End()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 10*time.Second)
	defer cancel()
	if err := tp.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	if g.dropped.Load() != 1 || g.pending.Load() != 0 {
		t.Errorf("after a timed-out export: dropped %d, pending %d; want 1, 0", g.dropped.Load(), g.pending.Load())
	}
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestEnabled: tracing is on with a telemetry section or a collector in
// the environment, and off otherwise or when the SDK is disabled.
func TestEnabled(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	tests := []struct {
		name string
		o    Options
		want bool
	}{
		{"nothing", Options{Getenv: env(nil)}, false},
		{"section", Options{Config: &config.Telemetry{}, Getenv: env(nil)}, true},
		{"endpoint variable", Options{Getenv: env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})}, true},
		{"traces endpoint variable", Options{Getenv: env(map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"})}, true},
		{"sdk disabled", Options{Config: &config.Telemetry{}, Getenv: env(map[string]string{"OTEL_SDK_DISABLED": "true"})}, false},
		{"exporter none", Options{Config: &config.Telemetry{}, Getenv: env(map[string]string{"OTEL_TRACES_EXPORTER": "none"})}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Enabled(tc.o); got != tc.want {
				t.Errorf("Enabled(%s) = %v, want %v", tc.name, got, tc.want)
			}
		})
	}
	tr, err := New(t.Context(), Options{Getenv: env(nil)})
	if tr != nil || err != nil {
		t.Errorf("New with tracing off = %v, %v; want nil, nil (no SDK, no exporter)", tr, err)
	}
}

// TestNewBadProtocol: a protocol from the environment that no exporter
// speaks is an error that names the variable.
func TestNewBadProtocol(t *testing.T) {
	_, err := New(t.Context(), Options{Config: &config.Telemetry{}, Getenv: func(k string) string {
		if k == "OTEL_EXPORTER_OTLP_PROTOCOL" {
			return "thrift"
		}
		return ""
	}})
	if err == nil || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_PROTOCOL") {
		t.Errorf("New with protocol thrift: %v, want an error naming OTEL_EXPORTER_OTLP_PROTOCOL", err)
	}
}

// grpcReceiver is an OTLP/gRPC trace receiver on the official service
// definition; it counts the spans it receives.
type grpcReceiver struct {
	coltracepb.UnimplementedTraceServiceServer
	got chan string
}

func (r *grpcReceiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				r.got <- s.Name
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// TestNewGRPC: protocol grpc exports over OTLP/gRPC to the endpoint the
// section names.
func TestNewGRPC(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	rec := &grpcReceiver{got: make(chan string, 16)}
	coltracepb.RegisterTraceServiceServer(srv, rec)
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Serve(lis) })
	defer wg.Wait()
	defer srv.Stop()

	tr, err := New(t.Context(), Options{
		Config: &config.Telemetry{Endpoint: "http://" + lis.Addr().String(), Protocol: config.TelemetryGRPC},
		Getenv: func(string) string { return "" },
	})
	if err != nil || tr == nil {
		t.Fatalf("New(grpc) = %v, %v", tr, err)
	}
	_, span := tr.Start(t.Context(), "execute_tool x", telemetry.Internal)
	span.End()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 10*time.Second)
	defer cancel()
	if err := tr.Close(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case name := <-rec.got:
		if name != "execute_tool x" {
			t.Errorf("the receiver got span %q, want execute_tool x", name)
		}
	default:
		t.Errorf("the gRPC receiver got no span; dropped %d", tr.Dropped())
	}
}
