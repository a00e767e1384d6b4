package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/config/configtest"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/registry"
)

// leakyPassthrough is the MCP JSON "up__leaky" returns. Its spacing is
// not what encoding/json writes, so a result re-encoded shows.
const leakyPassthrough = `{"content": [{"type":"text","text":"token ghp_abcd"},{"type":"resource","resource":{"uri":"x:y","text":"ghp_abcd"}}], "structuredContent":{"token":"ghp_abcd"}}`

// hookGateway returns newGateway's gateway with hooks configured, and a
// "leaky" tool whose result holds a token in its text and structured
// content, and an upstream-like "up__leaky" that returns the same as
// passed-through MCP JSON.
func hookGateway(t *testing.T, hooks ...config.Hook) *Gateway {
	t.Helper()
	g, _ := newGateway(t, func(c *config.Config) { c.Hooks = hooks })
	leaky := executors.StatelessFunc(func(context.Context, map[string]any) (executors.Result, error) {
		return executors.Structured(map[string]any{"token": "ghp_abcd", "n": 1}, "token ghp_abcd and mail a.b@example.com"), nil
	})
	up := executors.StatelessFunc(func(context.Context, map[string]any) (executors.Result, error) {
		return executors.Result{Passthrough: json.RawMessage(leakyPassthrough)}, nil
	})
	err := g.register(
		executors.Bound{Tool: registry.Tool{Name: "leaky", Kind: registry.Stateless, Source: "test"}, Exec: leaky},
		executors.Bound{Tool: registry.Tool{Name: "up__leaky", Kind: registry.MCP, Source: "upstream:up"}, Exec: up},
	)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func call(t *testing.T, g *Gateway, c *Call) *Result {
	t.Helper()
	res, err := g.handle(t.Context(), c)
	if err != nil {
		t.Fatalf("handle(%q) error = %v", c.Name, err)
	}
	return res
}

func TestHookRedact(t *testing.T) {
	g := hookGateway(t, config.Hook{Type: config.HookRedact, Patterns: []string{"ghp_[a-z]{4}", `[\w.+-]+@[\w-]+\.[\w.]+`}})
	res := call(t, g, &Call{Name: "leaky"})
	if got, want := res.Text(), "token [redacted] and mail [redacted]"; got != want {
		t.Errorf("leaky text = %q, want %q", got, want)
	}
	if b, _ := json.Marshal(res.Structured); string(b) != `{"n":1,"token":"[redacted]"}` {
		t.Errorf("leaky structured = %s, want the token redacted", b)
	}
	res = call(t, g, &Call{Name: "up__leaky"})
	if strings.Contains(string(res.Passthrough), "ghp_") || strings.Count(string(res.Passthrough), "[redacted]") != 3 {
		t.Errorf("up__leaky passthrough = %s, want the token redacted in text, resource and structured content", res.Passthrough)
	}
	// Tools whose result holds no match are forwarded byte for byte.
	res = call(t, g, &Call{Name: "echo", Raw: json.RawMessage(`{"text":"plain"}`)})
	if res.Text() != "plain" {
		t.Errorf("echo text = %q, want plain", res.Text())
	}
	// A passed-through result that holds no match is forwarded byte for
	// byte.
	g = hookGateway(t, config.Hook{Type: config.HookRedact, Patterns: []string{"no such token"}})
	if res := call(t, g, &Call{Name: "up__leaky"}); string(res.Passthrough) != leakyPassthrough {
		t.Errorf("up__leaky passthrough = %s, want %s unchanged", res.Passthrough, leakyPassthrough)
	}
}

func TestHookTruncate(t *testing.T) {
	g := hookGateway(t, config.Hook{Type: config.HookTruncate, MaxBytes: 7, Tools: []string{"echo", "up__*"}})
	res := call(t, g, &Call{Name: "echo", Raw: json.RawMessage(`{"text":"héllo wörld"}`)})
	want := []Content{
		{Type: executors.TextContent, Text: "héllo "},
		{Type: executors.TextContent, Text: "[truncated: the result text is 13 bytes; only the first 7 are shown]"},
	}
	if diff := cmp.Diff(want, res.Content); diff != "" {
		t.Errorf("echo content mismatch (-want +got):\n%s", diff)
	}
	res = call(t, g, &Call{Name: "echo", Raw: json.RawMessage(`{"text":"short"}`)})
	if res.Text() != "short" {
		t.Errorf("echo text = %q, want short (under the cap)", res.Text())
	}
	res = call(t, g, &Call{Name: "up__leaky"})
	var m struct {
		Content []struct{ Text string }
	}
	if err := json.Unmarshal(res.Passthrough, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Content) != 3 || m.Content[0].Text != "token g" || !strings.Contains(m.Content[2].Text, "22 bytes") {
		t.Errorf("up__leaky passthrough = %s, want its text cut to 7 bytes with a notice", res.Passthrough)
	}
	// leaky is not among the hook's tools.
	if res := call(t, g, &Call{Name: "leaky"}); !strings.Contains(res.Text(), "example.com") {
		t.Errorf("leaky text = %q, want it whole", res.Text())
	}
}

func TestHookDenyArgs(t *testing.T) {
	deny := config.Hook{Type: config.HookDenyArgs, Tools: []string{"ec*"}, Rules: []config.DenyRule{
		{Pointer: "/text", Pattern: "^/etc/", Reason: "system files are off limits"},
		{Pointer: "/n", Pattern: "^(13|666)$", Reason: "unlucky"},
	}}
	g := hookGateway(t, deny)
	tests := []struct {
		name      string
		tool      string
		args      string
		wantClass string
		wantText  string
	}{
		{"string matches", "echo", `{"text":"/etc/passwd"}`, "permission", "permission: system files are off limits"},
		{"number matches as JSON", "echo", `{"text":"x","n":13}`, "permission", "permission: unlucky"},
		{"no match", "echo", `{"text":"/home/x","n":12}`, "", "/home/x"},
		{"other tool", "leaky", `{"text":"/etc/passwd"}`, "", "token ghp_abcd and mail a.b@example.com"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := call(t, g, &Call{Name: tc.tool, Raw: json.RawMessage(tc.args)})
			if errorClass(res) != tc.wantClass || res.Text() != tc.wantText {
				t.Errorf("%s(%s) = %q (class %q), want %q (class %q)", tc.tool, tc.args, res.Text(), errorClass(res), tc.wantText, tc.wantClass)
			}
		})
	}
}

