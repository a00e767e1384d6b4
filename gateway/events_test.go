package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/config/configtest"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/gateway/internal/events"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

// subscribeEvents opens base/events?query and returns the events it
// streams; the channel is closed when the stream ends (the gateway's Close
// ends it). It returns once the subscription is in place.
func subscribeEvents(t *testing.T, base, query string) <-chan events.Event {
	t.Helper()
	return subscribeEventsAs(t, base, query, "")
}

// subscribeEventsAs is subscribeEvents sending token as a bearer token
// when it is not empty.
func subscribeEventsAs(t *testing.T, base, query, token string) <-chan events.Event {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/events?"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET /events: %v", err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		resp.Body.Close()
		t.Fatalf("GET /events = %d %q, want 200 text/event-stream", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || line != ": subscribed\n" {
		resp.Body.Close()
		t.Fatalf("first line of /events = %q, %v; want the subscribed comment", line, err)
	}
	ch := make(chan events.Event, 1024)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		var event string
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			switch {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimSpace(strings.TrimPrefix(line, "event: "))
			case strings.HasPrefix(line, "data: ") && event == "call":
				var e events.Event
				if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e) == nil {
					ch <- e
				}
			}
		}
	}()
	return ch
}

// eventsUntilEnd reads events until a final one (completed or error).
func eventsUntilEnd(t *testing.T, ch <-chan events.Event) []events.Event {
	t.Helper()
	var got []events.Event
	for {
		select {
		case e, ok := <-ch:
			if !ok {
				t.Fatalf("the event stream ended after %+v", got)
			}
			got = append(got, e)
			if e.State == events.StateCompleted || e.State == events.StateError {
				return got
			}
		case <-t.Context().Done():
			t.Fatalf("no final event after %+v", got)
		}
	}
}

// step is what a test compares of an event.
type eventStep struct {
	State    string
	Attempt  int
	Attempts int
	Class    string
}

