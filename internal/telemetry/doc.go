// Package telemetry holds toolgate's OpenTelemetry tracing as the
// pipeline, the MCP front and the executors use it: the [Tracer], span
// helpers and W3C trace-context propagation, on OpenTelemetry's API only.
// Package internal/telemetry/otlp builds the Tracer on the SDK and an
// OTLP exporter, from the telemetry section and the OTEL_* variables, with
// the bounded export queue that drops and counts spans while the
// collector is down or slow; only the gateway imports it, so the
// executors link no SDK.
//
// Tracing off is a nil *[Tracer]: every helper then returns its context
// unchanged and a zero [Span] that does nothing, without allocating, so a
// call costs what it did before tracing existed. No global (otel.Set…) is
// ever installed: the provider belongs to the gateway that built it.
//
// Trace context travels as W3C trace context (traceparent, tracestate):
// in from an HTTP request's headers or a request's params._meta (the MCP
// trace-context proposal; _meta wins, as it names the one message), out
// to REST backends as headers and to upstream MCP servers in _meta and,
// over HTTP, headers too.
//
// Spans never carry argument values, headers or secrets: tool names,
// kinds, outcomes, classes, attempt counts and principals only.
//
// It imports no toolgate package.
package telemetry
