package otlp

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/internal/telemetry"
)

// Options configure [New]. The zero value reads everything from the
// environment.
type Options struct {
	// Config is the telemetry section; nil when the file has none.
	Config *config.Telemetry
	// Getenv reads the environment; nil means os.Getenv. (The SDK and the
	// exporters read the OTEL_* variables they own themselves.)
	Getenv func(string) string
	// Logger receives the one warning about dropped spans; nil discards.
	Logger *slog.Logger
	// Version is toolgate's, reported as service.version.
	Version string
}

// Enabled reports whether o turns tracing on: a telemetry section, or a
// collector named by OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT; never with OTEL_SDK_DISABLED=true
// or OTEL_TRACES_EXPORTER=none.
func Enabled(o Options) bool {
	env := o.getenv()
	if strings.EqualFold(env("OTEL_SDK_DISABLED"), "true") || strings.EqualFold(env("OTEL_TRACES_EXPORTER"), "none") {
		return false
	}
	return o.Config != nil || env("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

func (o Options) getenv() func(string) string {
	if o.Getenv == nil {
		return os.Getenv
	}
	return o.Getenv
}

// New builds the tracer o asks for, on the OpenTelemetry SDK and an OTLP
// exporter, or returns nil, nil when tracing is off ([Enabled]). It does
// not connect: the exporter dials the collector when it first exports, so
// a collector that is down costs no start-up time. The caller calls
// Close on the tracer.
func New(ctx context.Context, o Options) (*telemetry.Tracer, error) {
	if !Enabled(o) {
		return nil, nil
	}
	c := o.Config
	if c == nil {
		c = &config.Telemetry{}
	}
	exp, err := exporter(ctx, c, o.getenv())
	if err != nil {
		return nil, fmt.Errorf("building the OTLP trace exporter: %w", err)
	}
	res, err := serviceResource(ctx, c, o.Version)
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("building the trace resource: %w", err)
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	g := newGate(exp, c.Queue(), c.Timeout(), logger)
	opts := []sdktrace.TracerProviderOption{sdktrace.WithSpanProcessor(g), sdktrace.WithResource(res)}
	if r := c.SampleRatio; r != nil {
		// Otherwise the SDK reads OTEL_TRACES_SAMPLER (default: parent
		// based, always on).
		opts = append(opts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(*r))))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	return telemetry.NewTracer(tp, g.dropped.Load, tp.Shutdown), nil
}

// exporter is the OTLP exporter for c: the protocol, endpoint and headers
// c sets, else those of the OTEL_* variables (read by the exporters).
func exporter(ctx context.Context, c *config.Telemetry, env func(string) string) (sdktrace.SpanExporter, error) {
	protocol := cmp.Or(c.Protocol, env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), env("OTEL_EXPORTER_OTLP_PROTOCOL"), config.TelemetryHTTP)
	switch protocol {
	case config.TelemetryGRPC:
		opts := []otlptracegrpc.Option{otlptracegrpc.WithTimeout(c.Timeout())}
		if c.Endpoint != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(c.Endpoint))
		}
		if len(c.Headers) > 0 {
			opts = append(opts, otlptracegrpc.WithHeaders(c.Headers))
		}
		return otlptracegrpc.New(ctx, opts...)
	case config.TelemetryHTTP, config.TelemetryHTTPJSON:
		opts := []otlptracehttp.Option{otlptracehttp.WithTimeout(c.Timeout())}
		if c.Protocol == config.TelemetryHTTPJSON {
			opts = append(opts, otlptracehttp.WithEncoding(otlptracehttp.EncodingJSON))
		}
		if c.Endpoint != "" {
			// A base URL, as OTEL_EXPORTER_OTLP_ENDPOINT is: the signal's
			// path is added.
			opts = append(opts, otlptracehttp.WithEndpointURL(strings.TrimRight(c.Endpoint, "/")+"/v1/traces"))
		}
		if len(c.Headers) > 0 {
			opts = append(opts, otlptracehttp.WithHeaders(c.Headers))
		}
		return otlptracehttp.New(ctx, opts...)
	}
	return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL is %q: use http/protobuf, http/json or grpc", protocol)
}

// serviceResource describes toolgate: service.name toolgate unless
// OTEL_SERVICE_NAME (or OTEL_RESOURCE_ATTRIBUTES) or c says otherwise.
func serviceResource(ctx context.Context, c *config.Telemetry, version string) (*resource.Resource, error) {
	opts := []resource.Option{
		resource.WithAttributes(attribute.String("service.name", "toolgate")),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(), // later options win
	}
	if version != "" {
		opts = append(opts, resource.WithAttributes(attribute.String("service.version", version)))
	}
	if c.ServiceName != "" {
		opts = append(opts, resource.WithAttributes(attribute.String("service.name", c.ServiceName)))
	}
	return resource.New(ctx, opts...)
}
