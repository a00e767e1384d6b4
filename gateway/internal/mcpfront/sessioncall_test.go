package mcpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/internal/syncbuf"
)

// TestSessionCallMatchesMCPGo: a session's tools/call on the fast path
// (sessioncall.go) answers what mcp-go answers for the same call in the
// same session.
func TestSessionCallMatchesMCPGo(t *testing.T) {
	g, _ := newGateway(t, nil)
	logs := &syncbuf.Buffer{}
	g.logger = slog.New(slog.NewTextHandler(logs, nil))
	g.addTool(t, "boom", func(context.Context, *Request) *executors.Result { panic("boom") })
	// pass answers with its arguments as an upstream's result, which the
	// fast path forwards as it is when it can (rawReply).
	g.addTool(t, "pass", func(_ context.Context, r *Request) *executors.Result {
		return &executors.Result{Passthrough: r.Raw}
	})
	// own answers with text parts the fast path encodes itself (textResult).
	g.addTool(t, "own", func(context.Context, *Request) *executors.Result {
		return &executors.Result{Content: []executors.Content{{Type: executors.TextContent, Text: "a <b> & \"c\"\n"}, {Text: "é"}},
			Structured: map[string]any{"n": 1.5, "s": []string{"x"}}, IsError: true, Meta: map[string]any{"toolgate/loop": "warned", "k": []int{1}}}
	})
	srv := serveHTTP(t, g)
	s := newVersionedSession(t, srv.URL+"/mcp", "2025-11-25", true)
	call := func(id, params string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{` + params + `}}`
	}
	for _, tc := range []struct {
		body string
		fast bool // the fast path serves it; otherwise mcp-go
	}{
		{call(`"a-1"`, `"name":"echo","arguments":{"text":"same"}`), true},
		{call(`7`, `"name":"echo","arguments":{"text":12}`), true},
		{call(`1.0`, `"name":"echo","arguments":{"text":"id"}`), true},
		{call(`"a-1"`, `"name":"echo"`), true},
		{call(`"a-1"`, `"name":"echo","arguments":null`), true},
		{call(`"a-1"`, `"name":"echo","arguments":{"text":"meta"},"_meta":{"toolgate/thread":"t1","progressToken":"p"}`), true},
		{call(`"a-1"`, `"name":"boom","arguments":{}`), true},
		{call(`3`, `"name":"pass","arguments":{"content":[{"type":"text","text":"up\nline"}]}`), true},
		{call(`3`, `"name":"pass","arguments":{ "content" : [ {"text":"a\u00e9\"","type":"text","annotations":{"priority":1}} ],`+
			"\n"+`"structuredContent":{"n":[1, 2.50]},"isError":true,"_meta":{"progressToken":1,"k":"v"}}`), true},
		{call(`3`, `"name":"pass","arguments":{"content":[],"isError":false}`), true},
		{call(`3`, `"name":"pass","arguments":{"content":[{"type":"image","data":"aGk=","mimeType":"image/png"}]}`), true},
		{call(`3`, `"name":"pass","arguments":{"content":[{"type":"text","text":"x"}],"extra":1}`), true},
		{call(`3`, `"name":"pass","arguments":{"Content":[{"type":"text","text":"x"}]}`), true},
		{call(`3`, `"name":"pass","arguments":{"isError":true}`), true},
		{call(`4`, `"name":"own","arguments":{}`), true},
		{call(`"a<b"`, `"name":"echo","arguments":{"text":"html id"}`), true},
		{call(`12345678901234567891`, `"name":"echo","arguments":{"text":"big id"}`), true},
		{`{"JSONRPC":"2.0","ID":5,"Method":"tools/call","Params":{"Name":"echo","Arguments":{"text":"folded"},"_meta":{"a":1},"_meta":{"b":2}}}`, true},
		{`{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"v"}}}`, false},
		{`{"id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"v"}}}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","result":{},"params":{"name":"echo","arguments":{"text":"v"}}}`, false},
		{call(`"a-1"`, `"name":"echo","arguments":{"text":"t"},"task":{}`), false},
	} {
		before := g.httpParts.fastCalls.Load()
		status, fast, hdr := s.post(t.Context(), tc.body)
		if took := g.httpParts.fastCalls.Load() > before; took != tc.fast {
			t.Errorf("%s: fast path %v, want %v", tc.body, took, tc.fast)
		}
		req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/mcp", strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", s.id)
		req.Header.Set(mcp.HeaderProtocolVersion, "2025-11-25")
		rec := httptest.NewRecorder()
		g.httpParts.streamable.ServeHTTP(rec, req) // mcp-go, without the front
		var a, b any
		if len(fast) > 0 || rec.Body.Len() > 0 {
			if err := json.Unmarshal(fast, &a); err != nil {
				t.Fatalf("%s: front: %d %s", tc.body, status, fast)
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil {
				t.Fatalf("%s: mcp-go: %d %s", tc.body, rec.Code, rec.Body.Bytes())
			}
			// A result forwarded as it came keeps an isError of false,
			// which mcp-go leaves out: the same result to a client.
			if r, ok := a.(map[string]any)["result"].(map[string]any); ok && r["isError"] == false {
				delete(r, "isError")
			}
			if bytes.Contains(bytes.TrimSuffix(fast, []byte("\n")), []byte("\n")) {
				t.Errorf("%s: the front's answer is not compact: %s", tc.body, fast)
			}
		}
		if diff := cmp.Diff(b, a); diff != "" || status != rec.Code || hdr.Get("Content-Type") != rec.Header().Get("Content-Type") {
			t.Errorf("%s: front %d %q, mcp-go %d %q; body diff (-mcp-go +front):\n%s",
				tc.body, status, hdr.Get("Content-Type"), rec.Code, rec.Header().Get("Content-Type"), diff)
		}
	}
	// boom's panic, on the fast path and on mcp-go's, is logged with its
	// stack (and answered -32603, as compared above).
	if got := logs.String(); strings.Count(got, `msg="tool handler panicked" tool=boom panic=boom stack=`) != 2 {
		t.Errorf("boom's two panics not logged with their stacks; the log:\n%s", got)
	}
	// The fast path runs the call in its session: the counter counts on.
	for want := 1; want <= 2; want++ {
		_, body, _ := s.post(t.Context(), `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"counter","arguments":{}}}`)
		if !strings.Contains(string(body), fmt.Sprintf(`"structuredContent":{"n":%d}`, want)) {
			t.Fatalf("counter call %d: %s", want, body)
		}
	}
}

// notifications/cancelled cancels a session's call on either path: the
// fast path's own (sessioncall.go) and mcp-go's, alone or in a batch.
func TestSessionCallCancelled(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fast  bool
		batch bool
	}{{"fast path", true, false}, {"fast path, cancelled in a batch", true, true}, {"mcp-go", false, false}} {
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
				if !tc.fast {
					req.Header.Set("Last-Event-ID", "none") // leaves the fast path
				}
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
			if took := g.httpParts.fastCalls.Load() > 0; took != tc.fast {
				t.Fatalf("fast path %v, want %v", took, tc.fast)
			}
		})
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

// FuzzReadSessionCall checks that whenever readSessionCall reads a
// message, it reads what decoding it into a sessionCall gives.
func FuzzReadSessionCall(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`,
		`{"JSONRPC":"2.0","Params":{"NAME":"a","Arguments":null,"_META":{"k":[1, 2]},"_meta":{"p":"q"}},"result":null}`,
		`{"params":{"_meta":{"a":1},"_meta":{"b":2},"task":{}},"error":{"code":1}}`,
		`{"params":{"name":"a","name":"b","arguments":{"x":1},"arguments":[2]}}`,
		`{"jsonrpc":null,"params":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		var got, want sessionCall
		if !readSessionCall(msg, &got) {
			return
		}
		if err := json.Unmarshal(msg, &want); err != nil {
			t.Fatalf("read %s, which does not decode: %v", msg, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("%s: read differs from decoded (-decoded +read):\n%s", msg, diff)
		}
	})
}

func TestSimpleID(t *testing.T) {
	plain := map[string]bool{`0`: true, `7`: true, `123456789012345`: true, `"a-1"`: true, `""`: true, `" x~"`: true}
	for _, id := range []string{`0`, `7`, `123456789012345`, `"a-1"`, `""`, `" x~"`,
		`1234567890123456`, `12345678901234567891`, `1.0`, `-1`, `01`, `"a<b"`, `"\u0041"`, `"é"`, `null`, `{}`} {
		var want mcp.RequestId
		wantErr := json.Unmarshal([]byte(id), &want)
		got, ok := simpleID([]byte(id))
		if ok != plain[id] {
			t.Errorf("simpleID(%s) ok = %v, want %v", id, ok, plain[id])
		}
		if !ok {
			continue
		}
		if wantErr != nil || got.String() != want.String() {
			t.Errorf("simpleID(%s) = %s, decoding gives %s (%v)", id, got.String(), want.String(), wantErr)
		}
		if out, _ := json.Marshal(got); string(out) != id {
			t.Errorf("simpleID(%s) writes back as %s", id, out)
		}
	}
}
