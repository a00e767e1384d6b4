package mcpfront

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/mcp"
)

// TestSessionCallMatchesMCPGo: a session's tools/call on the fast path
// (sessioncall.go) answers what mcp-go answers for the same call in the
// same session.
func TestSessionCallMatchesMCPGo(t *testing.T) {
	g, _ := newGateway(t, nil)
	srv := serveHTTP(t, g)
	s := newVersionedSession(t, srv.URL+"/mcp", "2025-11-25", true)
	for _, params := range []string{
		`"name":"echo","arguments":{"text":"same"}`,
		`"name":"echo","arguments":{"text":12}`,
		`"name":"echo"`,
		`"name":"echo","arguments":null`,
		`"name":"echo","arguments":{"text":"meta"},"_meta":{"toolgate/thread":"t1"}`,
	} {
		body := `{"jsonrpc":"2.0","id":"a-1","method":"tools/call","params":{` + params + `}}`
		status, fast, hdr := s.post(t.Context(), body)
		req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", s.id)
		req.Header.Set(mcp.HeaderProtocolVersion, "2025-11-25")
		rec := httptest.NewRecorder()
		g.httpParts.streamable.ServeHTTP(rec, req) // mcp-go, without the front
		var a, b any
		if err := json.Unmarshal(fast, &a); err != nil {
			t.Fatalf("fast path: %d %s", status, fast)
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil {
			t.Fatalf("mcp-go: %d %s", rec.Code, rec.Body.Bytes())
		}
		if diff := cmp.Diff(b, a); diff != "" || status != rec.Code || hdr.Get("Content-Type") != rec.Header().Get("Content-Type") {
			t.Errorf("params %s: fast path %d %q, mcp-go %d %q; body diff (-mcp-go +fast):\n%s",
				params, status, hdr.Get("Content-Type"), rec.Code, rec.Header().Get("Content-Type"), diff)
		}
	}
	if n := g.httpParts.fastCalls.Load(); n != 5 {
		t.Fatalf("%d calls took the fast path, want the 5 the test made through the front", n)
	}
	// The fast path runs the call in its session: the counter counts on.
	for want := 1; want <= 2; want++ {
		_, body, _ := s.post(t.Context(), `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"counter","arguments":{}}}`)
		if !strings.Contains(string(body), fmt.Sprintf(`"structuredContent":{"n":%d}`, want)) {
			t.Fatalf("counter call %d: %s", want, body)
		}
	}
}

// A session's call takes the fast path only when mcp-go's stream is not
// needed: a call from a client that declared elicitation still reaches
// the client with its elicitation (TestElicit), and the fast path leaves
// a Host mcp-go refuses to mcp-go's answer.
func TestSessionCallFallsBack(t *testing.T) {
	g, _ := newGateway(t, nil)
	srv := serveHTTP(t, g)
	s := newVersionedSession(t, srv.URL+"/mcp", "2025-11-25", true)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/mcp",
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "evil.example"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", s.id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if n := g.httpParts.fastCalls.Load(); n != 0 {
		t.Fatalf("%d calls took the fast path, want none", n)
	}
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a call naming a foreign Host over loopback: HTTP %d, want mcp-go's 403", resp.StatusCode)
	}
}
