package config

import (
	"net/url"
	"strconv"
	"time"
)

// Telemetry protocols: how spans travel to the OpenTelemetry collector.
const (
	// TelemetryHTTP is OTLP over HTTP with protobuf bodies (port 4318).
	TelemetryHTTP = "http/protobuf"
	// TelemetryHTTPJSON is OTLP over HTTP with JSON bodies.
	TelemetryHTTPJSON = "http/json"
	// TelemetryGRPC is OTLP over gRPC (port 4317).
	TelemetryGRPC = "grpc"
)

// Limits of the telemetry section.
const (
	defaultTelemetryQueue   = 2048
	maxTelemetryQueue       = 1 << 20
	defaultTelemetryTimeout = 10 * time.Second
)

// Telemetry sends OpenTelemetry traces of MCP requests and tool calls to an
// OTLP collector (docs/tracing.md). Without the section, tracing is on
// only when the environment names a collector
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), and
// OTEL_SDK_DISABLED=true turns it off either way. A value left empty here
// is taken from the standard OTEL_* variable, then from OpenTelemetry's
// default.
type Telemetry struct {
	// Endpoint is the collector's base URL, http:// or https://, like
	// http://127.0.0.1:4318; for http/protobuf, /v1/traces is added.
	// Default OTEL_EXPORTER_OTLP_ENDPOINT, else http://localhost:4318
	// (4317 for grpc).
	Endpoint string `yaml:"endpoint"`
	// Protocol is http/protobuf, http/json or grpc. Default
	// OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf.
	Protocol string `yaml:"protocol"`
	// ServiceName names toolgate in the traces. Default OTEL_SERVICE_NAME,
	// else toolgate.
	ServiceName string `yaml:"service_name"`
	// SampleRatio, from 0 to 1, is the share of traces started here that
	// are recorded; a trace the caller started follows the caller's
	// decision. Default: OTEL_TRACES_SAMPLER, else every trace.
	SampleRatio *float64 `yaml:"sample_ratio"`
	// Headers are sent with every export, e.g. a collector's API key;
	// give secrets from the environment (${OTLP_TOKEN}). Default
	// OTEL_EXPORTER_OTLP_HEADERS.
	Headers map[string]string `yaml:"headers"`
	// QueueSize bounds the spans waiting for export: past it, while the
	// collector is down or slow, new spans are dropped and counted in
	// toolgate_trace_spans_dropped_total. From 1 to 1048576. Default 2048.
	QueueSize int `yaml:"queue_size"`
	// ExportTimeout bounds one export to the collector. Default 10s.
	ExportTimeout Duration `yaml:"export_timeout"`
}

// Queue is QueueSize, or its default when unset.
func (t *Telemetry) Queue() int {
	if t.QueueSize == 0 {
		return defaultTelemetryQueue
	}
	return t.QueueSize
}

// Timeout is ExportTimeout, or its default when unset.
func (t *Telemetry) Timeout() time.Duration {
	if t.ExportTimeout == 0 {
		return defaultTelemetryTimeout
	}
	return time.Duration(t.ExportTimeout)
}

// telemetry checks the telemetry section.
func (c *checker) telemetry(cfg *Config) {
	t := cfg.Telemetry
	if t == nil || c.broken["telemetry"] {
		return
	}
	if t.Endpoint != "" {
		if u, err := url.Parse(t.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			c.fail("telemetry.endpoint", quoteShort(t.Endpoint), "must be the collector's http:// or https:// URL, like http://127.0.0.1:4318")
		}
	}
	switch t.Protocol {
	case "", TelemetryHTTP, TelemetryHTTPJSON, TelemetryGRPC:
	default:
		c.fail("telemetry.protocol", quoteShort(t.Protocol), "must be http/protobuf, http/json or grpc")
	}
	if r := t.SampleRatio; r != nil && (*r < 0 || *r > 1) {
		c.fail("telemetry.sample_ratio", strconv.FormatFloat(*r, 'g', -1, 64), "must be from 0 to 1, like 0.1 to record one trace in ten")
	}
	if t.QueueSize < 0 || t.QueueSize > maxTelemetryQueue {
		c.fail("telemetry.queue_size", strconv.Itoa(t.QueueSize), "must be from 1 to %d, like 2048", maxTelemetryQueue)
	}
	if t.ExportTimeout < 0 {
		c.fail("telemetry.export_timeout", t.ExportTimeout.String(), "must be positive, like 10s")
	}
	for k := range t.Headers {
		if k == "" {
			c.fail("telemetry.headers", "", "a header needs a name")
		}
	}
}
