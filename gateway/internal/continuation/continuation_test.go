package continuation

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/toolgate/toolgate/gateway/internal/replica"
	"github.com/toolgate/toolgate/internal/canonjson"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A call that asks its client something waits for the retry that answers
// it; the requestState is refused to another principal, for other
// arguments and once used, and taken for the same arguments spelt
// otherwise.
func TestResume(t *testing.T) {
	r := New(replica.Alone())
	root, cancel := context.WithCancel(context.Background())
	defer r.Close(cancel)
	ctx := t.Context()
	bind := Binding{Method: "tools/call", Name: "t", Args: canonjson.RawSum(json.RawMessage(`{"a":1,"b":[2]}`))}
	c, ok := r.Start(ctx, root, "alice", bind, func(ctx context.Context, c *Continuation) Outcome {
		raw, err := c.Ask(ctx, mcp.NewElicitationInputRequest(mcp.ElicitationParams{Message: "go on?"}))
		return Outcome{Res: string(raw), Err: err}
	})
	if !ok {
		t.Fatal("Start refused")
	}
	_, in, err := c.Await(ctx)
	if err != nil || in == nil || len(in.InputRequests) != 1 || !strings.HasPrefix(in.RequestState, StatePrefix+r.Instance()+".") {
		t.Fatalf("first answer: %v, %v", in, err)
	}
	var key string
	for k := range in.InputRequests {
		key = k
	}
	answers := map[string]json.RawMessage{key: json.RawMessage(`{"action":"accept"}`)}
	other := bind
	other.Args = canonjson.RawSum(json.RawMessage(`{"a":2}`))
	for _, tc := range []struct {
		name, who, state string
		bind             Binding
		answers          map[string]json.RawMessage
	}{
		{"another principal", "bob", in.RequestState, bind, answers},
		{"other arguments", "alice", in.RequestState, other, answers},
		{"no answer", "alice", in.RequestState, bind, nil},
		{"forged", "alice", in.RequestState[:len(in.RequestState)-2] + "AA", bind, answers},
		{"another instance", "alice", StatePrefix + "0000000000000000." + strings.SplitN(in.RequestState, ".", 3)[2], bind, answers},
	} {
		if _, err := r.Resume(tc.who, tc.bind, tc.state, tc.answers, true); err == nil {
			t.Errorf("%s: the retry was taken", tc.name)
		}
	}
	spelt := bind
	spelt.Args = canonjson.RawSum(json.RawMessage(` { "b" : [ 2 ] , "a" : 1.0 } `))
	c2, err := r.Resume("alice", spelt, in.RequestState, answers, true)
	if err != nil {
		t.Fatalf("the retry: %v", err)
	}
	res, in2, err := c2.Await(ctx)
	if err != nil || in2 != nil || res != `{"action":"accept"}` {
		t.Fatalf("after the retry: %v, %v, %v; want the client's answer", res, in2, err)
	}
	if _, err := r.Resume("alice", bind, in.RequestState, answers, true); err == nil {
		t.Error("a used requestState was taken again")
	}
	if n := r.Len(); n != 0 {
		t.Errorf("%d continuations wait after the result", n)
	}
}

// TestStateAcrossReplicas checks what lets replicas share requestStates:
// a replica of the same cluster (or one rotating from its secret) opens
// another's requestState and learns which replica holds the call, while
// refusing to continue it itself; another cluster's, another principal's
// or an altered one opens nowhere.
func TestStateAcrossReplicas(t *testing.T) {
	const secret, next = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	r1 := New(replica.Member("r1", secret, ""))
	root, cancel := context.WithCancel(context.Background())
	defer r1.Close(cancel)
	bind := Binding{Method: "tools/call", Name: "t"}
	c, _ := r1.Start(t.Context(), root, "alice", bind, func(ctx context.Context, c *Continuation) Outcome {
		raw, err := c.Ask(ctx, mcp.NewElicitationInputRequest(mcp.ElicitationParams{Message: "go on?"}))
		return Outcome{Res: string(raw), Err: err}
	})
	_, in, err := c.Await(t.Context())
	if err != nil || in == nil || !strings.HasPrefix(in.RequestState, StatePrefix+"r1.") {
		t.Fatalf("first answer: %v, %v", in, err)
	}
	state := in.RequestState
	r2, rotated := New(replica.Member("r2", secret, "")), New(replica.Member("r3", next, secret))
	for _, r := range []*Registry{r1, r2, rotated} {
		if owner, err := r.Owner("alice", state); owner != "r1" || err != nil {
			t.Errorf("replica %s: owner %q, %v; want r1", r.Instance(), owner, err)
		}
	}
	if _, err := r2.Resume("alice", bind, state, nil, false); err == nil || !strings.Contains(err.Error(), "another replica") {
		t.Errorf("r2 continued r1's call, or said %v", err)
	}
	for name, tc := range map[string]struct {
		r          *Registry
		who, state string
	}{
		"another cluster":   {New(replica.Member("r1", next, "")), "alice", state},
		"another principal": {r2, "bob", state},
		"renamed owner":     {r2, "alice", strings.Replace(state, ".r1.", ".r2.", 1)},
		"a lone toolgate":   {New(replica.Alone()), "alice", state},
	} {
		if owner, err := tc.r.Owner(tc.who, tc.state); err == nil {
			t.Errorf("%s: opened, owner %q", name, owner)
		}
	}
}
