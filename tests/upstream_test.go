package tests

// End-to-end tests of upstream MCP servers behind the toolgate binary: the
// real npm servers (server-everything over stdio and streamable HTTP,
// server-filesystem, server-memory) and a small Go server of our own
// (testdata/fakeupstream) for runtime tool registration and cancellation.
//
// Every stdio upstream of a test gets an environment entry unique to the
// test (a procMarker), so that its processes can be found in /proc: to
// kill one, to count per-thread processes, and to check that none is left
// once toolgate has exited.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/internal/syncbuf"
)

// Bounds of the upstream tests.
const (
	upstreamTimeout = 30 * time.Second // for an upstream's tools to appear, or for it to come back
	fastFail        = 5 * time.Second  // an unavailable or cancelled call returns within this
)

// everythingTools are the server-everything tools the tests rely on (its
// unconditional ones; the rest depend on the client's capabilities).
var everythingTools = []string{"echo", "get-sum", "get-tiny-image", "get-structured-content", "get-annotated-message", "get-env", "trigger-long-running-operation"}

func TestUpstreamEverything(t *testing.T) {
	entry := npmEntry(t, "server-everything")
	direct := startDirect(t, "node", entry, "stdio")
	// In toolgate's environment, but not for its stdio upstreams.
	t.Setenv("TG_E2E_SECRET", "s3cret-of-another-tool")
	tests := []struct {
		name string
		// upstream returns the upstreams: entry of ev, given the test's
		// marker and a fresh directory.
		upstream func(t *testing.T, m procMarker, dir string) string
		stdio    bool
	}{
		{
			name: "stdio",
			upstream: func(t *testing.T, m procMarker, dir string) string {
				return fmt.Sprintf("  - name: ev\n    transport: stdio\n    command: node\n    args: [%q, stdio]\n    cwd: %q\n    env: %s\n", entry, dir, m.yaml())
			},
			stdio: true,
		},
		{
			name: "streamable-http",
			upstream: func(t *testing.T, m procMarker, dir string) string {
				url := startEverythingHTTP(t, entry)
				return fmt.Sprintf("  - name: ev\n    transport: streamable-http\n    url: %q\n", url)
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newProcMarker(t)
			dir := t.TempDir()
			srv := serveUpstreams(t, m, "upstreams:\n"+tc.upstream(t, m, dir))
			c := connect(t, streamableHTTP, srv)
			var want []string
			for _, name := range everythingTools {
				want = append(want, "ev__"+name)
			}
			waitTools(t, c, want...)

			raw := openRawSession(t, srv.URL)
			t.Run("schemas imported raw", func(t *testing.T) {
				viaGate := toolsByName(t, rawRPC(t, raw))
				upstream := toolsByName(t, direct.rpc(t))
				echo := viaGate["ev__echo"]
				if s, _ := echo["inputSchema"].(map[string]any); s == nil || s["$schema"] == nil {
					t.Errorf("ev__echo inputSchema = %v, want the upstream's $schema kept", echo["inputSchema"])
				}
				for name, tool := range viaGate {
					orig, ok := strings.CutPrefix(name, "ev__")
					if !ok {
						t.Errorf("tools/list has %q, want only ev__ tools", name)
						continue
					}
					up, ok := upstream[orig]
					if !ok {
						t.Errorf("tools/list has %q; the upstream itself lists no %q", name, orig)
						continue
					}
					for _, key := range []string{"inputSchema", "outputSchema", "description", "annotations"} {
						if diff := cmp.Diff(up[key], tool[key]); diff != "" {
							t.Errorf("%s %s differs from the upstream's %s (-upstream +toolgate):\n%s", name, key, orig, diff)
						}
					}
				}
			})

			t.Run("results pass through unchanged", func(t *testing.T) {
				calls := []struct {
					tool string
					args map[string]any
				}{
					{"echo", map[string]any{"message": "through toolgate"}},
					{"get-sum", map[string]any{"a": 2, "b": 3.5}},
					{"get-tiny-image", map[string]any{}},
					{"get-structured-content", map[string]any{"location": "Chicago"}},
					{"get-annotated-message", map[string]any{"messageType": "error", "includeImage": true}},
				}
				gate, up := rawRPC(t, raw), direct.rpc(t)
				for _, call := range calls {
					want := decodeJSON(t, up("tools/call", map[string]any{"name": call.tool, "arguments": call.args}))
					got := decodeJSON(t, gate("tools/call", map[string]any{"name": "ev__" + call.tool, "arguments": call.args}))
					if diff := cmp.Diff(want, got); diff != "" {
						t.Errorf("ev__%s %v result differs from the upstream's (-upstream +toolgate):\n%s", call.tool, call.args, diff)
					}
				}
			})

			t.Run("calls", func(t *testing.T) {
				wantOK(t, mustCall(t, c, "ev__echo", map[string]any{"message": "hello"}, ""), "Echo: hello")
				if res := mustCall(t, c, "ev__get-sum", map[string]any{"a": 2, "b": 3}, ""); res.IsError || !strings.Contains(resultText(res), "5") {
					t.Errorf("ev__get-sum 2 3 = %q (isError %v), want the sum 5", resultText(res), res.IsError)
				}
				res := mustCall(t, c, "ev__get-tiny-image", map[string]any{}, "")
				var images []mcp.ImageContent
				for _, ct := range res.Content {
					if img, ok := ct.(mcp.ImageContent); ok {
						images = append(images, img)
					}
				}
				if len(images) != 1 || images[0].MIMEType != "image/png" || images[0].Data == "" {
					t.Errorf("ev__get-tiny-image content = %+v, want one image/png image with data", res.Content)
				}
				res = mustCall(t, c, "ev__get-structured-content", map[string]any{"location": "Chicago"}, "")
				if got := structured(t, res); got["conditions"] == nil || got["temperature"] == nil {
					t.Errorf("ev__get-structured-content structuredContent = %v, want the weather", got)
				}
				// The upstream's own schema is enforced (a string for a number).
				if res := mustCall(t, c, "ev__get-sum", map[string]any{"a": "two", "b": 1}, ""); !res.IsError {
					t.Errorf("ev__get-sum a=\"two\" = %q, want an error result", resultText(res))
				}
			})

			t.Run("progress", func(t *testing.T) {
				progress := collect(c, string(mcp.MethodNotificationProgress))
				req := callRequest("ev__trigger-long-running-operation", map[string]any{"duration": 0.6, "steps": 3}, "")
				req.Params.Meta = &mcp.Meta{ProgressToken: "p1"}
				ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
				defer cancel()
				res, err := c.CallTool(ctx, req)
				if err != nil || res.IsError {
					t.Fatalf("ev__trigger-long-running-operation = %v, %v", res, err)
				}
				var steps []float64
				for len(progress) > 0 {
					n := <-progress
					if tok := n.Params.AdditionalFields["progressToken"]; tok != "p1" {
						t.Errorf("progress notification with token %v, want the client's p1", tok)
						continue
					}
					p, _ := n.Params.AdditionalFields["progress"].(float64)
					steps = append(steps, p)
				}
				if len(steps) < 2 || !slices.IsSorted(steps) {
					t.Errorf("progress values received = %v, want at least 2, increasing", steps)
				}
			})

			if !tc.stdio {
				return
			}
			t.Run("env and cwd", func(t *testing.T) {
				if got := resultText(mustCall(t, c, "ev__get-env", map[string]any{}, "")); !strings.Contains(got, fmt.Sprintf("%q: %q", m.name, m.value)) {
					t.Errorf("ev__get-env does not show %s=%s from the config's env", m.name, m.value)
				}
				if got := resultText(mustCall(t, c, "ev__get-env", map[string]any{}, "")); strings.Contains(got, "TG_E2E_SECRET") || !strings.Contains(got, `"PATH"`) {
					t.Errorf("ev__get-env shows TG_E2E_SECRET of toolgate's environment, or no PATH (inherit_env is false):\n%s", got)
				}
				pids := m.pids(t)
				if len(pids) != 1 {
					t.Fatalf("found %d upstream processes, want 1", len(pids))
				}
				if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pids[0])); err != nil || cwd != dir {
					t.Errorf("upstream working directory = %q, %v, want the config's cwd %q", cwd, err, dir)
				}
			})
		})
	}
}

