package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// reloadBackend is a REST backend for the reload tests: /slow answers
// once release is closed (a call held in flight across a reload), every
// other path at once with its own path.
func reloadBackend(t *testing.T) (url string, slowArrived <-chan struct{}, release chan<- struct{}) {
	t.Helper()
	arrived, rel := make(chan struct{}, 1), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			arrived <- struct{}{}
			select {
			case <-rel:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"path":%q}`, r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, arrived, rel
}

// replaceFile writes data to path as editors save: a new file renamed
// over the old one.
func replaceFile(t *testing.T, path, data string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// listChanges returns a channel told of each notifications/tools/list_changed c gets.
func listChanges(c *client.Client) <-chan struct{} {
	ch := make(chan struct{}, 64)
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationToolsListChanged) {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	})
	return ch
}

// listedTools returns the names c's tools/list gives.
func listedTools(t *testing.T, c *client.Client) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	res, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return names
}

// reloadLines returns the "configuration reloaded" log records of srv.
func reloadLines(t *testing.T, srv *server) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.SplitSeq(srv.Stderr(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "configuration reloaded" {
			out = append(out, rec)
		}
	}
	return out
}

// TestReloadLive: an edit of the configuration file, saved as an editor
// saves it, is applied to a running serve while a session holds a
// scratchpad note and a call is in flight: a REST tool is added and an
// upstream removed (its process exits) while the other upstream keeps its
// process; the session is told (list_changed), sees the new tool, keeps
// its note, and the call in flight completes. An invalid edit keeps the
// old tools, is logged at file:line:col, counted, and shown on /readyz. A
// storm of 100 saves, each written in two steps, costs a bounded number
// of reloads and never applies a half-written file.
func TestReloadLive(t *testing.T) {
	backend, slowArrived, release := reloadBackend(t)
	gone, kept := newProcMarker(t), newProcMarker(t)
	upstream := func(name string, m procMarker) string {
		return fmt.Sprintf("  - name: %s\n    transport: stdio\n    command: node\n    args: [%q, stdio]\n    env: %s\n",
			name, npmEntry(t, "server-everything"), m.yaml())
	}
	head := "guards: {loop: {action: \"off\"}}\nbuiltin: [scratchpad]\nrest:\n  - {name: slow, url: '" + backend + "/slow', timeout: 60s}\n"
	v1 := head + "upstreams:\n" + upstream("gone", gone) + upstream("kept", kept)
	v2 := head + "  - {name: weather, url: '" + backend + "/weather'}\nupstreams:\n" + upstream("kept", kept)
	srv := startServe(t, v1)
	t.Cleanup(func() {
		srv.Stop(t)
		if left := append(gone.pids(t), kept.pids(t)...); len(left) > 0 {
			t.Errorf("upstream processes %v outlived toolgate serve", left)
		}
	})
	for _, u := range []string{"gone", "kept"} {
		waitMetric(t, srv.URL, "toolgate_upstream_up", map[string]string{"upstream": u}, 1)
	}
	keptPIDs := kept.pids(t)
	c := connectListening(t, srv)
	changed := listChanges(c)
	put := map[string]any{"op": "put", "key": "note", "value": "kept across reloads"}
	if res := mustCall(t, c, "scratchpad", put, ""); res.IsError {
		t.Fatalf("scratchpad put: %q", resultText(res))
	}
	inFlight := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := callTool(t, c, "slow", map[string]any{}, "")
		if err != nil {
			res = mcp.NewToolResultError("transport: " + err.Error())
		}
		inFlight <- res
	}()
	<-slowArrived // the call is at the backend

	replaceFile(t, srv.ConfigPath, v2)
	waitMetric(t, srv.URL, "toolgate_config_reloads_total", map[string]string{"result": "ok"}, 1)
	select {
	case <-changed:
	case <-time.After(callTimeout):
		t.Fatal("no notifications/tools/list_changed after the reload")
	}
	names := listedTools(t, c)
	if !slices.Contains(names, "weather") || slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "gone__") }) ||
		!slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "kept__") }) {
		t.Errorf("tools after the reload = %v, want weather and kept__*, no gone__*", names)
	}
	wantOK(t, mustCall(t, c, "weather", map[string]any{}, ""), `{"path":"/weather"}`)
	wantOK(t, mustCall(t, c, "scratchpad", map[string]any{"op": "get", "key": "note"}, ""), "kept across reloads")
	close(release)
	wantOK(t, <-inFlight, `{"path":"/slow"}`)
	waitProcs(t, gone, 0)
	if got := kept.pids(t); !slices.Equal(got, keptPIDs) {
		t.Errorf("the unchanged upstream's processes = %v, were %v: it was restarted", got, keptPIDs)
	}

	// An invalid edit: the old configuration serves on.
	bad := v2 + "  - {name: broken, transport: stdio}\n"
	replaceFile(t, srv.ConfigPath, bad)
	waitMetric(t, srv.URL, "toolgate_config_reloads_total", map[string]string{"result": "error"}, 1)
	line := strings.Count(bad, "\n")
	if want := fmt.Sprintf("%s:%d:", srv.ConfigPath, line); !strings.Contains(srv.Stderr(), want) {
		t.Errorf("the failed reload logged no problem at %s", want)
	}
	if got := listedTools(t, c); !slices.Equal(got, names) {
		t.Errorf("tools after an invalid edit = %v, want them unchanged: %v", got, names)
	}
	if _, body := get(t, srv.URL+"/readyz"); !strings.Contains(body, `"status":"degraded"`) || !strings.Contains(body, `"result":"error"`) {
		t.Errorf("/readyz after a failed reload = %s, want degraded with the reload's error", body)
	}

	// A storm: 100 saves in place, each written in two steps whose first
	// alone would remove every tool but slow. The last adds "storm".
	okBefore := len(reloadLines(t, srv))
	final := strings.Replace(v2, "upstreams:\n", "  - {name: storm, url: '"+backend+"/storm'}\nupstreams:\n", 1)
	for i := range 100 {
		content := v2
		if i == 99 {
			content = final
		}
		cut := strings.Index(content, "  - {name: weather")
		f, err := os.OpenFile(srv.ConfigPath, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err1 := f.WriteString(content[:cut])
		_, err2 := f.WriteString(content[cut:])
		if err := f.Close(); err1 != nil || err2 != nil || err != nil {
			t.Fatalf("writing the config: %v %v %v", err1, err2, err)
		}
	}
	pollUntil(t, pollTimeout, "the storm's last save applied", func() (bool, string) {
		got := listedTools(t, c)
		return slices.Contains(got, "storm"), fmt.Sprintf("tools %v", got)
	})
	storm := reloadLines(t, srv)[okBefore:]
	if len(storm) > 4 {
		t.Errorf("100 saves cost %d reloads, want a few (debounced, one in flight and one queued)", len(storm))
	}
	for _, rec := range storm {
		if removed, _ := rec["removed"].(string); removed != "" {
			t.Errorf("a reload during the storm removed %s: a half-written file was applied", removed)
		}
	}
}

// TestReloadCommand: with server.watch off an edit is not applied until
// `toolgate reload` checks the file and sends SIGHUP; an invalid file is
// reported by the command at file:line:col and no signal is sent.
func TestReloadCommand(t *testing.T) {
	backend, _, _ := reloadBackend(t)
	v1 := "server: {watch: false}\nbuiltin: [calc]\n"
	srv := startServe(t, v1)
	pid := strconv.Itoa(srv.cmd.Process.Pid)
	c := connectListening(t, srv)
	changed := listChanges(c)

	bad := v1 + "rest:\n  - {name: weather, url: 'ftp://h/x'}\n"
	replaceFile(t, srv.ConfigPath, bad)
	r := runCLI(t, "reload", "--config", srv.ConfigPath, "--pid", pid)
	if want := srv.ConfigPath + ":4:"; r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Errorf("reload of an invalid file = %v, want exit 1 and a problem at %s", r, want)
	}

	replaceFile(t, srv.ConfigPath, v1+"rest:\n  - {name: weather, url: '"+backend+"/weather'}\n")
	if slices.Contains(listedTools(t, c), "weather") {
		t.Error("an edit was applied with server.watch off, before any reload")
	}
	r = runCLI(t, "reload", "--config", srv.ConfigPath, "--pid", pid)
	if r.code != 0 || !strings.Contains(r.stdout, "sent SIGHUP") {
		t.Fatalf("reload = %v, want exit 0", r)
	}
	waitMetric(t, srv.URL, "toolgate_config_reloads_total", map[string]string{"result": "ok"}, 1)
	if got := metricOrZero(scrape(t, srv.URL), "toolgate_config_reloads_total", map[string]string{"result": "error"}); got != 0 {
		t.Errorf("toolgate_config_reloads_total{result=\"error\"} = %v, want 0: the invalid file never reached serve", got)
	}
	select {
	case <-changed:
	case <-time.After(callTimeout):
		t.Fatal("no notifications/tools/list_changed after the reload")
	}
	wantOK(t, mustCall(t, c, "weather", map[string]any{}, ""), `{"path":"/weather"}`)

	// A setting that cannot change live is logged as needing a restart.
	replaceFile(t, srv.ConfigPath, "server: {watch: false, mcp_path: /other}\nbuiltin: [calc]\n")
	srv.Signal(t, syscall.SIGHUP)
	waitMetric(t, srv.URL, "toolgate_config_reloads_total", map[string]string{"result": "ok"}, 2)
	if !strings.Contains(srv.Stderr(), `"setting":"server.mcp_path"`) {
		t.Error("a changed server.mcp_path was not logged as needing a restart")
	}
	if slices.Contains(listedTools(t, c), "weather") {
		t.Error("weather is still listed after a reload that removed it")
	}
}

// TestReloadStdio: `toolgate stdio` reloads on SIGHUP (server.watch off):
// its one session is told, sees the builtin the file switched on, and
// keeps its scratchpad.
func TestReloadStdio(t *testing.T) {
	v1 := "server: {watch: false}\nbuiltin: [calc, scratchpad]\n"
	s := startSignalStdio(t, v1)
	s.send(t, stdioInitialize)
	s.response(t, "1", callTimeout)
	s.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"scratchpad","arguments":{"op":"put","key":"note","value":"kept"}}}`)
	if res := s.response(t, "2", callTimeout).toolResult(t); res.IsError {
		t.Fatalf("scratchpad put: %q", resultText(res))
	}
	replaceFile(t, s.config, "server: {watch: false}\nbuiltin: [calc, scratchpad, clock_now]\n")
	s.signal(t, syscall.SIGHUP)
	s.notification(t, string(mcp.MethodNotificationToolsListChanged), callTimeout)
	s.send(t, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
	if r := s.response(t, "3", callTimeout); !strings.Contains(string(r.Result), `"clock_now"`) {
		t.Errorf("tools/list after SIGHUP = %s, want clock_now", r.Result)
	}
	s.send(t, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"scratchpad","arguments":{"op":"get","key":"note"}}}`)
	wantOK(t, s.response(t, "4", callTimeout).toolResult(t), "kept")
}

// TestReloadLiveSettings: an edit of defaults.timeout, guards.loop and
// batch_tool reaches a running serve's next calls while a session keeps
// its scratchpad note and a call that started before the edit keeps the
// deadline it started with: the next call of the same REST tool (no
// timeout of its own) times out under the new default, a repeated call
// is blocked by the loop guard switched on, and toolgate_batch appears
// with notifications/tools/list_changed. Nothing is logged as needing a
// restart.
func TestReloadLiveSettings(t *testing.T) {
	arrived, release := make(chan struct{}, 4), make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			select {
			case arrived <- struct{}{}:
			default:
			}
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"path":%q}`, r.URL.Path)
	}))
	t.Cleanup(backend.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	tools := "builtin: [scratchpad]\nrest:\n  - {name: slow, url: '" + backend.URL + "/slow'}\n  - {name: same, url: '" + backend.URL + "/same'}\n"
	v1 := "defaults: {timeout: 60s}\nguards: {loop: {action: \"off\"}}\n" + tools
	v2 := "defaults: {timeout: 300ms}\nguards: {loop: {action: block, threshold: 2}}\nbatch_tool: true\n" + tools
	srv := startServe(t, v1)
	c := connectListening(t, srv)
	changed := listChanges(c)
	put := map[string]any{"op": "put", "key": "note", "value": "kept across reloads"}
	if res := mustCall(t, c, "scratchpad", put, ""); res.IsError {
		t.Fatalf("scratchpad put: %q", resultText(res))
	}
	for range 3 {
		wantOK(t, mustCall(t, c, "same", map[string]any{}, ""), `{"path":"/same"}`)
	}
	inFlight := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := callTool(t, c, "slow", map[string]any{}, "")
		if err != nil {
			res = mcp.NewToolResultError("transport: " + err.Error())
		}
		inFlight <- res
	}()
	<-arrived // the call is at the backend, under the 60s it started with

	replaceFile(t, srv.ConfigPath, v2)
	waitMetric(t, srv.URL, "toolgate_config_reloads_total", map[string]string{"result": "ok"}, 1)
	select {
	case <-changed:
	case <-time.After(callTimeout):
		t.Fatal("no notifications/tools/list_changed after batch_tool went on")
	}
	if names := listedTools(t, c); !slices.Contains(names, "toolgate_batch") {
		t.Errorf("tools after the reload = %v, want toolgate_batch", names)
	}
	start := time.Now()
	res := mustCall(t, c, "slow", map[string]any{}, "")
	wantError(t, res, "timeout")
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("the call after the reload took %v, want it cut at the new 300ms", took)
	}
	for range 2 {
		wantOK(t, mustCall(t, c, "same", map[string]any{}, ""), `{"path":"/same"}`)
	}
	res = mustCall(t, c, "same", map[string]any{}, "")
	wantError(t, res, "validation")
	if !strings.Contains(resultText(res), "loop guard") {
		t.Errorf("the third identical call after the guard went on: %q, want the loop guard's notice", resultText(res))
	}
	wantOK(t, mustCall(t, c, "scratchpad", map[string]any{"op": "get", "key": "note"}, ""), "kept across reloads")
	close(release)
	wantOK(t, <-inFlight, `{"path":"/slow"}`)
	if strings.Contains(srv.Stderr(), "takes effect when toolgate restarts") {
		t.Errorf("a live setting was logged as needing a restart:\n%s", srv.Stderr())
	}
}
