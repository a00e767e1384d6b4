package telemetry

import (
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/trace"
)

// RoundTrip sends r through rt as the client span of one HTTP request
// (OpenTelemetry's HTTP conventions: named by the method, with the
// server's address, never the URL, whose query may hold a secret), and
// with the trace context in its headers. A request whose context has no
// trace goes through rt as it is.
func RoundTrip(rt http.RoundTripper, r *http.Request) (*http.Response, error) {
	if !trace.SpanContextFromContext(r.Context()).IsValid() {
		return rt.RoundTrip(r)
	}
	ctx, span := Child(r.Context(), r.Method, Client)
	defer span.End()
	if span.Recording() {
		span.Str("http.request.method", r.Method)
		span.Str("server.address", r.URL.Hostname())
		if p := r.URL.Port(); p != "" {
			if n, err := strconv.Atoi(p); err == nil {
				span.Int("server.port", n)
			}
		}
	}
	r = r.Clone(ctx) // a RoundTripper must not change the caller's request
	Inject(ctx, r.Header)
	resp, err := rt.RoundTrip(r)
	switch {
	case err != nil:
		span.Fail("network", "the HTTP request failed")
	case span.Recording():
		span.Int("http.response.status_code", resp.StatusCode)
		if resp.StatusCode >= 400 { // a client span fails on 4xx too
			span.Fail(strconv.Itoa(resp.StatusCode), "the server answered "+resp.Status)
		}
	}
	return resp, err
}