func TestHookPrincipals(t *testing.T) {
	g := hookGateway(t, config.Hook{Type: config.HookDenyArgs, Principals: []string{"alice"},
		Rules: []config.DenyRule{{Pattern: ".", Reason: "not for alice"}}})
	for _, tc := range []struct {
		principal string
		wantClass string
	}{{"alice", "permission"}, {"bob", ""}, {"", ""}} {
		res := call(t, g, &Call{Name: "echo", Raw: json.RawMessage(`{"text":"hi"}`), Principal: tc.principal})
		if errorClass(res) != tc.wantClass {
			t.Errorf("echo as %q = %q (class %q), want class %q", tc.principal, res.Text(), errorClass(res), tc.wantClass)
		}
	}
}

// fakeWebhook is a webhook endpoint that records the payloads it gets
// and answers with answer(payload).
type fakeWebhook struct {
	mu       sync.Mutex
	payloads []map[string]any // guarded by mu
	srv      *httptest.Server
}

func newFakeWebhook(t *testing.T, answer func(w http.ResponseWriter, r *http.Request, payload map[string]any)) *fakeWebhook {
	t.Helper()
	f := &fakeWebhook{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p map[string]any
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &p); err != nil {
			http.Error(w, "bad payload", http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.payloads = append(f.payloads, p)
		f.mu.Unlock()
		answer(w, r, p)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeWebhook) got() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.payloads
}

func answerWith(s string) func(http.ResponseWriter, *http.Request, map[string]any) {
	return func(w http.ResponseWriter, _ *http.Request, _ map[string]any) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, s)
	}
}

func webhookHook(url string, phase config.HookPhase, onError config.HookOnError) config.Hook {
	return config.Hook{Type: config.HookWebhook, URL: url, Phase: phase, Timeout: config.Duration(2 * time.Second), OnError: onError}
}

