package tests

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

// openEvents opens /events as token's principal. A stream that is served
// is read up to its first comment (subscribed) and closed with the test;
// it returns the status and, for a refusal, the body.
func openEvents(t *testing.T, ctx context.Context, base, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := newHTTPClient().Do(req)
	if err != nil {
		t.Fatalf("GET /events: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	t.Cleanup(func() { resp.Body.Close() })
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, ": subscribed") {
		t.Fatalf("the stream began with %q (%v), want the subscribed comment", line, err)
	}
	return resp.StatusCode, ""
}

// TestEventStreamsPerPrincipal (issue 31, item 5): bob, who sees only his
// own calls, may hold 8 /events streams, not every one of toolgate's 64;
// his 9th is refused with 503 saying why, while alice and the admin still
// get theirs (before, bob took all 64 and both got 503).
func TestEventStreamsPerPrincipal(t *testing.T) {
	srv := startServe(t, "builtin: [calc]\n"+fairShareAuth)
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel) // before the bodies close: ends the streams
	for i := range 8 {
		if status, body := openEvents(t, ctx, srv.URL, "bob-token-0123456789abcdef"); status != http.StatusOK {
			t.Fatalf("bob's stream %d: HTTP %d %s", i+1, status, body)
		}
	}
	status, body := openEvents(t, ctx, srv.URL, "bob-token-0123456789abcdef")
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "one principal") {
		t.Errorf("bob's 9th stream: HTTP %d %q, want 503 saying one principal's bound", status, body)
	}
	for _, who := range []string{"alice-token-0123456789abcdef", "ops-token-0123456789abcdef"} {
		if status, body := openEvents(t, ctx, srv.URL, who); status != http.StatusOK {
			t.Errorf("%s's stream with bob at his bound: HTTP %d %s, want 200", who[:strings.IndexByte(who, '-')], status, body)
		}
	}
}
