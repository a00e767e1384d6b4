package mcpup

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

// waitLimit bounds every wait in these tests.
const waitLimit = 20 * time.Second

// fakeBin is the fake upstream server, built once by TestMain.
var fakeBin string

// TestMain builds testdata/fakeupstream and checks that no test leaves a
// goroutine behind.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mcpup-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "creating temp dir:", err)
		os.Exit(1)
	}
	fakeBin = filepath.Join(dir, "fakeupstream")
	build := exec.Command(goTool(), "build", "-o", fakeBin, "./testdata/fakeupstream")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the fake upstream:", err)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		_ = os.RemoveAll(dir)
		os.Exit(code)
	}))
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// recorder collects what a Manager reports through its callbacks.
type recorder struct {
	tools    chan []registry.Tool
	states   chan bool
	restarts chan struct{}
}

func newRecorder() *recorder {
	return &recorder{
		tools:    make(chan []registry.Tool, 100),
		states:   make(chan bool, 100),
		restarts: make(chan struct{}, 100),
	}
}

func (r *recorder) options(t testing.TB, o *Options) *Options {
	if o == nil {
		o = &Options{}
	}
	if o.Logger == nil {
		// Shown only when the test fails (or with -v).
		o.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	}
	o.OnTools = func(_ string, bound []executors.Bound) error {
		tools := make([]registry.Tool, len(bound))
		for i, b := range bound {
			tools[i] = b.Tool
		}
		r.tools <- tools
		return nil
	}
	o.OnState = func(_ string, up bool) { r.states <- up }
	o.OnRestart = func(string) { r.restarts <- struct{}{} }
	return o
}

// waitTools returns the next tool set reported.
func (r *recorder) waitTools(t testing.TB) []registry.Tool {
	t.Helper()
	select {
	case tools := <-r.tools:
		return tools
	case <-time.After(waitLimit):
		t.Fatal("no OnTools call")
		return nil
	}
}

// waitState waits until the upstream is reported up (or down).
func (r *recorder) waitState(t testing.TB, want bool) {
	t.Helper()
	timeout := time.After(waitLimit)
	for {
		select {
		case up := <-r.states:
			if up == want {
				return
			}
		case <-timeout:
			t.Fatalf("OnState(%v) not called", want)
		}
	}
}

// stdioUpstream is a stdio upstream running the fake server.
func stdioUpstream(args ...string) Upstream {
	return Upstream{Name: "fs", Transport: TransportStdio, Command: fakeBin, Args: args}
}

// testManager is a Manager with the executors its OnTools handed out,
// kept by tool name as gateway keeps them.
type testManager struct {
	*Manager
	mu    sync.Mutex
	execs map[string]executors.Executor // guarded by mu; from the latest listings
}

// listed returns the executor the latest listing handed out for the tool
// called name.
func (m *testManager) listed(name string) (executors.Executor, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.execs[name]
	return e, ok
}

// exec returns the executor of the tool called name: the listed one, or
// for a tool no listing had (one the upstream lacks, one a thread's own
// instance serves) one bound to the upstream its prefix names, as a
// listing would have bound it.
func (m *testManager) exec(t testing.TB, name string) executors.Executor {
	t.Helper()
	if e, ok := m.listed(name); ok {
		return e
	}
	prefix, orig, _ := strings.Cut(name, Separator)
	i := slices.IndexFunc(m.ups, func(u *upstream) bool { return u.cfg.Name == prefix })
	if i < 0 {
		t.Fatalf("no upstream for tool %q", name)
	}
	return m.ups[i].bind(orig)
}

// start creates and starts a Manager for ups and closes it when t ends.
// The executors its OnTools hands out are kept (then handed on to
// opts.OnTools, if any).
func start(t testing.TB, opts *Options, ups ...Upstream) *testManager {
	t.Helper()
	return startWith(t, opts, nil, ups...)
}

