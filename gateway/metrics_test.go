package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/toolgate/toolgate/internal/buildinfo"
)

// buildInfoLine is the toolgate_build_info sample a scrape must hold for
// bi.
func buildInfoLine(bi buildinfo.Info) string {
	return `toolgate_build_info{go_version="` + bi.GoVersion + `",revision="` + bi.Revision + `",version="` + bi.Version + `"} 1`
}

// TestMetricsLint runs the linter `promtool check metrics` uses over a real
// scrape, after calls of every outcome.
func TestMetricsLint(t *testing.T) {
	g, _ := newGateway(t, nil)
	for _, args := range []string{`{"text":"x"}`, `{}`} {
		if _, err := g.Call(t.Context(), "echo", json.RawMessage(args), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := g.Call(t.Context(), "counter", nil, nil); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	g.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	problems, err := promlint.New(strings.NewReader(string(body))).Lint()
	if err != nil {
		t.Fatalf("lint: %v", err)
	}
	for _, p := range problems {
		t.Errorf("metric %s: %s", p.Metric, p.Text)
	}
	for _, want := range []string{
		`toolgate_tool_calls_total{error_class="validation",kind="stateless",outcome="error",tool="echo"} 1`,
		`toolgate_tool_calls_total{error_class="",kind="stateful",outcome="ok",tool="counter"} 1`,
		`toolgate_tool_call_duration_seconds_count{kind="stateless",tool="echo"} 2`,
		`toolgate_tool_calls_in_flight 0`,
		`toolgate_sessions 0`,
		`process_`,
		buildInfoLine(buildinfo.Read()),
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestMetricsCarryNoArguments checks that argument values never become
// label values or appear anywhere in a scrape.
func TestMetricsCarryNoArguments(t *testing.T) {
	g, _ := newGateway(t, nil)
	const secret = "sk-live-DO-NOT-LEAK"
	_, _ = g.Call(t.Context(), "echo", json.RawMessage(`{"text":"`+secret+`"}`), nil)
	_, _ = g.Call(t.Context(), secret, nil, nil)
	rec := httptest.NewRecorder()
	g.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if strings.Contains(rec.Body.String(), secret) {
		t.Error("/metrics contains an argument value or an unknown tool name")
	}
	if !strings.Contains(rec.Body.String(), "toolgate_unknown_tool_calls_total 1") {
		t.Error("unknown tool call not counted")
	}
}
