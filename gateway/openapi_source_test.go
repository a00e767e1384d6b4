package gateway

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/config/configtest"
)

// TestOpenAPISourceUnreadable checks that a source whose document
// cannot be read is an error only when it is the only source: otherwise
// the gateway starts without it, /readyz says degraded and names it, and
// SourceProblems places it in the file for toolgate validate.
func TestOpenAPISourceUnreadable(t *testing.T) {
	in := configtest.Lines(
		"rest:",
		"  - {name: ping, url: 'http://127.0.0.1:9/ping'}",
		"openapi:",
		"  - {name: gone, spec: missing.yaml}",
		"  - {name: ok, spec: a.yaml}",
	)
	g, err := New(configtest.ParseIn(t, in, map[string]string{"a.yaml": configtest.TinyOpenAPI}))
	if err != nil {
		t.Fatalf("New = %v, want the gateway to start without the unreadable source", err)
	}
	defer g.Close()
	probs := g.SourceProblems()
	if len(probs) != 1 || !strings.HasPrefix(probs[0].Error(), "t.yaml:4:24: openapi[0].spec: reading the spec: open missing.yaml") {
		t.Errorf("SourceProblems() = %q, want the spec's position and why", probs)
	}
	if len(g.Tools()) != 2 {
		t.Errorf("%d tools, want ping and ok__list", len(g.Tools()))
	}
	rec := httptest.NewRecorder()
	g.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1/readyz", nil))
	var body struct {
		Status      string   `json:"status"`
		Unavailable []string `json:"openapi_unavailable"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != http.StatusOK ||
		body.Status != "degraded" || len(body.Unavailable) != 1 || body.Unavailable[0] != "gone" {
		t.Errorf("/readyz = %d %s, want 200 degraded naming gone", rec.Code, rec.Body)
	}

	only := configtest.Lines("openapi:", "  - {name: gone, spec: missing.yaml}")
	if g2, err := New(configtest.ParseIn(t, only, nil)); err == nil {
		g2.Close()
		t.Fatal("New with the unreadable source as the only source succeeded, want its error")
	} else if !strings.Contains(err.Error(), "t.yaml:2:24: openapi[0].spec: reading the spec") {
		t.Errorf("New = %v, want the spec's position", err)
	}
}

// TestOpenAPISourceSkipped checks the one info line per source, and that
// skipped operations are listed with their reason.
func TestOpenAPISourceSkipped(t *testing.T) {
	doc := configtest.TinyOpenAPI + `  /trace:
    trace:
      operationId: traceIt
      responses: {"200": {description: OK}}
  /host:
    get:
      operationId: badPort
      servers: [{url: "http://127.0.0.1:99999"}]
      responses: {"200": {description: OK}}
`
	var logs bytes.Buffer
	in := configtest.Lines("openapi:", "  - {name: s, spec: a.yaml, include: [list, 'tag:none', traceIt, 'GET /host']}")
	g, err := New(configtest.ParseIn(t, in, map[string]string{"a.yaml": doc}),
		WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	got := g.SkippedOperations()
	// The REST executor refuses the operation's URL (its port): the
	// operation is skipped, not the gateway. Both are in document order.
	if len(got) != 2 || got[1] != (SkippedOperation{Source: "s", Operation: "TRACE /trace (traceIt)", Tool: "s__traceIt", Reason: "TRACE operations are not supported"}) ||
		got[0].Tool != "s__badPort" || !strings.HasPrefix(got[0].Reason, "the REST executor cannot send it: ") {
		t.Errorf("SkippedOperations() = %+v", got)
	}
	out := logs.String()
	if !strings.Contains(out, `level=INFO msg="openapi source \"s\": 1 tools, 2 operations skipped"`) {
		t.Errorf("log has no info line for the source:\n%s", out)
	}
	if !strings.Contains(out, `level=WARN`) || !strings.Contains(out, `include glob \"tag:none\" matches no operation`) {
		t.Errorf("log has no warning for the glob that matches nothing:\n%s", out)
	}
	if strings.Contains(out, "TRACE") {
		t.Errorf("skipped operations are logged above debug:\n%s", out)
	}
}
