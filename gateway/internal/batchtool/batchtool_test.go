package batchtool

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/retry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakePipeline answers each call by its tool's name: "fail" fails as
// validation, "boom" panics, anything else echoes its arguments. It
// records the most calls it saw at once.
type fakePipeline struct {
	mu         sync.Mutex
	now, peak  int
	gate       chan struct{} // when not nil, each call waits for a token
	entered    chan struct{} // when not nil, each call says it started
	args       []json.RawMessage
	repairedTo string // when set, "typo" resolves to it
}

func (p *fakePipeline) Call(_ context.Context, name string, args json.RawMessage) (string, *executors.Result) {
	p.mu.Lock()
	p.now++
	p.peak = max(p.peak, p.now)
	p.args = append(p.args, args)
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.now--
		p.mu.Unlock()
	}()
	if p.entered != nil {
		p.entered <- struct{}{}
	}
	if p.gate != nil {
		<-p.gate
	}
	switch name {
	case "fail":
		return name, p.Failed(retry.Errorf(retry.Validation, "bad arguments"))
	case "boom":
		panic("kaboom")
	case "typo":
		name = p.repairedTo
	}
	return name, &executors.Result{Content: []executors.Content{{Type: executors.TextContent, Text: string(args)}}}
}

func (*fakePipeline) Failed(err error) *executors.Result {
	c := retry.Classify(err)
	return &executors.Result{IsError: true, Class: c, Content: []executors.Content{{Type: executors.TextContent, Text: string(c) + ": " + err.Error()}}}
}

func (*fakePipeline) Class(res *executors.Result) string { return "class:" + string(res.Class) }

// run runs a batch of args through p and decodes its result, checking the
// text copy holds the same.
func run(t *testing.T, p Pipeline, args string, perSession int, logger *slog.Logger, progress func(done, total float64, msg string)) Result {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(args), &m); err != nil {
		t.Fatal(err)
	}
	res, err := Run(t.Context(), executors.Call{Args: m, Progress: progress}, p, perSession, logger)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	var out Result
	if err := json.Unmarshal(res.Structured.(json.RawMessage), &out); err != nil {
		t.Fatal(err)
	}
	if len(res.Content) != 1 || res.Content[0].Text != string(res.Structured.(json.RawMessage)) {
		t.Errorf("the text copy %v differs from structuredContent", res.Content)
	}
	return out
}

func TestRunOutcomes(t *testing.T) {
	p := &fakePipeline{repairedTo: "echo"}
	var calls []float64
	var mu sync.Mutex
	out := run(t, p, `{"calls":[{"tool":"echo","arguments":{"a":1}},{"tool":"fail"},{"tool":"typo","arguments":null}]}`, 0, nil,
		func(done, total float64, msg string) {
			mu.Lock()
			defer mu.Unlock()
			if total != 3 || msg == "" {
				t.Errorf("progress %v/%v %q", done, total, msg)
			}
			calls = append(calls, done)
		})
	if out.OK != 2 || out.Failed != 1 || len(out.Results) != 3 {
		t.Fatalf("result %+v, want 2 ok and 1 failed", out)
	}
	want := []struct{ tool, status, class string }{{"echo", "ok", ""}, {"fail", "error", "class:validation"}, {"echo", "ok", ""}}
	for i, w := range want {
		o := out.Results[i]
		if o.Tool != w.tool || o.Status != w.status || o.Class != w.class || o.DurationMS < 0 {
			t.Errorf("result %d = %+v, want %+v", i, o, w)
		}
	}
	if !strings.Contains(string(out.Results[0].Content), `{\"a\":1}`) {
		t.Errorf("the first call's content %s lacks its arguments", out.Results[0].Content)
	}
	if len(calls) != 3 {
		t.Errorf("progress reported %d times, want 3", len(calls))
	}
	for _, a := range p.args {
		if string(a) == "null" {
			t.Errorf("arguments null reached the pipeline as %q, want nil", a)
		}
	}
}

func TestRunLimits(t *testing.T) {
	calls := `{"tool":"x"},{"tool":"x"},{"tool":"x"},{"tool":"x"},{"tool":"x"},{"tool":"x"}`
	for _, tc := range []struct {
		name       string
		extra      string
		perSession int
		want       int
	}{
		{"all at once", "", 0, 6},
		{"max_parallel", `,"max_parallel":2`, 0, 2},
		{"per-session slots", `,"max_parallel":5`, 3, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &fakePipeline{gate: make(chan struct{}), entered: make(chan struct{}, 6)}
			done := make(chan Result, 1)
			go func() { done <- run(t, p, `{"calls":[`+calls+`]`+tc.extra+`}`, tc.perSession, nil, nil) }()
			for range tc.want {
				<-p.entered // the limit's calls all run at once
			}
			for range 6 {
				p.gate <- struct{}{} // a token only a running call takes
			}
			if out := <-done; out.OK != 6 {
				t.Errorf("ok %d, want 6", out.OK)
			}
			if p.peak > tc.want {
				t.Errorf("peak calls at once %d, want at most %d", p.peak, tc.want)
			}
		})
	}
}

func TestRunPanic(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(writerFunc(func(b []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(b)
	}), nil))
	out := run(t, &fakePipeline{}, `{"calls":[{"tool":"boom"},{"tool":"echo"}]}`, 0, logger, nil)
	if out.OK != 1 || out.Failed != 1 {
		t.Fatalf("result %+v, want the panic to fail its call alone", out)
	}
	if o := out.Results[0]; o.Tool != "boom" || o.Class != "class:internal" || !strings.Contains(string(o.Content), "panic") {
		t.Errorf("the panicking call's outcome = %+v", o)
	}
	if !strings.Contains(logs.String(), "kaboom") {
		t.Errorf("the panic was not logged: %s", logs.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

func TestTool(t *testing.T) {
	tool := Tool()
	if tool.Name != Name || !json.Valid(tool.InputSchema) || tool.Timeout <= 0 {
		t.Errorf("Tool() = %+v", tool)
	}
	if _, err := Run(t.Context(), executors.Call{Args: map[string]any{"calls": "not a list"}}, &fakePipeline{}, 0, nil); retry.Classify(err) != retry.Internal {
		t.Errorf("Run with arguments its schema refuses = %v, want an internal error", err)
	}
}
