package mcpfront

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/gateway/internal/continuation"
	"github.com/toolgate/toolgate/gateway/internal/forward"
	"github.com/toolgate/toolgate/gateway/internal/replica"
	"github.com/toolgate/toolgate/registry"
)

const testClusterSecret = "0123456789abcdef0123456789abcdef"

// clusterOf starts the fronts of replicas ids, each with peers on the
// others and a tool "where" answering the ID of the replica it ran on,
// and returns their MCP URLs by ID.
func clusterOf(t *testing.T, ids ...string) map[string]*httptest.Server {
	t.Helper()
	srvs := map[string]*httptest.Server{}
	addrs := map[string]string{}
	for _, id := range ids {
		srvs[id] = httptest.NewUnstartedServer(nil)
		addrs[id] = srvs[id].Listener.Addr().String()
	}
	for _, id := range ids {
		f := New(&fakeBackend{reg: registry.New()}, Options{Name: "toolgate", Version: "test", MCPPath: "/mcp",
			MaxSessions: 100, MaxBodyBytes: 1 << 20, ReadTimeout: 10 * time.Second,
			Replica: replica.Member(id, testClusterSecret, ""), Peers: forward.New(id, addrs)})
		t.Cleanup(f.Close)
		f.SetTools([]Tool{{Def: &registry.Tool{Name: "where", Source: "test"}, Call: func(context.Context, *Request) *executors.Result {
			return new(executors.Text(id))
		}}, {Def: &registry.Tool{Name: "ask", Source: "test"}, Call: func(ctx context.Context, req *Request) *executors.Result {
			res, err := req.Peer.Request(ctx, "roots/list", nil)
			return new(executors.Text(fmt.Sprintf("%s: %s %v", id, res, err)))
		}}}, nil)
		mux := http.NewServeMux()
		f.Mount(mux)
		srvs[id].Config.Handler = mux
		srvs[id].Start()
		t.Cleanup(srvs[id].Close)
	}
	return srvs
}

// post POSTs body to url in session sid (none when ""), with extra
// headers, and returns the status, the Mcp-Session-Id answered and the
// body.
func post(t *testing.T, url, sid, body string, hdr ...string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(b)
}

