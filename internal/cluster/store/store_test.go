package store

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitTimeout bounds every wait for a log line.
const waitTimeout = 5 * time.Second

// logLines is a slog handler that sends each record as "LEVEL message
// attrs" on a channel, so a test can wait for a line.
type logLines chan string

func (l logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l logLines) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l logLines) WithGroup(string) slog.Handler            { return l }
func (l logLines) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	l <- b.String()
	return nil
}

// drain returns the lines logged so far.
func (l logLines) drain() []string {
	var got []string
	for {
		select {
		case s := <-l:
			got = append(got, s)
		default:
			return got
		}
	}
}

func ping(ctx context.Context, c redis.Scripter) error {
	return c.Eval(ctx, "return redis.call('PING')", nil).Err()
}

// An outage is logged once and counted for every failed operation; an
// operation that succeeds ends it, saying so.
func TestOutageLoggedOnceCountedEachTime(t *testing.T) {
	m := miniredis.RunT(t)
	m.RequireAuth("pw-in-url")
	lines := make(logLines, 16)
	var errs atomic.Int64
	s, err := Open(t.Context(), "redis://:pw-in-url@"+m.Addr()+"/0", &Options{Logger: slog.New(lines), OnError: func() { errs.Add(1) }, Probe: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Do(t.Context(), ping); err != nil || !s.Up() {
		t.Fatalf("Do(ping) = %v, Up() = %v; want nil, true", err, s.Up())
	}
	addr := m.Addr()
	m.Close()
	for range 3 {
		if err := s.Do(t.Context(), ping); err == nil {
			t.Fatal("Do(ping) with redis gone = nil, want an error")
		}
	}
	if s.Up() || errs.Load() != 3 {
		t.Errorf("after 3 failures: Up() = %v, errors counted %d; want false, 3", s.Up(), errs.Load())
	}
	got := lines.drain()
	if len(got) != 1 || !strings.HasPrefix(got[0], "WARN cluster: redis did not answer") || !strings.Contains(got[0], "redis="+addr) {
		t.Errorf("logged %q; want one warning naming %s", got, addr)
	}
	if strings.Contains(strings.Join(got, "\n"), "pw-in-url") {
		t.Errorf("a log line shows the URL's password: %q", got)
	}
	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := s.Do(t.Context(), ping); err != nil || !s.Up() {
		t.Fatalf("Do(ping) with redis back = %v, Up() = %v; want nil, true", err, s.Up())
	}
	if got := lines.drain(); len(got) != 1 || !strings.HasPrefix(got[0], "INFO cluster: redis answers again") {
		t.Errorf("logged %q after the outage; want one line saying redis answers again", got)
	}
}

// A Redis that does not answer at start is said once; the store starts
// down, and its probe finds Redis when it comes.
func TestUnreachableAtStartThenProbed(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	lines := make(logLines, 16)
	s, err := Open(t.Context(), "redis://"+addr, &Options{Logger: slog.New(lines), Probe: 10 * time.Millisecond})
	if err != nil {
		t.Fatalf("Open(unreachable) = %v, want nil: toolgate starts without its Redis", err)
	}
	defer s.Close()
	if s.Up() {
		t.Error("Up() = true with nothing listening")
	}
	select {
	case line := <-lines:
		if !strings.HasPrefix(line, "WARN cluster: redis did not answer at start") {
			t.Errorf("first line %q; want the warning that redis did not answer at start", line)
		}
	case <-time.After(waitTimeout):
		t.Fatal("no warning that redis did not answer at start")
	}
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr(addr); err != nil {
		t.Fatalf("starting miniredis on %s: %v", addr, err)
	}
	defer m.Close()
	select {
	case line := <-lines:
		if !strings.HasPrefix(line, "INFO cluster: redis answers again") {
			t.Errorf("next line %q; want redis answers again", line)
		}
	case <-time.After(waitTimeout):
		t.Fatal("the probe did not find redis within 5s")
	}
	if !s.Up() {
		t.Error("Up() = false after the probe found redis")
	}
}

// A cancelled caller is not an outage.
func TestCallerCancelNotCounted(t *testing.T) {
	m := miniredis.RunT(t)
	var errs atomic.Int64
	s, err := Open(t.Context(), "redis://"+m.Addr(), &Options{OnError: func() { errs.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Do(ctx, ping); err == nil {
		t.Fatal("Do(cancelled ctx) = nil, want the context's error")
	}
	if !s.Up() || errs.Load() != 0 {
		t.Errorf("after a cancelled call: Up() = %v, errors %d; want true, 0", s.Up(), errs.Load())
	}
}

// A URL that is not Redis's is refused, saying how to write one, without
// the password.
func TestOpenBadURL(t *testing.T) {
	for _, u := range []string{"redis://:hunter2secret@127.0.0.1:notaport/0", "redis://:hunter2secret@127.0.0.1:6379/notadb", "http://:hunter2secret@127.0.0.1:6379"} {
		s, err := Open(t.Context(), u, nil)
		if err == nil {
			s.Close()
			t.Errorf("Open(%q) = nil error, want one", u)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, "hunter2secret") || !strings.Contains(msg, "redis://[:password@]host:6379/0") {
			t.Errorf("Open(%q) = %q; want the shape of a Redis URL and no password", u, msg)
		}
	}
}
