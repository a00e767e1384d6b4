package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// stdioProcess is a `toolgate stdio` run by hand.
type stdioProcess struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr *bytes.Buffer // read only after wait
	lines  []string      // every stdout line read so far
}

// startStdio starts `toolgate stdio` with debug logging, so that any log
// that strays onto stdout would show. The process is killed when ctx ends.
func startStdio(t *testing.T, ctx context.Context, cfgPath string) *stdioProcess {
	t.Helper()
	p := &stdioProcess{stderr: &bytes.Buffer{}}
	p.cmd = exec.CommandContext(ctx, toolgateBin, "stdio", "--config", cfgPath, "--log-level", "debug")
	p.cmd.Stderr = p.stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatalf("stdin pipe: %v", err)
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("stdout pipe: %v", err)
	}
	p.stdout = bufio.NewReader(out)
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting toolgate stdio: %v", err)
	}
	t.Cleanup(func() {
		_ = p.stdin.Close()
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
	})
	return p
}

func (p *stdioProcess) send(t *testing.T, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if _, err := io.WriteString(p.stdin, l+"\n"); err != nil {
			t.Fatalf("writing to toolgate stdio: %v", err)
		}
	}
}

// readLine reads one stdout line; ok is false at EOF.
func (p *stdioProcess) readLine(t *testing.T) (string, bool) {
	t.Helper()
	line, err := p.stdout.ReadString('\n')
	if line != "" {
		p.lines = append(p.lines, line)
	}
	if err != nil {
		if line != "" {
			t.Errorf("stdout line %q has no newline", line)
		}
		return line, false
	}
	return line, true
}

// readResponses reads stdout until a response with each of ids (JSON
// encodings, like `1` or `null`) has arrived, and returns them by id.
func (p *stdioProcess) readResponses(t *testing.T, ids ...string) map[string]rpcResponse {
	t.Helper()
	got := map[string]rpcResponse{}
	for len(got) < len(ids) {
		line, ok := p.readLine(t)
		if line != "" {
			var r rpcResponse
			if json.Unmarshal([]byte(line), &r) == nil && slices.Contains(ids, string(r.ID)) {
				got[string(r.ID)] = r
			}
		}
		if !ok {
			t.Fatalf("stdout ended after %d lines, before responses %v arrived; stderr:\n%s", len(p.lines), ids, p.stderr)
		}
	}
	return got
}

// finish closes stdin, reads stdout to its end and waits for the process,
// returning its exit code.
func (p *stdioProcess) finish(t *testing.T) int {
	t.Helper()
	if err := p.stdin.Close(); err != nil {
		t.Errorf("closing stdin: %v", err)
	}
	for {
		if _, ok := p.readLine(t); !ok {
			break
		}
	}
	_ = p.cmd.Wait()
	return p.cmd.ProcessState.ExitCode()
}

// checkJSONRPCLines fails for every line that is not one JSON-RPC 2.0
// message.
func checkJSONRPCLines(t *testing.T, lines []string) {
	t.Helper()
	for i, line := range lines {
		var msg struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Method  string          `json:"method"`
			Result  json.RawMessage `json:"result"`
			Error   json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &msg); err != nil {
			t.Errorf("stdout line %d is not JSON: %v\n%s", i+1, err, line)
			continue
		}
		isResponse := msg.ID != nil && (msg.Result != nil || msg.Error != nil)
		if msg.JSONRPC != "2.0" || (!isResponse && msg.Method == "") {
			t.Errorf("stdout line %d is not a JSON-RPC 2.0 message: %s", i+1, line)
		}
	}
}

const stdioInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + protocolVersion + `","capabilities":{},"clientInfo":{"name":"toolgate-e2e-stdio","version":"1"}}}`

func TestStdioStdoutIsProtocolOnly(t *testing.T) {
	cfg := writeConfig(t, baseConfig)

	t.Run("conversation", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
		defer cancel()
		p := startStdio(t, ctx, cfg)
		p.send(t, stdioInitialize)
		if r := p.readResponses(t, "1")["1"]; r.Error != nil {
			t.Fatalf("initialize: JSON-RPC error %+v", r.Error)
		}
		p.send(t,
			`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
			`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"calc","arguments":{"expression":"2+3*4"}}}`,
			`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"calcc","arguments":{}}}`,
			`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"scratchpad","arguments":{"op":"put","key":"k","value":"v"}}}`,
		)
		got := p.readResponses(t, "2", "3", "4", "5")
		p.send(t, `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"scratchpad","arguments":{"op":"get","key":"k"}}}`)
		got6 := p.readResponses(t, "6")

		var list struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(got["2"].Result, &list); err != nil || len(list.Tools) != 4 {
			t.Errorf("tools/list result %s: want 4 tools (decode error %v)", got["2"].Result, err)
		}
		wantOK(t, got["3"].toolResult(t), "14")
		if e := got["4"].Error; e == nil || e.Code != -32602 || !strings.Contains(e.Message, `"calc"`) {
			t.Errorf("tools/call calcc: error %+v, want -32602 suggesting calc", e)
		}
		wantOK(t, got6["6"].toolResult(t), "v") // one thread for the whole process

		if code := p.finish(t); code != 0 {
			t.Errorf("toolgate stdio exited with code %d at EOF on stdin, want 0; stderr:\n%s", code, p.stderr)
		}
		checkJSONRPCLines(t, p.lines)
		if p.stderr.Len() == 0 {
			t.Errorf("toolgate stdio at debug level wrote nothing to stderr; its logs belong there")
		}
	})

	t.Run("stdin closed at once", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
		defer cancel()
		p := startStdio(t, ctx, cfg)
		p.send(t, stdioInitialize,
			`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		)
		if code := p.finish(t); code != 0 {
			t.Errorf("toolgate stdio exited with code %d at EOF on stdin, want 0; stderr:\n%s", code, p.stderr)
		}
		checkJSONRPCLines(t, p.lines)
		// Requests read before EOF are still answered.
		var ids []string
		for _, l := range p.lines {
			var r rpcResponse
			if json.Unmarshal([]byte(l), &r) == nil && r.ID != nil {
				ids = append(ids, string(r.ID))
			}
		}
		slices.Sort(ids)
		if !slices.Equal(ids, []string{"1", "2"}) {
			t.Errorf("responses to ids %v, want 1 and 2; stdout:\n%s", ids, strings.Join(p.lines, ""))
		}
	})

	t.Run("garbage line", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
		defer cancel()
		p := startStdio(t, ctx, cfg)
		p.send(t, stdioInitialize)
		p.readResponses(t, "1")
		p.send(t, `this is not json`, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":1}}}`)
		wantOK(t, p.readResponses(t, "9")["9"].toolResult(t), "slept 1 ms")
		if code := p.finish(t); code != 0 {
			t.Errorf("toolgate stdio exited with code %d, want 0; stderr:\n%s", code, p.stderr)
		}
		checkJSONRPCLines(t, p.lines)
		if !slices.ContainsFunc(p.lines, func(l string) bool { return strings.Contains(l, fmt.Sprint(-32700)) }) {
			t.Errorf("no parse error (-32700) answered the garbage line; stdout:\n%s", strings.Join(p.lines, ""))
		}
	})
}
