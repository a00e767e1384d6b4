package tests

// A replica crashes under load (issue 26, requirement 3): session clients,
// 2026-07-28 stateless loops and 2026-07-28 thread handle loops run
// through HAProxy with the shipped config while one replica is killed with
// SIGKILL. Calls that were not in flight on it are not lost (the
// balancer's retry-on conn-failure); each session on it ends with exactly
// one error, after which its client initializes again and carries on
// elsewhere; each handle whose thread lived on it gets exactly one notice
// naming it, and a new handle that works; the other sessions and handles
// see nothing; started again, the replica takes new sessions.

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// Bounds of the crash test.
const (
	crashSessions  = 6  // 2025 session clients
	crashLoops     = 2  // 2026-07-28 stateless call loops
	crashHandles   = 3  // 2026-07-28 thread handle loops, one per replica
	crashWarmCalls = 10 // calls each loop makes before the kill
	crashAfter     = 20 // calls each loop makes after the kill, before the restart
)

// timedCall is one stateless call of a loop: when it ran and how it ended.
type timedCall struct {
	start, end time.Time
	err        error
}

// sessionLog is what one session client lived through.
type sessionLog struct {
	first  string // the replica its first session was on
	errors []error
	// okAfterError counts the calls that worked after its last error.
	okAfterError int
	calls        atomic.Int64 // calls that worked, for the test to watch
	gave         atomic.Bool  // it gave up: it could not initialize
}

// sessionOwnerOf is the replica a toolgate session ID names.
func sessionOwnerOf(sid string) string {
	rest, _ := strings.CutPrefix(sid, "mcp-session-")
	owner, _, _ := strings.Cut(rest, ".")
	return owner
}

// runSessionClient puts and gets on the scratchpad of a session through
// base until stop is closed; on an error it records it, and initializes a
// new session. Its first session is open when ready is called.
func runSessionClient(t *testing.T, base string, n int, log *sessionLog, stop <-chan struct{}, ready func()) {
	open := func() (*client.Client, error) {
		ctx, cancel := context.WithTimeout(t.Context(), flowTimeout)
		defer cancel()
		return open2025(ctx, base)
	}
	step := func(c *client.Client, i int) error {
		ctx, cancel := context.WithTimeout(t.Context(), flowTimeout)
		defer cancel()
		want := fmt.Sprintf("client %d call %d", n, i)
		if _, err := callText(ctx, c, "scratchpad", map[string]any{"op": "put", "key": "k", "value": want}, ""); err != nil {
			return err
		}
		got, err := callText(ctx, c, "scratchpad", map[string]any{"op": "get", "key": "k"}, "")
		if err == nil && got != want {
			err = fmt.Errorf("get = %q, want %q: the session's thread lost its state", got, want)
		}
		return err
	}
	c, err := open()
	if err != nil {
		log.errors = append(log.errors, fmt.Errorf("first initialize: %w", err))
		log.gave.Store(true)
		ready()
		return
	}
	log.first = sessionOwnerOf(c.GetSessionId())
	ready()
	for i := 0; ; i++ {
		select {
		case <-stop:
			_ = c.Close()
			return
		default:
		}
		if err := step(c, i); err != nil {
			log.errors = append(log.errors, fmt.Errorf("session on %s, call %d: %w", sessionOwnerOf(c.GetSessionId()), i, err))
			log.okAfterError = 0
			_ = c.Close()
			if c, err = open(); err != nil {
				log.errors = append(log.errors, fmt.Errorf("initializing again: %w", err))
				log.gave.Store(true)
				return
			}
			continue
		}
		log.okAfterError++
		log.calls.Add(1)
	}
}

// handleLog is what one thread handle loop lived through. The test's poll
// reads notices and errors while the loop runs, so both are written and
// read there under mu; after the loop ends they are read directly.
type handleLog struct {
	first   string      // the replica its first handle's thread was on
	mu      sync.Mutex  // guards notices and errors while the loop runs
	notices []string    // the replicas the lost-thread notices named
	errors  []timedCall // the calls that failed
	// okAfterNotice counts the gets that worked after its last notice.
	okAfterNotice int
	calls         atomic.Int64 // gets that worked, for the test to watch
	gave          atomic.Bool  // it gave up: it has no handle
}

