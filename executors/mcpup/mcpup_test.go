package mcpup

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/internal/syncbuf"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
	"github.com/toolgate/toolgate/threadctx"
)

// The fake's raw schemas, as in testdata/fakeupstream/main.go.
const (
	fakeRawSchema       = `{"$schema":"http://json-schema.org/draft-07/schema#","title":"Raw","type":"object","oneOf":[{"required":["a"]},{"required":["b"]}],"properties":{"a":{"type":"string"},"b":{"type":"integer","minimum":1}}}`
	fakeRawOutputSchema = `{"type":"object","properties":{"ok":{"type":"boolean"}},"additionalProperties":false}`
)

func TestNewValidates(t *testing.T) {
	pool := threadctx.NewPool(nil)
	t.Cleanup(func() { _ = pool.Close() })
	ok := stdioUpstream()
	tests := []struct {
		name    string
		ups     []Upstream
		pool    *threadctx.Pool
		wantErr bool
	}{
		{name: "stdio", ups: []Upstream{ok}},
		{name: "http", ups: []Upstream{{Name: "web", Transport: TransportStreamableHTTP, URL: "http://127.0.0.1:1/mcp"}}},
		{name: "sse", ups: []Upstream{{Name: "web", Transport: TransportSSE, URL: "https://example.test/sse"}}},
		{name: "thread with pool", ups: []Upstream{{Name: "fs", Transport: TransportStdio, Command: "x", Isolation: IsolationThread}}, pool: pool},
		{name: "empty name", ups: []Upstream{{Transport: TransportStdio, Command: "x"}}, wantErr: true},
		{name: "separator in name", ups: []Upstream{{Name: "a__b", Transport: TransportStdio, Command: "x"}}, wantErr: true},
		{name: "bad name", ups: []Upstream{{Name: "a b", Transport: TransportStdio, Command: "x"}}, wantErr: true},
		{name: "duplicate", ups: []Upstream{ok, ok}, wantErr: true},
		{name: "unknown transport", ups: []Upstream{{Name: "fs", Transport: "websocket", Command: "x"}}, wantErr: true},
		{name: "stdio without command", ups: []Upstream{{Name: "fs", Transport: TransportStdio}}, wantErr: true},
		{name: "http without url", ups: []Upstream{{Name: "fs", Transport: TransportStreamableHTTP}}, wantErr: true},
		{name: "relative url", ups: []Upstream{{Name: "fs", Transport: TransportSSE, URL: "/sse"}}, wantErr: true},
		{name: "thread without pool", ups: []Upstream{{Name: "fs", Transport: TransportStdio, Command: "x", Isolation: IsolationThread}}, wantErr: true},
		{name: "unknown isolation", ups: []Upstream{{Name: "fs", Transport: TransportStdio, Command: "x", Isolation: "process"}}, wantErr: true},
		{name: "bad glob", ups: []Upstream{{Name: "fs", Transport: TransportStdio, Command: "x", Include: []string{"[a"}}}, wantErr: true},
		{name: "negative timeout", ups: []Upstream{{Name: "fs", Transport: TransportStdio, Command: "x", Timeout: -time.Second}}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(tc.ups, &Options{Pool: tc.pool})
			if m != nil {
				_ = m.Close()
			}
			if got := errors.Is(err, ErrInvalidUpstream); got != tc.wantErr {
				t.Fatalf("New() error = %v, want ErrInvalidUpstream: %v", err, tc.wantErr)
			}
		})
	}
}

