package gateway

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/config/configtest"
	"github.com/toolgate/toolgate/gateway/internal/events"
)

// finalEvents reads ch until n final events have come, and returns every
// event read.
func finalEvents(t *testing.T, ch <-chan events.Event, n int) []events.Event {
	t.Helper()
	var got []events.Event
	for range n {
		got = append(got, eventsUntilEnd(t, ch)...)
	}
	return got
}

// eventOwners is "principal id state" of each event.
func eventOwners(events []events.Event) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.Principal+" "+e.ID+" "+e.State)
	}
	return out
}

// TestEventsOwnCallsOnly: with authentication on, /events and /ui/state
// show a principal its own calls only (issue 11: no principal reads
// another's calls), and a principal query cannot widen that.
func TestEventsOwnCallsOnly(t *testing.T) {
	g := authGateway(t, nil)
	srv := serveHTTP(t, g)
	aliceEvents := subscribeEventsAs(t, srv.URL, "", aliceToken)
	bobEvents := subscribeEventsAs(t, srv.URL, "", bobToken)
	alice := newRawSessionAs(t, srv.URL+"/mcp", aliceToken)
	bob := newRawSessionAs(t, srv.URL+"/mcp", bobToken)

	// Calls alternate, so that another's event would fall between one's
	// own: alice c-1, bob c-2, the embedding program c-3 (no principal),
	// alice c-4, bob c-5.
	calls := []func(){
		func() { decodeCall(t, alice.call("tools/call", `{"name":"echo","arguments":{"text":"a1"}}`)) },
		func() { decodeCall(t, bob.call("tools/call", `{"name":"counter"}`)) },
		func() {
			if _, err := g.Call(t.Context(), "echo", json.RawMessage(`{"text":"e"}`), nil); err != nil {
				t.Fatal(err)
			}
		},
		func() { decodeCall(t, alice.call("tools/call", `{"name":"echo","arguments":{"text":"a2"}}`)) },
		func() { decodeCall(t, bob.call("tools/call", `{"name":"echo","arguments":{"text":"b2"}}`)) },
	}
	for _, call := range calls {
		call()
	}
	lifecycle := func(who string, ids ...string) []string {
		var out []string
		for _, id := range ids {
			for _, state := range []string{events.StatePending, events.StateRunning, events.StateCompleted} {
				out = append(out, who+" "+id+" "+state)
			}
		}
		return out
	}
	if diff := cmp.Diff(lifecycle("alice", "c-1", "c-4"), eventOwners(finalEvents(t, aliceEvents, 2))); diff != "" {
		t.Errorf("alice's /events (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(lifecycle("bob", "c-2", "c-5"), eventOwners(finalEvents(t, bobEvents, 2))); diff != "" {
		t.Errorf("bob's /events (-want +got):\n%s", diff)
	}

	// A principal query cannot widen what a principal sees.
	for _, tc := range []struct {
		query string
		want  int
	}{
		{"principal=bob", http.StatusForbidden},
		{"tool=*&principal=bob", http.StatusForbidden},
		{"principal=", http.StatusOK},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/events?"+tc.query, nil)
		req.Header.Set("Authorization", "Bearer "+aliceToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close() // a stream, when it is one: the status is enough
		if resp.StatusCode != tc.want {
			t.Errorf("alice's GET /events?%s = %d, want %d", tc.query, resp.StatusCode, tc.want)
		}
	}
	// Her own name narrows nothing away: her stream still gets her call,
	// and only hers.
	own := subscribeEventsAs(t, srv.URL, "principal=alice", aliceToken)
	decodeCall(t, bob.call("tools/call", `{"name":"echo","arguments":{"text":"b3"}}`))
	decodeCall(t, alice.call("tools/call", `{"name":"echo","arguments":{"text":"a3"}}`))
	if diff := cmp.Diff(lifecycle("alice", "c-7"), eventOwners(eventsUntilEnd(t, own))); diff != "" {
		t.Errorf("alice's /events?principal=alice (-want +got):\n%s", diff)
	}

	t.Run("ui state", func(t *testing.T) {
		type state struct {
			Principal string `json:"principal"`
			Sources   []struct {
				Tools []struct{ Name string } `json:"tools"`
			} `json:"sources"`
			Recent []struct{ ID, Principal string } `json:"recent"`
		}
		for _, tc := range []struct {
			token, who string
			tools, ids []string
		}{
			{aliceToken, "alice", []string{"echo", "toolgate_batch"}, []string{"c-1", "c-4", "c-7"}},
			{bobToken, "bob", []string{"counter", "echo", "toolgate_batch"}, []string{"c-2", "c-5", "c-6"}},
		} {
			code, _, body := get(t, srv.URL+"/ui/state", tc.token, nil)
			var st state
			if code != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil {
				t.Fatalf("%s's GET /ui/state = %d %s", tc.who, code, body)
			}
			var tools, ids []string
			for _, s := range st.Sources {
				for _, tl := range s.Tools {
					tools = append(tools, tl.Name)
				}
			}
			slices.Sort(tools)
			for _, r := range st.Recent {
				if r.Principal != tc.who {
					t.Errorf("%s's /ui/state lists call %s of principal %q", tc.who, r.ID, r.Principal)
				}
				ids = append(ids, r.ID)
			}
			if st.Principal != tc.who || !slices.Equal(tools, tc.tools) || !slices.Equal(ids, tc.ids) {
				t.Errorf("%s's /ui/state: principal %q, tools %v, recent %v; want %q, %v, %v", tc.who, st.Principal, tools, ids, tc.who, tc.tools, tc.ids)
			}
		}
	})

	t.Run("the page is public, its data is not", func(t *testing.T) {
		for _, tc := range []struct {
			path string
			want int
		}{
			{"/ui", http.StatusOK},
			{"/ui/", http.StatusOK},
			{"/ui/app.js", http.StatusOK},
			{"/ui/state", http.StatusUnauthorized},
			{"/ui/state/", http.StatusNotFound},
			{"/ui/nothing", http.StatusNotFound},
			{"/events", http.StatusUnauthorized},
		} {
			code, hdr, body := get(t, srv.URL+tc.path, "", nil)
			if code != tc.want {
				t.Errorf("GET %s without a token = %d, want %d", tc.path, code, tc.want)
			}
			if code == http.StatusOK && (strings.Contains(body, "alice") || strings.Contains(body, "c-1")) {
				t.Errorf("GET %s without a token shows call data: %s", tc.path, body)
			}
			if (tc.path == "/ui" || tc.path == "/ui/") && !strings.Contains(hdr.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
				t.Errorf("GET %s: Content-Security-Policy %q, want one refusing frames", tc.path, hdr.Get("Content-Security-Policy"))
			}
		}
		// The page's own rules stay: a rebinding Host and a foreign
		// origin are refused, token or not.
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/ui", nil)
		req.Host = "evil.example"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("GET /ui with Host evil.example = %d, want 403", resp.StatusCode)
		}
		cross := map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}
		for _, path := range []string{"/ui", "/ui/app.js", "/ui/state"} {
			if code, _, _ := get(t, srv.URL+path, bobToken, cross); code != http.StatusForbidden {
				t.Errorf("cross-origin GET %s = %d, want 403", path, code)
			}
		}
	})
}

