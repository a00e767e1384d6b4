package continuation

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/gateway/internal/replica"
	"github.com/toolgate/toolgate/internal/canonjson"
)

// retryWith is the multi-round-trip params of a retry answering key.
func retryWith(t *testing.T, state, key, answer string) mcp.MultiRoundTripParams {
	t.Helper()
	var p mcp.MultiRoundTripParams
	raw := `{"requestState":` + mustQuote(state) + `,"inputResponses":{` + mustQuote(key) + `:` + answer + `}}`
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func mustQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// A sealed question ends its call: nothing waits for the retry (no
// continuation counted, the call's goroutine done), its requestState
// names no replica, and another replica of the cluster opens it and gets
// the answer; another principal, other arguments, an altered or expired
// state, another cluster and a missing answer are refused, each saying
// what to do.
func TestSealedQuestion(t *testing.T) {
	const secret = "0123456789abcdef0123456789abcdef"
	r1 := New(replica.Member("r1", secret, ""))
	root, cancel := context.WithCancel(context.Background())
	defer r1.Close(cancel)
	bind := Binding{Method: "tools/call", Name: "t", Args: canonjson.RawSum(json.RawMessage(`{"a":1}`))}
	ran := make(chan error, 1)
	c, _ := r1.Start(t.Context(), root, "alice", bind, func(ctx context.Context, c *Continuation) Outcome {
		err := c.AskSealed(mcp.NewElicitationInputRequest(mcp.ElicitationParams{Message: "run it again?"}))
		ran <- err
		return Outcome{Res: "denied, unseen", Err: nil}
	})
	res, in, err := c.Await(t.Context())
	if err != nil || res != nil || in == nil || len(in.InputRequests) != 1 || !strings.HasPrefix(in.RequestState, StatePrefix+AnyReplica+".") {
		t.Fatalf("Await = %v, %+v, %v; want an input_required with a state for any replica", res, in, err)
	}
	if err := <-ran; !IsSealed(err) {
		t.Errorf("AskSealed returned %v, want the sealed error", err)
	}
	if n := r1.Len(); n != 0 {
		t.Errorf("%d continuations wait for the retry of a sealed question, want 0", n)
	}
	var key string
	for k := range in.InputRequests {
		key = k
	}
	answer := `{"action":"accept","content":{"decision":"allow_once"}}`

	r2 := New(replica.Member("r2", secret, ""))
	got, sealed, err := r2.OpenSealed("alice", bind, retryWith(t, in.RequestState, key, answer))
	if err != nil || !sealed {
		t.Fatalf("r2 opening r1's sealed question: %v, %v", sealed, err)
	}
	var a struct{ Action string }
	if json.Unmarshal(got, &a) != nil || a.Action != "accept" {
		t.Errorf("the answer = %s", got)
	}

	other := bind
	other.Args = canonjson.RawSum(json.RawMessage(`{"a":2}`))
	expired := New(replica.Member("r1", secret, ""))
	expired.Limits.Wait = -time.Second
	ce, _ := expired.Start(t.Context(), root, "alice", bind, func(ctx context.Context, c *Continuation) Outcome {
		return Outcome{Err: c.AskSealed(mcp.NewElicitationInputRequest(mcp.ElicitationParams{Message: "?"}))}
	})
	_, old, _ := ce.Await(t.Context())
	defer expired.Close(func() {})
	for name, tc := range map[string]struct {
		r     *Registry
		who   string
		bind  Binding
		state string
		key   string
		want  string
	}{
		"another principal": {r2, "bob", bind, in.RequestState, key, "not one this toolgate issued"},
		"other arguments":   {r2, "alice", other, in.RequestState, key, "another call"},
		"altered":           {r2, "alice", bind, in.RequestState[:len(in.RequestState)-2] + "AA", key, "not one this toolgate issued"},
		"another cluster":   {New(replica.Member("r1", "fedcba9876543210fedcba9876543210", "")), "alice", bind, in.RequestState, key, "not one this toolgate issued"},
		"no answer":         {r2, "alice", bind, in.RequestState, "other", "no answer"},
		"expired":           {r2, "alice", bind, old.RequestState, key, "expired"},
	} {
		_, sealed, err := tc.r.OpenSealed(tc.who, tc.bind, retryWith(t, tc.state, tc.key, answer))
		if !sealed || err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: sealed %v, %v; want refused, saying %q", name, sealed, err, tc.want)
		}
	}
	// A continuation's state is not a sealed question's: Resume has it.
	if _, sealed, err := r2.OpenSealed("alice", bind, retryWith(t, StatePrefix+"r1.AAAA", key, answer)); sealed || err != nil {
		t.Errorf("a continuation's state: sealed %v, %v", sealed, err)
	}
}