func TestHookWebhook(t *testing.T) {
	tests := []struct {
		name      string
		phase     config.HookPhase
		answer    string
		args      string
		wantClass string
		wantText  string
	}{
		{"allow", config.PhaseBoth, `{"decision":"allow"}`, `{"text":"hi"}`, "", "hi"},
		{"deny before", config.PhaseBefore, `{"decision":"deny","reason":"not today"}`, `{"text":"hi"}`, "permission", "permission: not today"},
		{"deny after", config.PhaseAfter, `{"decision":"deny","reason":"result withheld"}`, `{"text":"hi"}`, "permission", "permission: result withheld"},
		{"deny without a reason", config.PhaseBefore, `{"decision":"deny"}`, `{"text":"hi"}`, "permission", "permission: the call was refused by a webhook (hooks[0])"},
		{"rewrite arguments", config.PhaseBefore, `{"decision":"allow","arguments":{"text":"rewritten"}}`, `{"text":"hi"}`, "", "rewritten"},
		{"rewrite arguments invalid", config.PhaseBefore, `{"decision":"allow","arguments":{"text":5}}`, `{"text":"hi"}`, "validation", ""},
		{"rewrite result", config.PhaseAfter, `{"decision":"allow","result":{"content":[{"type":"text","text":"replaced"}]}}`, `{"text":"hi"}`, "", "replaced"},
		{"bad decision", config.PhaseBefore, `{"decision":"maybe"}`, `{"text":"hi"}`, "permission", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeWebhook(t, answerWith(tc.answer))
			g := hookGateway(t, webhookHook(f.srv.URL+"/hook?key=k", tc.phase, config.OnErrorDeny))
			res := call(t, g, &Call{Name: "echo", Raw: json.RawMessage(tc.args)})
			if errorClass(res) != tc.wantClass || tc.wantText != "" && res.Text() != tc.wantText {
				t.Errorf("echo(%s) = %q (class %q), want %q (class %q)", tc.args, res.Text(), errorClass(res), tc.wantText, tc.wantClass)
			}
			if strings.Contains(res.Text(), "key=") {
				t.Errorf("echo(%s) = %q, shows the webhook URL's query", tc.args, res.Text())
			}
			if len(f.got()) == 0 {
				t.Errorf("the webhook was not called")
			}
		})
	}
}