const (
	initBody  = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	whereBody = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"where","arguments":{}}}`
)

// TestSessionForwarded checks that a session lives on the replica that
// opened it, whichever replica a request in it reaches: its ID names that
// replica, a call sent to another runs on it, once (a forwarded request
// is not forwarded again), and when that replica is gone the session is
// too: 404, the spec's signal to initialize again.
func TestSessionForwarded(t *testing.T) {
	srvs := clusterOf(t, "r1", "r2")
	code, sid, body := post(t, srvs["r1"].URL, "", initBody)
	if code != http.StatusOK || !strings.HasPrefix(sid, sessionIDPrefix+"r1.") {
		t.Fatalf("initialize on r1: %d, session %q: %s", code, sid, body)
	}
	post(t, srvs["r1"].URL, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for _, via := range []string{"r1", "r2"} {
		if code, _, body := post(t, srvs[via].URL, sid, whereBody); code != http.StatusOK || !strings.Contains(body, `"text":"r1"`) {
			t.Errorf("a call in r1's session sent to %s: %d %s; want it run on r1", via, code, body)
		}
	}
	if code, _, _ := post(t, srvs["r2"].URL, sid, whereBody, forward.Header, "r3"); code != http.StatusNotFound {
		t.Errorf("a forwarded request for r1's session reaching r2: %d; want 404, not forwarded again", code)
	}
	srvs["r1"].CloseClientConnections()
	srvs["r1"].Close()
	if code, _, body := post(t, srvs["r2"].URL, sid, whereBody); code != http.StatusNotFound || !strings.Contains(body, "initialize again") {
		t.Errorf("a call in the session of r1, gone, sent to r2: %d %s; want 404 asking to initialize again", code, body)
	}
}

// TestRetryForwarded checks that a 2026-07-28 call waiting for its
// client's answers is continued on the replica that holds it, whichever
// replica the retry reaches; when that replica is gone the retry gets
// -32602 telling the client to call the tool again.
func TestRetryForwarded(t *testing.T) {
	srvs := clusterOf(t, "r1", "r2")
	meta := mrtrMeta(`{"roots":{}}`)
	status, first := postCall(t, srvs["r1"].URL, "", `"arguments":{},`+meta)
	st := first.Result.RequestState
	if status != http.StatusOK || first.Result.ResultType != "input_required" || !strings.HasPrefix(st, continuation.StatePrefix+"r1.") {
		t.Fatalf("first answer from r1: %d %+v; want input_required with r1's requestState", status, first)
	}
	answer := `"inputResponses":{"roots-1":{"roots":[{"uri":"file:///x"}]}},"requestState":"` + st + `",`
	status, done := postCall(t, srvs["r2"].URL, "", `"arguments":{},`+answer+meta)
	if status != http.StatusOK || len(done.Result.Content) != 1 || !strings.HasPrefix(done.Result.Content[0].Text, "r1: ") || !strings.Contains(done.Result.Content[0].Text, "file:///x") {
		t.Fatalf("the retry sent to r2: %d %+v; want r1's call to finish with the answer", status, done)
	}
	status, first = postCall(t, srvs["r1"].URL, "", `"arguments":{},`+meta)
	st = first.Result.RequestState
	srvs["r1"].CloseClientConnections()
	srvs["r1"].Close()
	answer = `"inputResponses":{"roots-1":{"roots":[]}},"requestState":"` + st + `",`
	status, lost := postCall(t, srvs["r2"].URL, "", `"arguments":{},`+answer+meta)
	if status != http.StatusBadRequest || lost.Error == nil || lost.Error.Code != mcp.INVALID_PARAMS || !strings.Contains(lost.Error.Message, "call the tool again") {
		t.Errorf("a retry for r1, gone, sent to r2: %d %+v; want 400, -32602 asking to call the tool again", status, lost.Error)
	}
}

// TestThreadForwarded checks that a 2026-07-28 call naming a thread in
// _meta runs on the one replica that owns that thread of its principal,
// whichever replica it reaches, that the threads spread over the
// replicas, and that while the owner is gone the call runs where it
// arrived.
func TestThreadForwarded(t *testing.T) {
	srvs := clusterOf(t, "r1", "r2", "r3")
	call := func(via, thread string) (int, string) {
		params := `"arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{},"toolgate/thread":"` + thread + `"}`
		status, _, body := postModern(t, srvs[via].URL+"/mcp", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"where",`+params+`}}`,
			map[string]string{mcp.HeaderMethod: "tools/call", mcp.HeaderName: "where"})
		for _, id := range []string{"r1", "r2", "r3"} {
			if strings.Contains(string(body), `"text":"`+id+`"`) {
				return status, id
			}
		}
		return status, string(body)
	}
	owners := map[string]bool{}
	ownerOf := map[string]string{}
	for i := range 12 {
		thread := fmt.Sprintf("notes-%d", i)
		for _, via := range []string{"r1", "r2", "r3"} {
			status, ran := call(via, thread)
			if status != http.StatusOK || (ownerOf[thread] != "" && ran != ownerOf[thread]) {
				t.Fatalf("thread %s via %s: %d, ran on %s; earlier calls ran on %s", thread, via, status, ran, ownerOf[thread])
			}
			ownerOf[thread] = ran
		}
		owners[ownerOf[thread]] = true
	}
	if len(owners) < 2 {
		t.Errorf("12 threads all owned by %v: rendezvous hashing spreads none", owners)
	}
	var lost, thread string
	for th, o := range ownerOf {
		if o != "r1" {
			lost, thread = o, th
			break
		}
	}
	srvs[lost].CloseClientConnections()
	srvs[lost].Close()
	if status, ran := call("r1", thread); status != http.StatusOK || ran != "r1" {
		t.Errorf("thread %s of %s, gone, via r1: %d, ran on %s; want it run on r1", thread, lost, status, ran)
	}
}