func TestEvents(t *testing.T) {
	var hits atomic.Int64
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if hits.Add(1) <= 2 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(api.Close)
	parsed, err := config.Parse("t.yaml", configtest.Lines(
		"defaults:",
		"  retry: {attempts: 3, initial_backoff: 1ms, max_backoff: 2ms}",
		"rest:",
		"  - name: flaky_rest",
		"    url: "+api.URL+"/x",
	), nil)
	if err != nil {
		t.Fatalf("config.Parse = %v", err)
	}
	g, _ := newGateway(t, func(c *config.Config) {
		c.Defaults.Retry, c.Rest = parsed.Defaults.Retry, parsed.Rest
	})
	var fails atomic.Int64
	register := func(tool registry.Tool, fn executors.StatelessFunc) {
		t.Helper()
		if err := g.RegisterStateless(tool, fn); err != nil {
			t.Fatal(err)
		}
	}
	register(registry.Tool{Name: "flaky", Idempotent: true}, func(context.Context, map[string]any) (executors.Result, error) {
		if fails.Add(1) == 1 {
			return executors.Result{}, retry.Errorf(retry.Unavailable, "try again")
		}
		return executors.Text("ok"), nil
	})
	// What executors/mcpup returns for an upstream's isError result.
	register(registry.Tool{Name: "upstream_fails"}, func(context.Context, map[string]any) (executors.Result, error) {
		return executors.Result{Passthrough: json.RawMessage(`{"content":[{"type":"text","text":"it failed"}],"isError":true}`), IsError: true}, nil
	})
	register(registry.Tool{Name: "upstream_not_found"}, func(context.Context, map[string]any) (executors.Result, error) {
		return executors.Result{Passthrough: json.RawMessage(`{"content":[{"type":"text","text":"no such row"}],"isError":true,"_meta":{"toolgate/error_class":"not_found"}}`), IsError: true}, nil
	})
	srv := serveHTTP(t, g)
	events := subscribeEvents(t, srv.URL, "")

	tests := []struct {
		name, tool, args string
		meta             map[string]any
		want             []eventStep
		wantMsg          string
	}{
		{name: "ok", tool: "echo", args: `{"text":"hi"}`, meta: map[string]any{ThreadMetaKey: "my-thread"},
			want: []eventStep{{State: "pending"}, {State: "running", Attempt: 1}, {State: "completed", Attempts: 1}}},
		{name: "invalid, never dispatched", tool: "echo", args: `{}`,
			want:    []eventStep{{State: "pending"}, {State: "error", Class: "validation"}},
			wantMsg: "validation: "},
		{name: "retried by the dispatcher", tool: "flaky",
			want: []eventStep{{State: "pending"}, {State: "running", Attempt: 1}, {State: "running", Attempt: 2}, {State: "completed", Attempts: 2}}},
		{name: "retried by the REST executor", tool: "flaky_rest",
			want: []eventStep{{State: "pending"}, {State: "running", Attempt: 1}, {State: "running", Attempt: 2}, {State: "running", Attempt: 3}, {State: "completed", Attempts: 3}}},
		{name: "upstream isError", tool: "upstream_fails",
			want:    []eventStep{{State: "pending"}, {State: "running", Attempt: 1}, {State: "error", Attempts: 1, Class: "execution"}},
			wantMsg: "it failed"},
		{name: "upstream isError with its class", tool: "upstream_not_found",
			want:    []eventStep{{State: "pending"}, {State: "running", Attempt: 1}, {State: "error", Attempts: 1, Class: "not_found"}},
			wantMsg: "no such row"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := g.Call(t.Context(), tc.tool, json.RawMessage(tc.args), tc.meta); err != nil {
				t.Fatalf("Call(%s) error = %v", tc.tool, err)
			}
			got := eventsUntilEnd(t, events)
			var steps []eventStep
			for _, e := range got {
				steps = append(steps, eventStep{State: e.State, Attempt: e.Attempt, Attempts: e.Attempts, Class: e.Class})
				if e.ID != got[0].ID || !strings.HasPrefix(e.ID, "c-") || e.Tool != tc.tool {
					t.Errorf("event %+v: want tool %q and the ID of the first event (%q)", e, tc.tool, got[0].ID)
				}
			}
			if diff := cmp.Diff(tc.want, steps); diff != "" {
				t.Errorf("events of %s (-want +got):\n%s", tc.tool, diff)
			}
			last := got[len(got)-1]
			if !strings.HasPrefix(last.Message, tc.wantMsg) || (tc.wantMsg == "") != (last.Message == "") {
				t.Errorf("final event message = %q, want it to start with %q", last.Message, tc.wantMsg)
			}
			if th, ok := tc.meta[ThreadMetaKey].(string); ok {
				for _, e := range got { // pending included
					if want := threadLabel("t:" + th); e.Thread != want {
						t.Errorf("%s event thread = %q, want the hash %q", e.State, e.Thread, want)
					}
				}
			}
		})
	}

	t.Run("isError counts as an error in metrics", func(t *testing.T) {
		resp, err := http.Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, want := range []string{
			`toolgate_tool_calls_total{error_class="execution",kind="stateless",outcome="error",tool="upstream_fails"} 1`,
			`toolgate_tool_calls_total{error_class="not_found",kind="stateless",outcome="error",tool="upstream_not_found"} 1`,
		} {
			if !strings.Contains(string(body), want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	})

	t.Run("batch calls have their own IDs", func(t *testing.T) {
		g.cfg.BatchTool = true
		if err := g.addBatchTool(); err != nil {
			t.Fatal(err)
		}
		if _, err := g.Call(t.Context(), BatchToolName, json.RawMessage(`{"calls":[{"tool":"echo","arguments":{"text":"a"}},{"tool":"echo","arguments":{"text":"b"}}]}`), nil); err != nil {
			t.Fatal(err)
		}
		ids := map[string]string{}
		for len(ids) < 3 {
			for _, e := range eventsUntilEnd(t, events) {
				ids[e.ID] = e.Tool
			}
		}
		if len(ids) != 3 {
			t.Errorf("batch of two calls: event IDs %v, want 3 distinct (the batch and each call)", ids)
		}
	})
}

func TestEventsFilterAndOrigin(t *testing.T) {
	g, _ := newGateway(t, nil)
	srv := serveHTTP(t, g)
	events := subscribeEvents(t, srv.URL, "tool=ec*&outcome=error")
	for _, args := range []string{`{"text":"ok"}`, `{}`} {
		if _, err := g.Call(t.Context(), "echo", json.RawMessage(args), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := g.Call(t.Context(), "counter", nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Call(t.Context(), "counter", json.RawMessage(`[]`), nil); err != nil {
		t.Fatal(err)
	}
	// A last call that matches marks the end of what was published.
	if _, err := g.Call(t.Context(), "echo", json.RawMessage(`{"n":1}`), nil); err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 2 {
		e := <-events
		got = append(got, e.Tool+" "+e.State+" "+e.Class)
	}
	if diff := cmp.Diff([]string{"echo error validation", "echo error validation"}, got); diff != "" {
		t.Errorf("filtered events (-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		name   string
		query  string
		header http.Header
		want   int
	}{
		{name: "bad glob", query: "tool=[", want: http.StatusBadRequest},
		{name: "bad outcome", query: "outcome=maybe", want: http.StatusBadRequest},
		{name: "cross-origin", header: http.Header{"Sec-Fetch-Site": {"cross-site"}, "Origin": {"https://evil.example"}}, want: http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/events?"+tc.query, nil)
			for k, v := range tc.header {
				req.Header[k] = v
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("GET /events?%s = %d, want %d", tc.query, resp.StatusCode, tc.want)
			}
		})
	}
}

// TestStalledConsumerNeverSlowsCalls proves the bound through the
// gateway: a subscriber that reads nothing holds at most the bus's buffer
// (256 events), the one past them drops it and counts in
// toolgate_events_dropped_total, and every call returns meanwhile
// (gateway/internal/events's TestStalledStream does it over HTTP).
func TestStalledConsumerNeverSlowsCalls(t *testing.T) {
	const buffer = 256
	g, _ := newGateway(t, nil)
	sub, _ := g.events.Subscribe(events.Filter{})
	if sub == nil {
		t.Fatal("no subscription")
	}
	// Each successful call publishes 3 events: pending, running, completed.
	calls := buffer / 3
	for range calls {
		if _, err := g.Call(t.Context(), "echo", json.RawMessage(`{"text":"x"}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(sub.C()); got != calls*3 || sub.Dropped() {
		t.Fatalf("after %d calls: %d events queued (dropped: %v), want %d and still subscribed", calls, got, sub.Dropped(), calls*3)
	}
	for range 2 {
		if _, err := g.Call(t.Context(), "echo", json.RawMessage(`{"text":"x"}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	if !sub.Dropped() || g.events.Subscribers() != 0 {
		t.Fatalf("a consumer %d events behind is still subscribed, want it dropped", buffer+1)
	}
	if got := len(sub.C()); got != buffer {
		t.Errorf("the dropped consumer holds %d events, want the buffer's %d", got, buffer)
	}
	if got := testCounterValue(t, g, "toolgate_events_dropped_total"); got != 1 {
		t.Errorf("toolgate_events_dropped_total = %v, want 1", got)
	}
}

// testCounterValue returns the value of the unlabelled counter name.
func testCounterValue(t *testing.T, g *Gateway, name string) float64 {
	t.Helper()
	mfs, err := g.metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no counter %s", name)
	return 0
}

func TestEventBusClose(t *testing.T) {
	g, _ := newGateway(t, nil)
	sub, _ := g.events.Subscribe(events.Filter{})
	g.Close()
	if _, ok := <-sub.C(); ok {
		t.Error("a subscription's channel is open after Close, want it closed")
	}
	if s, _ := g.events.Subscribe(events.Filter{}); s != nil {
		t.Error("Subscribe after Close returned a subscription, want nil")
	}
	g.events.Unsubscribe(sub) // after the bus ended it: nothing to do
}

func TestUIRoutes(t *testing.T) {
	g, _ := newGateway(t, nil)
	srv := serveHTTP(t, g)
	if _, err := g.Call(t.Context(), "echo", json.RawMessage(`{}`), nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, ctype, want string }{
		{"/ui", "text/html; charset=utf-8", `<script src="/ui/app.js">`},
		{"/ui/app.js", "text/javascript; charset=utf-8", `fetch("/events"`},
		{"/ui/state", "application/json", `"source":"embedder","tools":[{"name":"counter","kind":"stateful"},{"name":"echo","kind":"stateless"}]`},
		{"/ui/state", "application/json", `"recent":[{"state":"error","id":"c-1"`},
	} {
		resp, err := http.Get(srv.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != tc.ctype || !strings.Contains(string(body), tc.want) {
			t.Errorf("GET %s = %d %q %s, want 200 %q containing %s", tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), body, tc.ctype, tc.want)
		}
	}
}