func TestImportTools(t *testing.T) {
	_, _, tools := startUp(t, stdioUpstream("-page", "2"), nil)
	byName := make(map[string]registry.Tool)
	for _, tool := range tools {
		byName[tool.Name] = tool
	}
	// Every page was listed, the long name was shortened (not dropped),
	// and the stdio-only garbage tool is there.
	long := strings.Repeat("x", 62) // testdata's LongName
	short, _, _ := registry.ShortName("fs__" + long)
	wantNames := []string{"fs__add_tool", "fs__big", "fs__cancel_stats", "fs__churn", "fs__crash", "fs__echo", "fs__fail", "fs__garbage", "fs__getenv", "fs__image", "fs__log", "fs__pid", "fs__raw", "fs__slow", short}
	gotNames := slices.Sorted(func(yield func(string) bool) {
		for n := range byName {
			if !yield(n) {
				return
			}
		}
	})
	if diff := cmp.Diff(wantNames, gotNames); diff != "" {
		t.Fatalf("tool names (-want +got):\n%s", diff)
	}
	if got := byName[short]; got.UpstreamName != long || got.Title != long {
		t.Errorf("shortened tool: UpstreamName %q, Title %q, want both %q", got.UpstreamName, got.Title, long)
	}

	raw := byName["fs__raw"]
	if string(raw.InputSchema) != fakeRawSchema {
		t.Errorf("raw input schema = %s, want %s", raw.InputSchema, fakeRawSchema)
	}
	if string(raw.OutputSchema) != fakeRawOutputSchema {
		t.Errorf("raw output schema = %s, want %s", raw.OutputSchema, fakeRawOutputSchema)
	}
	if !raw.Idempotent {
		t.Errorf("raw (readOnlyHint) is not idempotent")
	}
	echo := byName["fs__echo"]
	want := registry.Tool{
		Name:        "fs__echo",
		Description: "Echoes its raw arguments.",
		Kind:        registry.MCP,
		Source:      "upstream:fs",
		InputSchema: json.RawMessage(`{"type":"object"}`),
		Annotations: registry.Annotations{Title: "Echo", ReadOnlyHint: ptr(false), DestructiveHint: ptr(true), IdempotentHint: ptr(true), OpenWorldHint: ptr(true)},
		Idempotent:  true,
	}
	if diff := cmp.Diff(want, echo, cmp.AllowUnexported(registry.Tool{})); diff != "" {
		t.Errorf("echo (-want +got):\n%s", diff)
	}
	if byName["fs__crash"].Idempotent {
		t.Errorf("crash is idempotent; its hints say no")
	}
}

func ptr[T any](v T) *T { return &v }

func TestImportFilters(t *testing.T) {
	no := false
	tests := []struct {
		name       string
		include    []string
		exclude    []string
		idempotent *bool
		want       []string
	}{
		{name: "include", include: []string{"e*", "pid"}, want: []string{"fs__echo", "fs__pid"}},
		{name: "exclude", include: []string{"e*", "pid", "raw"}, exclude: []string{"p?d"}, want: []string{"fs__echo", "fs__raw"}},
		{name: "override idempotent", include: []string{"pid"}, idempotent: &no, want: []string{"fs__pid"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			up := stdioUpstream()
			up.Include, up.Exclude, up.Idempotent = tc.include, tc.exclude, tc.idempotent
			up.Timeout = 7 * time.Second
			m, _, tools := startUp(t, up, nil)
			var got []string
			for _, tool := range tools {
				got = append(got, tool.Name)
				if tool.Timeout != up.Timeout {
					t.Errorf("%s: Timeout = %v, want %v", tool.Name, tool.Timeout, up.Timeout)
				}
				if tc.idempotent != nil && tool.Idempotent != *tc.idempotent {
					t.Errorf("%s: Idempotent = %v, want the override %v", tool.Name, tool.Idempotent, *tc.idempotent)
				}
			}
			slices.Sort(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("tools (-want +got):\n%s", diff)
			}
			// An excluded tool gets no executor either.
			if _, ok := m.listed("fs__slow"); ok {
				t.Error("the excluded fs__slow was handed an executor")
			}
		})
	}
}