// TestUIStateWithoutAuth: without authentication /ui/state shows every
// call, whoever made it, and every tool, as before issue 11.
func TestUIStateWithoutAuth(t *testing.T) {
	g, _ := newGateway(t, nil)
	srv := serveHTTP(t, g)
	for _, who := range []string{"alice", "bob"} {
		if _, err := g.Call(WithPrincipal(t.Context(), who), "echo", json.RawMessage(`{"text":"x"}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	code, _, body := get(t, srv.URL+"/ui/state?principal=alice", "", nil)
	var st struct {
		Principal string                       `json:"principal"`
		Recent    []struct{ Principal string } `json:"recent"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil {
		t.Fatalf("GET /ui/state = %d %s", code, body)
	}
	if len(st.Recent) != 2 || st.Recent[0].Principal != "alice" || st.Recent[1].Principal != "bob" || st.Principal != "" {
		t.Errorf("/ui/state without auth = %s, want both calls and no principal", body)
	}
}

// TestEventsAdminSeesAll: a principal in auth.admins reads every
// principal's calls.
func TestEventsAdminSeesAll(t *testing.T) {
	g := authGateway(t, nil)
	srv := serveHTTP(t, g)
	opsEvents := subscribeEventsAs(t, srv.URL, "", opsToken)
	alice := newRawSessionAs(t, srv.URL+"/mcp", aliceToken)
	bob := newRawSessionAs(t, srv.URL+"/mcp", bobToken)
	decodeCall(t, alice.call("tools/call", `{"name":"echo","arguments":{"text":"a"}}`))
	decodeCall(t, bob.call("tools/call", `{"name":"echo","arguments":{"text":"b"}}`))
	var who []string
	for _, e := range finalEvents(t, opsEvents, 2) {
		if e.State == events.StateCompleted {
			who = append(who, e.Principal)
		}
	}
	if diff := cmp.Diff([]string{"alice", "bob"}, who); diff != "" {
		t.Errorf("ops's /events (-want +got):\n%s", diff)
	}
}

// TestUIStateBackendsForAdminsOnly: /ui/state names the backend (host and
// port) a tool's calls go to only to admins; another principal sees its
// tools and their breakers' state, not where they lead (issue 31, item 7).
func TestUIStateBackendsForAdminsOnly(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{}`)) }))
	t.Cleanup(api.Close)
	parsed, err := config.Parse("t.yaml", configtest.Lines("rest:", "  - name: weather", "    url: "+api.URL+"/x"), nil)
	if err != nil {
		t.Fatalf("config.Parse = %v", err)
	}
	g := authGateway(t, func(c *config.Config) {
		c.Rest = parsed.Rest
		c.Auth.Tokens[0].Allow = append(c.Auth.Tokens[0].Allow, "weather")
	})
	srv := serveHTTP(t, g)
	host := strings.TrimPrefix(api.URL, "http://")
	for _, tc := range []struct {
		who, token string
		backend    bool
	}{{"alice", aliceToken, false}, {"ops", opsToken, true}} {
		code, _, body := get(t, srv.URL+"/ui/state", tc.token, nil)
		if code != http.StatusOK || !strings.Contains(body, `"weather"`) {
			t.Fatalf("%s's GET /ui/state = %d %s; want the weather tool listed", tc.who, code, body)
		}
		if got := strings.Contains(body, host); got != tc.backend {
			t.Errorf("%s's /ui/state names the backend %s: %v, want %v; body %s", tc.who, host, got, tc.backend, body)
		}
	}
}
