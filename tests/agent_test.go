package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// modelTurn is one scripted answer of the fake model: text, then tool calls
// (name and arguments JSON).
type modelTurn struct {
	text  string
	calls [][2]string
	// check, when not nil, inspects the request body that gets this turn.
	check func(t *testing.T, body string)
}

// fakeModel is a provider API on an httptest server (Anthropic Messages or
// OpenAI Chat Completions) that streams one scripted turn per request in
// the provider's SSE wire format, each tool call's arguments in two
// fragments.
type fakeModel struct {
	t     *testing.T
	kind  string
	srv   *httptest.Server
	mu    sync.Mutex // guards turns and n
	turns []modelTurn
	n     int
}

func newFakeModel(t *testing.T, kind string, turns ...modelTurn) *fakeModel {
	f := &fakeModel{t: t, kind: kind, turns: turns}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// baseURL is what --base-url takes.
func (f *fakeModel) baseURL() string {
	if f.kind == "openai" {
		return f.srv.URL + "/v1"
	}
	return f.srv.URL
}

func (f *fakeModel) requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

func (f *fakeModel) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.n++
	if len(f.turns) == 0 {
		f.mu.Unlock()
		f.t.Errorf("fake %s: unexpected request %s", f.kind, body)
		http.Error(w, `{"error":{"type":"api_error","message":"no more turns"}}`, http.StatusInternalServerError)
		return
	}
	tr := f.turns[0]
	f.turns = f.turns[1:]
	f.mu.Unlock()
	if tr.check != nil {
		tr.check(f.t, string(body))
	}
	w.Header().Set("Content-Type", "text/event-stream")
	switch f.kind {
	case "anthropic":
		io.WriteString(w, anthropicTurn(tr))
	case "gemini":
		io.WriteString(w, geminiTurn(tr))
	default:
		io.WriteString(w, openaiTurn(tr))
	}
}

func sse(b *strings.Builder, event string, v any) {
	j, _ := json.Marshal(v)
	if event != "" {
		fmt.Fprintf(b, "event: %s\n", event)
	}
	fmt.Fprintf(b, "data: %s\n\n", j)
}

func anthropicTurn(tr modelTurn) string {
	var b strings.Builder
	sse(&b, "message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": "msg_e2e", "type": "message", "role": "assistant",
		"model": "claude-e2e", "content": []any{}, "stop_reason": nil, "usage": map[string]any{"input_tokens": 50, "output_tokens": 1}}})
	i := 0
	if tr.text != "" {
		sse(&b, "content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "text", "text": ""}})
		sse(&b, "content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "text_delta", "text": tr.text}})
		sse(&b, "content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
		i++
	}
	for _, c := range tr.calls {
		sse(&b, "content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%d", i), "name": c[0], "input": map[string]any{}}})
		for _, piece := range []string{c[1][:len(c[1])/2], c[1][len(c[1])/2:]} {
			sse(&b, "content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": piece}})
		}
		sse(&b, "content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
		i++
	}
	stop := "end_turn"
	if len(tr.calls) > 0 {
		stop = "tool_use"
	}
	sse(&b, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop}, "usage": map[string]any{"output_tokens": 10}})
	sse(&b, "message_stop", map[string]any{"type": "message_stop"})
	return b.String()
}

func openaiTurn(tr modelTurn) string {
	var b strings.Builder
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": "chatcmpl-e2e", "object": "chat.completion.chunk", "created": 1, "model": "gpt-e2e",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	sse(&b, "", chunk(map[string]any{"role": "assistant", "content": tr.text}, nil))
	for i, c := range tr.calls {
		sse(&b, "", chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": fmt.Sprintf("call_%d", i), "type": "function",
			"function": map[string]any{"name": c[0], "arguments": c[1][:len(c[1])/2]}}}}, nil))
		sse(&b, "", chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": c[1][len(c[1])/2:]}}}}, nil))
	}
	finish := "stop"
	if len(tr.calls) > 0 {
		finish = "tool_calls"
	}
	sse(&b, "", chunk(map[string]any{}, finish))
	b.WriteString("data: [DONE]\n\n")
	return b.String()
}

