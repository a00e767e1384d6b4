package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/gateway/internal/loopstep"
	"github.com/toolgate/toolgate/internal/loopguard/loopguardtest"
	"github.com/toolgate/toolgate/registry"
)

// loopGateway returns a gateway with the loop guard set by lg and a tool
// "rep" (any arguments) and "other" that count their runs.
func loopGateway(t *testing.T, lg config.LoopGuard) (g *Gateway, runs *atomic.Int64) {
	t.Helper()
	return loopGatewayWith(t, func(c *config.Config) { c.Guards.Loop = lg })
}

// loopGatewayWith is loopGateway with the configuration mutate makes.
func loopGatewayWith(t *testing.T, mutate func(*config.Config)) (g *Gateway, runs *atomic.Int64) {
	t.Helper()
	g, _ = newGateway(t, mutate)
	runs = new(atomic.Int64)
	for _, name := range []string{"rep", "other"} {
		err := g.RegisterStateless(registry.Tool{Name: name}, func(context.Context, map[string]any) (executors.Result, error) {
			runs.Add(1)
			return executors.Text("ran"), nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return g, runs
}

// loopStep is one call of a loop guard test: tool, raw arguments, and
// whether it must run (else it must be blocked).
type loopStep struct {
	tool, args string
	runs       bool
}

// sameArgs spells one arguments object four ways: key order, spacing and
// number spelling differ.
var sameArgs = []string{
	`{"q":"x","n":1,"o":{"a":[1,2],"b":true}}`,
	`{"o":{"b":true,"a":[1.0,2e0]},"n":1.0,"q":"x"}`,
	` { "n" : 1e0 , "q" : "x" , "o" : { "a" : [ 10e-1 , 0.2e1 ] , "b" : true } } `,
	`{"n":100e-2,"o":{"a":[1,2],"b":true},"q":"x"}`,
}

func TestLoopGuard(t *testing.T) {
	block := config.LoopGuard{Threshold: 3, Action: config.LoopBlock}
	tests := []struct {
		name  string
		lg    config.LoopGuard
		calls []loopStep
	}{
		{"block after threshold, reordered keys and 1 vs 1.0", block, []loopStep{
			{"rep", sameArgs[0], true}, {"rep", sameArgs[1], true}, {"rep", sameArgs[2], true},
			{"rep", sameArgs[3], false}, {"rep", sameArgs[0], false},
		}},
		{"absent, null and {} arguments are the same", block, []loopStep{
			{"rep", ``, true}, {"rep", `null`, true}, {"rep", `{}`, true}, {"rep", ` { } `, false},
		}},
		{"a different call resets the streak", block, []loopStep{
			{"rep", `{"n":1}`, true}, {"rep", `{"n":1}`, true}, {"rep", `{"n":1}`, true},
			{"other", `{"n":1}`, true},
			{"rep", `{"n":1}`, true}, {"rep", `{"n":1}`, true}, {"rep", `{"n":1}`, true}, {"rep", `{"n":1}`, false},
		}},
		{"different arguments reset the streak", block, []loopStep{
			{"rep", `{"n":1}`, true}, {"rep", `{"n":1}`, true}, {"rep", `{"n":1}`, true},
			{"rep", `{"n":2}`, true}, {"rep", `{"n":1}`, true},
			{"rep", `{"n":10000000000000000000001}`, true}, {"rep", `{"n":10000000000000000000000}`, true},
		}},
		{"threshold 1", config.LoopGuard{Threshold: 1, Action: config.LoopBlock}, []loopStep{
			{"rep", `{}`, true}, {"rep", `{}`, false}, {"other", `{}`, true}, {"rep", `{}`, true},
		}},
		{"off", config.LoopGuard{Threshold: 1, Action: config.LoopOff}, []loopStep{
			{"rep", `{}`, true}, {"rep", `{}`, true}, {"rep", `{}`, true},
		}},
		{"per-tool off", config.LoopGuard{Threshold: 1, Action: config.LoopBlock, Tools: map[string]config.LoopAction{"rep": config.LoopOff}}, []loopStep{
			{"rep", `{}`, true}, {"rep", `{}`, true}, {"other", `{}`, true}, {"other", `{}`, false},
		}},
		{"per-tool block", config.LoopGuard{Threshold: 1, Action: config.LoopOff, Tools: map[string]config.LoopAction{"rep": config.LoopBlock}}, []loopStep{
			{"other", `{}`, true}, {"other", `{}`, true}, {"rep", `{}`, true}, {"rep", `{}`, false},
		}},
		{"ask without elicitation blocks", config.LoopGuard{Threshold: 2, Action: config.LoopAsk}, []loopStep{
			{"rep", `{}`, true}, {"rep", `{}`, true}, {"rep", `{}`, false},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, runs := loopGateway(t, tc.lg)
			meta := map[string]any{ThreadMetaKey: "loop"}
			for i, lc := range tc.calls {
				before := runs.Load()
				res, err := g.Call(t.Context(), lc.tool, json.RawMessage(lc.args), meta)
				if err != nil {
					t.Fatalf("call %d: Call(%s, %s) error %v", i+1, lc.tool, lc.args, err)
				}
				ran := runs.Load() > before
				switch {
				case ran != lc.runs:
					t.Fatalf("call %d: Call(%s, %s) ran = %v, want %v; result %q", i+1, lc.tool, lc.args, ran, lc.runs, resultText(t, res))
				case lc.runs && res.IsError:
					t.Fatalf("call %d: Call(%s, %s) = %q, want success", i+1, lc.tool, lc.args, resultText(t, res))
				case !lc.runs:
					wantBlocked(t, res, lc.tool)
				}
			}
		})
	}
}

// TestLoopGuardPolling runs the loop guard's scenarios (loopguardtest):
// the same call returning another result each time is polling, not a
// loop; the guard acts on the call after threshold identical calls in a
// row that returned one result.
func TestLoopGuardPolling(t *testing.T) {
	for _, sc := range loopguardtest.Scenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			g, _ := newGateway(t, func(c *config.Config) {
				c.Guards.Loop = config.LoopGuard{Threshold: sc.Threshold, Action: config.LoopBlock}
			})
			var runs atomic.Int64
			err := g.RegisterStateless(registry.Tool{Name: "status"}, func(context.Context, map[string]any) (executors.Result, error) {
				text, failed := loopguardtest.Answer(sc.Answers[runs.Add(1)-1])
				if failed {
					return executors.Result{}, errors.New(text)
				}
				return executors.Text(text), nil
			})
			if err != nil {
				t.Fatal(err)
			}
			meta := map[string]any{ThreadMetaKey: "poll"}
			for i, wantRun := range sc.Runs {
				before := runs.Load()
				res, err := g.Call(t.Context(), "status", json.RawMessage(`{}`), meta)
				if err != nil {
					t.Fatalf("call %d: Call(status, {}) error %v", i+1, err)
				}
				if ran := runs.Load() > before; ran != wantRun {
					t.Fatalf("call %d: Call(status, {}) ran = %v, want %v; result %q", i+1, ran, wantRun, resultText(t, res))
				}
				if !wantRun {
					wantBlocked(t, res, "status")
				}
			}
		})
	}
}