func TestUpstreamCancellation(t *testing.T) {
	fake := buildFakeUpstream(t)
	m := newProcMarker(t)
	srv := serveUpstreams(t, m, "upstreams:\n"+everythingUpstream(t, m)+fmt.Sprintf(`  - name: fake
    transport: stdio
    command: %q
    env: %s
`, fake, m.yaml()))

	// Over stdio the client sends notifications/cancelled; over streamable
	// HTTP it abandons the request's stream.
	for _, tr := range []string{streamableHTTP, stdioPipe} {
		t.Run(tr, func(t *testing.T) {
			c := connect(t, tr, srv)
			progress := collect(c, string(mcp.MethodNotificationProgress))
			waitTools(t, c, "ev__trigger-long-running-operation", "ev__echo", "fake__wait", "fake__cancellations")
			before := fakeCancellations(t, c)

			tests := []struct {
				name string
				tool string
				args map[string]any
			}{
				{"everything long-running operation", "ev__trigger-long-running-operation", map[string]any{"duration": 30, "steps": 60}},
				{"fake wait", "fake__wait", map[string]any{"seconds": 30}},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					ctx, cancel := context.WithCancel(t.Context())
					defer cancel()
					token := "cancel-" + tc.tool
					req := callRequest(tc.tool, tc.args, "")
					req.Params.Meta = &mcp.Meta{ProgressToken: token}
					done := make(chan error, 1)
					start := time.Now()
					go func() {
						_, err := c.CallTool(ctx, req)
						done <- err
					}()
					waitProgress(t, progress, token, done)
					cancel()
					cancelled := time.Now()
					select {
					case err := <-done:
						if err == nil {
							t.Errorf("%s returned a result after its context was cancelled, want an error", tc.tool)
						}
						if d := time.Since(cancelled); d > fastFail {
							t.Errorf("%s returned %v after the cancellation, want within %v", tc.tool, d, fastFail)
						}
						if d := time.Since(start); d > 10*time.Second {
							t.Errorf("%s took %v in all, want well under its 30 s", tc.tool, d)
						}
					case <-time.After(callTimeout):
						t.Fatalf("%s still running %v after the cancellation", tc.tool, callTimeout)
					}
				})
			}

			// The cancellation reached the upstream: the fake's handler saw
			// its context end.
			pollUntil(t, fastFail*2, "fake__cancellations to count the cancelled wait", func() (bool, string) {
				n := fakeCancellations(t, c)
				return n == before+1, fmt.Sprintf("fake__cancellations = %d, want %d", n, before+1)
			})
			// Both upstreams, and toolgate, keep serving.
			wantOK(t, mustCall(t, c, "ev__echo", map[string]any{"message": "still here"}, ""), "Echo: still here")
			wantOK(t, mustCall(t, c, "fake__wait", map[string]any{"seconds": 0.05}, ""), "waited")
		})
	}
}

