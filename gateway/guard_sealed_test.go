package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/gateway/internal/loopstep"
)

// post2026 sends a 2026-07-28 tools/call of rep in the _meta thread "t"
// from a client that declared elicitation, with extra params (a retry's
// requestState and inputResponses), and returns the result.
func post2026(t *testing.T, url, extra string) map[string]any {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"rep","arguments":{"a":1}` + extra +
		`,"_meta":{"toolgate/thread":"t","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}}`
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "rep")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if i := bytes.Index(b, []byte("data: ")); i >= 0 { // an event stream's one message
		b = bytes.TrimSpace(b[i+len("data: "):])
	}
	var m struct {
		Result map[string]any
		Error  map[string]any
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("HTTP %d %s: %v", resp.StatusCode, b, err)
	}
	if m.Error != nil {
		return map[string]any{"error": m.Error["message"]}
	}
	return m.Result
}

// TestLoopGuardAskSealed is issue 26's "the loop guard's ask needs no live
// state": asked of a 2026-07-28 client, the question goes out sealed in a
// requestState that names no replica, the call ends (no continuation
// waits for the retry), and the retry with the answer runs on the replica
// that asked or on another one of its cluster, which was never told.
func TestLoopGuardAskSealed(t *testing.T) {
	cluster := func(id string) func(*config.Config) {
		return func(c *config.Config) {
			c.Guards.Loop = config.LoopGuard{Threshold: 1, Action: config.LoopAsk}
			c.Cluster = &config.Cluster{ReplicaID: id, Secret: "0123456789abcdef0123456789abcdef-sealed"}
		}
	}
	g1, runs := loopGatewayWith(t, cluster("r1"))
	g2, runs2 := loopGatewayWith(t, cluster("r2"))
	s1, s2 := serveHTTP(t, g1), serveHTTP(t, g2)

	if res := post2026(t, s1.URL, ""); res["resultType"] == "input_required" {
		t.Fatalf("the first call was asked about: %v", res)
	}
	asked := func() (state string) {
		t.Helper()
		before := runs.Load()
		res := post2026(t, s1.URL, "")
		state, _ = res["requestState"].(string)
		reqs, _ := res["inputRequests"].(map[string]any)
		if res["resultType"] != "input_required" || !strings.HasPrefix(state, "tg1.any.") || reqs["toolgate-question"] == nil {
			t.Fatalf("the repeated call = %v; want input_required with a sealed requestState (tg1.any.) asking toolgate-question", res)
		}
		if runs.Load() != before || g1.front.Waiting() != 0 {
			t.Fatalf("the asked call ran, or %d calls wait for their retry; want neither", g1.front.Waiting())
		}
		return state
	}
	retry := func(state, decision string) string {
		ans, _ := json.Marshal(map[string]any{"toolgate-question": map[string]any{"action": "accept", "content": map[string]any{"decision": decision}}})
		st, _ := json.Marshal(state)
		return `,"requestState":` + string(st) + `,"inputResponses":` + string(ans)
	}
	ran := func(url, extra string) bool {
		t.Helper()
		runs := runs
		if url == s2.URL {
			runs = runs2
		}
		before := runs.Load()
		res := post2026(t, url, extra)
		if res["error"] != nil || res["resultType"] == "input_required" {
			t.Fatalf("the retry = %v", res)
		}
		return runs.Load() > before
	}

	if !ran(s1.URL, retry(asked(), loopstep.AllowOnce)) {
		t.Error("allowed once on the replica that asked: the call did not run")
	}
	if ran(s1.URL, retry(asked(), loopstep.Deny)) {
		t.Error("denied: the call ran")
	}
	if !ran(s2.URL, retry(asked(), loopstep.AllowOnce)) {
		t.Error("allowed once, retried on another replica: the call did not run")
	}
	altered := strings.Replace(retry(asked(), loopstep.AllowOnce), `"requestState":"tg1.any.`, `"requestState":"tg1.any.A`, 1)
	if res := post2026(t, s2.URL, altered); res["error"] == nil {
		t.Errorf("an altered sealed requestState was taken: %v", res)
	}
}
