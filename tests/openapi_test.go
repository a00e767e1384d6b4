package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// openapiDoc has one operation that becomes a tool and one (TRACE) that
// cannot.
const openapiDoc = `openapi: 3.0.3
info: {title: t, version: "1"}
servers: [{url: "http://127.0.0.1:9"}]
paths:
  /items:
    get:
      operationId: listItems
      responses: {"200": {description: OK}}
  /debug:
    trace:
      operationId: traceDebug
      responses: {"200": {description: OK}}
`

// TestCLIOpenAPISources checks, through the binary, that toolgate tools
// --skipped lists the operations left out with their reason, and that
// validate reports a source whose document cannot be read, at its
// file:line:col, while the other sources still load.
func TestCLIOpenAPISources(t *testing.T) {
	yaml := "builtin: []\n" +
		"openapi:\n" +
		"  - name: items\n" +
		"    spec: items.yaml\n" +
		"  - name: gone\n" +
		"    spec: missing.yaml\n"
	cfg := writeConfig(t, yaml)
	if err := os.WriteFile(filepath.Join(filepath.Dir(cfg), "items.yaml"), []byte(openapiDoc), 0o600); err != nil {
		t.Fatal(err)
	}

	r := runCLI(t, "tools", "--config", cfg, "--skipped", "--json")
	if r.code != 0 {
		t.Fatalf("tools --skipped --json: %v", r)
	}
	var rows []struct{ Source, Operation, Tool, Reason string }
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil {
		t.Fatalf("tools --skipped --json output: %v\n%s", err, r.stdout)
	}
	if len(rows) != 1 || rows[0].Source != "items" || rows[0].Operation != "TRACE /debug (traceDebug)" ||
		rows[0].Tool != "items__traceDebug" || rows[0].Reason != "TRACE operations are not supported" {
		t.Errorf("tools --skipped --json = %+v", rows)
	}
	r = runCLI(t, "tools", "--config", cfg, "--skipped")
	if r.code != 0 || !strings.Contains(r.stdout, "TRACE /debug (traceDebug)") || !strings.Contains(r.stdout, "REASON") {
		t.Errorf("tools --skipped: %v", r)
	}
	r = runCLI(t, "tools", "--config", cfg)
	if r.code != 0 || !strings.Contains(r.stdout, "items__listItems") {
		t.Errorf("tools (the readable source's tools): %v", r)
	}

	r = runCLI(t, "validate", "--config", cfg)
	off := strings.Index(yaml, "missing.yaml")
	line := strings.Count(yaml[:off], "\n") + 1
	col := off - strings.LastIndex(yaml[:off], "\n")
	want := fmt.Sprintf("%s:%d:%d: openapi[1].spec: reading the spec", cfg, line, col)
	if r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Errorf("validate = %v, want exit 1 and %q", r, want)
	}
}