func TestUpstreamFilesystem(t *testing.T) {
	entry := npmEntry(t, "server-filesystem")
	m := newProcMarker(t)
	dir := t.TempDir()
	hello := filepath.Join(dir, "hello.txt")
	if err := os.WriteFile(hello, []byte("hello from the e2e test\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fsUpstream := func(name, filters string) string {
		return fmt.Sprintf("  - name: %s\n    transport: stdio\n    command: node\n    args: [%q, %q]\n    env: %s\n%s", name, entry, dir, m.yaml(), filters)
	}
	srv := serveUpstreams(t, m, "upstreams:\n"+
		fsUpstream("fs", "")+
		fsUpstream("fsnw", "    exclude: [\"write_*\"]\n")+
		fsUpstream("fsro", "    include: [\"read_*\", \"list_*\"]\n    exclude: [\"read_media_file\", \"list_allowed_*\"]\n"))
	c := connect(t, streamableHTTP, srv)
	tools := waitTools(t, c, "fs__read_text_file", "fsnw__read_text_file", "fsro__read_text_file")

	t.Run("filters", func(t *testing.T) {
		// The tools of the pinned server-filesystem.
		all := []string{"create_directory", "directory_tree", "edit_file", "get_file_info", "list_allowed_directories",
			"list_directory", "list_directory_with_sizes", "move_file", "read_file", "read_media_file",
			"read_multiple_files", "read_text_file", "search_files", "write_file"}
		tests := []struct {
			upstream string
			want     []string
		}{
			{"fs", all},
			{"fsnw", slices.DeleteFunc(slices.Clone(all), func(s string) bool { return s == "write_file" })},
			{"fsro", []string{"list_directory", "list_directory_with_sizes", "read_file", "read_multiple_files", "read_text_file"}},
		}
		for _, tc := range tests {
			t.Run(tc.upstream, func(t *testing.T) {
				var got []string
				for name := range tools {
					if orig, ok := strings.CutPrefix(name, tc.upstream+"__"); ok {
						got = append(got, orig)
					}
				}
				slices.Sort(got)
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("tools of %s (-want +got):\n%s", tc.upstream, diff)
				}
			})
		}
		if res, err := callTool(t, c, "fsnw__write_file", map[string]any{"path": filepath.Join(dir, "x"), "content": "x"}, ""); err == nil && !res.IsError {
			t.Errorf("fsnw__write_file (excluded) = %q, want it refused", resultText(res))
		}
		if _, err := os.Stat(filepath.Join(dir, "x")); err == nil {
			t.Errorf("an excluded tool wrote %s", filepath.Join(dir, "x"))
		}
	})

	t.Run("calls", func(t *testing.T) {
		written := filepath.Join(dir, "written.txt")
		tests := []struct {
			name     string
			tool     string
			args     map[string]any
			wantText string // a substring of the result's text
			wantErr  bool   // an isError result
		}{
			{"list", "fs__list_directory", map[string]any{"path": dir}, "[FILE] hello.txt", false},
			{"read", "fs__read_text_file", map[string]any{"path": hello}, "hello from the e2e test", false},
			{"read filtered", "fsro__read_text_file", map[string]any{"path": hello}, "hello from the e2e test", false},
			{"write", "fs__write_file", map[string]any{"path": written, "content": "written through toolgate"}, "", false},
			{"read written", "fs__read_text_file", map[string]any{"path": written}, "written through toolgate", false},
			{"outside the directory", "fs__read_text_file", map[string]any{"path": "/etc/hostname"}, "", true},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				res := mustCall(t, c, tc.tool, tc.args, "")
				if res.IsError != tc.wantErr {
					t.Fatalf("%s %v: isError = %v, want %v; text %q", tc.tool, tc.args, res.IsError, tc.wantErr, resultText(res))
				}
				if got := resultText(res); !strings.Contains(got, tc.wantText) {
					t.Errorf("%s %v = %q, want it to contain %q", tc.tool, tc.args, got, tc.wantText)
				}
			})
		}
		if b, err := os.ReadFile(written); err != nil || string(b) != "written through toolgate" {
			t.Errorf("%s = %q, %v, want what fs__write_file wrote", written, b, err)
		}
	})
}

