package mcpup

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"
)

// stderrLinesPerSecond caps the upstream output mcpup logs per upstream:
// stderr lines plus log notifications.
const stderrLinesPerSecond = 20

// lineLimiter lets at most perSec lines a second through and counts the
// rest, so a chatty upstream cannot flood the gateway's log.
type lineLimiter struct {
	perSec int

	// mu guards window, n and dropped.
	mu      sync.Mutex
	window  time.Time // start of the current one-second window
	n       int       // lines let through in the window
	dropped int       // lines dropped since the last one let through
}

func newLineLimiter(perSec int) *lineLimiter { return &lineLimiter{perSec: perSec} }

// allow reports whether a line arriving at now may be logged, and if so how
// many lines were dropped before it (to be reported first).
func (l *lineLimiter) allow(now time.Time) (ok bool, dropped int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.window) >= time.Second {
		l.window, l.n = now, 0
	}
	if l.n >= l.perSec {
		l.dropped++
		return false, 0
	}
	l.n++
	dropped, l.dropped = l.dropped, 0
	return true, dropped
}

// flush returns the lines dropped since the last one let through and
// forgets them.
func (l *lineLimiter) flush() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.dropped
	l.dropped = 0
	return d
}

// logLimited logs one record of upstream output through the limiter.
func (u *upstream) logLimited(level slog.Level, msg, thread string, attrs ...any) {
	u.logWith(u.lines, level, msg, thread, attrs...)
}

// logWith logs one record if limiter lets it through.
func (u *upstream) logWith(limiter *lineLimiter, level slog.Level, msg, thread string, attrs ...any) {
	ok, dropped := limiter.allow(time.Now())
	if dropped > 0 {
		u.logDropped(thread, dropped)
	}
	if !ok {
		return
	}
	attrs = append([]any{"upstream", u.cfg.Name}, attrs...)
	if thread != "" {
		attrs = append(attrs, "thread", thread)
	}
	u.m.logger.Log(context.Background(), level, msg, attrs...)
}

func (u *upstream) logDropped(thread string, n int) {
	attrs := []any{"upstream", u.cfg.Name, "dropped", n}
	if thread != "" {
		attrs = append(attrs, "thread", thread)
	}
	u.m.logger.Info("upstream stderr lines dropped", attrs...)
}

// logStderr logs r, a stdio upstream's stderr, line by line (as the
// upstream wrote them: they are its own words) until it ends. Lines longer
// than maxLogLine are cut, and the upstream's secrets are hidden: a
// process handed a token in its environment may well print it.
func (u *upstream) logStderr(r io.Reader, thread string) {
	br := bufio.NewReaderSize(r, maxLogLine)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			u.logLimited(slog.LevelInfo, "upstream stderr", thread, "line", u.redact(logLine(line)))
		}
		for errors.Is(err, bufio.ErrBufferFull) { // skip the rest of a long line
			_, err = br.ReadSlice('\n')
		}
		if err != nil {
			break
		}
	}
	if n := u.lines.flush(); n > 0 {
		u.logDropped(thread, n)
	}
}

// logMessage logs an upstream's notifications/message at the slog level
// matching its MCP level, with the upstream's secrets hidden, as in its
// stderr.
func (u *upstream) logMessage(thread string, f map[string]any) {
	level, _ := f["level"].(string)
	logger, _ := f["logger"].(string)
	u.logWith(u.logs, mcpLevel(level), "upstream log", thread, "logger", u.redact(logger), "data", u.redactValue(f["data"]))
}

// redactValue returns v, a decoded JSON value, with the upstream's secrets
// hidden in every string of it, keys included. v is not modified.
func (u *upstream) redactValue(v any) any {
	if u.redactor == nil {
		return v
	}
	switch v := v.(type) {
	case string:
		return u.redactor.Replace(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = u.redactValue(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[u.redactor.Replace(k)] = u.redactValue(e)
		}
		return out
	}
	return v // a number, a bool or nil
}

// mcpLevel maps an MCP (syslog) logging level to slog's.
func mcpLevel(level string) slog.Level {
	switch level {
	case "debug":
		return slog.LevelDebug
	case "warning":
		return slog.LevelWarn
	case "error", "critical", "alert", "emergency":
		return slog.LevelError
	default: // info, notice, and anything unknown
		return slog.LevelInfo
	}
}

// threadLabel is how a thread appears in logs: a short hash, matching the
// label threadctx and gateway log, since a thread ID can grant access to a
// session.
func threadLabel(thread string) string {
	if thread == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(thread))
	return hex.EncodeToString(sum[:6])
}