// startWith is start that calls prepare, when not nil, with the Manager
// before starting it.
func startWith(t testing.TB, opts *Options, prepare func(*Manager), ups ...Upstream) *testManager {
	t.Helper()
	tm := &testManager{execs: make(map[string]executors.Executor)}
	var o Options
	if opts != nil {
		o = *opts
	}
	next := o.OnTools
	o.OnTools = func(upstream string, tools []executors.Bound) error {
		tm.mu.Lock()
		for name := range tm.execs {
			if strings.HasPrefix(name, upstream+Separator) {
				delete(tm.execs, name)
			}
		}
		for _, b := range tools {
			tm.execs[b.Tool.Name] = b.Exec
		}
		tm.mu.Unlock()
		if next != nil {
			return next(upstream, tools)
		}
		return nil
	}
	m, err := New(ups, &o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	tm.Manager = m
	t.Cleanup(func() { _ = m.Close() })
	if prepare != nil {
		prepare(m)
	}
	m.Start()
	return tm
}

// startUp starts a Manager for up and waits for its first tool set.
func startUp(t testing.TB, up Upstream, opts *Options) (*testManager, *recorder, []registry.Tool) {
	t.Helper()
	rec := newRecorder()
	m := start(t, rec.options(t, opts), up)
	tools := rec.waitTools(t)
	rec.waitState(t, true)
	return m, rec, tools
}

// callIn calls tool through its executor (see [testManager.exec]) in
// thread.
func callIn(ctx context.Context, t testing.TB, m *testManager, thread, tool, raw string, progress func(float64, float64, string)) (executors.Result, error) {
	c := executors.Call{Tool: &registry.Tool{Name: tool, Kind: registry.MCP}, Thread: thread, Progress: progress}
	if raw != "" {
		c.Raw = json.RawMessage(raw)
	}
	return m.exec(t, tool).Execute(ctx, c)
}

// mustCall calls tool and fails the test on an error.
func mustCall(t *testing.T, m *testManager, thread, tool, raw string) executors.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	res, err := callIn(ctx, t, m, thread, tool, raw, nil)
	if err != nil {
		t.Fatalf("Execute(%s, %s) error: %v", tool, raw, err)
	}
	return res
}

// wireResult is the part of a CallToolResult the tests look at.
type wireResult struct {
	Content []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		Data     string `json:"data"`
		MIMEType string `json:"mimeType"`
	} `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	IsError           bool            `json:"isError"`
}

func decodeResult(t *testing.T, res executors.Result) wireResult {
	t.Helper()
	var w wireResult
	if err := json.Unmarshal(res.Passthrough, &w); err != nil {
		t.Fatalf("decoding passthrough %s: %v", res.Passthrough, err)
	}
	return w
}

func text(t *testing.T, res executors.Result) string {
	t.Helper()
	w := decodeResult(t, res)
	if len(w.Content) == 0 {
		t.Fatalf("result %s has no content", res.Passthrough)
	}
	return w.Content[0].Text
}

func pidOf(t *testing.T, m *testManager, thread string) int {
	t.Helper()
	pid, err := strconv.Atoi(text(t, mustCall(t, m, thread, "fs__pid", "")))
	if err != nil {
		t.Fatalf("pid: %v", err)
	}
	return pid
}

// alive reports whether a process with pid exists (a zombie counts: it
// has not been reaped).
func alive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

// fakeChildren returns the PIDs of this test process's children that run
// the fake upstream.
func fakeChildren(t *testing.T) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("reading /proc: %v", err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if strings.Contains(string(cmdline), fakeBin) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// wantClass checks that err is a *retry.Error of class want.
func wantClass(t *testing.T, err error, want retry.Class) {
	t.Helper()
	if err == nil {
		t.Fatalf("error = nil, want class %s", want)
	}
	if got := retry.Classify(err); got != want {
		t.Fatalf("Classify(%v) = %s, want %s", err, got, want)
	}
	if _, ok := errors.AsType[*retry.Error](err); !ok {
		t.Fatalf("error %v (%T) is not a *retry.Error", err, err)
	}
}

// httpFake runs the fake upstream in mode http or sse and returns its URL
// and a function that kills it. It is killed when t ends.
func httpFake(t testing.TB, mode string) (string, func()) {
	t.Helper()
	cmd := exec.Command(fakeBin, "-mode", mode)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the fake: %v", err)
	}
	urls := make(chan string, 1)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "listening "); ok {
				urls <- u
			}
		}
	}()
	var once sync.Once
	kill := func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			<-drained
			_ = cmd.Wait()
		})
	}
	t.Cleanup(kill)
	select {
	case u := <-urls:
		return u, kill
	case <-time.After(waitLimit):
		t.Fatal("the fake did not say where it listens")
		return "", nil
	}
}

// logCapture is a slog handler that keeps every record.
type logCapture struct {
	mu      sync.Mutex
	records []slog.Record
	added   chan struct{}
}

func newLogCapture() *logCapture { return &logCapture{added: make(chan struct{}, 1000)} }

func (h *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (h *logCapture) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.records = append(h.records, r.Clone())
	h.mu.Unlock()
	select {
	case h.added <- struct{}{}:
	default:
	}
	return nil
}
func (h *logCapture) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logCapture) WithGroup(string) slog.Handler      { return h }

// find returns the records with message msg.
func (h *logCapture) find(msg string) []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []slog.Record
	for _, r := range h.records {
		if r.Message == msg {
			out = append(out, r)
		}
	}
	return out
}

// waitFor waits until a record with message msg has been logged.
func (h *logCapture) waitFor(t *testing.T, msg string) slog.Record {
	t.Helper()
	timeout := time.After(waitLimit)
	for {
		if rs := h.find(msg); len(rs) > 0 {
			return rs[0]
		}
		select {
		case <-h.added:
		case <-timeout:
			t.Fatalf("no %q record logged", msg)
		}
	}
}

func attr(r slog.Record, key string) string {
	var v string
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value.String()
			return false
		}
		return true
	})
	return v
}