func TestUpstreamUnavailableThenRestarted(t *testing.T) {
	entry := npmEntry(t, "server-everything")
	m := newProcMarker(t)
	// While the gate file exists the upstream's command fails at once, so
	// the upstream stays down for as long as the test needs. ($$ is YAML
	// config for a literal $.)
	gate := filepath.Join(t.TempDir(), "down")
	srv := serveUpstreams(t, m, fmt.Sprintf(`upstreams:
  - name: ev
    transport: stdio
    command: sh
    args: ["-c", 'if [ -e "$$0" ]; then echo upstream held down >&2; exit 3; fi; exec node "$$1" stdio', %q, %q]
    env: %s
`, gate, entry, m.yaml()))
	c := connect(t, streamableHTTP, srv)
	waitTools(t, c, "ev__echo")
	up := map[string]string{"upstream": "ev"}
	waitMetric(t, srv.URL, "toolgate_upstream_up", up, 1)
	wantReady(t, srv, "ready", true)
	wantOK(t, mustCall(t, c, "ev__echo", map[string]any{"message": "before"}, ""), "Echo: before")

	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	pids := m.pids(t)
	if len(pids) != 1 {
		t.Fatalf("found %d upstream processes, want 1", len(pids))
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitMetric(t, srv.URL, "toolgate_upstream_up", up, 0)
	for range 2 {
		start := time.Now()
		wantError(t, mustCall(t, c, "ev__echo", map[string]any{"message": "down"}, ""), "unavailable")
		if d := time.Since(start); d > fastFail {
			t.Errorf("the unavailable result took %v, want it within %v", d, fastFail)
		}
	}
	wantReady(t, srv, "degraded", false)
	// The supervisor keeps trying (and failing) to restart it.
	pollUntil(t, upstreamTimeout, "a restart attempt", func() (bool, string) {
		n := metricOrZero(scrape(t, srv.URL), "toolgate_upstream_restarts_total", up)
		return n >= 1, fmt.Sprintf("toolgate_upstream_restarts_total%s = %v, want at least 1", fmtLabels(up), n)
	})

	if err := os.Remove(gate); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, upstreamTimeout, "ev__echo to work again", func() (bool, string) {
		res := mustCall(t, c, "ev__echo", map[string]any{"message": "back"}, "")
		return !res.IsError, fmt.Sprintf("ev__echo = %q (class %q)", resultText(res), errorClass(res))
	})
	wantOK(t, mustCall(t, c, "ev__echo", map[string]any{"message": "back"}, ""), "Echo: back")
	waitMetric(t, srv.URL, "toolgate_upstream_up", up, 1)
	wantReady(t, srv, "ready", true)
	if pids := m.pids(t); len(pids) != 1 {
		t.Errorf("found %d upstream processes after the restart, want 1", len(pids))
	}
}