func wantBlocked(t *testing.T, res *Result, tool string) {
	t.Helper()
	text := resultText(t, res)
	if !res.IsError || errorClass(res) != "validation" || !strings.HasPrefix(text, "validation: loop guard: this is call ") ||
		!strings.Contains(text, fmt.Sprintf("in a row of tool %q", tool)) || !strings.Contains(text, "change your approach") {
		t.Fatalf("blocked call = %q (isError %v, class %q), want a validation error naming %q and the count", text, res.IsError, errorClass(res), tool)
	}
}

func TestLoopGuardWarn(t *testing.T) {
	g, runs := loopGateway(t, config.LoopGuard{Threshold: 2, Action: config.LoopWarn})
	meta := map[string]any{ThreadMetaKey: "loop"}
	for i := 1; i <= 4; i++ {
		res, err := g.Call(t.Context(), "rep", json.RawMessage(sameArgs[i-1]), meta)
		if err != nil || res.IsError {
			t.Fatalf("call %d = %v, %v; want success", i, res, err)
		}
		want := []Content{{Type: executors.TextContent, Text: "ran"}}
		if i > 2 {
			want = append(want, Content{Type: executors.TextContent, Text: "toolgate " + loopstep.Notice(g.loops, "rep", i)})
		}
		if diff := cmp.Diff(want, res.Content); diff != "" {
			t.Fatalf("call %d content mismatch (-want +got):\n%s", i, diff)
		}
	}
	if got := runs.Load(); got != 4 {
		t.Errorf("runs = %d, want 4 (warn runs every call)", got)
	}
}