// fail records a failed call.
func (l *handleLog) fail(c timedCall) {
	l.mu.Lock()
	l.errors = append(l.errors, c)
	l.mu.Unlock()
}

// progress says, for the test's poll, how the loop fares so far.
func (l *handleLog) progress() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var last error
	if len(l.errors) > 0 {
		last = l.errors[len(l.errors)-1].err
	}
	return fmt.Sprintf("%s: %d errors (last %v), notices %v", l.first, len(l.errors), last, l.notices)
}

// handleOwner is the replica a thread handle (th_<replica>.<sealed>)
// names.
func handleOwner(h string) string {
	rest, _ := strings.CutPrefix(h, "th_")
	owner, _, _ := strings.Cut(rest, ".")
	return owner
}

// lostNotice matches the notice of a call whose handle's thread is gone
// with its replica, and captures that replica.
var lostNotice = regexp.MustCompile(`the thread your handle named lived on toolgate replica ([a-z0-9-]+), which cannot be reached`)

// runHandleLoop keeps a value in the scratchpad of a thread handle whose
// thread lives on replica want (it puts until the balancer sends a put
// there), then gets it with the handle through base until stop is closed.
// A get that says the thread was lost with its replica is noted, and the
// loop carries on with the new handle that result gives, putting the
// value again.
func runHandleLoop(t *testing.T, base, want string, log *handleLog, stop <-chan struct{}, ready func()) {
	ctx := t.Context()
	octx, cancel := context.WithTimeout(ctx, flowTimeout)
	c, err := open2026(octx, base)
	if err == nil {
		_, err = c.ListTools(octx, mcp.ListToolsRequest{}) // so that handles go as Mcp-Param-Toolgate-Thread
	}
	cancel()
	if err != nil {
		log.fail(timedCall{err: fmt.Errorf("negotiating: %w", err)})
		log.gave.Store(true)
		ready()
		return
	}
	defer c.Close()
	// call makes a call; a result that is an error is one, unless it is
	// the lost-thread notice's (a get in a new thread finds no note).
	call := func(args map[string]any) (*mcp.CallToolResult, error) {
		ctx, cancel := context.WithTimeout(ctx, flowTimeout)
		defer cancel()
		start := time.Now()
		res, err := c.CallTool(ctx, callRequest("scratchpad", args, ""))
		if err == nil && res.IsError && !lostNotice.MatchString(resultText(res)) {
			err = fmt.Errorf("isError: %s", resultText(res))
		}
		if err != nil {
			err = fmt.Errorf("%v with a handle on %q: %w", args["op"], handleOwner(fmt.Sprint(args["thread"])), err)
			log.fail(timedCall{start: start, end: time.Now(), err: err})
		}
		return res, err
	}
	value := "kept by the handle loop on " + want
	var handle string
	for range 30 {
		res, err := call(map[string]any{"op": "put", "key": "k", "value": value})
		if err != nil {
			continue
		}
		if handle = handleOf(res); handleOwner(handle) == want {
			break
		}
	}
	if log.first = handleOwner(handle); log.first != want {
		log.fail(timedCall{err: fmt.Errorf("no put in 30 made a thread on %s (the last on %q)", want, log.first)})
		log.gave.Store(true)
		ready()
		return
	}
	ready()
	for {
		select {
		case <-stop:
			return
		default:
		}
		res, err := call(map[string]any{"op": "get", "key": "k", "thread": handle})
		if err != nil {
			continue
		}
		text := resultText(res)
		if m := lostNotice.FindStringSubmatch(text); m != nil {
			log.mu.Lock()
			log.notices = append(log.notices, m[1])
			log.mu.Unlock()
			log.okAfterNotice = 0
			if handle = handleOf(res); handle == "" {
				log.fail(timedCall{err: fmt.Errorf("the lost-thread notice came with no new handle")})
				return
			}
			_, _ = call(map[string]any{"op": "put", "key": "k", "value": value, "thread": handle})
			continue
		}
		if text != value {
			log.fail(timedCall{err: fmt.Errorf("get with a handle on %s = %q, want %q", handleOwner(handle), text, value)})
			continue
		}
		log.okAfterNotice++
		log.calls.Add(1)
	}
}