func TestUpstreamThreadIsolation(t *testing.T) {
	entry := npmEntry(t, "server-memory")
	m := newProcMarker(t)
	// server-memory keeps its graph in the file MEMORY_FILE_PATH names (by
	// default one file inside its package, for every process): each
	// process gets a file in its own directory.
	srv := serveUpstreams(t, m, fmt.Sprintf(`upstreams:
  - name: mem
    transport: stdio
    isolation: thread
    command: node
    args: [%q]
    env: {MEMORY_FILE_PATH: "${TOOLGATE_INSTANCE_DIR}/graph.jsonl", %s: %q}
`, entry, m.name, m.value))
	waitMetric(t, srv.URL, "toolgate_upstream_up", map[string]string{"upstream": "mem"}, 1)
	// The probe that listed the tools is closed; no thread has an instance yet.
	waitProcs(t, m, 0)

	sessions := []struct {
		entity string
		c      *client.Client
	}{{entity: "alpha"}, {entity: "beta"}}
	for i := range sessions {
		s := &sessions[i]
		s.c = connect(t, streamableHTTP, srv)
		waitTools(t, s.c, "mem__create_entities", "mem__read_graph")
		entities := map[string]any{"entities": []any{map[string]any{"name": s.entity, "entityType": "test", "observations": []any{"made by session " + s.entity}}}}
		if res := mustCall(t, s.c, "mem__create_entities", entities, ""); res.IsError {
			t.Fatalf("session %s: mem__create_entities = %q", s.entity, resultText(res))
		}
		waitProcs(t, m, i+1)
	}
	for _, s := range sessions {
		t.Run("graph of "+s.entity, func(t *testing.T) {
			res := mustCall(t, s.c, "mem__read_graph", map[string]any{}, "")
			if res.IsError {
				t.Fatalf("mem__read_graph = %q", resultText(res))
			}
			var graph struct {
				Entities []struct {
					Name string `json:"name"`
				} `json:"entities"`
			}
			if err := json.Unmarshal([]byte(resultText(res)), &graph); err != nil {
				t.Fatalf("mem__read_graph text %q: %v", resultText(res), err)
			}
			var names []string
			for _, e := range graph.Entities {
				names = append(names, e.Name)
			}
			if diff := cmp.Diff([]string{s.entity}, names); diff != "" {
				t.Errorf("session %s sees entities (-want +got):\n%s", s.entity, diff)
			}
		})
	}
	// Ending a session (DELETE) ends its thread's process.
	for i, s := range sessions {
		if err := s.c.Close(); err != nil {
			t.Fatalf("closing session %s: %v", s.entity, err)
		}
		waitProcs(t, m, len(sessions)-i-1)
	}
}

func TestUpstreamRuntimeTool(t *testing.T) {
	fake := buildFakeUpstream(t)
	tests := []struct {
		name    string
		connect func(t *testing.T, srv *server) *client.Client
	}{
		{"streamable-http", connectListening},
		{"stdio", func(t *testing.T, srv *server) *client.Client { return connect(t, stdioPipe, srv) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newProcMarker(t)
			srv := serveUpstreams(t, m, fmt.Sprintf("upstreams:\n  - name: fake\n    transport: stdio\n    command: %q\n    env: %s\n", fake, m.yaml()))
			c := tc.connect(t, srv)
			changed := collect(c, string(mcp.MethodNotificationToolsListChanged))
			tools := waitTools(t, c, "fake__add_tool")
			if _, ok := tools["fake__late"]; ok {
				t.Fatal("fake__late is listed before fake__add_tool added it")
			}
			for len(changed) > 0 {
				<-changed // notifications from the upstream's start
			}
			wantOK(t, mustCall(t, c, "fake__add_tool", map[string]any{}, ""), "added late")

			timer := time.NewTimer(upstreamTimeout)
			defer timer.Stop()
			for {
				select {
				case <-changed:
				case <-timer.C:
					t.Fatalf("no notifications/tools/list_changed listing fake__late within %v", upstreamTimeout)
				}
				if _, ok := listTools(t, c)["fake__late"]; ok {
					break
				}
			}
			wantOK(t, mustCall(t, c, "fake__late", map[string]any{}, ""), "late tool")
		})
	}
}