// TestLoopWarningPassthrough: the step's warning on an upstream's result
// as it sent it: decoded into parts with the warning appended, an error's
// class kept under [ErrorClassMetaKey] once its JSON goes, and the bytes
// kept with the warning under [LoopWarningMetaKey] when they cannot be
// read.
func TestLoopWarningPassthrough(t *testing.T) {
	g, _ := loopGateway(t, config.LoopGuard{Threshold: 1, Action: config.LoopWarn})
	for _, tc := range []struct{ name, raw string }{
		{"a result", `{"content":[{"type":"text","text":"up"}],"isError":false}`},
		{"an error", `{"content":[{"type":"text","text":"gone"}],"isError":true,"_meta":{"toolgate/error_class":"not_found"}}`},
		{"unreadable", `not json`},
	} {
		up := &Result{Passthrough: json.RawMessage(tc.raw), Meta: map[string]any{"k": "v"}}
		h := g.guard(func(context.Context, *Call) (*Result, error) { return up, nil })
		c := &Call{Tool: &registry.Tool{Name: "rep"}, Thread: "t-" + tc.name, Raw: json.RawMessage(`{}`)}
		_, _ = h(t.Context(), c)
		got, err := h(t.Context(), c)
		if err != nil {
			t.Fatal(err)
		}
		notice := "toolgate " + loopstep.Notice(g.loops, "rep", 2)
		switch tc.name {
		case "unreadable":
			if string(got.Passthrough) != tc.raw || got.Meta[LoopWarningMetaKey] != notice[len("toolgate "):] {
				t.Errorf("%s: warned = %+v, want the bytes kept and the warning in _meta", tc.name, got)
			}
			continue
		case "an error":
			if !got.IsError || got.Meta[ErrorClassMetaKey] != "not_found" || resultClass(got) != "not_found" {
				t.Errorf("%s: warned = %+v, want class not_found kept", tc.name, got)
			}
		}
		if got.Passthrough != nil || len(got.Content) != 2 || got.Content[1].Text != notice || got.Meta["k"] != "v" {
			t.Errorf("%s: warned = %+v, want the upstream's content decoded with the warning appended", tc.name, got)
		}
		if string(up.Passthrough) != tc.raw {
			t.Errorf("%s: the warning changed the upstream's result", tc.name)
		}
	}
}

func TestLoopGuardThreads(t *testing.T) {
	g, runs := loopGateway(t, config.LoopGuard{Threshold: 2, Action: config.LoopBlock})
	call := func(meta map[string]any) *Result {
		t.Helper()
		res, err := g.Call(t.Context(), "rep", json.RawMessage(`{}`), meta)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	a, b := map[string]any{ThreadMetaKey: "a"}, map[string]any{ThreadMetaKey: "b"}
	call(a)
	call(a)
	call(b)
	call(b)
	for range 5 {
		if res := call(nil); res.IsError { // one-call threads: never a streak
			t.Fatalf("a call in a one-call thread = %q, want success", resultText(t, res))
		}
	}
	wantBlocked(t, call(a), "rep")
	wantBlocked(t, call(b), "rep")
	if got := runs.Load(); got != 9 {
		t.Errorf("runs = %d, want 9", got)
	}
	if got := g.loops.Len(); got != 2 {
		t.Errorf("threads tracked = %d, want 2 (one-call threads are not)", got)
	}
}

func TestLoopGuardConcurrent(t *testing.T) {
	const n = 20
	g, runs := loopGateway(t, config.LoopGuard{Threshold: 5, Action: config.LoopBlock})
	meta := map[string]any{ThreadMetaKey: "c"}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if _, err := g.Call(t.Context(), "rep", json.RawMessage(`{"a":1}`), meta); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := runs.Load(); got != 5 {
		t.Errorf("%d concurrent identical calls ran %d, want the threshold, 5", n, got)
	}
}

// fakeUser answers elicitation requests with the queued answers and
// counts the questions.
type fakeUser struct {
	mu      sync.Mutex // guards answers and asked
	answers []mcp.ElicitationResult
	asked   int
	last    mcp.ElicitationRequest
}

func (u *fakeUser) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.asked++
	u.last = req
	if len(u.answers) == 0 {
		return nil, fmt.Errorf("fakeUser: no answer queued")
	}
	a := u.answers[0]
	u.answers = u.answers[1:]
	return &a, nil
}

