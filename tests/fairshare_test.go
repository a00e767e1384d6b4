package tests

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// fairShareAuth is the auth section of the fair-share tests: alice and
// bob, and ops, an admin who reads /metrics.
const fairShareAuth = `auth:
  tokens:
    - {name: alice, token: alice-token-0123456789abcdef}
    - {name: bob, token: bob-token-0123456789abcdef}
    - {name: ops, token: ops-token-0123456789abcdef}
  admins: [ops]
`

// waitQueueLength waits until toolgate_queue_length is want, reading
// /metrics as ops.
func waitQueueLength(t *testing.T, srv *server, want float64) {
	t.Helper()
	pollUntil(t, pollTimeout, "the calls waiting for a slot", func() (bool, string) {
		got := metricOrZero(scrapeWith(t, srv.URL, "ops-token-0123456789abcdef"), "toolgate_queue_length", nil)
		return got == want, fmt.Sprintf("toolgate_queue_length = %v, want %v", got, want)
	})
}

// TestFairShareAdmitsAnotherPrincipal (issue 31, item 1): alice keeps
// more sleep calls in flight than there are call slots; she runs her share
// (defaults.max_parallel_per_principal) and the rest of hers wait on it,
// so bob's calc is admitted at once while hers are queued. Before the
// share her calls took every slot, and bob's waited for one of them to
// end (58.6 s in the red team's run).
func TestFairShareAdmitsAnotherPrincipal(t *testing.T) {
	srv := startServe(t, `
builtin: [calc, sleep]
defaults:
  max_parallel: 4
  max_parallel_per_session: 4
  max_parallel_per_principal: 2
`+fairShareAuth)
	alice, err := authClient(t, srv, "alice-token-0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	bob, err := authClient(t, srv, "bob-token-0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	flood, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop()
	for i := range 4 {
		wg.Go(func() {
			var req mcp.CallToolRequest
			req.Params.Name = "sleep"
			req.Params.Arguments = map[string]any{"ms": 60000 - i} // unlike each other: no loop guard
			_, _ = alice.CallTool(flood, req)                      // ended by stop
		})
	}
	waitQueueLength(t, srv, 2) // two of alice's run, two wait on her share
	res := mustCall(t, bob, "calc", map[string]any{"expression": "6*7"}, "")
	if res.IsError || resultText(res) != "42" {
		t.Errorf("bob's calc while alice's calls wait = %q (isError %v), want 42", resultText(res), res.IsError)
	}
	if got := metricOrZero(scrapeWith(t, srv.URL, "ops-token-0123456789abcdef"), "toolgate_queue_length", nil); got != 2 {
		t.Errorf("after bob's call, toolgate_queue_length = %v, want alice's 2 still waiting", got)
	}
}

// TestFairShareParkedCallHoldsNoSlot (issue 31, item 1): a 2026-07-28 call whose
// upstream asked its client something (an input_required result the
// client never answers) gives its slot back while it waits for the
// retry. With one slot in all, alice's unanswered elicitation leaves it
// to bob's calc; before, the calc waited until the continuation expired.
func TestFairShareParkedCallHoldsNoSlot(t *testing.T) {
	m := newProcMarker(t)
	srv := serveUpstreams(t, m, "builtin: [calc]\ndefaults: {max_parallel: 1, max_parallel_per_session: 1}\n"+aliceAndBob+"upstreams:\n"+everythingUpstream(t, m))
	bob, err := authClient(t, srv, "bob-token-0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	waitTools(t, bob, "calc", "ev__trigger-elicitation-request")
	status, first := askByHand(t, srv.URL, "ev__trigger-elicitation-request", "alice-token-0123456789abcdef", "")
	if status != http.StatusOK || first.Result.ResultType != "input_required" {
		t.Fatalf("alice's call: %d %+v, want input_required", status, first)
	}
	res := mustCall(t, bob, "calc", map[string]any{"expression": "6*7"}, "")
	if res.IsError || resultText(res) != "42" {
		t.Errorf("bob's calc while alice's call waits for her answer = %q (isError %v), want 42", resultText(res), res.IsError)
	}
	// Her answer resumes the call, which takes a slot again and ends.
	var key string
	for k := range first.Result.InputRequests {
		key = k
	}
	status, done := askByHand(t, srv.URL, "ev__trigger-elicitation-request", "alice-token-0123456789abcdef",
		`"inputResponses":{"`+key+`":{"action":"decline"}},"requestState":"`+first.Result.RequestState+`",`)
	if status != http.StatusOK || done.Result.ResultType != "complete" {
		t.Errorf("alice's retry: %d %+v, want the call's result", status, done)
	}
}