// npmEntry returns the absolute path of the program (package.json "bin")
// of @modelcontextprotocol/pkg, installed in tests/npm by `make npm-deps`.
// It skips the test when the package is not installed.
func npmEntry(t *testing.T, pkg string) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("npm", "node_modules", "@modelcontextprotocol", pkg))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("@modelcontextprotocol/%s is not installed in tests/npm/node_modules; run `make npm-deps`", pkg)
	}
	if err != nil {
		t.Fatalf("reading %s's package.json: %v", pkg, err)
	}
	var meta struct {
		Bin map[string]string `json:"bin"`
	}
	if err := json.Unmarshal(b, &meta); err != nil || len(meta.Bin) != 1 {
		t.Fatalf("%s's package.json: bin = %v (%v), want one program", pkg, meta.Bin, err)
	}
	var entry string
	for _, p := range meta.Bin {
		entry = filepath.Join(dir, p)
	}
	return entry
}

// procMarker is an environment entry, unique to one test, given to the
// test's stdio upstreams so that their processes can be found in /proc.
type procMarker struct{ name, value string }

func newProcMarker(t *testing.T) procMarker {
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, t.Name())
	return procMarker{name: "TG_E2E_UPSTREAM", value: fmt.Sprintf("%s_%016x", name, time.Now().UnixNano())}
}

// yaml returns an env: mapping that sets the marker.
func (m procMarker) yaml() string { return fmt.Sprintf("{%s: %q}", m.name, m.value) }

// pids returns the processes that carry the marker.
func (m procMarker) pids(t *testing.T) []int {
	t.Helper()
	return pidsWithEnv(t, m.name+"="+m.value+"\x00")
}

// waitProcs waits (at most pollTimeout) until exactly n processes carry m.
func waitProcs(t *testing.T, m procMarker, n int) {
	t.Helper()
	pollUntil(t, pollTimeout, fmt.Sprintf("%d upstream processes", n), func() (bool, string) {
		pids := m.pids(t)
		return len(pids) == n, fmt.Sprintf("upstream processes %v, want %d", pids, n)
	})
}

// everythingUpstream is the upstreams: entry of ev, server-everything over
// stdio, its processes marked by m.
func everythingUpstream(t *testing.T, m procMarker) string {
	t.Helper()
	return fmt.Sprintf("  - name: ev\n    transport: stdio\n    command: node\n    args: [%q, stdio]\n    env: %s\n",
		npmEntry(t, "server-everything"), m.yaml())
}

// serveUpstreams is startServe for a config whose stdio upstreams carry m.
// Once the test's clients are closed, it stops the server and checks that
// no process carrying m remains (toolgate reaps its children on SIGTERM).
func serveUpstreams(t *testing.T, m procMarker, yaml string) *server {
	t.Helper()
	// The tests poll with identical calls: no loop guard.
	srv := startServe(t, "guards: {loop: {action: \"off\"}}\n"+yaml)
	// Cleanups run last-registered first: after the clients' (registered
	// later), before startServe's, which checks the exit code.
	t.Cleanup(func() {
		srv.Stop(t)
		if left := m.pids(t); len(left) > 0 {
			t.Errorf("upstream processes %v outlived toolgate serve", left)
		}
	})
	return srv
}

// pollUntil calls check every pollInterval until it reports done, failing
// with its last message after d.
func pollUntil(t *testing.T, d time.Duration, what string, check func() (done bool, msg string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		done, msg := check()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s: %s", d, what, msg)
		}
		select {
		case <-tick.C:
		case <-t.Context().Done():
			t.Fatalf("waiting for %s: %v", what, t.Context().Err())
		}
	}
}

// listTools returns every tool c lists, by name.
func listTools(t *testing.T, c *client.Client) map[string]mcp.Tool {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	tools := map[string]mcp.Tool{}
	req := mcp.ListToolsRequest{}
	for {
		res, err := c.ListTools(ctx, req)
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		for _, tl := range res.Tools {
			tools[tl.Name] = tl
		}
		if res.NextCursor == "" {
			return tools
		}
		req.Params.Cursor = res.NextCursor
	}
}

