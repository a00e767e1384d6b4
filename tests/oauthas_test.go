package tests

// A real OAuth 2.1 authorization server for the end-to-end tests of
// upstream OAuth (oauth_upstream_test.go), on httptest: RFC 8414
// metadata, Dynamic Client Registration, the authorization endpoint
// (which approves at once and redirects, as a person clicking "allow"
// would), the token endpoint (authorization code with PKCE S256 checked
// with x/oauth2's own S256ChallengeFromVerifier, refresh with rotation)
// and RFC 7009 revocation; and a protected resource in front of a real
// MCP server (the conformance fixture) that accepts only the tokens the
// server issued for it and answers 401 with RFC 9728 metadata otherwise.

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"golang.org/x/oauth2"
)

type testAS struct {
	srv *httptest.Server

	mu        sync.Mutex
	codes     map[string]asCode // authorization code → what it was issued for
	access    map[string]string // valid access token → principal (the login's "user")
	refresh   map[string]string // valid refresh token → principal
	issued    []string          // every token issued, to look for in files and logs
	revoked   []string          // token_type_hint of each revocation
	refreshes int               // refresh_token grants received
	nextUser  string            // the user the next authorization approves
	subjects  map[string]string // subject token → user, for token exchange (RFC 8693)
	exchanges int               // token exchanges granted
}

type asCode struct{ challenge, redirect, resource, user string }

func newTestAS(t *testing.T) *testAS {
	as := &testAS{codes: map[string]asCode{}, access: map[string]string{}, refresh: map[string]string{}, subjects: map[string]string{}, nextUser: "operator"}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", as.metadata)
	mux.HandleFunc("POST /register", as.register)
	mux.HandleFunc("GET /authorize", as.authorize)
	mux.HandleFunc("POST /token", as.token)
	mux.HandleFunc("POST /revoke", as.revoke)
	as.srv = httptest.NewServer(mux)
	t.Cleanup(as.srv.Close)
	return as
}

func randomToken(prefix string) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

func (as *testAS) metadata(w http.ResponseWriter, _ *http.Request) {
	u := as.srv.URL
	answerJSON(w, http.StatusOK, map[string]any{
		"issuer": u, "authorization_endpoint": u + "/authorize", "token_endpoint": u + "/token",
		"registration_endpoint": u + "/register", "revocation_endpoint": u + "/revoke",
		"response_types_supported": []string{"code"}, "code_challenge_methods_supported": []string{"S256"},
		"grant_types_supported":                 []string{"authorization_code", "refresh_token"},
		"token_endpoint_auth_methods_supported": []string{"none"}, "scopes_supported": []string{"fx:read", "offline_access"},
	})
}

func (as *testAS) register(w http.ResponseWriter, r *http.Request) {
	var req map[string]any
	_ = json.NewDecoder(r.Body).Decode(&req)
	answerJSON(w, http.StatusCreated, map[string]any{"client_id": randomToken("client-"), "token_endpoint_auth_method": "none", "redirect_uris": req["redirect_uris"]})
}

// authorize approves the request for nextUser and redirects with a code.
func (as *testAS) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("resource") == "" {
		http.Error(w, "PKCE S256 and resource are required", http.StatusBadRequest)
		return
	}
	redirect, err := url.Parse(q.Get("redirect_uri"))
	if err != nil || redirect.Hostname() != "127.0.0.1" {
		http.Error(w, "loopback redirect required", http.StatusBadRequest)
		return
	}
	code := randomToken("code-")
	as.mu.Lock()
	as.codes[code] = asCode{challenge: q.Get("code_challenge"), redirect: q.Get("redirect_uri"), resource: q.Get("resource"), user: as.nextUser}
	as.mu.Unlock()
	v := redirect.Query()
	v.Set("code", code)
	v.Set("state", q.Get("state"))
	redirect.RawQuery = v.Encode()
	http.Redirect(w, r, redirect.String(), http.StatusFound)
}

