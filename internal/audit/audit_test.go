package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// lumberjack starts one goroutine per file at its first rotation, which
// outlives Close (docs/dependencies.md).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("gopkg.in/natefinch/lumberjack%2ev2.(*Logger).millRun"))
}

func entry(i int) Entry {
	return Entry{
		Time: time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC), CallID: "c-1", Principal: "alice",
		Session: "0a1b2c3d4e5f", Thread: "5f4e3d2c1b0a", Tool: "calc", Kind: "stateless",
		Outcome: "error", Class: "timeout", Attempts: i, DurationMS: 12.5,
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", ArgsSHA256: strings.Repeat("ab", 32),
	}
}

func TestRecordWritesOneLinePerCall(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	tr, err := Open(Options{File: path, MaxSizeMB: 1, MaxBackups: 2})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() { tr.Record(entry(i + 1)) })
	}
	wg.Wait()
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Errorf("audit file mode %v, want 0600: the trail names principals", perm)
	}
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 50 {
		t.Fatalf("%d lines, want 50", len(lines))
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &got); err != nil {
		t.Fatalf("line %q: %v", lines[0], err)
	}
	for _, k := range []string{"time", "call_id", "principal", "session", "thread", "tool", "kind", "outcome", "class", "attempts", "duration_ms", "trace_id", "args_sha256"} {
		if _, ok := got[k]; !ok {
			t.Errorf("line lacks %q: %s", k, lines[0])
		}
	}
	if got["duration_ms"] != 12.5 {
		t.Errorf("duration_ms = %v, want 12.5 (milliseconds)", got["duration_ms"])
	}
}

// TestRotation writes past max_size_mb and checks that the file was
// rotated: a backup holds the older lines, the file the newer, and no
// line was lost or split.
func TestRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	tr, err := Open(Options{File: path, MaxSizeMB: 1, MaxBackups: 3})
	if err != nil {
		t.Fatal(err)
	}
	line, _ := json.Marshal(entry(1))
	n := (1<<20)/(len(line)+1) + 100 // a little past 1 MB
	for i := range n {
		tr.Record(entry(i + 1))
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "audit-*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("backups %v, want one rotated file", files)
	}
	total := 0
	for _, f := range append(files, path) {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			if !json.Valid(sc.Bytes()) {
				t.Errorf("%s: a line is not JSON: %q", f, sc.Text())
			}
			total++
		}
		fh.Close()
		if info, _ := os.Stat(f); info.Size() > 1<<20 {
			t.Errorf("%s is %d bytes, past max_size_mb", f, info.Size())
		}
	}
	if total != n {
		t.Errorf("%d lines across the files, want %d", total, n)
	}
}

func TestOpenFailsOnAMissingDirectory(t *testing.T) {
	_, err := Open(Options{File: filepath.Join(t.TempDir(), "no", "such", "audit.jsonl"), MaxSizeMB: 1})
	if err == nil || !strings.Contains(err.Error(), "opening the audit file") {
		t.Errorf("Open under a missing directory: %v, want an error saying the file cannot be opened", err)
	}
}

// TestFullDiskIsCountedAndLoggedOnce writes to /dev/full, which fails
// every write with ENOSPC as a full disk does.
func TestFullDiskIsCountedAndLoggedOnce(t *testing.T) {
	f, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no /dev/full on this system: %v", err)
	}
	defer f.Close()
	var logs bytes.Buffer
	tr := New(f, nil, "/dev/full", slog.New(slog.NewTextHandler(&logs, nil)))
	for i := range 3 {
		tr.Record(entry(i))
	}
	if n := tr.Lost(); n != 3 {
		t.Errorf("Lost() = %d, want 3", n)
	}
	if n := strings.Count(logs.String(), "audit trail cannot be written"); n != 1 {
		t.Errorf("the outage was logged %d times, want once:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "no space left on device") {
		t.Errorf("the log line does not say why:\n%s", logs.String())
	}
}

// flaky fails its writes while down is set.
type flaky struct {
	bytes.Buffer
	down bool
}

func (f *flaky) Write(p []byte) (int, error) {
	if f.down {
		return 0, errors.New("disk full")
	}
	return f.Buffer.Write(p)
}

func TestRecoveryIsLoggedAndNextOutageToo(t *testing.T) {
	var logs bytes.Buffer
	w := &flaky{down: true}
	tr := New(w, nil, "test", slog.New(slog.NewTextHandler(&logs, nil)))
	tr.Record(entry(1))
	w.down = false
	tr.Record(entry(2))
	w.down = true
	tr.Record(entry(3))
	tr.Record(entry(4))
	if got, want := strings.Count(logs.String(), "cannot be written"), 2; got != want {
		t.Errorf("outages logged %d times, want %d (once per outage):\n%s", got, want, logs.String())
	}
	if !strings.Contains(logs.String(), "audit trail writable again") || !strings.Contains(logs.String(), "lost_total=1") {
		t.Errorf("the recovery is not logged with the count lost:\n%s", logs.String())
	}
	if tr.Lost() != 3 || strings.Count(w.String(), "\n") != 1 {
		t.Errorf("Lost() = %d, lines written %d; want 3 and 1", tr.Lost(), strings.Count(w.String(), "\n"))
	}
}

// TestReopenSharesTheRotator opens one file twice, as a reload does: the
// second trail reuses the first's rotator (one goroutine, not two), and
// writes after the first trail's Close.
func TestReopenSharesTheRotator(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	o := Options{File: path, MaxSizeMB: 1, MaxBackups: 1}
	a, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	a.Record(entry(1))
	b, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	if a.w != b.w {
		t.Error("a second Open of the same file made a second rotator")
	}
	a.Close()
	b.Record(entry(2))
	b.Close()
	data, _ := os.ReadFile(path)
	if n := strings.Count(string(data), "\n"); n != 2 {
		t.Errorf("%d lines, want 2: the write after a Close reopens the file", n)
	}
}