// waitTools lists c's tools until every name in want is among them (the
// upstreams connect in the background), failing after upstreamTimeout.
func waitTools(t *testing.T, c *client.Client, want ...string) map[string]mcp.Tool {
	t.Helper()
	var tools map[string]mcp.Tool
	pollUntil(t, upstreamTimeout, "the upstreams' tools", func() (bool, string) {
		tools = listTools(t, c)
		var missing []string
		for _, name := range want {
			if _, ok := tools[name]; !ok {
				missing = append(missing, name)
			}
		}
		return len(missing) == 0, fmt.Sprintf("tools/list lacks %v; it has %v", missing, slices.Sorted(maps.Keys(tools)))
	})
	return tools
}

// collect returns a channel that receives the notifications of method that
// c gets. It never blocks c's reader: past 1024 unread, notifications are
// dropped.
func collect(c *client.Client, method string) <-chan mcp.JSONRPCNotification {
	ch := make(chan mcp.JSONRPCNotification, 1024)
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == method {
			select {
			case ch <- n:
			default:
			}
		}
	})
	return ch
}

// waitProgress waits for a progress notification with token, failing if
// the call ends first (done) or none comes within callTimeout.
func waitProgress(t *testing.T, progress <-chan mcp.JSONRPCNotification, token string, done <-chan error) {
	t.Helper()
	timer := time.NewTimer(callTimeout)
	defer timer.Stop()
	for {
		select {
		case n := <-progress:
			if n.Params.AdditionalFields["progressToken"] == token {
				return
			}
		case err := <-done:
			t.Fatalf("the call ended (%v) before a progress notification with token %s", err, token)
		case <-timer.C:
			t.Fatalf("no progress notification with token %s within %v", token, callTimeout)
		}
	}
}

// connectListening is connect over streamable HTTP with the client's GET
// stream open, so that it receives notifications outside of requests
// (tools/list_changed).
func connectListening(t *testing.T, srv *server) *client.Client {
	t.Helper()
	c, err := client.NewStreamableHttpClient(srv.URL+"/mcp", transport.WithContinuousListening())
	if err != nil {
		t.Fatalf("creating the streamable HTTP client: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(t.Context()); err != nil {
		t.Fatalf("starting the streamable HTTP client: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = protocolVersion
	req.Params.ClientInfo = mcp.Implementation{Name: "toolgate-e2e-listening", Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return c
}

// fakeCancellations returns the count of the fake upstream's cancellations tool.
func fakeCancellations(t *testing.T, c *client.Client) int {
	t.Helper()
	res := mustCall(t, c, "fake__cancellations", map[string]any{}, "")
	n, err := strconv.Atoi(resultText(res))
	if res.IsError || err != nil {
		t.Fatalf("fake__cancellations = %q (isError %v)", resultText(res), res.IsError)
	}
	return n
}

// wantReady checks /readyz's status and its "ev" upstream entry.
func wantReady(t *testing.T, srv *server, status string, evUp bool) {
	t.Helper()
	code, body := get(t, srv.URL+"/readyz")
	var ready struct {
		Status    string          `json:"status"`
		Upstreams map[string]bool `json:"upstreams"`
	}
	if err := json.Unmarshal([]byte(body), &ready); err != nil {
		t.Fatalf("GET /readyz body %q: %v", body, err)
	}
	if code != http.StatusOK || ready.Status != status || !cmp.Equal(ready.Upstreams, map[string]bool{"ev": evUp}) {
		t.Errorf("GET /readyz = %d %s, want 200 with status %q and upstreams {\"ev\": %v}", code, body, status, evUp)
	}
}

// buildFakeUpstream builds testdata/fakeupstream and returns the binary.
func buildFakeUpstream(t *testing.T) string { return buildTestdata(t, "fakeupstream") }

// buildTestdata builds the program in testdata/name and returns the binary.
func buildTestdata(t *testing.T, name string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	ctx, cancel := context.WithTimeout(t.Context(), 2*callTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "./testdata/"+name).CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./testdata/%s: %v\n%s", name, err, out)
	}
	return bin
}

// rpcFunc sends one JSON-RPC request and returns its result, failing the
// test on a JSON-RPC error.
type rpcFunc func(method string, params any) json.RawMessage

// rawRPC sends requests over a raw toolgate session, so that results are
// seen as they are on the wire.
func rawRPC(t *testing.T, s *rawSession) rpcFunc {
	id := 100
	return func(method string, params any) json.RawMessage {
		t.Helper()
		id++
		body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		if err != nil {
			t.Fatalf("encoding %s: %v", method, err)
		}
		h := s.post(t, body, true)
		if h.Status != http.StatusOK {
			t.Fatalf("%s: HTTP %d; body %s", method, h.Status, h.Body)
		}
		r := h.rpc(t)
		if r.Error != nil {
			t.Fatalf("%s: JSON-RPC error %d %q", method, r.Error.Code, r.Error.Message)
		}
		return r.Result
	}
}

// directServer is an MCP server started by the test itself over stdio,
// without toolgate, to compare toolgate's answers with.
type directServer struct {
	tr  *transport.Stdio
	mu  sync.Mutex
	ids int64
}

// startDirect starts command and initializes it; it is closed in t.Cleanup.
func startDirect(t *testing.T, command string, args ...string) *directServer {
	t.Helper()
	d := &directServer{tr: transport.NewStdio(command, nil, args...)}
	// The process lives as long as Start's context.
	if err := d.tr.Start(t.Context()); err != nil {
		t.Fatalf("starting %s %v: %v", command, args, err)
	}
	t.Cleanup(func() { _ = d.tr.Close() })
	d.rpc(t)("initialize", map[string]any{
		"protocolVersion": protocolVersion,
		// What toolgate declares to its upstreams (it relays these
		// requests to its clients): server-everything lists some tools only
		// to clients that declare them.
		"capabilities": map[string]any{"sampling": map[string]any{}, "elicitation": map[string]any{}, "roots": map[string]any{}},
		"clientInfo":   map[string]any{"name": "toolgate-e2e-direct", "version": "1"},
	})
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	if err := d.tr.SendNotification(ctx, mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{Method: "notifications/initialized"}}); err != nil {
		t.Fatalf("notifications/initialized: %v", err)
	}
	return d
}

// rpc returns an rpcFunc that sends to d and fails t.
func (d *directServer) rpc(t *testing.T) rpcFunc {
	return func(method string, params any) json.RawMessage {
		t.Helper()
		d.mu.Lock()
		d.ids++
		id := d.ids
		d.mu.Unlock()
		ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
		defer cancel()
		resp, err := d.tr.SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(id), Method: method, Params: params})
		if err != nil {
			t.Fatalf("%s to the upstream directly: %v", method, err)
		}
		if resp.Error != nil {
			t.Fatalf("%s to the upstream directly: JSON-RPC error %d %q", method, resp.Error.Code, resp.Error.Message)
		}
		return resp.Result
	}
}