func (as *testAS) token(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	f := r.PostForm
	as.mu.Lock()
	defer as.mu.Unlock()
	var user string
	switch f.Get("grant_type") {
	case "authorization_code":
		c, ok := as.codes[f.Get("code")]
		delete(as.codes, f.Get("code"))
		if !ok || oauth2.S256ChallengeFromVerifier(f.Get("code_verifier")) != c.challenge || f.Get("redirect_uri") != c.redirect || f.Get("resource") != c.resource {
			answerJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant"})
			return
		}
		user = c.user
	case "refresh_token":
		as.refreshes++
		u, ok := as.refresh[f.Get("refresh_token")]
		if !ok {
			answerJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant", "error_description": "refresh token revoked"})
			return
		}
		delete(as.refresh, f.Get("refresh_token")) // rotation
		user = u
	case "urn:ietf:params:oauth:grant-type:token-exchange":
		u, ok := as.subjects[f.Get("subject_token")]
		if !ok || f.Get("subject_token_type") != "urn:ietf:params:oauth:token-type:access_token" || f.Get("resource") == "" {
			answerJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant", "error_description": "unknown subject token"})
			return
		}
		as.exchanges++
		user = u
	default:
		answerJSON(w, http.StatusBadRequest, map[string]string{"error": "unsupported_grant_type"})
		return
	}
	at, rt := randomToken("at-"), randomToken("rt-")
	as.access[at], as.refresh[rt] = user, user
	as.issued = append(as.issued, at, rt)
	answerJSON(w, http.StatusOK, map[string]any{"access_token": at, "token_type": "Bearer", "expires_in": 3600, "refresh_token": rt, "scope": "fx:read offline_access"})
}

func (as *testAS) revoke(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	as.mu.Lock()
	defer as.mu.Unlock()
	delete(as.access, r.PostForm.Get("token"))
	delete(as.refresh, r.PostForm.Get("token"))
	as.revoked = append(as.revoked, r.PostForm.Get("token_type_hint"))
	w.WriteHeader(http.StatusOK)
}

// exchangeable makes subject a token the server exchanges for user's.
func (as *testAS) exchangeable(subject, user string) {
	as.mu.Lock()
	defer as.mu.Unlock()
	as.subjects[subject] = user
}

// expireAccess ends every access token's validity at the resource: the
// server-side expiry a client learns of from a 401.
func (as *testAS) expireAccess() {
	as.mu.Lock()
	defer as.mu.Unlock()
	clear(as.access)
}

// revokeRefresh revokes every refresh token.
func (as *testAS) revokeRefresh() {
	as.mu.Lock()
	defer as.mu.Unlock()
	clear(as.refresh)
}

func (as *testAS) user(token string) (string, bool) {
	as.mu.Lock()
	defer as.mu.Unlock()
	u, ok := as.access[token]
	return u, ok
}

func (as *testAS) counts() (refreshes int, revoked []string, issued []string) {
	as.mu.Lock()
	defer as.mu.Unlock()
	return as.refreshes, append([]string(nil), as.revoked...), append([]string(nil), as.issued...)
}

func answerJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// protectedResource is the MCP server at mcpURL behind bearer
// authentication by as; seen, when not nil, is told the user of every
// request it lets through.
func protectedResource(t *testing.T, as *testAS, mcpURL string, seen func(user string)) string {
	target, err := url.Parse(mcpURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	proxy.FlushInterval = -1 // event streams pass as they come
	var srv *httptest.Server
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-protected-resource"+target.Path, func(w http.ResponseWriter, _ *http.Request) {
		answerJSON(w, http.StatusOK, map[string]any{"resource": srv.URL + target.Path, "authorization_servers": []string{as.srv.URL}, "scopes_supported": []string{"fx:read"}})
	})
	mux.HandleFunc(target.Path, func(w http.ResponseWriter, r *http.Request) {
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		user, ok := as.user(tok)
		if !ok {
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer error="invalid_token", resource_metadata="%s/.well-known/oauth-protected-resource%s"`, srv.URL, target.Path))
			http.Error(w, "invalid token", http.StatusUnauthorized)
			return
		}
		if seen != nil {
			seen(user)
		}
		r.Header.Del("Authorization")
		proxy.ServeHTTP(w, r)
	})
	srv = httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + target.Path
}
