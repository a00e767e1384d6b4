package tests

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
)

// corsPage initializes a session with toolgate at the MCP URL it is given
// (%q), lists the tools and writes their names into #tools, or the error
// into #error. Cross-origin: it is served from another port. The body's
// data-done marks the end either way.
const corsPage = `<!doctype html>
<html><head><meta charset="utf-8"><title>cors</title></head>
<body><ul id="tools"></ul><p id="error"></p>
<script>
const mcp = %q;
async function rpc(msg, sid) {
  const headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"};
  if (sid) { headers["Mcp-Session-Id"] = sid; headers["Mcp-Protocol-Version"] = "2025-06-18"; }
  const resp = await fetch(mcp, {method: "POST", headers, body: JSON.stringify(msg)});
  if (!resp.ok && resp.status !== 202) throw new Error("HTTP " + resp.status + ": " + await resp.text());
  const text = await resp.text();
  if (!text) return {resp};
  // JSON, or an SSE stream whose last data line is the answer.
  const data = text.split("\n").filter(l => l.startsWith("data:")).map(l => l.slice(5));
  return {resp, body: JSON.parse(data.length ? data[data.length - 1] : text)};
}
(async () => {
  try {
    const init = await rpc({jsonrpc: "2.0", id: 1, method: "initialize",
      params: {protocolVersion: "2025-06-18", capabilities: {}, clientInfo: {name: "page", version: "1"}}});
    const sid = init.resp.headers.get("Mcp-Session-Id");
    if (!sid) throw new Error("no readable Mcp-Session-Id");
    await rpc({jsonrpc: "2.0", method: "notifications/initialized"}, sid);
    const list = await rpc({jsonrpc: "2.0", id: 2, method: "tools/list"}, sid);
    for (const tool of list.body.result.tools) {
      const li = document.createElement("li");
      li.className = "tool";
      li.textContent = tool.name;
      document.getElementById("tools").appendChild(li);
    }
  } catch (e) {
    document.getElementById("error").textContent = String(e);
  }
  document.body.dataset.done = "yes";
})();
</script></body></html>
`

// TestBrowserCORS loads a page from one origin in headless Chromium that
// lists toolgate's tools through fetch against a `toolgate serve` on
// another: with the page's origin in server.allowed_origins the names
// appear; without it the browser gets none.
func TestBrowserCORS(t *testing.T) {
	chromium := chromiumPath(t)
	var mcpURL atomic.Pointer[string] // set once toolgate listens, before the page loads
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, corsPage, *mcpURL.Load())
	}))
	defer page.Close()

	for _, tc := range []struct {
		name    string
		origins string
		want    bool
	}{
		{"allowed", fmt.Sprintf("[%q]", page.URL), true},
		{"not allowed", "[]", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startServe(t, fmt.Sprintf("server:\n  allowed_origins: %s\nbuiltin: [calc, clock_now]\n", tc.origins))
			u := srv.URL + "/mcp"
			mcpURL.Store(&u)

			ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
			defer cancel()
			var dom, stderr bytes.Buffer
			cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
				"--dump-dom", page.URL+"/")
			cmd.Stdout, cmd.Stderr = &dom, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("chromium --dump-dom: %v\n%s", err, stderr.String())
			}
			got := dom.String()
			if !strings.Contains(got, `data-done="yes"`) {
				t.Fatalf("the page's script did not finish; page:\n%s", got)
			}
			listed := strings.Contains(got, `<li class="tool">calc</li>`) && strings.Contains(got, `<li class="tool">clock_now</li>`)
			if listed != tc.want || !tc.want && !strings.Contains(got, "Failed to fetch") {
				t.Errorf("page origin %s, server.allowed_origins %s: tools listed = %v, want %v; page:\n%s",
					page.URL, tc.origins, listed, tc.want, got)
			}
		})
	}
}
