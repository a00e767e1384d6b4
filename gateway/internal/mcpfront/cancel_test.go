package mcpfront

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// notifications/cancelled cancels a session's call, alone or in a batch,
// its requestId read as a JSON-RPC id (42.0 is 42).
func TestSessionCallCancelled(t *testing.T) {
	for _, tc := range []struct {
		name  string
		batch bool
	}{{"alone", false}, {"in a batch", true}} {
		t.Run(tc.name, func(t *testing.T) {
			g, _ := newGateway(t, nil)
			call, started, ended := waitTool()
			g.addTool(t, "wait", call)
			srv := serveHTTP(t, g)
			version := "2025-11-25"
			if tc.batch {
				version = "2025-03-26" // the last revision with batches
			}
			s := newVersionedSession(t, srv.URL+"/mcp", version, true)
			done := make(chan struct{})
			go func() {
				defer close(done)
				req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, s.url, strings.NewReader(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"wait","arguments":{}}}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Mcp-Session-Id", s.id)
				req.Header.Set("Mcp-Protocol-Version", version)
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
			}()
			<-started
			cancel := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":42.0,"reason":"test"}}`
			if tc.batch {
				cancel = "[" + cancel + "]"
			}
			if status, body, _ := s.post(t.Context(), cancel); status != http.StatusAccepted {
				t.Fatalf("cancel: HTTP %d %s", status, body)
			}
			select {
			case err := <-ended:
				if err != context.Canceled {
					t.Fatalf("the call's context ended with %v, want cancelled", err)
				}
			case <-time.After(batchWait):
				t.Fatal("notifications/cancelled did not cancel the call")
			}
			<-done
		})
	}
}