func TestHookWebhookPayload(t *testing.T) {
	f := newFakeWebhook(t, answerWith(`{"decision":"allow"}`))
	cfg, err := config.Parse("t.yaml", configtest.Lines(
		"builtin: []",
		"hooks:",
		"  - {type: webhook, tools: [echo], url: '"+f.srv.URL+"/hook?key=${TOKEN}', phase: both}",
	), &config.Options{LookupEnv: func(k string) (string, bool) { return "s3cret-token", k == "TOKEN" }})
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	err = g.RegisterStateless(registry.Tool{Name: "echo", InputSchema: json.RawMessage(echoSchema)},
		func(_ context.Context, args map[string]any) (executors.Result, error) {
			return executors.Text(args["text"].(string)), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	res := call(t, g, &Call{Name: "echo", Raw: json.RawMessage(`{"text":"s3cret-token"}`)})
	if res.IsError {
		t.Fatalf("echo = %q, want success", res.Text())
	}
	got := f.got()
	if len(got) != 2 {
		t.Fatalf("webhook got %d payloads, want 2 (before and after)", len(got))
	}
	for i, phase := range []string{"before", "after"} {
		p := got[i]
		if p["phase"] != phase || p["tool"] != "echo" || p["kind"] != "stateless" || p["call_id"] == "" || p["thread"] == "" {
			t.Errorf("payload %d = %v, want phase %s, tool echo, kind stateless, a call_id and a thread", i, p, phase)
		}
		if b, _ := json.Marshal(p); strings.Contains(string(b), "s3cret") || !strings.Contains(string(b), "[redacted]") {
			t.Errorf("payload %d = %s, want the secret redacted", i, b)
		}
	}
	if _, ok := got[1]["result"].(map[string]any); !ok {
		t.Errorf("after payload = %v, want a result object", got[1])
	}
	if _, ok := got[0]["result"]; ok {
		t.Errorf("before payload = %v, want no result", got[0])
	}
}

func TestHookWebhookFailure(t *testing.T) {
	block := func(_ http.ResponseWriter, r *http.Request, _ map[string]any) { <-r.Context().Done() }
	status := func(w http.ResponseWriter, _ *http.Request, _ map[string]any) {
		http.Error(w, "boom", http.StatusInternalServerError)
	}
	redirect := func(w http.ResponseWriter, r *http.Request, _ map[string]any) {
		http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
	}
	tests := []struct {
		name      string
		handler   func(http.ResponseWriter, *http.Request, map[string]any)
		phase     config.HookPhase
		onError   config.HookOnError
		wantClass string
		wantText  string
	}{
		{"timeout allow", block, config.PhaseBefore, config.OnErrorAllow, "", "hi"},
		{"timeout deny", block, config.PhaseBefore, config.OnErrorDeny, "permission", "no answer from the webhook within"},
		{"timeout after allow", block, config.PhaseAfter, config.OnErrorAllow, "", "hi"},
		{"timeout after deny", block, config.PhaseAfter, config.OnErrorDeny, "permission", "result was withheld"},
		{"status deny", status, config.PhaseBefore, config.OnErrorDeny, "permission", "answered HTTP 500"},
		{"redirect not followed", redirect, config.PhaseBefore, config.OnErrorDeny, "permission", "answered HTTP 307"},
		{"answer over 1 MiB", answerWith(`{"decision":"allow","reason":"` + strings.Repeat("x", 1<<20) + `"}`), config.PhaseBefore, config.OnErrorDeny, "permission", "larger than 1048576 bytes"},
		{"bad JSON allow", answerWith("nope"), config.PhaseBefore, config.OnErrorAllow, "", "hi"},
		{"bad JSON deny", answerWith("nope"), config.PhaseBefore, config.OnErrorDeny, "permission", "is not JSON"},
		{"unreachable", nil, config.PhaseBefore, config.OnErrorDeny, "permission", "could not be reached"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeWebhook(t, tc.handler)
			if tc.handler == nil {
				f.srv.Close() // nothing listens at its address any more
			}
			h := webhookHook(f.srv.URL+"/hook?key=k", tc.phase, tc.onError)
			// Short only where the webhook never answers: a 1 MiB answer
			// under -race on a loaded machine may take longer than 50ms.
			h.Timeout = config.Duration(10 * time.Second)
			if strings.HasPrefix(tc.name, "timeout") {
				h.Timeout = config.Duration(50 * time.Millisecond)
			}
			g := hookGateway(t, h)
			res := call(t, g, &Call{Name: "echo", Raw: json.RawMessage(`{"text":"hi"}`)})
			if errorClass(res) != tc.wantClass || !strings.Contains(res.Text(), tc.wantText) {
				t.Errorf("echo = %q (class %q), want %q (class %q)", res.Text(), errorClass(res), tc.wantText, tc.wantClass)
			}
			// Where the webhook is, is for the log and admins only (issue
			// 31, item 7).
			if strings.Contains(res.Text(), "key=") || strings.Contains(res.Text(), strings.TrimPrefix(f.srv.URL, "http://")) {
				t.Errorf("echo = %q, shows the webhook's URL", res.Text())
			}
		})
	}
}

func TestConfigCheckHooks(t *testing.T) {
	got := checkLines(t, configtest.Lines(
		"hooks:",
		"  - {type: redact, patterns: ['ok', '[a'], tools: ['[x']}",
		"  - {type: deny_args, rules: [{pointer: path, pattern: '(', reason: r}, {pointer: /a~2, pattern: x, reason: r}]}",
		"  - {type: webhook, url: 'ftp://x/hook'}",
		"  - {type: webhook, url: 'http://127.0.0.1/{id}'}",
	), nil)
	want := []string{
		"t.yaml:2:37: hooks[0].patterns[1]: is not a valid regular expression (Go RE2 syntax): missing closing ]; got \"[a\"",
		"t.yaml:2:52: hooks[0].tools[0]: is not a valid glob (* ? [a-z] and \\ to escape, as in Go's path.Match); write \\[ for a literal [; got \"[x\"",
		"t.yaml:3:41: hooks[1].rules[0].pointer: is not a JSON pointer (RFC 6901): write it like /path or /files/0, with ~0 for ~ and ~1 for / in a key; got \"path\"",
		"t.yaml:3:56: hooks[1].rules[0].pattern: is not a valid regular expression (Go RE2 syntax): missing closing ); got \"(\"",
		"t.yaml:3:83: hooks[1].rules[1].pointer: is not a JSON pointer (RFC 6901): write it like /path or /files/0, with ~0 for ~ and ~1 for / in a key; got \"/a~2\"",
		"t.yaml:4:26: hooks[2].url: the scheme must be http or https",
		"t.yaml:5:26: hooks[3].url: must not hold placeholders; a webhook's URL is fixed, like http://127.0.0.1:9000/hook",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("New errors mismatch (-want +got):\n%s", diff)
	}
}

// TestExampleHooks builds the commented hooks example of
// config.example.yaml: its globs, patterns, pointers and URL must pass
// their owners' checks, not config's alone.
func TestExampleHooks(t *testing.T) {
	data, err := os.ReadFile("../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(data), "# BEGIN hooks example\n")
	block, _, ok := strings.Cut(rest, "# END hooks example")
	if !ok {
		t.Fatal("config.example.yaml has no hooks example block")
	}
	var b strings.Builder
	for line := range strings.Lines(block) {
		line = strings.TrimPrefix(line, "#")
		b.WriteString(strings.TrimPrefix(line, " "))
	}
	cfg, err := config.Parse("example-hooks", []byte("builtin: []\n"+b.String()), nil)
	if err != nil {
		t.Fatalf("config.Parse(hooks example) = %v", err)
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatalf("New(hooks example) = %v", err)
	}
	g.Close()
	if len(g.hookSet) != 4 {
		t.Errorf("hooks example built %d hooks, want 4", len(g.hookSet))
	}
}