// geminiTurn renders tr as Gemini's streamGenerateContent SSE: the text,
// then each function call whole, its arguments an object.
func geminiTurn(tr modelTurn) string {
	var b strings.Builder
	var parts []any
	if tr.text != "" {
		parts = append(parts, map[string]any{"text": tr.text})
	}
	for _, c := range tr.calls {
		var args map[string]any
		if err := json.Unmarshal([]byte(c[1]), &args); err != nil {
			panic(err)
		}
		parts = append(parts, map[string]any{"functionCall": map[string]any{"name": c[0], "args": args}})
	}
	for i, p := range parts {
		cand := map[string]any{"index": 0, "content": map[string]any{"role": "model", "parts": []any{p}}}
		if i == len(parts)-1 {
			cand["finishReason"] = "STOP"
		}
		sse(&b, "", map[string]any{"candidates": []any{cand}, "modelVersion": "gemini-e2e", "responseId": "e2e",
			"usageMetadata": map[string]any{"promptTokenCount": 50, "candidatesTokenCount": 10, "totalTokenCount": 60}})
	}
	return b.String()
}

// runAgent runs `toolgate agent` (which runs the toolgate-agent built next
// to it) with args and the provider's key in its environment, bounded by
// callTimeout.
func runAgent(t *testing.T, env []string, args ...string) cliResult {
	t.Helper()
	return runProgram(t, toolgateBin, env, append([]string{"agent"}, args...)...)
}

func keyEnv(kind string) []string {
	switch kind {
	case "anthropic":
		return []string{"ANTHROPIC_API_KEY=test-key"}
	case "gemini":
		return []string{"GEMINI_API_KEY=test-key"}
	}
	return []string{"OPENAI_API_KEY=test-key"}
}

// scratchpadTask is a three-step task: store a note, read it back, answer
// with it. The third request must carry the note read from the
// scratchpad, which keeps it per thread: proof the calls reached the real
// tool in one thread.
func scratchpadTask() []modelTurn {
	return []modelTurn{
		{text: "I'll note the city.", calls: [][2]string{{"scratchpad", `{"op": "put", "key": "city", "value": "Lisbon"}`}}},
		{calls: [][2]string{{"scratchpad", `{"op": "get", "key": "city"}`}}},
		{text: "The city is Lisbon.", check: func(t *testing.T, body string) {
			// The get's result is the note alone: Anthropic's tool_result
			// text, or Chat Completions' tool message content.
			if !strings.Contains(body, `"text":"Lisbon"`) && !strings.Contains(body, `"content":"Lisbon"`) {
				t.Errorf("the last request does not carry the note read back from the scratchpad: %s", body)
			}
		}},
	}
}

// TestAgentScratchpadOverMCP runs `toolgate agent` against the fake model
// and a real `toolgate serve`, reaching its scratchpad over streamable
// HTTP, for both providers.
func TestAgentScratchpadOverMCP(t *testing.T) {
	srv := startServe(t, baseConfig)
	for _, kind := range []string{"anthropic", "openai"} {
		t.Run(kind, func(t *testing.T) {
			m := newFakeModel(t, kind, scratchpadTask()...)
			res := runAgent(t, keyEnv(kind), "--provider", kind, "--model", "test-model", "--base-url", m.baseURL(), "--mcp", srv.URL+"/mcp", "remember Lisbon")
			if res.code != 0 {
				t.Fatalf("toolgate agent failed:\n%s", res)
			}
			if want := "I'll note the city.\nThe city is Lisbon.\n"; res.stdout != want {
				t.Errorf("stdout = %q, want %q", res.stdout, want)
			}
			for _, want := range []string{`→ scratchpad {"op": "put", "key": "city", "value": "Lisbon"}`, "← scratchpad ok (", `→ scratchpad {"op": "get", "key": "city"}`} {
				if !strings.Contains(res.stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, res.stderr)
				}
			}
			if n := m.requests(); n != 3 {
				t.Errorf("the model got %d requests, want 3", n)
			}
		})
	}
}