func (u *fakeUser) queue(as ...mcp.ElicitationResult) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.answers = append(u.answers, as...)
}

// checkStep checks one step of an ask test: whether the tool ran, the
// loop guard's error when it did not, and how many questions u has been
// asked in all.
func (u *fakeUser) checkStep(t *testing.T, name string, ran bool, res *mcp.CallToolResult, runs bool, asked int) {
	t.Helper()
	if ran != runs {
		t.Fatalf("%s: ran = %v, want %v; result %q", name, ran, runs, mcpText(res))
	}
	if !runs && (!res.IsError || !strings.HasPrefix(mcpText(res), "validation: loop guard: ")) {
		t.Fatalf("%s: result %q (isError %v), want the loop guard's validation error", name, mcpText(res), res.IsError)
	}
	if got := u.questions(); got != asked {
		t.Fatalf("%s: questions asked = %d, want %d", name, got, asked)
	}
}

func (u *fakeUser) questions() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.asked
}

func decision(d string) mcp.ElicitationResult {
	return mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"decision": d}}}
}

func elicitingClient(ctx context.Context, t *testing.T, url string, u client.ElicitationHandler) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url)
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20251125), client.WithElicitationHandler(u))
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	init.Params.ClientInfo = mcp.Implementation{Name: "test", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestLoopGuardAsk(t *testing.T) {
	g, runs := loopGateway(t, config.LoopGuard{Threshold: 2, Action: config.LoopAsk})
	srv := serveHTTP(t, g)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	u := &fakeUser{}
	c := elicitingClient(ctx, t, srv.URL+"/mcp", u)
	plain := streamableClient(ctx, t, srv.URL+"/mcp") // declares no elicitation
	t.Cleanup(func() { plain.Close() })

	call := func(c *client.Client, args map[string]any) (ran bool, res *mcp.CallToolResult) {
		t.Helper()
		before := runs.Load()
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = "rep", args
		res, err := c.CallTool(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return runs.Load() > before, res
	}
	steps := []struct {
		name   string
		client *client.Client
		args   map[string]any
		answer *mcp.ElicitationResult
		runs   bool
		asked  int // questions so far
	}{
		{"first", c, map[string]any{"a": 1}, nil, true, 0},
		{"second", c, map[string]any{"a": 1.0}, nil, true, 0},
		{"third, allowed once", c, map[string]any{"a": 1}, new(decision(loopstep.AllowOnce)), true, 1},
		{"fourth, asked again, denied", c, map[string]any{"a": 1}, new(decision(loopstep.Deny)), false, 2},
		{"declined", c, map[string]any{"a": 1}, &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionDecline}}, false, 3},
		{"cancelled", c, map[string]any{"a": 1}, &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionCancel}}, false, 4},
		{"an unknown decision", c, map[string]any{"a": 1}, new(decision("maybe")), false, 5},
		{"the client fails", c, map[string]any{"a": 1}, nil, false, 6},
		{"allowed always", c, map[string]any{"a": 1}, new(decision(loopstep.AllowAlways)), true, 7},
		{"no more questions", c, map[string]any{"a": 1}, nil, true, 7},
		{"still none", c, map[string]any{"a": 1.0}, nil, true, 7},
		{"other arguments", c, map[string]any{"a": 2}, nil, true, 7},
		{"other arguments again", c, map[string]any{"a": 2}, nil, true, 7},
		{"other arguments are asked about", c, map[string]any{"a": 2}, new(decision(loopstep.Deny)), false, 8},
		{"back to the allowed call", c, map[string]any{"a": 1}, nil, true, 8},
		{"and its streak", c, map[string]any{"a": 1}, nil, true, 8},
		{"past its threshold, still allowed", c, map[string]any{"a": 1}, nil, true, 8},
		{"no elicitation: first", plain, map[string]any{}, nil, true, 8},
		{"no elicitation: second", plain, map[string]any{}, nil, true, 8},
		{"no elicitation: blocked", plain, map[string]any{}, nil, false, 8},
	}
	for _, s := range steps {
		if s.answer != nil {
			u.queue(*s.answer)
		}
		ran, res := call(s.client, s.args)
		u.checkStep(t, s.name, ran, res, s.runs, s.asked)
	}
	u.mu.Lock()
	last := u.last
	u.mu.Unlock()
	enum := fmt.Sprint(last.Params.RequestedSchema.(map[string]any)["properties"].(map[string]any)["decision"].(map[string]any)["enum"])
	if !strings.Contains(last.Params.Message, `"rep"`) || enum != "[allow_once allow_always deny]" {
		t.Errorf("the question = %q with decision enum %s, want the tool named and three choices", last.Params.Message, enum)
	}

	// The session's state goes with the session.
	if got := g.loops.Len(); got != 2 {
		t.Fatalf("threads tracked = %d, want 2", got)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got := g.loops.Len(); got != 1 {
		t.Errorf("threads tracked after a session ended = %d, want 1", got)
	}
}

