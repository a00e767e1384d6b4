package mcpfront

import (
	"context"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// Sessions as the HTTP paths need them, and the idle expiry of streamable
// HTTP sessions (server.session_idle_ttl).
//
// toolgate expires idle sessions itself rather than through mcp-go's
// sweeper, which counts as activity only what passes through mcp-go's own
// POST and GET handling. JSON-RPC batches do not (batch.go hands their
// messages to HandleMessage, since mcp-go's POST handling drops session
// notifications it cannot stream), so with mcp-go's sweeper a client that
// sends only batches would lose its session. Here a session is idle when no
// request of its is in flight — a POST, a batch, or an open GET stream,
// which mcp-go keeps alive with heartbeats — and none has been for
// session_idle_ttl; it is then ended with a DELETE through mcp-go, exactly
// as a client ends it, so mcp-go's state and toolgate's thread go with it.

// clientSession is a live mcp-go session (any transport).
type clientSession struct {
	session server.ClientSession
	// streamable: mcp-go's streamable HTTP session type, the one the idle
	// expiry applies to.
	streamable bool
	version    atomic.Pointer[string] // negotiated over streamable HTTP; nil before (or for another transport)
	active     atomic.Int32           // requests of the session in flight
	last       atomic.Int64           // when the last request ended (or the session started); Unix ns
}

// streamableSession is implemented by mcp-go's streamable HTTP sessions
// only (its type is unexported).
type streamableSession interface {
	UpgradeToSSEWhenReceiveNotification()
}

// clientStarted and clientEnded keep f.clients in step with mcp-go's
// registered sessions (its register and unregister hooks).
// A session mcp-go registers while it serves a GET (one naming no or an
// unknown session ID) counts that GET as its request in flight.
func (f *Front) clientStarted(ctx context.Context, s server.ClientSession) {
	id := s.SessionID()
	if id == "" {
		return
	}
	_, streamable := s.(streamableSession)
	c := &clientSession{session: s, streamable: streamable}
	c.last.Store(time.Now().UnixNano())
	// mcp-go registers a session it initializes with its version already
	// set, whatever Mcp-Session-Id the initialize carried; one registered
	// for a GET has none.
	if v := protocolVersion(s); streamable && v != "" {
		c.version.Store(&v)
	}
	if reg, ok := ctx.Value(streamRegKey{}).(*streamReg); ok && streamable {
		c.begin()
		reg.c = c // the hook runs on the GET's goroutine, within ServeHTTP
	}
	f.clients.Store(id, c)
}

// streamReg receives the session mcp-go registers while serving a GET.
type streamReg struct{ c *clientSession }

type streamRegKey struct{}

func (f *Front) clientEnded(s server.ClientSession) {
	// Only s's entry: a GET may have registered a new session under the
	// same ID meanwhile.
	if v, ok := f.clients.Load(s.SessionID()); ok && v.(*clientSession).session == s {
		f.clients.CompareAndDelete(s.SessionID(), v)
	}
}

// liveClient returns live session id, or nil when mcp-go has none by that
// ID (never had, or unregistered it).
func (f *Front) liveClient(id string) *clientSession {
	if v, ok := f.clients.Load(id); ok {
		return v.(*clientSession)
	}
	return nil
}

// streamableVersion is the protocol version of a session initialized over
// streamable HTTP; "" for nil, a session of another transport, or one
// mcp-go registered without an initialize (a GET with an unknown ID).
func (c *clientSession) streamableVersion() string {
	if c == nil {
		return ""
	}
	if v := c.version.Load(); v != nil {
		return *v
	}
	return ""
}

// expiring is the active count of a session the sweeper has claimed.
const expiring = math.MinInt32

// begin and end bracket a request of the session. begin reports false,
// and the request must not run in the session, when the sweeper is ending
// it; nil begins (and ends) nothing.
func (c *clientSession) begin() bool {
	if c == nil {
		return true
	}
	for {
		n := c.active.Load()
		if n < 0 {
			return false
		}
		if c.active.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (c *clientSession) end() {
	if c != nil {
		c.last.Store(time.Now().UnixNano())
		c.active.Add(-1)
	}
}

// claimIdle reports whether the session has been idle for ttl at now and,
// if so, claims it for the sweeper: from then on begin refuses.
func (c *clientSession) claimIdle(now time.Time, ttl time.Duration) bool {
	last := c.last.Load()
	if now.Sub(time.Unix(0, last)) < ttl || !c.active.CompareAndSwap(0, expiring) {
		return false
	}
	if c.last.Load() != last { // a request began and ended meanwhile
		c.active.Store(0)
		return false
	}
	return true
}

// serveStream serves a request other than a POST (a GET stream, a
// DELETE) for session sid ("" for none), counting it as activity of the
// session, including one mcp-go registers while serving it.
func (f *Front) serveStream(w http.ResponseWriter, r *http.Request, p *httpParts, sid string) {
	c := f.liveClient(sid)
	if !c.begin() {
		writeUnknownSession(w)
		return
	}
	defer c.end()
	if c == nil && r.Method == http.MethodGet {
		reg := &streamReg{}
		defer func() { reg.c.end() }()
		p.streamable.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), streamRegKey{}, reg)))
		return
	}
	p.streamable.ServeHTTP(w, r)
}

// sweepInterval is how often idle sessions are looked for, for ttl: a
// session lives at most a quarter of ttl past it.
func sweepInterval(ttl time.Duration) time.Duration {
	return max(ttl/4, time.Second)
}

// idleSweeper ends the streamable HTTP sessions idle for ttl, every
// sweepInterval(ttl), until stop.
type idleSweeper struct {
	stop context.CancelFunc
	wg   sync.WaitGroup
}

func (f *Front) startSweeper(p *httpParts, ttl time.Duration) *idleSweeper {
	ctx, stop := context.WithCancel(context.Background())
	sw := &idleSweeper{stop: stop}
	sw.wg.Go(func() {
		t := time.NewTicker(sweepInterval(ttl))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				f.sweepIdle(ctx, p, ttl, now)
			}
		}
	})
	return sw
}

func (sw *idleSweeper) close() {
	if sw != nil {
		sw.stop()
		sw.wg.Wait()
	}
}

// sweepIdle ends every streamable HTTP session idle for ttl at now.
func (f *Front) sweepIdle(ctx context.Context, p *httpParts, ttl time.Duration, now time.Time) {
	f.clients.Range(func(k, v any) bool {
		if c := v.(*clientSession); c.streamable && c.claimIdle(now, ttl) {
			f.expire(ctx, p, k.(string), c, now)
		}
		return ctx.Err() == nil
	})
}

// expire ends session id as its client would, with a DELETE through
// mcp-go: mcp-go forgets the session and unregisters it, which ends its
// thread.
func (f *Front) expire(ctx context.Context, p *httpParts, id string, c *clientSession, now time.Time) {
	idle := now.Sub(time.Unix(0, c.last.Load()))
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, f.o.MCPPath, http.NoBody)
	if err != nil {
		return // unreachable: the method and path are valid
	}
	req.Header.Set(server.HeaderKeySessionID, id)
	rec := &elementRecorder{header: http.Header{}}
	p.streamable.ServeHTTP(rec, req)
	if rec.code != 0 && rec.code != http.StatusOK {
		// The status only: mcp-go's message may name the session.
		f.logger.Warn("ending an idle session failed", "status", rec.code)
		c.active.Store(0) // unclaimed: it serves on, and the next sweep tries again
		return
	}
	f.logger.Info("session ended after being idle", "idle", idle.Round(time.Second).String(),
		"limit", "server.session_idle_ttl")
}
