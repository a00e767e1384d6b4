package gateway

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/gateway/internal/batchtool"
	"github.com/toolgate/toolgate/internal/syncbuf"
	"github.com/toolgate/toolgate/registry"
)

// batchOf calls toolgate_batch with args and decodes its structured result.
func batchOf(t *testing.T, g *Gateway, args string, meta map[string]any) batchtool.Result {
	t.Helper()
	res, err := g.Call(t.Context(), BatchToolName, json.RawMessage(args), meta)
	if err != nil {
		t.Fatalf("Call(%s): %v", BatchToolName, err)
	}
	if res.IsError {
		t.Fatalf("%s = isError %q", BatchToolName, resultText(t, res))
	}
	var out batchtool.Result
	b, _ := json.Marshal(res.Structured)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("structuredContent %s: %v", b, err)
	}
	var fromText batchtool.Result
	if err := json.Unmarshal([]byte(resultText(t, res)), &fromText); err != nil || len(fromText.Results) != len(out.Results) {
		t.Errorf("the text copy does not hold the same result: %v", err)
	}
	return out
}

func TestBatchTool(t *testing.T) {
	t.Run("off by default", func(t *testing.T) {
		g, _ := newGateway(t, nil)
		if _, err := g.Call(t.Context(), BatchToolName, json.RawMessage(`{"calls":[]}`), nil); err == nil {
			t.Errorf("%s exists without batch_tool: true", BatchToolName)
		}
	})

	g, _ := newGateway(t, func(c *config.Config) { c.BatchTool = true })
	const n = 4
	gt := newGate(n)
	addGate(t, g, "gate", gt)

	t.Run("all settled, in order", func(t *testing.T) {
		close(gt.release) // this subtest does not need the barrier
		defer func() { gt.release = make(chan struct{}) }()
		out := batchOf(t, g, `{"calls":[
			{"tool":"echo","arguments":{"text":"one"}},
			{"tool":"echo","arguments":{"text":"far too long for the schema of echo","n":"x"}},
			{"tool":"ecoh","arguments":{"text":"x"}},
			{"tool":"COUNTER"},
			{"tool":"toolgate_batch","arguments":{"calls":[{"tool":"echo"}]}},
			{"tool":"counter","arguments":{}}
		]}`, map[string]any{ThreadMetaKey: "batch-thread"})
		want := []struct{ tool, status, class, text string }{
			{"echo", "ok", "", `"one"`},
			{"echo", "error", "validation", "/text"},
			{"ecoh", "error", "not_found", `did you mean \"echo\"`},
			{"counter", "ok", "", `n`},
			{"toolgate_batch", "error", "validation", "cannot run inside"},
			{"counter", "ok", "", `n`},
		}
		if len(out.Results) != len(want) {
			t.Fatalf("%d results, want %d: %+v", len(out.Results), len(want), out.Results)
		}
		for i, w := range want {
			r := out.Results[i]
			if r.Tool != w.tool || r.Status != w.status || r.Class != w.class || !strings.Contains(string(r.Content), w.text) {
				t.Errorf("results[%d] = %+v (content %s), want tool %s status %s class %q content with %q", i, r, r.Content, w.tool, w.status, w.class, w.text)
			}
			if r.DurationMS < 0 {
				t.Errorf("results[%d].duration_ms = %v", i, r.DurationMS)
			}
		}
		if out.OK != 3 || out.Failed != 3 {
			t.Errorf("ok %d failed %d, want 3 and 3", out.OK, out.Failed)
		}
		// Both counter calls ran in the batch's thread: one instance, two calls.
		res, _ := g.Call(t.Context(), "counter", nil, map[string]any{ThreadMetaKey: "batch-thread"})
		if got := resultText(t, res); got != `{"n":3}` {
			t.Errorf("the batch thread's counter then says %s, want {\"n\":3}", got)
		}
	})

	t.Run("calls run in parallel", func(t *testing.T) {
		calls := strings.Repeat(`{"tool":"gate"},`, n)
		done := make(chan batchtool.Result, 1)
		go func() { done <- batchOf(t, g, `{"calls":[`+strings.TrimSuffix(calls, ",")+`]}`, nil) }()
		gt.waitAll(t) // all n calls of the batch inside the tool at once
		close(gt.release)
		out := <-done
		if out.OK != n {
			t.Errorf("ok %d, want %d: %+v", out.OK, n, out.Results)
		}
	})

	t.Run("max_parallel", func(t *testing.T) {
		g, _ := newGateway(t, func(c *config.Config) { c.BatchTool = true })
		gt := newGate(2)
		close(gt.release)
		addGate(t, g, "gate", gt)
		calls := strings.TrimSuffix(strings.Repeat(`{"tool":"gate"},`, 6), ",")
		if out := batchOf(t, g, `{"calls":[`+calls+`],"max_parallel":2}`, nil); out.OK != 6 {
			t.Errorf("ok %d, want 6", out.OK)
		}
		if p := gt.peakSeen(); p > 2 {
			t.Errorf("peak calls at once = %d with max_parallel 2", p)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		for _, args := range []string{`{}`, `{"calls":[]}`, `{"calls":[{"arguments":{}}]}`, `{"calls":[{"tool":"echo"}],"max_parallel":0}`} {
			res, err := g.Call(t.Context(), BatchToolName, json.RawMessage(args), nil)
			if err != nil || errorClass(res) != "validation" {
				t.Errorf("%s with %s = %v %v, want a validation error", BatchToolName, args, err, res)
			}
		}
	})
}

// panicJSON panics when encoded.
type panicJSON struct{}

func (panicJSON) MarshalJSON() ([]byte, error) { panic("encoding blew up") }

// TestBatchToolCallPanics checks that a panic on a batch call's own
// goroutine fails that call alone. The tool returns structured content
// whose encoding panics: the dispatcher's recover, around the tool itself,
// has returned by then, and only toolgate_batch encodes it.
func TestBatchToolCallPanics(t *testing.T) {
	g, _ := newGateway(t, func(c *config.Config) { c.BatchTool = true })
	var logs syncbuf.Buffer
	g.logger = slog.New(slog.NewTextHandler(&logs, nil))
	err := g.RegisterStateless(registry.Tool{Name: "bad"}, func(context.Context, map[string]any) (executors.Result, error) {
		return executors.Result{Content: []executors.Content{{Type: executors.TextContent, Text: "x"}}, Structured: panicJSON{}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	out := batchOf(t, g, `{"calls":[{"tool":"bad"},{"tool":"echo","arguments":{"text":"fine"}}]}`, nil)
	if len(out.Results) != 2 {
		t.Fatalf("%d results, want 2: %+v", len(out.Results), out.Results)
	}
	if r := out.Results[0]; r.Tool != "bad" || r.Status != "error" || r.Class != "internal" || !strings.Contains(string(r.Content), "internal: ") || !strings.Contains(string(r.Content), "panic") {
		t.Errorf("the panicking call = %+v (content %s), want an internal error saying it panicked", r, r.Content)
	}
	if r := out.Results[1]; r.Status != "ok" || !strings.Contains(string(r.Content), "fine") {
		t.Errorf("the other call = %+v (content %s), want ok", r, r.Content)
	}
	if out.OK != 1 || out.Failed != 1 {
		t.Errorf("ok %d failed %d, want 1 and 1", out.OK, out.Failed)
	}
	if l := logs.String(); !strings.Contains(l, "batch call panicked") || !strings.Contains(l, "encoding blew up") || !strings.Contains(l, "runtime/debug.Stack") {
		t.Errorf("log = %q, want the panic logged with its stack", l)
	}
}