// runStatelessLoop calls calc through base, as a 2026-07-28 client, until
// stop is closed, and records every call. count counts them; a loop that
// cannot negotiate records that and sets it to -1.
func runStatelessLoop(t *testing.T, base string, calls *[]timedCall, count *atomic.Int64, stop <-chan struct{}) {
	ctx := t.Context()
	octx, cancel := context.WithTimeout(ctx, flowTimeout)
	c, err := open2026(octx, base)
	cancel()
	if err != nil {
		*calls = append(*calls, timedCall{err: fmt.Errorf("negotiating: %w", err)})
		count.Store(-1)
		return
	}
	defer c.Close()
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		cctx, cancel := context.WithTimeout(ctx, flowTimeout)
		call := timedCall{start: time.Now()}
		got, err := callText(cctx, c, "calc", map[string]any{"expression": fmt.Sprintf("%d+1", i)}, "")
		cancel()
		call.end = time.Now()
		if err == nil && got != fmt.Sprint(i+1) {
			err = fmt.Errorf("calc %d+1 = %q", i, got)
		}
		call.err = err
		*calls = append(*calls, call)
		count.Add(1)
	}
}

func TestClusterReplicaCrash(t *testing.T) {
	needProgram(t, "haproxy", "haproxy")
	c := startCluster(t, "server: {shutdown_grace: 1s}\nguards: {loop: {action: \"off\"}}\nbuiltin: [calc, scratchpad]\n", true)
	lb := startHAProxy(t, "../examples/cluster/haproxy.cfg", c.addrs)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	sessions := make([]*sessionLog, crashSessions)
	var opened sync.WaitGroup
	for i := range sessions {
		sessions[i] = &sessionLog{}
		opened.Add(1)
		wg.Go(func() { runSessionClient(t, lb.URL, i, sessions[i], stop, opened.Done) })
	}
	handleLoops := make([]*handleLog, crashHandles)
	for i := range handleLoops {
		handleLoops[i] = &handleLog{}
		opened.Add(1)
		wg.Go(func() { runHandleLoop(t, lb.URL, replicaIDs[i%len(replicaIDs)], handleLoops[i], stop, opened.Done) })
	}
	loops := make([][]timedCall, crashLoops)
	counts := make([]atomic.Int64, crashLoops)
	for i := range loops {
		wg.Go(func() { runStatelessLoop(t, lb.URL, &loops[i], &counts[i], stop) })
	}
	stopped := false
	halt := func() {
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
		}
	}
	t.Cleanup(halt) // a failed poll below ends the test with the loops running
	opened.Wait()

	// The victim: the replica of the first session client's session, so
	// that at least one session dies with it.
	victimID := sessions[0].first
	victim := -1
	for i, id := range replicaIDs {
		if id == victimID {
			victim = i
		}
	}
	if victim < 0 {
		halt()
		t.Fatalf("session client 0 is on replica %q, not one of %v: %v", victimID, replicaIDs, sessions[0].errors)
	}
	// atLeast waits until every client made n calls, or gave up (its
	// errors are reported below).
	atLeast := func(what string, n int64) {
		t.Helper()
		pollUntil(t, pollTimeout, what, func() (bool, string) {
			var got []int64
			done := true
			for i := range counts {
				c := counts[i].Load()
				got = append(got, c)
				done = done && (c >= n || c < 0)
			}
			for _, s := range sessions {
				c := s.calls.Load()
				got = append(got, c)
				done = done && (c >= n || s.gave.Load())
			}
			for _, h := range handleLoops {
				c := h.calls.Load()
				got = append(got, c)
				done = done && (c >= n || h.gave.Load())
			}
			var hs []string
			for _, h := range handleLoops {
				hs = append(hs, h.progress())
			}
			return done, fmt.Sprintf("calls so far, loops, sessions, then handles: %v; handles: %s", got, strings.Join(hs, "; "))
		})
	}
	atLeast("every client's calls before the kill", crashWarmCalls)
	var base []int64
	for i := range counts {
		base = append(base, counts[i].Load())
	}

	killStart := time.Now()
	c.replicas[victim].Kill(t)
	killEnd := time.Now()
	atLeast("every client's calls after the kill", crashWarmCalls+crashAfter)

	// Started again, the replica takes new sessions: HAProxy's health
	// check sees it, and round robin sends it initializes.
	c.restart(t, victim)
	pollUntil(t, pollTimeout, "a new session on the restarted "+victimID, func() (bool, string) {
		ctx, cancel := context.WithTimeout(t.Context(), flowTimeout)
		defer cancel()
		cl, err := open2025(ctx, lb.URL)
		if err != nil {
			return false, err.Error()
		}
		defer cl.Close()
		owner := sessionOwnerOf(cl.GetSessionId())
		if owner != victimID {
			return false, "the last new session is on " + owner
		}
		_, err = callText(ctx, cl, "scratchpad", map[string]any{"op": "put", "key": "k", "value": "v"}, "")
		return err == nil, fmt.Sprint(err)
	})
	halt()

	// Stateless calls: only those in flight while the victim died may
	// fail, at most two a loop (as for the handle loops below: the call on
	// it as it died, and one sent before the kill was over on a connection
	// HAProxy still held to it, a POST it does not send again); the
	// balancer sent every other to a live replica.
	var lost, total, failedAll int
	for i, calls := range loops {
		failed := 0
		for _, call := range calls {
			total++
			if call.err == nil {
				continue
			}
			failed++
			if call.start.After(killEnd) || call.end.Before(killStart) {
				if lost++; lost > 3 {
					continue // the count below says how many
				}
				t.Errorf("stateless loop %d: a call not in flight at the kill (%v to %v, kill %v to %v) failed: %v",
					i, call.start.Format(time.StampMicro), call.end.Format(time.StampMicro), killStart.Format(time.StampMicro), killEnd.Format(time.StampMicro), call.err)
			}
		}
		if len(calls) <= int(base[i]) {
			t.Errorf("stateless loop %d made no call after the kill", i)
		}
		if failed > 2 {
			t.Errorf("stateless loop %d: %d calls in flight at the kill failed, want at most 2", i, failed)
		}
		failedAll += failed
	}
	if lost > 0 {
		t.Errorf("%d of %d stateless calls not in flight on the killed replica failed, want 0", lost, total)
	}

	// Sessions: those on the victim end with one error, then work again;
	// the others see none.
	onVictim := 0
	for i, s := range sessions {
		switch {
		case s.first == victimID:
			onVictim++
			if len(s.errors) != 1 {
				t.Errorf("session client %d (on the killed %s) had %d errors, want exactly 1: %v", i, victimID, len(s.errors), s.errors)
			}
			if s.okAfterError == 0 {
				t.Errorf("session client %d (on the killed %s) made no call that worked after initializing again", i, victimID)
			}
		case len(s.errors) != 0:
			t.Errorf("session client %d (on %s) had errors, want none: %v", i, s.first, s.errors)
		}
	}

	// Handles: those whose thread was on the victim get one notice naming
	// it, then work with the new handle; the others see nothing. Only a
	// call in flight on the victim as it died may fail (a transport error:
	// a call is never retried).
	for i, h := range handleLoops {
		var inFlight, others []error
		for _, call := range h.errors {
			if !call.start.IsZero() && !call.start.After(killEnd) && !call.end.Before(killStart) {
				inFlight = append(inFlight, call.err)
			} else {
				others = append(others, call.err)
			}
		}
		if len(others) > 0 || len(inFlight) > 2 {
			t.Errorf("handle loop %d (its thread on %s): failed calls %v not in flight at the kill, %v in flight; want none, and at most 2 in flight", i, h.first, others, inFlight)
		}
		switch {
		case h.first == victimID:
			if len(h.notices) != 1 || h.notices[0] != victimID {
				t.Errorf("handle loop %d (its thread on the killed %s): notices naming %v, want one naming %s", i, victimID, h.notices, victimID)
			}
			if h.okAfterNotice == 0 {
				t.Errorf("handle loop %d (its thread on the killed %s) made no get that worked with its new handle", i, victimID)
			}
		case len(h.notices) != 0:
			t.Errorf("handle loop %d (on %s): notices %v; want none", i, h.first, h.notices)
		}
	}
	t.Logf("killed %s: %d stateless calls, %d failed in flight, %d lost; %d of %d sessions on it", victimID, total, failedAll, lost, onVictim, crashSessions)
}
