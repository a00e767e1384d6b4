package tests

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
)

// aliceAndBob is an auth section with two principals, alice and bob,
// whose tokens are alice-token-0123456789abcdef and
// bob-token-0123456789abcdef.
const aliceAndBob = `auth:
  tokens:
    - name: alice
      token: alice-token-0123456789abcdef
    - name: bob
      token: bob-token-0123456789abcdef
`

// askByHand sends a 2026-07-28 tools/call of tool (no arguments) with
// token, declaring elicitation, extra inserted before its _meta (a retry's
// inputResponses and requestState), and returns the status and reply.
func askByHand(t *testing.T, base, tool, token, extra string) (int, mrtrReply) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"` + tool + `","arguments":{},` + extra +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}}`
	r := postRaw(t, newHTTPClient(), base+"/mcp", []byte(body), http.Header{"Authorization": {"Bearer " + token},
		"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {tool}})
	b := r.Body
	if i := bytes.LastIndex(b, []byte("data: ")); i >= 0 {
		b = b[i+len("data: "):]
	}
	var reply mrtrReply
	if err := json.Unmarshal(bytes.TrimSpace(b), &reply); err != nil {
		t.Fatalf("reading %d %s: %v", r.Status, r.Body, err)
	}
	return r.Status, reply
}

// TestPendingInputRequiredHoldsOnlyItsCall (issue 26, requirement 7): on
// a shared stdio upstream (server-everything), alice's call waits for her
// answer to its elicitation (input_required, left unanswered), and bob's
// elicitation of the same upstream still reaches bob, whose client
// answers it; then alice answers and her call completes with her answer.
// Before, bob's call got -32603 "calls of several clients are in flight"
// for as long as alice's waited.
func TestPendingInputRequiredHoldsOnlyItsCall(t *testing.T) {
	m := newProcMarker(t)
	srv := serveUpstreams(t, m, aliceAndBob+"upstreams:\n"+everythingUpstream(t, m))
	const tool = "ev__trigger-elicitation-request"
	bob := connect2026(t, srv, map[string]string{"Authorization": "Bearer bob-token-0123456789abcdef"}, client.WithElicitationHandler(formFiller{}))
	waitTools(t, bob, tool)

	status, first := askByHand(t, srv.URL, tool, "alice-token-0123456789abcdef", "")
	if status != http.StatusOK || first.Result.ResultType != "input_required" || len(first.Result.InputRequests) != 1 {
		t.Fatalf("alice's call: %d %+v; want input_required with one request", status, first)
	}

	res := mustCall(t, bob, tool, map[string]any{}, "")
	if res.IsError || !strings.Contains(resultText(res), "Ada Lovelace") {
		t.Errorf("bob's call while alice's waits = %q (isError %v); want his client's answer in it", resultText(res), res.IsError)
	}

	var key string
	for k := range first.Result.InputRequests {
		key = k
	}
	status, done := askByHand(t, srv.URL, tool, "alice-token-0123456789abcdef",
		`"inputResponses":{"`+key+`":{"action":"accept","content":{"name":"Grace Hopper"}}},"requestState":"`+first.Result.RequestState+`",`)
	var text strings.Builder
	for _, part := range done.Result.Content {
		text.WriteString(part.Text)
	}
	if status != http.StatusOK || done.Result.ResultType != "complete" || !strings.Contains(text.String(), "Grace Hopper") ||
		strings.Contains(text.String(), "Ada Lovelace") {
		t.Errorf("alice's answer: %d %+v; want her call's result with her answer, not bob's", status, done)
	}
}
