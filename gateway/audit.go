package gateway

import (
	"context"
	"encoding/hex"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/canonjson"
	"github.com/toolgate/toolgate/internal/telemetry"
)

// openAudit opens the audit trail cfg.Audit configures, or returns nil
// without one, and registers toolgate_audit_lost_total.
func (g *Gateway) openAudit(cfg *config.Config) (*audit.Trail, error) {
	a := cfg.Audit
	if a == nil {
		return nil, nil
	}
	t, err := audit.Open(audit.Options{File: a.File, MaxSizeMB: a.MaxSizeMB, MaxBackups: a.MaxBackups, Logger: g.logger})
	if err != nil {
		return nil, err
	}
	g.metrics.Registry().MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "toolgate_audit_lost_total",
		Help: "Audit trail lines the sink refused (a full disk, a closed stdout); the calls themselves went on.",
	}, func() float64 { return float64(t.Lost()) }))
	return t, nil
}

// auditCall writes c's line to the audit trail, if there is one: called
// where the call's end is recorded (callEnded), under the call's context
// (its span, when tracing is on), with its class ("" for a success) and
// duration.
func (g *Gateway) auditCall(ctx context.Context, c *Call, class string, d time.Duration) {
	if g.audit == nil {
		return
	}
	outcome := "ok"
	if class != "" {
		outcome = "error"
	}
	g.audit.Record(audit.Entry{
		Time: time.Now().UTC(), CallID: c.ID, Principal: c.Principal,
		Session: threadLabel(c.Session), Thread: threadLabel(c.Thread),
		Tool: c.Tool.Name, Kind: string(c.Tool.Kind), Outcome: outcome, Class: class,
		Attempts: c.attempts, DurationMS: durationMS(d),
		TraceID: auditTraceID(ctx, c.Meta), ArgsSHA256: auditArgsSum(c),
	})
}

// auditArgsSum is the hex SHA-256 of c's arguments in canonical form
// (argsSum, the loop guard's hash): the same arguments hash alike however
// they were spaced or ordered, so a SIEM can match repeated calls without
// seeing a value. Arguments that are not JSON hash as sent.
func auditArgsSum(c *Call) string {
	sum, err := argsSum(c)
	if err != nil {
		sum = canonjson.RawSum(c.Raw)
	}
	return hex.EncodeToString(sum[:])
}

// auditTraceID is the trace the call belongs to: its span's, when tracing
// is on (the trace context came in _meta or as an HTTP traceparent
// header, or the call started a trace), so the audit line, the call's log
// line and its spans name the same trace; else the trace ID of a
// traceparent in _meta; "" without either.
func auditTraceID(ctx context.Context, meta map[string]any) string {
	if id := telemetry.TraceID(ctx); id != "" {
		return id
	}
	return traceID(meta)
}

// traceID is the trace ID of a W3C traceparent in the request's _meta
// (the MCP trace-context proposal's place for it), or "" without a valid
// one.
func traceID(meta map[string]any) string {
	tp, _ := meta["traceparent"].(string)
	parts := strings.Split(tp, "-")
	if len(parts) != 4 || len(parts[0]) != 2 || len(parts[1]) != 32 || len(parts[2]) != 16 || len(parts[3]) != 2 {
		return ""
	}
	if _, err := hex.DecodeString(parts[1]); err != nil || parts[1] == strings.Repeat("0", 32) {
		return ""
	}
	return strings.ToLower(parts[1])
}
