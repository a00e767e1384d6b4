package continuation

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/toolgate/toolgate/internal/canonjson"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A call that asks its client something waits for the retry that answers
// it; the requestState is refused to another principal, for other
// arguments and once used, and taken for the same arguments spelt
// otherwise.
func TestResume(t *testing.T) {
	r := New()
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
