// Package audit writes the audit trail: one JSON line per tool call, to a
// file rotated by size or to standard output (docs/audit.md). A line
// names who called which tool, in which session and thread (hashed), how
// the call ended, and a SHA-256 of its arguments, never their values.
//
// Writing never fails a call: a line the sink refuses (a full disk, a
// closed pipe) is counted ([Trail.Lost]) and the outage is logged once,
// with its end when a line gets through again.
package audit

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"gopkg.in/natefinch/lumberjack.v2"
)

// Entry is one call's line. Session and Thread are the hashed labels
// (threadctx.Label) logs and events use, never the IDs themselves.
type Entry struct {
	Time       time.Time `json:"time"`
	CallID     string    `json:"call_id"`
	Principal  string    `json:"principal,omitempty"`
	Session    string    `json:"session,omitempty"`
	Thread     string    `json:"thread,omitempty"`
	Tool       string    `json:"tool"`
	Kind       string    `json:"kind"`
	Outcome    string    `json:"outcome"`
	Class      string    `json:"class,omitempty"`
	Attempts   int       `json:"attempts"`
	DurationMS float64   `json:"duration_ms"`
	TraceID    string    `json:"trace_id,omitempty"`
	ArgsSHA256 string    `json:"args_sha256"`
}

// Trail is an open audit sink. Its methods are safe for concurrent use.
type Trail struct {
	mu     sync.Mutex // one line at a time, whole
	w      io.Writer
	closer io.Closer // nil for stdout, which is not the trail's to close
	name   string    // the sink, for log lines
	logger *slog.Logger

	lost    atomic.Uint64
	failing bool // a write failed and none has succeeded since; guarded by mu
}

// Options say where the trail goes.
type Options struct {
	// File is a path, or "stdout".
	File string
	// MaxSizeMB is the size at which the file is rotated.
	MaxSizeMB int
	// MaxBackups is how many rotated files are kept; 0 keeps them all.
	MaxBackups int
	// Logger receives the sink's failures; nil discards them.
	Logger *slog.Logger
}

// Open opens the trail o describes. A file is created (mode 0600) if it
// does not exist, and its directory must exist and be writable: Open
// fails at start-up rather than losing every line later.
func Open(o Options) (*Trail, error) {
	if o.File == "stdout" {
		return New(os.Stdout, nil, "stdout", o.Logger), nil
	}
	f, err := os.OpenFile(o.File, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the audit file: %w", err)
	}
	_ = f.Close()
	lj := rotator(o.File, o.MaxSizeMB, o.MaxBackups)
	return New(lj, lj, o.File, o.Logger), nil
}

// rotatorKey names a rotating file with its settings.
type rotatorKey struct {
	file                string
	maxSize, maxBackups int
}

// rotators holds every rotating file opened in this process, kept for
// good. lumberjack starts a goroutine for each Logger at its first write
// that outlives Close (docs/dependencies.md): a gateway built again with
// the same audit section (a reload, a test) reuses its Logger, which
// reopens its file on the next write, so that goroutines do not pile up.
var rotators sync.Map // rotatorKey → *lumberjack.Logger

func rotator(file string, maxSize, maxBackups int) *lumberjack.Logger {
	k := rotatorKey{file, maxSize, maxBackups}
	v, _ := rotators.LoadOrStore(k, &lumberjack.Logger{Filename: file, MaxSize: maxSize, MaxBackups: maxBackups})
	return v.(*lumberjack.Logger)
}

// New returns a trail writing to w, closing closer (when not nil) on
// Close; name names the sink in log lines.
func New(w io.Writer, closer io.Closer, name string, logger *slog.Logger) *Trail {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Trail{w: w, closer: closer, name: name, logger: logger}
}

// Record writes e as one line. A line the sink refuses is counted and,
// the first time after a success, logged.
func (t *Trail) Record(e Entry) {
	line, err := json.Marshal(e)
	if err != nil { // strings, numbers and a time: cannot happen
		t.lose(err)
		return
	}
	line = append(line, '\n')
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, err := t.w.Write(line); err != nil {
		t.loseLocked(err)
		return
	}
	if t.failing {
		t.failing = false
		t.logger.Warn("audit trail writable again", "sink", t.name, "lost_total", t.lost.Load())
	}
}

func (t *Trail) lose(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.loseLocked(err)
}

// loseLocked counts a lost line and logs the first of an outage.
func (t *Trail) loseLocked(err error) {
	t.lost.Add(1)
	if t.failing {
		return
	}
	t.failing = true
	t.logger.Error("audit trail cannot be written; calls go on, their lines are lost and counted in toolgate_audit_lost_total until it recovers",
		"sink", t.name, "error", err.Error())
}

// Lost returns how many lines the sink refused.
func (t *Trail) Lost() uint64 { return t.lost.Load() }

// Close closes the file. A line recorded after Close reopens it. A nil
// trail (none configured) closes as nothing.
func (t *Trail) Close() error {
	if t == nil || t.closer == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closer.Close()
}