// TestAgentGeminiOverMCP runs `toolgate agent --provider gemini` against
// the fake Gemini API and a real `toolgate serve`: the key comes from
// GEMINI_API_KEY, and the note read back reaches the model as the
// function response's output.
func TestAgentGeminiOverMCP(t *testing.T) {
	srv := startServe(t, baseConfig)
	turns := scratchpadTask()
	turns[2].check = func(t *testing.T, body string) {
		if !strings.Contains(body, `"functionResponse":{"name":"scratchpad","response":{"output":"Lisbon"}}`) {
			t.Errorf("the last request does not carry the note read back from the scratchpad: %s", body)
		}
	}
	m := newFakeModel(t, "gemini", turns...)
	res := runAgent(t, keyEnv("gemini"), "--provider", "gemini", "--model", "test-model", "--base-url", m.baseURL(), "--mcp", srv.URL+"/mcp", "remember Lisbon")
	if res.code != 0 {
		t.Fatalf("toolgate agent failed:\n%s", res)
	}
	if want := "I'll note the city.\nThe city is Lisbon.\n"; res.stdout != want {
		t.Errorf("stdout = %q, want %q", res.stdout, want)
	}
	for _, want := range []string{`→ scratchpad {"key":"city","op":"put","value":"Lisbon"}`, "← scratchpad ok (", `→ scratchpad {"key":"city","op":"get"}`} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, res.stderr)
		}
	}
	if n := m.requests(); n != 3 {
		t.Errorf("the model got %d requests, want 3", n)
	}
	res = runAgent(t, []string{"GEMINI_API_KEY=", "GOOGLE_API_KEY="}, "--provider", "gemini", "--model", "m", "task")
	if res.code != 2 || !strings.Contains(res.stderr, "no API key: set GEMINI_API_KEY") {
		t.Errorf("without a key: exit %d, stderr %q; want 2 and where to set one", res.code, res.stderr)
	}
}

// TestAgentMCPHeader reaches a toolgate serve that requires a bearer token
// with --mcp-header; without it the agent exits non-zero, saying
// authorization is required.
func TestAgentMCPHeader(t *testing.T) {
	srv := startServe(t, `
builtin: [scratchpad]
auth:
  tokens:
    - name: agent
      token: agent-token-0123456789abcdef
`)
	m := newFakeModel(t, "anthropic", scratchpadTask()...)
	res := runAgent(t, keyEnv("anthropic"), "--provider", "anthropic", "--model", "test-model", "--base-url", m.baseURL(),
		"--mcp", srv.URL+"/mcp", "--mcp-header", "Authorization: Bearer agent-token-0123456789abcdef", "remember Lisbon")
	if res.code != 0 || !strings.HasSuffix(res.stdout, "The city is Lisbon.\n") {
		t.Fatalf("toolgate agent did not finish the task:\n%s", res)
	}
	res = runAgent(t, keyEnv("anthropic"), "--provider", "anthropic", "--model", "test-model", "--base-url", m.baseURL(), "--mcp", srv.URL+"/mcp", "task")
	if res.code == 0 || !strings.Contains(res.stderr, "authorization required") {
		t.Errorf("without the token: want a non-zero exit saying authorization is required:\n%s", res)
	}
}

