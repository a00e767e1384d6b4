package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/threadctx"
)

// TestAuditTrail checks a call's audit line: every field, the arguments'
// canonical hash and never their values, the session and thread hashed,
// and the trace ID of a traceparent in _meta.
func TestAuditTrail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	g, _ := newGateway(t, func(c *config.Config) {
		c.Audit = &config.Audit{File: path, MaxSizeMB: 1, MaxBackups: 1}
	})
	const secret = "sk-live-DO-NOT-LEAK"
	meta := map[string]any{
		ThreadMetaKey: "my-thread",
		"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	}
	if _, err := g.Call(t.Context(), "echo", json.RawMessage(`{ "text" : "`+secret+`" }`), meta); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Call(t.Context(), "echo", json.RawMessage(`{}`), nil); err != nil { // fails validation
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte(secret)) || bytes.Contains(data, []byte("my-thread")) {
		t.Fatalf("the audit trail holds an argument value or a raw thread name:\n%s", data)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want one per call:\n%s", len(lines), data)
	}
	var ok, failed map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &ok); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &failed); err != nil {
		t.Fatal(err)
	}
	canon := sha256.Sum256([]byte(`{"text":"` + secret + `"}`))
	for k, want := range map[string]any{
		"tool": "echo", "kind": "stateless", "outcome": "ok", "attempts": float64(1),
		"thread":      threadctx.Label("t:my-thread"), // the label logs and /events show "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
		"args_sha256": hex.EncodeToString(canon[:]),
	} {
		if ok[k] != want {
			t.Errorf("ok line %s = %v, want %v", k, ok[k], want)
		}
	}
	if d, isNum := ok["duration_ms"].(float64); !isNum || d < 0 {
		t.Errorf("duration_ms = %v, want a number of milliseconds", ok["duration_ms"])
	}
	if failed["outcome"] != "error" || failed["class"] != "validation" || failed["trace_id"] != nil {
		t.Errorf("failed line: %s; want outcome error, class validation, no trace_id", lines[1])
	}
}

// TestAuditLossNeverFailsACall points the trail at /dev/full (every write
// fails with ENOSPC, as on a full disk): calls still succeed, and the
// loss is counted in toolgate_audit_lost_total.
func TestAuditLossNeverFailsACall(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skipf("no /dev/full on this system: %v", err)
	}
	g, _ := newGateway(t, func(c *config.Config) {
		c.Audit = &config.Audit{File: "/dev/full", MaxSizeMB: 100}
	})
	for range 2 {
		res, err := g.Call(t.Context(), "echo", json.RawMessage(`{"text":"x"}`), nil)
		if err != nil || res.IsError {
			t.Fatalf("call with a full audit disk: %v, %+v; want it to succeed", err, res)
		}
	}
	rec := httptest.NewRecorder()
	g.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	if !strings.Contains(string(body), "toolgate_audit_lost_total 2") {
		t.Errorf("/metrics lacks toolgate_audit_lost_total 2")
	}
}

func TestTraceID(t *testing.T) {
	for tp, want := range map[string]string{
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01": "4bf92f3577b34da6a3ce929d0e0e4736",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01": "",
		"00-4bf92f3577b34da6a3ce929d0e0e47-00f067aa0ba902b7-01":   "",
		"garbage": "",
	} {
		if got := traceID(map[string]any{"traceparent": tp}); got != want {
			t.Errorf("traceID(%q) = %q, want %q", tp, got, want)
		}
	}
}

// TestAuditTraceIDOfSpan checks that the audit line names the trace of
// the call's span when tracing is on: a traceparent that came as an HTTP
// header (so the context carries it, not _meta) is recorded too, and
// wins over a _meta one; without a span, _meta's is used.
func TestAuditTraceIDOfSpan(t *testing.T) {
	const (
		headerTrace = "0af7651916cd43dd8448eb211c80319c"
		metaTrace   = "4bf92f3577b34da6a3ce929d0e0e4736"
	)
	tid, err := trace.TraceIDFromHex(headerTrace)
	if err != nil {
		t.Fatal(err)
	}
	sid, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	traced := trace.ContextWithRemoteSpanContext(t.Context(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	meta := map[string]any{"traceparent": "00-" + metaTrace + "-00f067aa0ba902b7-01"}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		meta map[string]any
		want string
	}{
		{"header only", traced, nil, headerTrace},
		{"span wins over _meta", traced, meta, headerTrace},
		{"_meta without a span", t.Context(), meta, metaTrace},
		{"neither", t.Context(), nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.jsonl")
			g, _ := newGateway(t, func(c *config.Config) {
				c.Audit = &config.Audit{File: path, MaxSizeMB: 1, MaxBackups: 1}
			})
			if _, err := g.Call(tc.ctx, "echo", json.RawMessage(`{"text":"x"}`), tc.meta); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var line map[string]any
			if err := json.Unmarshal(bytes.TrimSpace(data), &line); err != nil {
				t.Fatalf("%v: %s", err, data)
			}
			if got, _ := line["trace_id"].(string); got != tc.want {
				t.Errorf("trace_id = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestCallLogDurationMS checks that a call's JSON log line gives its
// duration in milliseconds under a key that says so, not as slog's bare
// nanoseconds.
func TestCallLogDurationMS(t *testing.T) {
	var logs lockedBuffer
	g, err := New(testConfig(t), WithLogger(slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.RegisterStateless(registry.Tool{Name: "nap", Description: "sleeps 20ms"}, func(context.Context, map[string]any) (executors.Result, error) {
		time.Sleep(20 * time.Millisecond) // the duration under test, not a synchronisation
		return executors.Text("ok"), nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Call(t.Context(), "nap", nil, nil); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["msg"] != "tool call" && m["msg"] != "tool call completed" {
			continue
		}
		seen++
		if _, has := m["duration"]; has {
			t.Errorf("%q still has a bare duration: %s", m["msg"], line)
		}
		if ms, ok := m["duration_ms"].(float64); !ok || ms < 20 || ms > 60_000 {
			t.Errorf("%q duration_ms = %v, want the call's ~20 ms in milliseconds", m["msg"], m["duration_ms"])
		}
	}
	if seen != 2 {
		t.Errorf("saw %d call lines, want the info and the debug one:\n%s", seen, logs.String())
	}
}

// lockedBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
