package mcpup

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// askedPeer is a client that hands each request it gets to the test (on
// asked, its params) and answers it with what the test sends on answer.
type askedPeer struct {
	session string
	asked   chan string
	answer  chan json.RawMessage
}

func newAskedPeer(session string) *askedPeer {
	return &askedPeer{session: session, asked: make(chan string, 4), answer: make(chan json.RawMessage, 4)}
}

func (p *askedPeer) Session() string { return p.session }

func (p *askedPeer) Request(ctx context.Context, _ string, params json.RawMessage) (json.RawMessage, error) {
	p.asked <- string(params)
	select {
	case a := <-p.answer:
		return a, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (p *askedPeer) Notify(string, map[string]any) {}

// wantAsked waits for p to be asked and checks that the request is the
// one whose message is want.
func (p *askedPeer) wantAsked(t *testing.T, want string) {
	t.Helper()
	select {
	case got := <-p.asked:
		if !strings.Contains(got, want) {
			t.Fatalf("%s was asked %s, want the request %q", p.session, got, want)
		}
	case <-time.After(waitLimit):
		t.Fatalf("%s was never asked %q", p.session, want)
	}
}

// wantNotAsked checks that p has been asked nothing more.
func (p *askedPeer) wantNotAsked(t *testing.T) {
	t.Helper()
	select {
	case got := <-p.asked:
		t.Errorf("%s was asked %s, a request of another client's call", p.session, got)
	default:
	}
}

// upMessage is a message toolgate wrote to the upstream, as the test
// (the upstream) reads it.
type upLine struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// sharedStdio is a stdio connection whose upstream is the test, shared by
// the calls the test puts in flight.
type sharedStdio struct {
	c     *conn
	out   *os.File    // the upstream's stdout
	lines chan upLine // what toolgate writes to the upstream
}

func newSharedStdio(t *testing.T) *sharedStdio {
	t.Helper()
	tr, in, out := pipeTransport(t)
	c := newTestConn(bareUpstream(t))
	c.tr = tr
	tr.SetRequestHandler(c.onRequest)
	s := &sharedStdio{c: c, out: out, lines: make(chan upLine, 64)}
	read := make(chan struct{})
	go func() {
		defer close(read)
		for {
			b, err := in.ReadBytes('\n')
			if err != nil {
				return
			}
			var l upLine
			if json.Unmarshal(b, &l) == nil {
				s.lines <- l
			}
		}
	}()
	t.Cleanup(func() {
		_ = tr.Close() // the reader reads to EOF
		<-read
	})
	return s
}

// call puts a call of p in flight until t ends, as request id of the
// connection's.
func (s *sharedStdio) call(t *testing.T, p *askedPeer, id string) {
	ctx, cancel := context.WithCancel(WithPeer(t.Context(), p))
	forget := s.c.trackPeer(ctx, id)
	t.Cleanup(func() { forget(); cancel() })
}

// aliceWaits returns a shared stdio connection on which alice's call has
// been asked the upstream's request 1, "alice's question", and waits for
// her answer, and bob's call is in flight.
func aliceWaits(t *testing.T) (s *sharedStdio, alice, bob *askedPeer) {
	t.Helper()
	s = newSharedStdio(t)
	alice, bob = newAskedPeer("alice"), newAskedPeer("bob")
	s.call(t, alice, "toolgate-1")
	s.elicit(t, 1, "alice's question")
	alice.wantAsked(t, "alice's question")
	s.call(t, bob, "toolgate-2")
	return s, alice, bob
}

// elicit writes the upstream's elicitation/create with id and message.
func (s *sharedStdio) elicit(t *testing.T, id int, message string) {
	t.Helper()
	msg := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"elicitation/create","params":{"message":%q,"requestedSchema":{"type":"object"}}}`+"\n", id, message)
	if _, err := io.WriteString(s.out, msg); err != nil {
		t.Fatal(err)
	}
}

// next returns the next message toolgate wrote that is not a ping
// (pings are returned when ping is set, others then skipped).
func (s *sharedStdio) next(t *testing.T, ping bool) upLine {
	t.Helper()
	for {
		select {
		case l := <-s.lines:
			if (l.Method == "ping") == ping {
				return l
			}
		case <-time.After(waitLimit):
			t.Fatalf("toolgate wrote nothing more to the upstream (want a ping: %v)", ping)
		}
	}
}

// pong answers the next ping toolgate sends: the fence it runs once a
// request is relayed to a client waiting for its answer.
func (s *sharedStdio) pong(t *testing.T) {
	t.Helper()
	p := s.next(t, true)
	if _, err := fmt.Fprintf(s.out, `{"jsonrpc":"2.0","id":%s,"result":{}}`+"\n", p.ID); err != nil {
		t.Fatal(err)
	}
}

// answered returns toolgate's answer to the upstream's request id.
func (s *sharedStdio) answered(t *testing.T, id int) upLine {
	t.Helper()
	l := s.next(t, false)
	if string(l.ID) != fmt.Sprint(id) {
		t.Fatalf("toolgate answered %s (%s), want an answer to request %d", l.ID, l.Result, id)
	}
	return l
}

// wantRefused checks that l refuses a request as one that cannot be
// attributed.
func wantRefused(t *testing.T, l upLine) {
	t.Helper()
	if l.Error == nil || l.Error.Code != -32603 || !strings.Contains(l.Error.Message, "several clients") {
		t.Errorf("answer %+v, want -32603 saying calls of several clients are in flight", l)
	}
}

// On a shared stdio upstream, whose requests name no call, a call waiting
// for its client's answer holds only itself (issue 26): once a fence (a
// ping answered after it) shows that the upstream sent everything it sent
// along with the waiting call's request, a request is the other client's
// when only one other client has a call in flight. A request read before
// the fence passed may be the waiting call's, sent along with its first
// (two elicitations at once, say): it reaches no one. When every call
// waits, none is left out.
func TestRelayWaitingCallHoldsOnlyItself(t *testing.T) {
	t.Run("after the fence", func(t *testing.T) {
		s, alice, bob := aliceWaits(t)
		s.pong(t)
		s.elicit(t, 2, "bob's question")
		bob.wantAsked(t, "bob's question")

		// Both wait now (bob's fence passed too): a request of either
		// reaches neither.
		s.pong(t)
		s.elicit(t, 3, "whose question")
		wantRefused(t, s.answered(t, 3))

		bob.answer <- json.RawMessage(`{"action":"accept","content":{"name":"Bob"}}`)
		if l := s.answered(t, 2); !strings.Contains(string(l.Result), "Bob") {
			t.Errorf("bob's answer reached the upstream as %+v", l)
		}
		alice.answer <- json.RawMessage(`{"action":"accept","content":{"name":"Alice"}}`)
		if l := s.answered(t, 1); !strings.Contains(string(l.Result), "Alice") {
			t.Errorf("alice's answer reached the upstream as %+v", l)
		}
		alice.wantNotAsked(t)
		bob.wantNotAsked(t)
	})

	t.Run("before the fence", func(t *testing.T) {
		s, alice, bob := aliceWaits(t)
		// Sent before the upstream read the fence's ping: it may be
		// alice's second question.
		s.elicit(t, 2, "alice's other question")
		wantRefused(t, s.answered(t, 2))
		bob.wantNotAsked(t)

		alice.answer <- json.RawMessage(`{"action":"decline"}`)
		s.answered(t, 1)
		alice.wantNotAsked(t)
	})
}

// On a shared stdio upstream, a request that arrives after another
// client's call ended may be that call's, sent late: it is refused, not
// handed to the one call left in flight (issue 31: a request sent after
// admin's call ended went to alice's stream). A call that had the
// connection to itself keeps getting its requests.
func TestRelayRefusesAfterAnotherCallEnded(t *testing.T) {
	s := newSharedStdio(t)
	admin, alice := newAskedPeer("admin"), newAskedPeer("alice")
	ctx, cancel := context.WithCancel(WithPeer(t.Context(), admin))
	defer cancel()
	adminEnds := s.c.trackPeer(ctx, "toolgate-1")
	s.call(t, alice, "toolgate-2")
	adminEnds() // admin's call is over; alice's alone is in flight
	s.elicit(t, 1, "admin's late question")
	if l := s.answered(t, 1); l.Error == nil || !strings.Contains(l.Error.Message, "ended") {
		t.Errorf("answer %+v, want an error saying another client's call ended while this one ran", l)
	}
	alice.wantNotAsked(t)

	// A call that had the connection to itself still gets its requests.
	s2 := newSharedStdio(t)
	bob := newAskedPeer("bob")
	s2.call(t, bob, "toolgate-3")
	s2.elicit(t, 2, "bob's question")
	bob.wantAsked(t, "bob's question")
	bob.answer <- json.RawMessage(`{"action":"decline"}`)
	s2.answered(t, 2)
}
