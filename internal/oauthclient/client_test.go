package oauthclient

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/oauth2"
)

// tokenServer is a token endpoint that counts refresh requests and issues
// "at-<n>" access tokens; refused makes it refuse refresh tokens.
type tokenServer struct {
	srv       *httptest.Server
	refreshes atomic.Int32
	refused   atomic.Bool
}

func newTokenServer(t *testing.T) *tokenServer {
	ts := &tokenServer{}
	ts.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		if r.PostForm.Get("grant_type") != "refresh_token" || r.PostForm.Get("resource") == "" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"invalid_request"}`))
			return
		}
		n := ts.refreshes.Add(1)
		if ts.refused.Load() {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"invalid_grant"}`))
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "access-" + string(rune('0'+n)), "token_type": "Bearer", "expires_in": 3600})
	}))
	t.Cleanup(ts.srv.Close)
	return ts
}

func expiredRecord(ts *tokenServer, principal string) *Record {
	return &Record{Upstream: "up", Principal: principal, Server: "http://up.test/mcp", Resource: "http://up.test/mcp",
		TokenEndpoint: ts.srv.URL, ClientID: "c", AuthMethod: AuthNone,
		Token: &oauth2.Token{AccessToken: "old-" + principal, RefreshToken: "rt-" + principal, TokenType: "Bearer", Expiry: time.Now().Add(-time.Minute)}}
}

// TestRefreshOneInFlight checks that 16 callers finding the token expired
// wait for one refresh and all get its token, that the refresh token is
// kept when the server sends none, and that a refused refresh token makes
// the upstream need a person, with the command to run.
func TestRefreshOneInFlight(t *testing.T) {
	ts := newTokenServer(t)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	store := testStore(t)
	if err := store.Put(expiredRecord(ts, "")); err != nil {
		t.Fatal(err)
	}
	c := New(Config{Upstream: "up", ServerURL: "http://up.test/mcp", Base: tr, Store: store, LoginCommand: "toolgate auth login up"})
	var wg sync.WaitGroup
	got := make(chan string, 16)
	for range 16 {
		wg.Go(func() {
			tok, err := c.Token(t.Context(), "")
			if err != nil {
				got <- "error: " + err.Error()
				return
			}
			got <- tok.AccessToken
		})
	}
	wg.Wait()
	close(got)
	for g := range got {
		if g != "access-1" {
			t.Errorf("a caller got %q, want access-1", g)
		}
	}
	if n := ts.refreshes.Load(); n != 1 {
		t.Errorf("%d refresh requests, want 1", n)
	}
	if r, _ := store.Get("up", ""); r == nil || r.Token.AccessToken != "access-1" || r.Token.RefreshToken != "rt-" {
		t.Errorf("stored record %+v, want the new access token and the kept refresh token", r)
	}
	if got := c.Redact("echo: Bearer access-1 / rt-"); strings.Contains(got, "access-1") {
		t.Errorf("Redact left the access token: %q", got)
	}

	ts.refused.Store(true)
	cur, _ := c.Token(t.Context(), "")
	ok, err := c.Refresh(t.Context(), "", cur) // the server answered 401 to cur
	var na *NeedsAuthError
	if ok || err == nil || !errors.As(err, &na) || !strings.Contains(err.Error(), "run `toolgate auth login up`") {
		t.Errorf("Refresh with a refused refresh token = %v, %v; want a NeedsAuthError naming the command", ok, err)
	}
	if c.NeedsAuth() == "" {
		t.Error("NeedsAuth is empty after the refresh token was refused")
	}
	if r, _ := store.Get("up", ""); r == nil || r.Token != nil {
		t.Errorf("the refused token is still stored: %+v", r)
	}
}

// TestPerPrincipalIsolation checks that with per-principal tokens each
// principal's requests carry its own token, and that a principal without
// one is never given another's: its request needs authorization.
func TestPerPrincipalIsolation(t *testing.T) {
	var mu sync.Mutex
	seen := map[string][]string{} // principal (from a test header) → bearer tokens
	resource := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		mu.Lock()
		seen[r.Header.Get("X-Test-Principal")] = append(seen[r.Header.Get("X-Test-Principal")], tok)
		mu.Unlock()
		if tok == "" {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	defer resource.Close()
	store := testStore(t)
	for _, p := range []string{"alice", "bob"} {
		r := &Record{Upstream: "up", Principal: p, Server: resource.URL, Token: &oauth2.Token{AccessToken: "at-" + p, TokenType: "Bearer"}}
		if err := store.Put(r); err != nil {
			t.Fatal(err)
		}
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := New(Config{Upstream: "up", ServerURL: resource.URL, Base: tr, Store: store, PerPrincipal: true, LoginCommand: "toolgate auth login up"})
	type key struct{}
	hc := &http.Client{Transport: &Transport{Base: tr, Client: c, Principal: func(ctx context.Context) (string, string) {
		p, _ := ctx.Value(key{}).(string)
		return p, ""
	}}}
	call := func(p string) error {
		req, _ := http.NewRequestWithContext(context.WithValue(t.Context(), key{}, p), http.MethodPost, resource.URL, strings.NewReader("{}"))
		req.Header.Set("X-Test-Principal", p)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { _ = call("alice") })
		wg.Go(func() { _ = call("bob") })
	}
	wg.Wait()
	if err := call("carol"); err == nil || !strings.Contains(err.Error(), "needs authorization") {
		t.Errorf("carol's call: %v, want it to need authorization", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for p, toks := range seen {
		for _, tok := range toks {
			if tok != "" && tok != "at-"+p {
				t.Errorf("principal %s's request carried %s", p, tok)
			}
		}
	}
	if len(seen["alice"]) != 8 || len(seen["bob"]) != 8 || len(seen["carol"]) != 1 || seen["carol"][0] != "" {
		t.Errorf("requests seen: %v", seen)
	}
}
