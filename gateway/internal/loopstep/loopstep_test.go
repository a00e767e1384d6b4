package loopstep

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/internal/loopguard"
	"github.com/toolgate/toolgate/retry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func text(s string) *executors.Result {
	return &executors.Result{Content: []executors.Content{{Type: executors.TextContent, Text: s}}}
}

// refuse is the result of a refused call, as the gateway's errorResult
// gives it in short.
func refuse(err error) *executors.Result {
	r := text(err.Error())
	r.IsError, r.Class = true, retry.Classify(err)
	return r
}

func noDecode(r *executors.Result) *executors.Result { return r }

// newStep returns a step of lc over a guard of threshold 2.
func newStep(lc config.LoopGuard) *Step {
	lc.Threshold = 2
	return New(loopguard.New(&loopguard.Options{Threshold: 2}), lc, noDecode, refuse)
}

// runs makes n identical calls in thread t through s, each returning
// "same", and returns the last result and how many ran.
func runs(t *testing.T, s *Step, c *Call, n int) (last *executors.Result, ran int) {
	t.Helper()
	for range n {
		res, err := s.Run(t.Context(), c, func(context.Context) (*executors.Result, error) {
			ran++
			return text("same"), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		last = res
	}
	return last, ran
}

func TestNewOff(t *testing.T) {
	if s := New(loopguard.New(nil), config.LoopGuard{Action: config.LoopOff}, noDecode, refuse); s != nil {
		t.Error("New(action off, no tool on) is a step, want nil")
	}
	lc := config.LoopGuard{Action: config.LoopOff, Tools: map[string]config.LoopAction{"t": config.LoopWarn}}
	if s := New(loopguard.New(nil), lc, noDecode, refuse); s == nil {
		t.Error("New(action off, one tool on) is nil, want a step")
	}
}

func TestBlock(t *testing.T) {
	s := newStep(config.LoopGuard{Action: config.LoopBlock})
	c := &Call{Tool: "rep", Thread: "t", Raw: json.RawMessage(`{"a":1}`)}
	res, ran := runs(t, s, c, 3)
	if ran != 2 || !res.IsError || res.Class != retry.Validation {
		t.Fatalf("third identical call: ran %d of 3, result %+v; want 2 run and a validation error", ran, res)
	}
	// Other spelling of the same arguments is the same call.
	c.Raw = json.RawMessage(`{ "a" : 1.0 }`)
	if _, ran = runs(t, s, c, 1); ran != 0 {
		t.Error("the same arguments spelled otherwise ran, want refused")
	}
}

func TestAsk(t *testing.T) {
	answers := []string{AllowOnce, Deny, AllowAlways}
	var asked int
	c := &Call{Tool: "rep", Thread: "t", Raw: json.RawMessage(`{}`), AskTimeout: time.Minute,
		Elicit: func(_ context.Context, msg string, schema map[string]any) (string, map[string]any, error) {
			asked++
			return "accept", map[string]any{"decision": answers[asked-1]}, nil
		}}
	s := newStep(config.LoopGuard{Action: config.LoopAsk})
	if _, ran := runs(t, s, c, 2); ran != 2 || asked != 0 {
		t.Fatalf("first two calls: ran %d, asked %d; want 2 run, none asked", ran, asked)
	}
	for i, want := range []int{1, 0, 1, 1} {
		if _, ran := runs(t, s, c, 1); ran != want {
			t.Errorf("call %d ran %d times, want %d (answers %v)", i+3, ran, want, answers)
		}
	}
	if asked != 3 {
		t.Errorf("asked %d times, want 3 (none after allow_always)", asked)
	}
	c.Elicit = nil
	c.Thread = "other"
	if _, ran := runs(t, s, c, 3); ran != 2 {
		t.Errorf("a client that cannot be asked: %d of 3 ran, want 2", ran)
	}
}

func TestWarnPassthrough(t *testing.T) {
	up := &executors.Result{Passthrough: json.RawMessage(`{"content":[{"type":"text","text":"up"}]}`), Meta: map[string]any{"k": "v"}}
	failed := &executors.Result{IsError: true, Passthrough: json.RawMessage(`{"isError":true}`)}
	decoded := map[*executors.Result]*executors.Result{
		up:     {Passthrough: up.Passthrough, Meta: up.Meta, Content: text("up").Content},
		failed: {Passthrough: failed.Passthrough, IsError: true, Class: "not_found", Content: text("gone").Content},
	}
	s := New(loopguard.New(nil), config.LoopGuard{Action: config.LoopWarn}, func(r *executors.Result) *executors.Result {
		if d, ok := decoded[r]; ok {
			return d
		}
		return r
	}, refuse)
	got := s.withWarning(up, "loop guard: x")
	if got.Passthrough != nil || len(got.Content) != 2 || got.Content[0].Text != "up" || got.Content[1].Text != "toolgate loop guard: x" || got.Meta["k"] != "v" {
		t.Errorf("withWarning(passthrough) = %+v, want the upstream's content decoded with the warning appended", got)
	}
	if up.Passthrough == nil || len(decoded[up].Content) != 1 {
		t.Error("withWarning changed its argument or the decoded result")
	}
	if got = s.withWarning(failed, "w"); !got.IsError || got.Class != "not_found" || got.Meta[errorClassMetaKey] != "not_found" {
		t.Errorf("withWarning(upstream isError naming not_found) = %+v, want not_found kept in Class and _meta", got)
	}
	bad := &executors.Result{Passthrough: json.RawMessage(`not json`)}
	got = s.withWarning(bad, "w")
	if string(got.Passthrough) != "not json" || got.Meta[WarningMetaKey] != "w" || len(got.Content) != 0 {
		t.Errorf("withWarning(undecodable) = %+v, want the bytes kept and the warning in _meta", got)
	}
}

// TestResultSum: the loop guard compares results by what the model sees;
// toolgate's own _meta does not count.
func TestResultSum(t *testing.T) {
	base := text("ok")
	tests := []struct {
		name  string
		res   *executors.Result
		err   error
		alike bool // hashes as base does
	}{
		{"the same", text("ok"), nil, true},
		{"other meta", &executors.Result{Content: base.Content, Meta: map[string]any{executors.AttemptsMetaKey: 2}}, nil, true},
		{"other text", text("ko"), nil, false},
		{"text split otherwise", &executors.Result{Content: []executors.Content{{Type: executors.TextContent, Text: "o"}, {Type: executors.TextContent, Text: "k"}}}, nil, false},
		{"an image", &executors.Result{Content: []executors.Content{{Type: executors.ImageContent, Data: []byte("ok"), MIMEType: "image/png"}}}, nil, false},
		{"an error result", &executors.Result{Content: base.Content, IsError: true}, nil, false},
		{"structured", &executors.Result{Content: base.Content, Structured: map[string]any{"n": 1}}, nil, false},
		{"passthrough", &executors.Result{Passthrough: json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`)}, nil, false},
		{"an error", nil, errors.New("ok"), false},
		{"nothing", nil, nil, false},
	}
	want := ResultSum(base, nil)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ResultSum(tc.res, tc.err); (got == want) != tc.alike {
				t.Errorf("ResultSum(%+v, %v) == ResultSum(%+v): %v, want %v", tc.res, tc.err, base, got == want, tc.alike)
			}
		})
	}
	s1 := ResultSum(&executors.Result{Structured: map[string]any{"a": 1, "b": 2}}, nil)
	if s2 := ResultSum(&executors.Result{Structured: map[string]any{"b": 2, "a": 1}}, nil); s1 != s2 {
		t.Error("one structured value hashes unlike twice")
	}
}

// BenchmarkResultSum is the loop guard's hash of a typical result, made
// for every call in a tracked thread.
func BenchmarkResultSum(b *testing.B) {
	r := text("hello world, some result text")
	b.ReportAllocs()
	for b.Loop() {
		ResultSum(r, nil)
	}
}