// TestAgentScratchpadOverStdio runs the task with the tools of a
// `toolgate stdio` subprocess whose command follows "--", word for word:
// the program and its config live in a directory whose name has spaces,
// which a command line split on spaces would break.
func TestAgentScratchpadOverStdio(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "my tools")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "tool gate")
	if err := os.Symlink(toolgateBin, bin); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "tools config.yaml")
	if err := os.WriteFile(cfg, []byte(baseConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	m := newFakeModel(t, "openai", scratchpadTask()...)
	res := runAgent(t, keyEnv("openai"), "--provider", "openai", "--model", "test-model", "--base-url", m.baseURL(), "remember Lisbon", "--", bin, "stdio", "--config", cfg)
	if res.code != 0 || !strings.HasSuffix(res.stdout, "The city is Lisbon.\n") {
		t.Fatalf("toolgate agent did not finish the task:\n%s", res)
	}
	if !strings.Contains(res.stderr, "← scratchpad ok (") {
		t.Errorf("stderr lacks the scratchpad's outcome:\n%s", res.stderr)
	}
}

// TestAgentScratchpadInProcess runs the same task through an in-process
// gateway built from --config.
func TestAgentScratchpadInProcess(t *testing.T) {
	m := newFakeModel(t, "anthropic", scratchpadTask()...)
	res := runAgent(t, keyEnv("anthropic"), "--provider", "anthropic", "--model", "test-model", "--base-url", m.baseURL(), "--config", writeConfig(t, baseConfig), "remember Lisbon")
	if res.code != 0 || !strings.HasSuffix(res.stdout, "The city is Lisbon.\n") {
		t.Fatalf("toolgate agent did not finish the task:\n%s", res)
	}
}

// TestAgentBudget: the run's totals go to stderr at the end, and
// --max-tokens-total ends the run normally once the budget is spent.
func TestAgentBudget(t *testing.T) {
	m := newFakeModel(t, "anthropic", scratchpadTask()...)
	res := runAgent(t, keyEnv("anthropic"), "--provider", "anthropic", "--model", "test-model", "--base-url", m.baseURL(),
		"--max-tokens-total", "1", "--price", "3/15", "--config", writeConfig(t, baseConfig), "remember Lisbon")
	if res.code != 0 || !regexp.MustCompile(`(?m)^tokens: \d+ in, \d+ out, .* over 1 model calls; cost \d+\.\d{4}$`).MatchString(res.stderr) ||
		!strings.Contains(res.stderr, "stopped: max_tokens(1) reached") {
		t.Errorf("want exit 0 after one model call, with the totals and the budget named on stderr:\n%s", res)
	}
	res = runAgent(t, keyEnv("anthropic"), "--provider", "anthropic", "--model", "m", "--max-cost", "1", "task")
	if res.code != 2 || !strings.Contains(res.stderr, "--price") {
		t.Errorf("--max-cost without --price: want exit 2 naming --price:\n%s", res)
	}
}

func TestAgentFailures(t *testing.T) {
	t.Run("no key", func(t *testing.T) {
		res := runAgent(t, []string{"ANTHROPIC_API_KEY="}, "--provider", "anthropic", "--model", "m", "task")
		if res.code == 0 || !strings.Contains(res.stderr, "ANTHROPIC_API_KEY") || strings.Count(strings.TrimSpace(res.stderr), "\n") != 0 {
			t.Errorf("want a non-zero exit with one line naming ANTHROPIC_API_KEY:\n%s", res)
		}
	})
	t.Run("provider error", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":{"type":"invalid_request_error","message":"Incorrect API key provided"}}`)
		}))
		defer srv.Close()
		res := runAgent(t, keyEnv("openai"), "--provider", "openai", "--model", "m", "--base-url", srv.URL+"/v1", "--config", writeConfig(t, baseConfig), "task")
		if res.code == 0 || !strings.Contains(res.stderr, "401") || strings.Contains(res.stderr, "test-key") {
			t.Errorf("want a non-zero exit naming the 401, without the key:\n%s", res)
		}
	})
	t.Run("--mcp is not a URL", func(t *testing.T) {
		res := runAgent(t, keyEnv("openai"), "--provider", "openai", "--model", "m", "--mcp", "toolgate stdio", "task")
		if res.code != 2 || !strings.Contains(res.stderr, "after --") || strings.Count(strings.TrimSpace(res.stderr), "\n") != 0 {
			t.Errorf("want exit 2 with one line pointing at the command after --:\n%s", res)
		}
	})
	t.Run("--mcp-header without --mcp", func(t *testing.T) {
		res := runAgent(t, keyEnv("openai"), "--provider", "openai", "--model", "m", "--mcp-header", "Authorization: Bearer x", "task", "--", "server")
		if res.code != 2 || !strings.Contains(res.stderr, "--mcp-header") {
			t.Errorf("want exit 2 saying --mcp-header needs --mcp:\n%s", res)
		}
	})
	t.Run("nothing after --", func(t *testing.T) {
		res := runAgent(t, keyEnv("openai"), "--provider", "openai", "--model", "m", "task", "--")
		if res.code != 2 || !strings.Contains(res.stderr, `nothing after "--"`) {
			t.Errorf("want exit 2 saying the command is missing:\n%s", res)
		}
	})
	t.Run("a failing tool call", func(t *testing.T) {
		// The model recovers from a bad call: the run still exits 0, and
		// stderr shows the call, its error outcome with a duration, and the
		// gateway's "<class>: <message>".
		m := newFakeModel(t, "openai",
			modelTurn{calls: [][2]string{{"scratchpad", `{"op": "delete"}`}}},
			modelTurn{text: "That did not work."})
		res := runAgent(t, keyEnv("openai"), "--provider", "openai", "--model", "m", "--base-url", m.baseURL(), "--config", writeConfig(t, baseConfig), "task")
		if res.code != 0 {
			t.Fatalf("toolgate agent failed:\n%s", res)
		}
		if !regexp.MustCompile(`(?m)^← scratchpad error \(\d+(\.\d+)?[µm]?s\): validation: `).MatchString(res.stderr) {
			t.Errorf("stderr lacks the call's error line (name, duration, class: message):\n%s", res.stderr)
		}
	})
	t.Run("max iterations", func(t *testing.T) {
		var turns []modelTurn
		for i := range 2 {
			turns = append(turns, modelTurn{calls: [][2]string{{"scratchpad", fmt.Sprintf(`{"op": "put", "key": "k%d", "value": "v"}`, i)}}})
		}
		m := newFakeModel(t, "anthropic", turns...)
		res := runAgent(t, keyEnv("anthropic"), "--provider", "anthropic", "--model", "m", "--base-url", m.baseURL(), "--max-iterations", "2", "--config", writeConfig(t, baseConfig), "task")
		if res.code == 0 || !strings.Contains(res.stderr, "after 2 steps") {
			t.Errorf("want a non-zero exit saying the iteration cap was reached:\n%s", res)
		}
	})
}

