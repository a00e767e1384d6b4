package events

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/toolgate/toolgate/internal/principal"
	"github.com/toolgate/toolgate/registry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var echo = &registry.Tool{Name: "echo", Source: "embedder", Kind: registry.Stateless}

// stalledWriter is an /events consumer that stops reading: its first
// Write blocks until release is closed.
type stalledWriter struct {
	header  http.Header
	entered chan struct{} // closed when the first Write starts
	release chan struct{}
	once    sync.Once
}

func (s *stalledWriter) Header() http.Header { return s.header }
func (s *stalledWriter) WriteHeader(int)     {}
func (s *stalledWriter) Flush()              {}
func (s *stalledWriter) Write(p []byte) (int, error) {
	s.once.Do(func() { close(s.entered) })
	<-s.release
	return len(p), nil
}

// TestStalledStream proves the bound: an /events consumer that reads
// nothing holds at most the buffer's events, the one past them drops it
// (counted through OnDrop), and publishing never waits meanwhile.
func TestStalledStream(t *testing.T) {
	const buffer = 256
	drops := 0
	b := NewBus(&Options{OnDrop: func() { drops++ }})
	s := &Server{Bus: b}
	w := &stalledWriter{header: http.Header{}, entered: make(chan struct{}), release: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Go(func() {
		s.ServeEvents(w, httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/events", nil))
	})
	<-w.entered // subscribed, and stuck writing
	subscribed := func() *Subscription {
		b.mu.Lock()
		defer b.mu.Unlock()
		for s := range b.subs {
			return s
		}
		return nil
	}
	sub := subscribed()
	if sub == nil {
		t.Fatal("no subscription while the handler writes")
	}
	for range buffer {
		b.Publish(New(StatePending, b.NextID(), echo, "", "", ""))
	}
	if got := len(sub.ch); got != buffer || subscribed() != sub {
		t.Fatalf("after %d events: %d queued (subscribed: %v), want %d and still subscribed", buffer, got, subscribed() != nil, buffer)
	}
	b.Publish(New(StatePending, b.NextID(), echo, "", "", ""))
	if subscribed() != nil || !sub.Dropped() || drops != 1 {
		t.Fatalf("a consumer %d events behind: subscribed %v, dropped %v, OnDrop called %d times; want it dropped, once", buffer+1, subscribed() != nil, sub.Dropped(), drops)
	}
	if got := len(sub.ch); got != buffer {
		t.Errorf("the dropped consumer holds %d events, want the buffer's %d", got, buffer)
	}
	close(w.release)
	wg.Wait() // the handler drains what was queued and returns
}

// TestSubscribersCapped checks that no client can open event streams
// without bound: past maxSubscribers a stream gets 503 with Retry-After,
// and a stream closed frees its place.
func TestSubscribersCapped(t *testing.T) {
	b := NewBus(nil)
	srv := httptest.NewServer(http.HandlerFunc((&Server{Bus: b}).ServeEvents))
	t.Cleanup(srv.Close)
	t.Cleanup(b.Close) // ends the streams, so that srv.Close returns
	subs := make([]*Subscription, 0, maxSubscribers)
	for range maxSubscribers {
		s, err := b.Subscribe(Filter{})
		if s == nil || err != nil {
			t.Fatalf("subscription %d refused", len(subs)+1)
		}
		subs = append(subs, s)
	}
	resp, err := http.Get(srv.URL + "/events")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("stream %d = HTTP %d (Retry-After %q), want 503 with Retry-After", maxSubscribers+1, resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	b.Unsubscribe(subs[0])
	if s, err := b.Subscribe(Filter{}); s == nil || err != nil {
		t.Error("no place after a stream closed")
	}
}

// The filter a query asks for, narrowed with Scoped to what the viewer
// may see.
func TestFilter(t *testing.T) {
	alice := &principal.Identity{Name: "alice"}
	admin := &principal.Identity{Name: "root", Admin: true}
	tests := []struct {
		name    string
		query   string
		scoped  bool
		viewer  *principal.Identity
		event   Event
		want    bool
		wantErr bool
	}{
		{name: "all", event: Event{Tool: "echo", State: StatePending}, want: true},
		{name: "tool glob", query: "tool=ec*", event: Event{Tool: "echo"}, want: true},
		{name: "tool glob misses", query: "tool=ca*", event: Event{Tool: "echo"}},
		{name: "outcome error", query: "outcome=error", event: Event{State: StateError}, want: true},
		{name: "outcome error, not final", query: "outcome=error", event: Event{State: StateRunning}},
		{name: "outcome ok", query: "outcome=ok", event: Event{State: StateCompleted}, want: true},
		{name: "bad glob", query: "tool=[", wantErr: true},
		{name: "bad outcome", query: "outcome=maybe", wantErr: true},
		{name: "principal", query: "principal=bob", event: Event{Principal: "alice"}},
		{name: "scoped: own calls", scoped: true, viewer: alice, event: Event{Principal: "alice"}, want: true},
		{name: "scoped: another's", scoped: true, viewer: alice, event: Event{Principal: "bob"}},
		{name: "scoped: the embedder's", scoped: true, viewer: alice, event: Event{}},
		{name: "scoped: asking for another's", query: "principal=bob", scoped: true, viewer: alice, wantErr: true},
		{name: "scoped: no identity", scoped: true, wantErr: true},
		{name: "scoped: an admin sees all", scoped: true, viewer: admin, event: Event{Principal: "bob"}, want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, _ := url.ParseQuery(tc.query)
			f, err := ParseFilter(q)
			if err == nil {
				r := httptest.NewRequest(http.MethodGet, "/events", nil)
				if tc.viewer != nil {
					r = r.WithContext(principal.With(r.Context(), tc.viewer))
				}
				err = (&Server{Scoped: tc.scoped}).scopeToViewer(r, &f)
			}
			if (err != nil) != tc.wantErr {
				t.Fatalf("filter(%q) error = %v, want error %v", tc.query, err, tc.wantErr)
			}
			if err == nil && f.match(&tc.event) != tc.want {
				t.Errorf("filter(%q).match(%+v) = %v, want %v", tc.query, tc.event, !tc.want, tc.want)
			}
		})
	}
}

// Recent keeps the last recentCalls final events, oldest first, labelled.
func TestRecent(t *testing.T) {
	b := NewBus(nil)
	for i := range recentCalls + 5 {
		e := New(StateCompleted, b.NextID(), echo, "s:secret", "", "")
		if i%2 == 1 {
			e.Tool = "other"
		}
		b.Remember(e)
	}
	all := b.Recent(&Filter{})
	if len(all) != recentCalls || all[0].ID != "c-6" || all[len(all)-1].ID != "c-105" {
		t.Fatalf("Recent = %d events from %s to %s, want %d from c-6 to c-105", len(all), all[0].ID, all[len(all)-1].ID, recentCalls)
	}
	if strings.Contains(all[0].Thread, "secret") || all[0].Thread == "" {
		t.Errorf("a recent event's thread = %q, want its label", all[0].Thread)
	}
	f, _ := ParseFilter(url.Values{"tool": {"echo"}})
	if got := b.Recent(&f); len(got) != recentCalls/2 {
		t.Errorf("Recent(tool=echo) = %d events, want %d", len(got), recentCalls/2)
	}
}

// A stream starts with a comment, then sends each event the filter
// selects as event: call.
func TestServeEvents(t *testing.T) {
	b := NewBus(nil)
	srv := httptest.NewServer(http.HandlerFunc((&Server{Bus: b}).ServeEvents))
	t.Cleanup(srv.Close)
	t.Cleanup(b.Close)
	resp, err := http.Get(srv.URL + "/events?outcome=error")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, _ := br.ReadString('\n'); line != ": subscribed\n" {
		t.Fatalf("first line = %q, want the subscribed comment", line)
	}
	b.Publish(New(StateCompleted, "c-1", echo, "", "", ""))
	e := New(StateError, "c-2", echo, "", "", "")
	e.Message = Message(strings.Repeat("x", 3000))
	b.Publish(e)
	br.ReadString('\n') // blank line
	for _, want := range []string{"event: call\n", `data: {"state":"error","id":"c-2"`} {
		line, err := br.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, want) {
			t.Fatalf("line = %q, %v; want it to start with %q", line, err, want)
		}
		if strings.HasPrefix(line, "data: ") && (strings.Contains(line, strings.Repeat("x", maxMessage+1)) || !strings.Contains(line, "…")) {
			t.Errorf("the message is not capped at %d bytes", maxMessage)
		}
	}
}

// remote is the other replicas as a bus sees them: wanted says whether
// one watches, sent is what was handed to them.
type remote struct {
	wanted  bool
	sent    []Event
	watches int
}

func (r *remote) Wanted() bool              { return r.wanted }
func (r *remote) Send(e Event)              { r.sent = append(r.sent, e) }
func (r *remote) Watch(ctx context.Context) { r.watches++ }
func (r *remote) Unwatch()                  { r.watches-- }

// In a cluster, call IDs name the replica; events go to the other
// replicas only while one watches, labelled; theirs reach the
// subscribers here as they came, and their last events are remembered.
func TestClusterEvents(t *testing.T) {
	rem := &remote{}
	b := NewBus(&Options{Replica: "r2", Remote: rem})
	defer b.Close()
	if id := b.NextID(); id != "c-r2-1" {
		t.Errorf("NextID() = %q, want c-r2-1", id)
	}
	if b.Active() {
		t.Fatal("Active() with nobody watching anywhere")
	}
	b.Publish(New(StatePending, "c-r2-1", echo, "thread-x", "alice", ""))
	if len(rem.sent) != 0 {
		t.Fatalf("sent %d events while no other replica watches", len(rem.sent))
	}
	rem.wanted = true
	if !b.Active() {
		t.Fatal("Active() is false while another replica watches")
	}
	b.Publish(New(StatePending, "c-r2-2", echo, "thread-x", "alice", ""))
	if len(rem.sent) != 1 || rem.sent[0].Thread == "" || rem.sent[0].thread != "" {
		t.Fatalf("sent %+v, want one event with its thread hashed and the raw one gone", rem.sent)
	}

	sub, _ := b.Subscribe(Filter{})
	defer b.Unsubscribe(sub)
	theirs := Event{State: StateCompleted, ID: "c-r1-7", Tool: "echo", Thread: "abc123", Principal: "bob"}
	b.Deliver(theirs)
	if got := <-sub.C(); got.ID != "c-r1-7" || got.Thread != "abc123" {
		t.Errorf("delivered %+v, want c-r1-7 with its thread label kept", got)
	}
	if recent := b.Recent(&Filter{}); len(recent) != 1 || recent[0].Thread != "abc123" {
		t.Errorf("Recent() = %+v, want the other replica's call with its label", recent)
	}
}

// TestSubscribersPerPrincipal (issue 31): one principal seeing its own
// calls holds at most maxPerPrincipal streams, such principals together
// all but adminRoom, and admins (whose filter is not narrowed to their
// own calls) the rest.
func TestSubscribersPerPrincipal(t *testing.T) {
	b := NewBus(nil)
	t.Cleanup(b.Close)
	own := func(name string) Filter { return Filter{own: true, owner: name} }
	var bobs []*Subscription
	for range maxPerPrincipal {
		s, err := b.Subscribe(own("bob"))
		if err != nil {
			t.Fatalf("bob's stream %d: %v", len(bobs)+1, err)
		}
		bobs = append(bobs, s)
	}
	if _, err := b.Subscribe(own("bob")); err == nil || !strings.Contains(err.Error(), "one principal") {
		t.Errorf("bob's stream %d: %v, want refused for one principal's bound", maxPerPrincipal+1, err)
	}
	b.Unsubscribe(bobs[0])
	if _, err := b.Subscribe(own("bob")); err != nil {
		t.Errorf("bob's stream after closing one: %v", err)
	}
	for i := 0; b.owned < maxSubscribers-adminRoom; i++ {
		if _, err := b.Subscribe(own("p" + strconv.Itoa(i/maxPerPrincipal))); err != nil {
			t.Fatalf("principal stream %d: %v", b.owned+1, err)
		}
	}
	if _, err := b.Subscribe(own("carol")); err == nil || !strings.Contains(err.Error(), "kept for admins") {
		t.Errorf("a new principal's stream past %d: %v, want refused, the rest kept for admins", maxSubscribers-adminRoom, err)
	}
	for n := range adminRoom {
		if _, err := b.Subscribe(Filter{}); err != nil {
			t.Fatalf("admin stream %d with every principal stream taken: %v", n+1, err)
		}
	}
	if _, err := b.Subscribe(Filter{}); err == nil {
		t.Errorf("admin stream past %d: nil error, want refused", maxSubscribers)
	}
}

// rawRemote is a [RawRemote] whose sends are kept, encoded.
type rawRemote struct{ sent []json.RawMessage }

func (r *rawRemote) Wanted() bool            { return true }
func (r *rawRemote) Send(ev json.RawMessage) { r.sent = append(r.sent, ev) }
func (r *rawRemote) Watch(context.Context)   {}
func (r *rawRemote) Unwatch()                {}

// TestJSONRemote: an event one replica sends as JSON reaches the other's
// subscribers as it was sent; bytes that are not an event are dropped.
func TestJSONRemote(t *testing.T) {
	raw := &rawRemote{}
	r1 := NewBus(&Options{Replica: "r1", Remote: JSONRemote(raw)})
	defer r1.Close()
	r2 := NewBus(&Options{Replica: "r2"})
	defer r2.Close()
	sub, _ := r2.Subscribe(Filter{})
	defer r2.Unsubscribe(sub)
	e := New(StateCompleted, "c-r1-1", echo, "thread-x", "alice", "")
	e.Attempts, e.DurationMS = 2, 1.5
	r1.Publish(e)
	if len(raw.sent) != 1 {
		t.Fatalf("sent %d events, want 1", len(raw.sent))
	}
	r2.DeliverJSON(json.RawMessage(`not json`))
	r2.DeliverJSON(raw.sent[0])
	got := <-sub.C()
	if got.ID != "c-r1-1" || got.State != StateCompleted || got.Attempts != 2 || got.DurationMS != 1.5 || got.Principal != "alice" || got.Thread == "" {
		t.Errorf("delivered %+v, want the event r1 sent", got)
	}
	if recent := r2.Recent(&Filter{}); len(recent) != 1 {
		t.Errorf("Recent() = %+v, want the delivered call only", recent)
	}
}
