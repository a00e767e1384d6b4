package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/config"
)

func TestServeStdio(t *testing.T) {
	g, fc := newGateway(t, func(c *config.Config) { c.Server.MaxBodyBytes = 4096 })
	var (
		mu         sync.Mutex
		principals = map[string]int{} // guarded by mu; the principal of each call that reached the pipeline
	)
	g.Use(func(next Handler) Handler {
		return func(ctx context.Context, c *Call) (*Result, error) {
			mu.Lock()
			principals[c.Principal]++
			mu.Unlock()
			return next(ctx, c)
		}
	})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- g.ServeStdio(t.Context(), inR, outW)
		outW.Close()
	}()
	responses := make(chan map[string]any, 16)
	go func() {
		defer close(responses)
		sc := bufio.NewScanner(outR)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				m = map[string]any{"garbage": sc.Text()}
			}
			responses <- m
		}
	}()
	send := func(line string) {
		t.Helper()
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	next := func() map[string]any {
		t.Helper()
		m, ok := <-responses
		if !ok {
			t.Fatal("stdout closed early")
		}
		if g, bad := m["garbage"]; bad {
			t.Fatalf("stdout carried a non-JSON line: %v", g)
		}
		return m
	}

	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if r := next(); r["id"] != 1.0 || r["result"] == nil {
		t.Fatalf("initialize = %v", r)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ecoh","arguments":{}}}`)
	r := next()
	e, _ := r["error"].(map[string]any)
	if r["id"] != 2.0 || e == nil || e["code"] != -32602.0 || !strings.Contains(e["message"].(string), `did you mean "echo"`) {
		t.Fatalf("unknown tool over stdio = %v", r)
	}
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"counter"}}`)
	send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"counter"}}`)
	// Calls run concurrently, so answers may come in either order; both
	// run in the one stdio thread, on one instance.
	ns := map[float64]bool{}
	for range 2 {
		r := next()
		res, _ := r["result"].(map[string]any)
		sc, _ := res["structuredContent"].(map[string]any)
		n, _ := sc["n"].(float64)
		ns[n] = true
	}
	if !ns[1] || !ns[2] {
		t.Errorf("counter results over stdio = %v, want 1 and 2 (one instance for the process)", ns)
	}
	send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + strings.Repeat("a", 5000) + `"}}}`)
	r = next()
	e, _ = r["error"].(map[string]any)
	if e == nil || !strings.Contains(e["message"].(string), "server.max_body_bytes") {
		t.Fatalf("oversized line = %v, want an error naming server.max_body_bytes", r)
	}
	send(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"echo","arguments":{"text":"still here"}}}`)
	if r := next(); !strings.Contains(mustJSON(r), "still here") {
		t.Fatalf("call after oversized line = %v", r)
	}
	mu.Lock()
	if len(principals) != 1 || principals["stdio"] != 3 {
		t.Errorf("the principals of the calls over stdio = %v, want stdio for all 3 calls that reached the pipeline", principals)
	}
	mu.Unlock()
	inW.Close() // the client goes away: EOF
	if err := <-done; err != nil {
		t.Fatalf("ServeStdio = %v", err)
	}
	for range responses {
	}
	if got := fc.closed.Load(); got != 1 {
		t.Errorf("stdio thread instances closed at EOF = %d, want 1", got)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
