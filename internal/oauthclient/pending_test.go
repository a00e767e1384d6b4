package oauthclient

import (
	"errors"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// TestWebLogin checks a principal's login through toolgate's callback: a
// principal without a token gets a link (the same one until it is used),
// the redirect's state settles only its own flow, once, and the token is
// the principal's alone.
func TestWebLogin(t *testing.T) {
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	store := testStore(t)
	const callback = "http://toolgate.test/oauth/callback"
	c := New(Config{
		Upstream: "notes", ServerURL: "http://mcp.test/mcp", Base: tr, Store: store, PerPrincipal: true,
		RedirectURL: callback, Timeout: 2 * time.Second, LoginCommand: "toolgate auth login notes",
	})
	ch := Challenge{ResourceMetadata: hostileAS(t, "")}
	link := func(p string) string {
		t.Helper()
		err := c.Acquire(t.Context(), p, "", nil, ch)
		na, ok := errors.AsType[*NeedsAuthError](err)
		if !ok || na.URL == "" {
			t.Fatalf("Acquire for %s = %v, want a NeedsAuthError with a link", p, err)
		}
		return na.URL
	}
	bob := link("bob")
	if again := link("bob"); again != bob {
		t.Errorf("a second call gave another link: %s, want the pending one %s", again, bob)
	}
	alice := link("alice")
	if alice == bob {
		t.Fatal("alice and bob got the same link")
	}
	q := authorize(t, tr, bob)
	if _, ok, err := c.Complete(t.Context(), Callback{State: "forged", Code: q.Get("code")}); ok || err != nil {
		t.Errorf("Complete with a forged state = %v, %v; want not ours", ok, err)
	}
	p, ok, err := c.Complete(t.Context(), Callback{State: q.Get("state"), Code: q.Get("code")})
	if p != "bob" || !ok || err != nil {
		t.Fatalf("Complete = %q, %v, %v; want bob authorized", p, ok, err)
	}
	if _, ok, _ := c.Complete(t.Context(), Callback{State: q.Get("state"), Code: q.Get("code")}); ok {
		t.Error("the same redirect completed a second time")
	}
	if tok, err := c.Token(t.Context(), "bob"); err != nil || tok == nil || tok.AccessToken != "at-1" {
		t.Errorf("bob's token = %v, %v; want at-1", tok, err)
	}
	if tok, _ := c.Token(t.Context(), "alice"); tok != nil {
		t.Errorf("alice has a token (%s) she never obtained", tok.AccessToken)
	}
	if r, _ := store.Get("notes", "bob"); r == nil || r.Token == nil {
		t.Error("bob's token is not in the store")
	}
	if got, _ := c.Principals(); len(got) != 1 || got[0] != "bob" {
		t.Errorf("Principals() = %v, want [bob]", got)
	}
	// Alice's link is still pending; the server's refusal settles it.
	qa := authorize(t, tr, alice)
	if _, ok, err := c.Complete(t.Context(), Callback{State: qa.Get("state"), Error: "access_denied"}); !ok || err == nil {
		t.Errorf("Complete of a refusal = %v, %v; want an error", ok, err)
	}
}

// authorize plays the browser on link: it returns the query of the
// authorization server's redirect, without following it.
func authorize(t *testing.T, tr *http.Transport, link string) url.Values {
	t.Helper()
	hc := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || loc.Path != "/oauth/callback" {
		t.Fatalf("the authorization server redirected to %q, %v", resp.Header.Get("Location"), err)
	}
	return loc.Query()
}