// toolsByName lists the tools (every page) as generic JSON objects by name.
func toolsByName(t *testing.T, rpc rpcFunc) map[string]map[string]any {
	t.Helper()
	tools := map[string]map[string]any{}
	params := map[string]any{}
	for {
		var page struct {
			Tools      []map[string]any `json:"tools"`
			NextCursor string           `json:"nextCursor"`
		}
		if raw := rpc("tools/list", params); json.Unmarshal(raw, &page) != nil {
			t.Fatalf("tools/list result %s is not a tool list", raw)
		}
		for _, tl := range page.Tools {
			name, _ := tl["name"].(string)
			tools[name] = tl
		}
		if page.NextCursor == "" {
			return tools
		}
		params = map[string]any{"cursor": page.NextCursor}
	}
}

func decodeJSON(t *testing.T, raw json.RawMessage) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("decoding %s: %v", raw, err)
	}
	return v
}

// startEverythingHTTP starts server-everything in its streamable HTTP mode
// on a free port of 127.0.0.1, waits for the port to accept connections,
// and returns the MCP endpoint. The process is killed in t.Cleanup (which,
// registered before the toolgate server's, runs after it stops).
func startEverythingHTTP(t *testing.T, entry string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	l.Close()
	var stderr syncbuf.Buffer
	cmd := exec.Command("node", entry, "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+port)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting server-everything streamableHttp: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	pollUntil(t, listenTimeout, "server-everything to listen on "+addr, func() (bool, string) {
		select {
		case <-exited:
			t.Fatalf("server-everything streamableHttp exited before listening on %s; stderr:\n%s", addr, stderr.String())
		default:
		}
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return true, ""
		}
		return false, err.Error()
	})
	return "http://" + addr + "/mcp"
}

// pidsWithEnv returns the processes whose environment holds marker.
func pidsWithEnv(t *testing.T, marker string) []int {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("no /proc to find processes in: %v", err)
	}
	var pids []int
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", d.Name(), "environ"))
		if err == nil && strings.Contains(string(env), marker) {
			pids = append(pids, pid)
		}
	}
	return pids
}