// TestLoopGuardAsk2026: a 2026-07-28 client, which has no session, is
// asked the loop guard's question through an input_required result
// (mcpfront's multi-round-trip requests), which mcp-go's client answers
// with its elicitation handler and retries; a 2026-07-28 client that
// declared no elicitation is not asked, and the call is blocked. The
// calls name a _meta thread: a sessionless call in a one-call thread is
// not tracked.
func TestLoopGuardAsk2026(t *testing.T) {
	g, runs := loopGateway(t, config.LoopGuard{Threshold: 1, Action: config.LoopAsk})
	srv := serveHTTP(t, g)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	connect := func(opts ...client.ClientOption) *client.Client {
		tr, err := transport.NewStreamableHTTP(srv.URL + "/mcp")
		if err != nil {
			t.Fatal(err)
		}
		c := client.NewClient(tr, opts...)
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil || c.ProtocolVersion() != mcp.ProtocolVersion20260728 {
			t.Fatalf("negotiating: %v, %q", err, c.ProtocolVersion())
		}
		return c
	}
	u := &fakeUser{}
	c := connect(client.WithElicitationHandler(u))
	plain := connect()
	call := func(c *client.Client, thread string) (ran bool, res *mcp.CallToolResult) {
		t.Helper()
		before := runs.Load()
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = "rep", map[string]any{"a": 1}
		req.Params.Meta = &mcp.Meta{AdditionalFields: map[string]any{"toolgate/thread": thread}}
		res, err := c.CallTool(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return runs.Load() > before, res
	}
	for _, s := range []struct {
		name   string
		client *client.Client
		thread string
		answer *mcp.ElicitationResult
		runs   bool
		asked  int
	}{
		{"first", c, "t-2026", nil, true, 0},
		{"repeated, allowed once", c, "t-2026", new(decision(loopstep.AllowOnce)), true, 1},
		{"repeated, denied", c, "t-2026", new(decision(loopstep.Deny)), false, 2},
		{"no elicitation: first", plain, "t-plain", nil, true, 2},
		{"no elicitation: blocked", plain, "t-plain", nil, false, 2},
	} {
		if s.answer != nil {
			u.queue(*s.answer)
		}
		ran, res := call(s.client, s.thread)
		u.checkStep(t, s.name, ran, res, s.runs, s.asked)
	}
}
