package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/config"
)

// TestHandleForwarded checks that a thread handle lives on the replica
// that minted it: a 2026-07-28 call passing it runs there whichever
// replica it reaches, its state intact; when that replica is gone the call
// runs in a new thread, and the model is told the state is lost and given
// the new handle (not "unknown thread handle", which says the model
// erred).
func TestHandleForwarded(t *testing.T) {
	srvs := map[string]*httptest.Server{"r1": httptest.NewUnstartedServer(nil), "r2": httptest.NewUnstartedServer(nil)}
	peers := map[string]string{}
	for id, s := range srvs {
		peers[id] = s.Listener.Addr().String()
	}
	for id, s := range srvs {
		g, _ := newGateway(t, func(c *config.Config) {
			c.Cluster = &config.Cluster{ReplicaID: id, Secret: strings.Repeat("k", 32), Peers: peers}
		})
		s.Config.Handler = g.Handler()
		s.Start()
		t.Cleanup(s.Close)
	}
	call := func(via, handle string) string {
		t.Helper()
		args := "{}"
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srvs[via].URL+"/mcp", nil)
		if handle != "" {
			args = `{"thread":"` + handle + `"}`
			req.Header.Set("Mcp-Param-Toolgate-Thread", handle)
		}
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"counter","arguments":` + args +
			`,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`
		req.Body = io.NopCloser(strings.NewReader(body))
		req.ContentLength = int64(len(body))
		for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
			"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "counter"} {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	handleIn := regexp.MustCompile(`"toolgate/thread_handle":"(th_[a-z0-9-]+\.[A-Za-z0-9_-]+)"`)
	first := call("r1", "")
	m := handleIn.FindStringSubmatch(first)
	if m == nil || !strings.HasPrefix(m[1], "th_r1.") || !strings.Contains(first, `\"n\":1`) {
		t.Fatalf("a handle-less call on r1: %s; want n 1 and a handle naming r1", first)
	}
	handle := m[1]
	for i, via := range []string{"r2", "r1", "r2"} {
		if got := call(via, handle); !strings.Contains(got, `\"n\":`+string(rune('2'+i))) {
			t.Fatalf("call %d with r1's handle via %s: %s; want the thread's count to go on", i+2, via, got)
		}
	}
	srvs["r1"].CloseClientConnections()
	srvs["r1"].Close()
	lost := call("r2", handle)
	m = handleIn.FindStringSubmatch(lost)
	if !strings.Contains(lost, "replica r1, which cannot be reached") || m == nil || !strings.HasPrefix(m[1], "th_r2.") || !strings.Contains(lost, `\"n\":1`) {
		t.Errorf("a call with r1's handle, r1 gone, via r2: %s; want a new thread on r2 (n 1, its handle) and the loss told", lost)
	}
}