// TestAgentLauncher checks how `toolgate agent` finds the separate
// toolgate-agent binary when it is not next to toolgate: in PATH, or
// nowhere, which is exit 2 and one line saying what to install.
func TestAgentLauncher(t *testing.T) {
	if r := runCLI(t, "help"); r.code != 0 || !strings.Contains(r.stdout, "toolgate agent ") {
		t.Errorf("help does not list the agent command:\n%s", r)
	}
	// toolgate alone in a directory: a hard link (or a copy), not a
	// symbolic link, which the launcher resolves to the directory where
	// toolgate-agent is.
	dir := t.TempDir()
	bin := filepath.Join(dir, "toolgate")
	if err := os.Link(toolgateBin, bin); err != nil {
		copyFile(t, toolgateBin, bin)
	}
	t.Run("in PATH", func(t *testing.T) {
		pathDir := t.TempDir()
		if err := os.Symlink(toolgateAgentBin, filepath.Join(pathDir, "toolgate-agent")); err != nil {
			t.Fatal(err)
		}
		res := runProgram(t, bin, []string{"PATH=" + pathDir}, "agent", "--provider", "nope", "--model", "m", "task")
		if want := "toolgate: unknown provider \"nope\": use --provider anthropic, openai, openai-responses or gemini\n"; res.code != 2 || res.stderr != want {
			t.Errorf("want toolgate-agent's exit 2 and stderr %q:\n%s", want, res)
		}
	})
	t.Run("another program's", func(t *testing.T) {
		// A toolgate-agent that is some other module's program: toolgate
		// says so, and runs it all the same.
		src, pathDir := t.TempDir(), t.TempDir()
		for name, text := range map[string]string{
			"go.mod":  "module example.com/otheragent\n\ngo 1.26\n",
			"main.go": "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"other agent\") }\n",
		} {
			if err := os.WriteFile(filepath.Join(src, name), []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		build := exec.Command("go", "build", "-o", filepath.Join(pathDir, "toolgate-agent"), ".")
		build.Dir = src
		build.Env = append(os.Environ(), "GOWORK=off") // a module of its own, whatever workspace is set
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("building the other program: %v\n%s", err, out)
		}
		res := runProgram(t, bin, []string{"PATH=" + pathDir + string(os.PathListSeparator) + os.Getenv("PATH")}, "agent", "task")
		if want := `toolgate: warning: toolgate-agent at ` + filepath.Join(pathDir, "toolgate-agent") + ` is not toolgate's (its module is "example.com/otheragent")`; res.code != 0 || res.stdout != "other agent\n" || !strings.HasPrefix(res.stderr, want) {
			t.Errorf("want the other program run and stderr beginning %q:\n%s", want, res)
		}
	})
	t.Run("not found", func(t *testing.T) {
		res := runProgram(t, bin, []string{"PATH=" + t.TempDir()}, "agent", "--provider", "openai", "--model", "m", "task")
		real, err := filepath.EvalSymlinks(bin)
		if err != nil {
			t.Fatal(err)
		}
		want := "toolgate: toolgate agent runs the separate toolgate-agent binary (it carries the model providers' SDKs, which would cost every toolgate serve about 9 MiB of RSS), and none was found next to " +
			real + " or in PATH: build it next to toolgate with make build (bin/toolgate-agent), or use a release archive, which holds both\n"
		if res.code != 2 || res.stderr != want || res.stdout != "" {
			t.Errorf("want exit 2 and stderr %q:\n%s", want, res)
		}
	})
}

// copyFile copies the executable src to dst.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestAgentSecondInterrupt: the first SIGINT cancels the run and the agent
// closes its tools; a second one ends it at once, before it has waited
// for a stdio server that ignores its stdin closing, and kills that
// server rather than leave it running. The server here is toolgate stdio
// in a shell that then stays, ignoring SIGTERM and noting it: mcp-go's
// client closes a server with stdin, then SIGTERM after 2 s, then SIGKILL.
// An agent that swallowed the second signal sent SIGTERM.
func TestAgentSecondInterrupt(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, baseConfig)
	terms, pidFile, childPidFile := filepath.Join(dir, "terms"), filepath.Join(dir, "pid"), filepath.Join(dir, "childpid")
	// The server also leaves a child of its own running, which ignores
	// SIGTERM: killing the server alone would leave it behind.
	script := `echo $$ > "$PIDFILE"; trap 'echo TERM >> "$TERMS"' TERM; ` +
		`sh -c 'echo $$ > "$CHILDPIDFILE"; trap "" TERM; while :; do sleep 1; done' </dev/null & ` +
		`"$TOOLGATE" stdio --config "$CONFIG"; while :; do sleep 1; done`
	t.Cleanup(func() {
		for _, f := range []string{pidFile, childPidFile} {
			if pid, err := readPid(f); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})

	asked, cancelled := make(chan struct{}, 1), make(chan struct{}, 1)
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // then net/http watches the connection
		asked <- struct{}{}
		<-r.Context().Done() // the model thinks until the agent gives up
		cancelled <- struct{}{}
	}))
	t.Cleanup(model.Close)

	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, toolgateAgentBin, "--provider", "anthropic", "--model", "test-model", "--base-url", model.URL,
		"remember Lisbon", "--", "sh", "-c", script)
	cmd.Env = append(os.Environ(), "ANTHROPIC_API_KEY=test-key", "PIDFILE="+pidFile, "CHILDPIDFILE="+childPidFile, "TERMS="+terms, "TOOLGATE="+toolgateBin, "CONFIG="+cfg)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-asked:
	case <-ctx.Done():
		t.Fatalf("the model was never asked:\n%s", stderr.String())
	}
	_ = cmd.Process.Signal(os.Interrupt)
	select {
	case <-cancelled: // the run is cancelled: the agent is closing its tools
	case <-ctx.Done():
		t.Fatalf("the first SIGINT did not cancel the model's request:\n%s", stderr.String())
	}
	_ = cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	if ctx.Err() != nil {
		t.Fatalf("the agent did not exit after two SIGINTs:\n%s", stderr.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 130 || err == nil {
		t.Errorf("exit code %d after a second SIGINT, want 130", code)
	}
	if b, _ := os.ReadFile(terms); len(b) > 0 {
		t.Errorf("the agent sent its stdio server SIGTERM after the second SIGINT: it waited for the server to close")
	}
	if !strings.Contains(stderr.String(), "second signal") {
		t.Errorf("stderr does not say that a second signal stopped the agent:\n%s", stderr.String())
	}
	// Nor is the server left running, or what it started: the agent
	// killed the server's process group.
	for what, f := range map[string]string{"the stdio server": pidFile, "the stdio server's child": childPidFile} {
		pid, err := readPid(f)
		if err != nil {
			t.Fatalf("%s's pid: %v", what, err)
		}
		waitDead(t, pid, what)
	}
}

// TestAgentInterruptWhileConnecting: a signal while the agent connects to
// its stdio server ends it as any interrupted run, with 130.
func TestAgentInterruptWhileConnecting(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	// Never answers initialize; exits when its stdin ends.
	script := `echo $$ > "$PIDFILE"; cat > /dev/null`
	a := startConnectingAgent(t, script, "PIDFILE="+pidFile)
	waitPid(t, pidFile, "the stdio server", a.exited)
	signalProcess(t, "toolgate-agent", a.cmd, os.Interrupt)
	if code := waitExit(t, "toolgate-agent", a.cmd, a.exited, callTimeout); code != 130 || a.stderr.String() != "toolgate: interrupted\n" {
		t.Errorf("exit code %d and stderr %q after SIGINT while connecting, want 130 and \"toolgate: interrupted\"", code, a.stderr.String())
	}
}

// startConnectingAgent starts toolgate-agent on a task with the stdio
// server `sh -c script` (env added to its environment), and a model that
// is never reached: the agent connects to the server first. The agent is
// killed when t ends.
func startConnectingAgent(t *testing.T, script string, env ...string) *toolgateProc {
	t.Helper()
	cmd := exec.Command(toolgateAgentBin, "--provider", "anthropic", "--model", "test-model", "--base-url", "http://127.0.0.1:1",
		"task", "--", "sh", "-c", script)
	cmd.Env = append(append(os.Environ(), "ANTHROPIC_API_KEY=test-key"), env...)
	return startProcess(t, cmd, "toolgate-agent")
}

// TestAgentSecondInterruptWhileConnecting: a second signal kills a stdio
// server the agent is still connecting to. The server here never answers
// initialize and ignores SIGTERM: after the first SIGINT the agent gives
// up the connection and closes the server, which mcp-go's client does by
// closing stdin, then SIGTERM after 2 s, then SIGKILL after 3 s more; a
// second SIGINT must not leave it running.
func TestAgentSecondInterruptWhileConnecting(t *testing.T) {
	dir := t.TempDir()
	pidFile, eofFile := filepath.Join(dir, "pid"), filepath.Join(dir, "eof")
	// The server reads its stdin to the end, notes that, and stays.
	script := `echo $$ > "$PIDFILE"; trap '' TERM; cat > /dev/null; echo eof > "$EOFFILE"; while :; do sleep 1; done`
	t.Cleanup(func() {
		if pid, err := readPid(pidFile); err == nil {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	})
	a := startConnectingAgent(t, script, "PIDFILE="+pidFile, "EOFFILE="+eofFile)
	pid := waitPid(t, pidFile, "the stdio server", a.exited)
	signalProcess(t, "toolgate-agent", a.cmd, os.Interrupt)
	// The agent gave up the connection and is closing the server: its
	// stdin is closed, and mcp-go's client waits before SIGTERM.
	waitFile(t, eofFile, "the server's stdin to close")
	signalProcess(t, "toolgate-agent", a.cmd, os.Interrupt)
	if code := waitExit(t, "toolgate-agent", a.cmd, a.exited, callTimeout); code != 130 {
		t.Errorf("exit code %d after a second SIGINT, want 130", code)
	}
	waitDead(t, pid, "the stdio server")
}