func TestEchoPassthrough(t *testing.T) {
	m, _, _ := startUp(t, stdioUpstream(), nil)
	tests := []struct {
		name     string
		raw      string
		wantArgs string // what the upstream received
	}{
		// Key order and a number beyond float64 precision survive.
		{name: "raw", raw: `{"z":1,"a":12345678901234567890,"s":"<&>"}`, wantArgs: `{"z":1,"a":12345678901234567890,"s":"\u003c\u0026\u003e"}`},
		{name: "absent", raw: "", wantArgs: `{}`},
		{name: "null", raw: "null", wantArgs: `{}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := mustCall(t, m, "t", "fs__echo", tc.raw)
			want := `{"content":[{"type":"text","text":` + quote(tc.wantArgs) + `}],"structuredContent":{"received":` + tc.wantArgs + `}}`
			if got := string(res.Passthrough); got != want {
				t.Fatalf("passthrough = %s, want %s", got, want)
			}
			if res.Content != nil || res.Structured != nil || res.IsError {
				t.Errorf("result has more than Passthrough: %+v", res)
			}
		})
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestResultKinds(t *testing.T) {
	m, _, _ := startUp(t, stdioUpstream(), nil)

	img := decodeResult(t, mustCall(t, m, "t", "fs__image", ""))
	if len(img.Content) != 2 || img.Content[1].Type != "image" || img.Content[1].MIMEType != "image/png" {
		t.Fatalf("image result content = %+v", img.Content)
	}
	data, err := base64.StdEncoding.DecodeString(img.Content[1].Data)
	if err != nil || !bytes.Equal(data, []byte("\x89PNG\r\n\x1a\nfake image bytes")) {
		t.Errorf("image data = %q (%v)", data, err)
	}

	failed := mustCall(t, m, "t", "fs__fail", "")
	if !failed.IsError {
		t.Error("Result.IsError = false for an upstream's isError result; the pipeline counts and reports it as a success")
	}
	fail := decodeResult(t, failed)
	if !fail.IsError || fail.Content[0].Text != "it failed" {
		t.Errorf("isError result = %+v, want isError with the upstream's text", fail)
	}

	raw := decodeResult(t, mustCall(t, m, "t", "fs__raw", `{"a":"x"}`))
	if string(raw.StructuredContent) != `{"ok":true}` {
		t.Errorf("structuredContent = %s", raw.StructuredContent)
	}
}

func TestCallErrors(t *testing.T) {
	m, _, _ := startUp(t, stdioUpstream(), nil)
	tests := []struct {
		name string
		tool string
		raw  string
		want retry.Class
	}{
		{name: "tool the upstream lacks", tool: "fs__missing", want: retry.NotFound},
		{name: "arguments that are not JSON", tool: "fs__echo", raw: `{"a":`, want: retry.Validation},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := callIn(t.Context(), t, m, "t", tc.tool, tc.raw, nil)
			wantClass(t, err, tc.want)
		})
	}
}

// progressEvent is one call of executors.Call.Progress.
type progressEvent struct {
	progress, total float64
	message         string
}

// startSlow starts fs__slow with progress reporting and returns once the
// first progress notification has arrived, with the call's cancel and its
// outcome.
func startSlow(t *testing.T, m *testManager) (context.CancelFunc, <-chan error, <-chan progressEvent) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	events := make(chan progressEvent, 1000)
	done := make(chan error, 1)
	go func() {
		_, err := callIn(ctx, t, m, "t", "fs__slow", "", func(p, total float64, msg string) {
			select {
			case events <- progressEvent{p, total, msg}:
			default:
			}
		})
		done <- err
	}()
	select {
	case ev := <-events:
		if ev.progress != 1 || ev.total != 1000 || ev.message != "step 1" {
			t.Errorf("first progress = %+v, want 1/1000 step 1", ev)
		}
	case <-time.After(waitLimit):
		cancel()
		<-done
		t.Fatal("no progress reached call.Progress")
	}
	return cancel, done, events
}

func TestProgressAndCancellation(t *testing.T) {
	for _, transport := range []string{TransportStdio, TransportStreamableHTTP} {
		t.Run(transport, func(t *testing.T) {
			up := stdioUpstream()
			if transport != TransportStdio {
				url, _ := httpFake(t, "http")
				up = Upstream{Name: "fs", Transport: transport, URL: url}
			}
			m, _, _ := startUp(t, up, nil)

			cancel, done, events := startSlow(t, m)
			select {
			case ev := <-events:
				if ev.progress < 2 {
					t.Errorf("second progress = %v, want >= 2", ev.progress)
				}
			case <-time.After(waitLimit):
				t.Fatal("no second progress")
			}
			cancel()
			select {
			case err := <-done:
				wantClass(t, err, retry.Cancelled)
			case <-time.After(waitLimit):
				t.Fatal("Execute did not return after cancellation")
			}
			// The upstream got notifications/cancelled and its handler's
			// ctx ended.
			ctx, stop := context.WithTimeout(t.Context(), waitLimit)
			defer stop()
			res, err := callIn(ctx, t, m, "t", "fs__cancel_stats", `{"at_least":1}`, nil)
			if err != nil {
				t.Fatalf("cancel_stats: %v", err)
			}
			var st struct{ Notes, Handlers int }
			if err := json.Unmarshal([]byte(text(t, res)), &st); err != nil {
				t.Fatal(err)
			}
			if st.Notes < 1 || st.Handlers < 1 {
				t.Fatalf("upstream saw %d notifications/cancelled and %d cancelled handlers, want >= 1 each", st.Notes, st.Handlers)
			}
		})
	}
}

func TestListChanged(t *testing.T) {
	for _, transport := range []string{TransportStdio, TransportStreamableHTTP} {
		t.Run(transport, func(t *testing.T) {
			up := stdioUpstream()
			if transport != TransportStdio {
				url, _ := httpFake(t, "http")
				up = Upstream{Name: "fs", Transport: transport, URL: url}
			}
			m, rec, _ := startUp(t, up, nil)
			mustCall(t, m, "t", "fs__add_tool", `{"name":"extra"}`)
			timeout := time.After(waitLimit)
			for {
				var tools []registry.Tool
				select {
				case tools = <-rec.tools:
				case <-timeout:
					t.Fatal("no OnTools call with fs__extra")
				}
				if slices.ContainsFunc(tools, func(t registry.Tool) bool { return t.Name == "fs__extra" }) {
					break
				}
			}
			if got := text(t, mustCall(t, m, "t", "fs__extra", `{"x":1}`)); got != `{"x":1}` {
				t.Errorf("fs__extra returned %q", got)
			}
		})
	}
}

// TestListChangedPaced: an upstream sending notifications/tools/
// list_changed over and over (every 20ms here) is listed again at most
// once per relistGap, the notifications in between coalesced, and each
// listing and coalesced notification counted (issue 31, item 9: a
// 20k-tool upstream announcing a change every second burned 25.3 s of CPU
// in 21 s).
func TestListChangedPaced(t *testing.T) {
	var mu sync.Mutex
	counts := map[string]int{}
	m, _, _ := startUp(t, stdioUpstream(), &Options{OnRelist: func(upstream string, listed bool) {
		mu.Lock()
		defer mu.Unlock()
		counts[fmt.Sprintf("%s %v", upstream, listed)]++
	}})
	// 30 notifications over 600ms, well within one relistGap.
	got := text(t, mustCall(t, m, "t", "fs__churn", `{"count":30,"gap_ms":20}`))
	n, err := strconv.Atoi(got)
	if err != nil {
		t.Fatalf("fs__churn = %q", got)
	}
	if n > 2 {
		t.Errorf("30 list_changed within %v made %d tools/list requests, want at most 2", relistGap, n)
	}
	mu.Lock()
	defer mu.Unlock()
	if counts["fs false"] < 25 {
		t.Errorf("OnRelist counted %d coalesced notifications of 30 (%v), want the rest of those not listed", counts["fs false"], counts)
	}
}

func TestCrashRestart(t *testing.T) {
	for _, mode := range []string{"exit", "after"} {
		t.Run(mode, func(t *testing.T) {
			m, rec, _ := startUp(t, stdioUpstream(), nil)
			pid := pidOf(t, m, "t")

			ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
			defer cancel()
			res, err := callIn(ctx, t, m, "t", "fs__crash", `{"mode":"`+mode+`"}`, nil)
			if mode == "exit" {
				wantClass(t, err, retry.Unavailable)
			} else if err != nil || text(t, res) != "bye" {
				t.Fatalf("crash after reply = %v, %v; want the reply", res, err)
			}
			rec.waitState(t, false)

			// While it restarts, calls fail fast.
			began := time.Now()
			_, err = callIn(ctx, t, m, "t", "fs__echo", "", nil)
			if err != nil {
				wantClass(t, err, retry.Unavailable)
				if !strings.Contains(err.Error(), "restarting") {
					t.Errorf("error %q does not say the upstream is restarting", err)
				}
				if d := time.Since(began); d > time.Second {
					t.Errorf("failing took %v; want fast", d)
				}
			}

			rec.waitState(t, true)
			select {
			case <-rec.restarts:
			default:
				t.Error("OnRestart was not called")
			}
			if alive(pid) {
				t.Errorf("crashed process %d was not reaped", pid)
			}
			if got := pidOf(t, m, "t"); got == pid {
				t.Errorf("pid after restart = %d, the old one", got)
			}
		})
	}
}

func TestGarbageRestart(t *testing.T) {
	logs := newLogCapture()
	m, rec, _ := startUp(t, stdioUpstream(), &Options{Logger: slog.New(logs)})
	pid := pidOf(t, m, "t")

	_, err := callIn(t.Context(), t, m, "t", "fs__garbage", "", nil)
	wantClass(t, err, retry.Unavailable)
	r := logs.waitFor(t, "upstream wrote garbage to stdout; restarting it")
	if got := attr(r, "line"); got != "this is not JSON-RPC" {
		t.Errorf("garbage line logged as %q", got)
	}
	rec.waitState(t, false)
	rec.waitState(t, true)
	if alive(pid) {
		t.Errorf("process %d that wrote garbage was not killed and reaped", pid)
	}
	if got := pidOf(t, m, "t"); got == pid {
		t.Errorf("pid after restart = %d, the old one", got)
	}
}

func TestFailingUpstream(t *testing.T) {
	rec := newRecorder()
	m := start(t, rec.options(t, nil), Upstream{Name: "bad", Transport: TransportStdio, Command: "/nonexistent/mcp-server"})
	rec.waitState(t, false)
	if st := m.Status(); st["bad"] {
		t.Errorf("Status() = %v, want bad down", st)
	}
	began := time.Now()
	_, err := callIn(t.Context(), t, m, "t", "bad__x", "", nil)
	wantClass(t, err, retry.Unavailable)
	if d := time.Since(began); d > time.Second {
		t.Errorf("failing took %v; want fast", d)
	}
	// It retries with backoff.
	select {
	case <-rec.restarts:
	case <-time.After(waitLimit):
		t.Fatal("no retry")
	}
}

func TestHTTPDropped(t *testing.T) {
	url, kill := httpFake(t, "http")
	m, rec, _ := startUp(t, Upstream{Name: "fs", Transport: TransportStreamableHTTP, URL: url, Headers: map[string]string{"Authorization": "Bearer s3cret-token"}}, nil)
	if st := m.Status(); !st["fs"] {
		t.Fatalf("Status() = %v, want fs up", st)
	}
	kill()
	_, err := callIn(t.Context(), t, m, "t", "fs__echo", "", nil)
	if c := retry.Classify(err); c != retry.Network && c != retry.Unavailable {
		t.Fatalf("call to a dead HTTP upstream: %v (class %s), want network or unavailable", err, c)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("error %q leaks a header value", err)
	}
	rec.waitState(t, false)
	if st := m.Status(); st["fs"] {
		t.Errorf("Status() = %v, want fs down", st)
	}
}

func TestSSE(t *testing.T) {
	url, _ := httpFake(t, "sse")
	m, _, tools := startUp(t, Upstream{Name: "fs", Transport: TransportSSE, URL: url}, nil)
	if !slices.ContainsFunc(tools, func(t registry.Tool) bool { return t.Name == "fs__echo" }) {
		t.Fatalf("tools = %v, want fs__echo", tools)
	}
	if got := text(t, mustCall(t, m, "t", "fs__echo", `{"via":"sse"}`)); got != `{"via":"sse"}` {
		t.Errorf("echo over SSE = %q", got)
	}
}

func TestUpstreamLogging(t *testing.T) {
	logs := newLogCapture()
	m, _, _ := startUp(t, stdioUpstream("-stderr-lines", "50"), &Options{Logger: slog.New(logs)})

	mustCall(t, m, "t", "fs__log", `{"level":"warning"}`)
	r := logs.waitFor(t, "upstream log")
	if r.Level != slog.LevelWarn || attr(r, "upstream") != "fs" || attr(r, "data") != "upstream says hi" {
		t.Errorf("upstream log record = %v %q %v", r.Level, r.Message, r)
	}

	// 50 stderr lines at once: at most 20 are logged, and the drop is
	// reported (at the latest when the process ends).
	logs.waitFor(t, "upstream stderr")
	_ = m.Close()
	lines := logs.find("upstream stderr")
	if len(lines) == 0 || len(lines) > stderrLinesPerSecond {
		t.Errorf("%d stderr lines logged, want 1 to %d", len(lines), stderrLinesPerSecond)
	}
	if got := attr(lines[0], "line"); got != "fake stderr line 0" {
		t.Errorf("first stderr line = %q", got)
	}
	dropped := 0
	for _, r := range logs.find("upstream stderr lines dropped") {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "dropped" {
				dropped += int(a.Value.Int64())
			}
			return true
		})
	}
	if len(lines)+dropped != 50 {
		t.Errorf("%d lines logged + %d dropped, want 50", len(lines), dropped)
	}
}

func TestThreadIsolation(t *testing.T) {
	pool := threadctx.NewPool(nil)
	t.Cleanup(func() { _ = pool.Close() })
	up := stdioUpstream()
	up.Isolation = IsolationThread
	m, rec, tools := startUp(t, up, &Options{Pool: pool})
	if len(tools) == 0 {
		t.Fatal("the probe listed no tools")
	}
	// The probe is closed once it has listed.
	if kids := fakeChildren(t); len(kids) != 0 {
		t.Logf("children after probe: %v (the probe may still be exiting)", kids)
	}

	a1, a2 := pidOf(t, m, "A"), pidOf(t, m, "A")
	b := pidOf(t, m, "B")
	if a1 != a2 {
		t.Errorf("thread A got two processes: %d, %d", a1, a2)
	}
	if a1 == b {
		t.Errorf("threads A and B share process %d", a1)
	}
	if got := pool.Counts()["upstream:fs"]; got != 2 {
		t.Errorf("pool holds %d instances, want 2", got)
	}

	pool.CloseThread("A")
	if alive(a1) {
		t.Errorf("thread A's process %d is still there after CloseThread", a1)
	}
	if !alive(b) {
		t.Errorf("thread B's process %d died with thread A", b)
	}
	// A new call in A gets a new process.
	if a3 := pidOf(t, m, "A"); a3 == a1 {
		t.Errorf("thread A reuses closed process %d", a1)
	}

	// A thread's process that crashes is restarted for that thread.
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	_, _ = callIn(ctx, t, m, "B", "fs__crash", `{"mode":"exit"}`, nil)
	select {
	case <-rec.restarts:
	case <-time.After(waitLimit):
		t.Fatal("thread B's instance was not restarted")
	}

	_ = m.Close()
	if kids := fakeChildren(t); len(kids) != 0 {
		t.Errorf("processes left after Close: %v", kids)
	}
	_, err := callIn(t.Context(), t, m, "A", "fs__pid", "", nil)
	wantClass(t, err, retry.Unavailable)
}

// sharedAndThread returns a thread pool (closed when t ends), a shared
// stdio upstream "fs" and a thread-isolated one "th".
func sharedAndThread(t *testing.T) (pool *threadctx.Pool, shared, thread Upstream) {
	pool = threadctx.NewPool(nil)
	t.Cleanup(func() { _ = pool.Close() })
	shared, thread = stdioUpstream(), stdioUpstream()
	thread.Name, thread.Isolation = "th", IsolationThread
	return pool, shared, thread
}

func TestCloseReapsAll(t *testing.T) {
	pool, shared, thread := sharedAndThread(t)
	rec := newRecorder()
	m := start(t, rec.options(t, &Options{Pool: pool}), shared, thread)
	rec.waitTools(t)
	rec.waitTools(t)
	pids := []int{pidOf(t, m, "x")}
	for _, th := range []string{"x", "y"} {
		pid, err := strconv.Atoi(text(t, mustCall(t, m, th, "th__pid", "")))
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	// A call in flight does not hold Close up.
	cancel, done, _ := startSlow(t, m)
	defer cancel()

	_ = m.Close()
	select {
	case err := <-done:
		if c := retry.Classify(err); c != retry.Unavailable && c != retry.Cancelled {
			t.Errorf("call in flight during Close: %v (class %s)", err, c)
		}
	case <-time.After(waitLimit):
		t.Fatal("call in flight did not end with Close")
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("process %d left after Close", pid)
		}
	}
	if kids := fakeChildren(t); len(kids) != 0 {
		t.Errorf("fake upstream children left after Close: %v", kids)
	}
	if st := m.Status(); len(st) != 2 {
		t.Errorf("Status() = %v, want both upstreams", st)
	}
}

// Kill ends every stdio process at once, before any Close, and a process
// started after it (the restart of one it killed) too; Close then has
// nothing to wait for.
func TestKill(t *testing.T) {
	pool, shared, thread := sharedAndThread(t)
	rec := newRecorder()
	opts := rec.options(t, &Options{Pool: pool})
	// Restarts and states of the shared upstream only.
	onRestart, onState := opts.OnRestart, opts.OnState
	opts.OnRestart = func(name string) {
		if name == shared.Name {
			onRestart(name)
		}
	}
	opts.OnState = func(name string, up bool) {
		if name == shared.Name {
			onState(name, up)
		}
	}
	m := start(t, opts, shared, thread)
	rec.waitTools(t)
	rec.waitTools(t)
	pids := []int{pidOf(t, m, "x")}
	pid, err := strconv.Atoi(text(t, mustCall(t, m, "x", "th__pid", "")))
	if err != nil {
		t.Fatal(err)
	}
	pids = append(pids, pid)
	rec.waitState(t, true) // the shared upstream's up of the start, reported after its tools

	// At least the two processes above; the thread-isolated upstream's
	// listing process may not have finished its shutdown yet.
	if n := m.Kill(); n < 2 {
		t.Errorf("Kill() = %d, want at least 2 processes signalled", n)
	}
	deadline := time.Now().Add(waitLimit)
	for _, pid := range pids {
		for alive(pid) { // reaped by the exit watcher once killed
			if time.Now().After(deadline) {
				t.Fatalf("process %d still alive %v after Kill", pid, waitLimit)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// The shared upstream's supervisor restarts it. Each new process is
	// killed as it starts, so the upstream never comes up and the
	// supervisor tries again: two attempts, and no up in between.
	timeout := time.After(waitLimit)
	for attempts := 0; attempts < 2; {
		select {
		case <-rec.restarts:
			attempts++
		case up := <-rec.states:
			if up {
				t.Fatal("the upstream came up again after Kill: a restarted process was left running")
			}
		case <-timeout:
			t.Fatalf("%d restart attempts within %v of Kill, want 2", attempts, waitLimit)
		}
	}
	_ = m.Close()
	if kids := fakeChildren(t); len(kids) != 0 {
		t.Errorf("fake upstream children left after Kill and Close: %v", kids)
	}
}

// Each process gets a private directory of its own, named in its
// environment and substituted into Args and Env, and removed with it.
func TestInstanceDir(t *testing.T) {
	pool := threadctx.NewPool(nil)
	t.Cleanup(func() { _ = pool.Close() })
	up := stdioUpstream("-page=3", InstanceDirRef+"/arg", "${"+InstanceDirVar+"}")
	up.Isolation = IsolationThread
	up.Env = map[string]string{"STATE_FILE": InstanceDirRef + "/state.json"}
	m, _, _ := startUp(t, up, &Options{Pool: pool})

	// dirOf returns thread's directory, checking how the process sees it.
	dirOf := func(thread string) string {
		t.Helper()
		dir := text(t, mustCall(t, m, thread, "fs__getenv", `{"name":"`+InstanceDirVar+`"}`))
		dir, args, _ := strings.Cut(dir, "\n")
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Fatalf("thread %s: %s=%q is not a private directory (%v)", thread, InstanceDirVar, dir, err)
		}
		if want := "-page=3\n" + dir + "/arg\n${" + InstanceDirVar + "}"; args != want {
			t.Errorf("thread %s: arguments %q, want %q", thread, args, want)
		}
		state, _, _ := strings.Cut(text(t, mustCall(t, m, thread, "fs__getenv", `{"name":"STATE_FILE"}`)), "\n")
		if want := dir + "/state.json"; state != want {
			t.Errorf("thread %s: STATE_FILE=%q, want %q", thread, state, want)
		}
		return dir
	}
	a, b := dirOf("A"), dirOf("B")
	if a == b {
		t.Fatalf("threads A and B share the directory %s", a)
	}
	pool.CloseThread("A")
	if _, err := os.Stat(a); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("thread A's directory %s is still there after CloseThread (%v)", a, err)
	}
	if _, err := os.Stat(b); err != nil {
		t.Errorf("thread B's directory went with thread A: %v", err)
	}
	_ = m.Close()
	if _, err := os.Stat(b); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("thread B's directory %s is still there after Close (%v)", b, err)
	}
}

// A stdio process gets only a few variables of the gateway's environment
// (PATH, HOME and the like), its instance directory and its own Env: not
// the gateway's secrets, unless InheritEnv is set.
func TestProcessEnv(t *testing.T) {
	t.Setenv("TOOLGATE_TEST_SECRET", "s3cret-of-another-tool")
	t.Setenv("HOME", "/home/toolgate-test")
	t.Setenv("SHELL", "() { :; }") // an exported shell function: left out
	getenv := func(t *testing.T, m *testManager, name string) string {
		t.Helper()
		v, _, _ := strings.Cut(text(t, mustCall(t, m, "t", "fs__getenv", `{"name":"`+name+`"}`)), "\n")
		return v
	}
	for _, inherit := range []bool{false, true} {
		t.Run(fmt.Sprintf("inherit_env %v", inherit), func(t *testing.T) {
			up := stdioUpstream()
			up.Env = map[string]string{"OWN_VAR": "own-value", "LANG": "C.UTF-8"}
			up.InheritEnv = inherit
			m, _, _ := startUp(t, up, nil)
			want := map[string]string{
				"PATH":                 os.Getenv("PATH"),
				"HOME":                 "/home/toolgate-test",
				"OWN_VAR":              "own-value",
				"LANG":                 "C.UTF-8", // Env wins over the gateway's
				"SHELL":                "",
				"TOOLGATE_TEST_SECRET": "",
			}
			if inherit {
				want["SHELL"] = "() { :; }"
				want["TOOLGATE_TEST_SECRET"] = "s3cret-of-another-tool"
			}
			for _, name := range slices.Sorted(maps.Keys(want)) {
				if got := getenv(t, m, name); got != want[name] {
					t.Errorf("the process's %s = %q, want %q", name, got, want[name])
				}
			}
			if dir := getenv(t, m, InstanceDirVar); dir == "" {
				t.Errorf("the process has no %s", InstanceDirVar)
			}
		})
	}
}

// inherit_env, like the other process settings, is only for stdio.
func TestInheritEnvOnlyStdio(t *testing.T) {
	up := Upstream{Name: "h", Transport: TransportSSE, URL: "http://127.0.0.1:1/sse", InheritEnv: true}
	err := up.Validate()
	if err == nil || !strings.Contains(err.Error(), "inherit_env") || !strings.Contains(err.Error(), "is only for transport: stdio") {
		t.Errorf("Validate() = %v, want inherit_env: is only for transport: stdio", err)
	}
}

// An idempotent call made while the upstream restarts is retried by the
// dispatcher after the RetryAfter its unavailable error carries, and
// succeeds once the supervisor has reconnected: with the default policy,
// whose own backoff (at most 100ms, then 200ms) would end before the
// supervisor's first attempt (500ms).
func TestRetryBridgesRestart(t *testing.T) {
	m, rec, _ := startUp(t, stdioUpstream(), nil)
	pid := pidOf(t, m, "t")
	_, err := callIn(t.Context(), t, m, "t", "fs__crash", `{"mode":"exit"}`, nil)
	wantClass(t, err, retry.Unavailable)
	if ra := retry.RetryAfterOf(err); ra < minBackoff || ra > minBackoff+time.Second {
		t.Errorf("RetryAfter of a broken connection = %v, want about the supervisor's first wait (%v)", ra, minBackoff)
	}
	rec.waitState(t, false)

	d := executors.NewDispatcher(nil)
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	res, err := d.Dispatch(ctx, m.exec(t, "fs__pid"), executors.Call{Tool: &registry.Tool{Name: "fs__pid", Kind: registry.MCP}, Thread: "t",
		// Attempts enough for a restart on a loaded machine (process start,
		// initialize, tools/list): the point is that retries bridge it.
		Retry: retry.Plan{Policy: retry.Policy{Attempts: 10}.Normalize(), Idempotent: true}})
	if err != nil {
		t.Fatalf("fs__pid during the restart: %v", err)
	}
	if n, _ := res.Meta[executors.AttemptsMetaKey].(int); n < 2 {
		t.Errorf("attempts = %v, want a retry", res.Meta[executors.AttemptsMetaKey])
	}
	if got := text(t, res); got == strconv.Itoa(pid) {
		t.Errorf("fs__pid answered from the crashed process %d", pid)
	}
}

// The thread pool's limits are toolgate's, not the upstream's: a full pool
// is rate_limited and a closed one cancelled, so neither trips the
// upstream's circuit breaker (which counts unavailable as a failure).
func TestThreadPoolErrors(t *testing.T) {
	pool := threadctx.NewPool(&threadctx.Options{MaxInstances: 1})
	t.Cleanup(func() { _ = pool.Close() })
	up := stdioUpstream()
	up.Isolation = IsolationThread
	m, _, _ := startUp(t, up, &Options{Pool: pool})

	cancel, done, _ := startSlow(t, m) // thread t's instance is busy
	_, err := callIn(t.Context(), t, m, "other", "fs__pid", "", nil)
	wantClass(t, err, retry.RateLimited)
	if !strings.Contains(err.Error(), "threads.max_instances") {
		t.Errorf("capacity error %q does not name threads.max_instances", err)
	}
	cancel()
	<-done

	_ = pool.Close()
	_, err = callIn(t.Context(), t, m, "other", "fs__pid", "", nil)
	wantClass(t, err, retry.Cancelled)
}

// TestStderrRedacted pins down that a stdio upstream's stderr lines are
// logged with its secrets hidden, raw, escaped or in base64.
func TestStderrRedacted(t *testing.T) {
	const secret = "s3cret/t0ken"
	b64 := base64.StdEncoding.EncodeToString([]byte(secret))
	line := "token=" + secret + " escaped=" + url.QueryEscape(secret) + " basic=" + b64
	logs := newLogCapture()
	var out syncbuf.Buffer
	logger := slog.New(slog.NewMultiHandler(logs, slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug})))
	up := stdioUpstream("-stderr", line)
	up.Secrets = []string{secret}
	m, _, _ := startUp(t, up, &Options{Logger: logger})

	r := logs.waitFor(t, "upstream stderr")
	_ = m.Close()
	if got, want := attr(r, "line"), "token=[redacted] escaped=[redacted] basic=[redacted]"; got != want {
		t.Errorf("stderr line logged = %q, want %q", got, want)
	}
	for _, leak := range []string{secret, url.QueryEscape(secret), b64, base64.RawStdEncoding.EncodeToString([]byte(secret))} {
		if strings.Contains(out.String(), leak) {
			t.Errorf("log shows %q:\n%s", leak, out.String())
		}
	}
}
