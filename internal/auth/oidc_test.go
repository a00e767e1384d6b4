package auth

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/internal/principal"
	"github.com/toolgate/toolgate/internal/syncbuf"
)

const (
	audience    = "https://gw.example/mcp"
	metadataRef = `resource_metadata="https://gw.example/.well-known/oauth-protected-resource/mcp"`
)

// signingKey is a key the test issuer signs with.
type signingKey struct {
	kid  string
	alg  jose.SignatureAlgorithm
	priv crypto.Signer
}

var (
	keyOnce sync.Once
	rsaKeys [3]*rsa.PrivateKey
	ecKey   *ecdsa.PrivateKey
)

// testKeys returns RSA keys 1 to 3 and an EC P-256 key, generated once.
func testKeys(t *testing.T) ([3]*rsa.PrivateKey, *ecdsa.PrivateKey) {
	t.Helper()
	keyOnce.Do(func() {
		for i := range rsaKeys {
			k, err := rsa.GenerateKey(rand.Reader, 2048)
			if err != nil {
				panic(err)
			}
			rsaKeys[i] = k
		}
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			panic(err)
		}
		ecKey = k
	})
	return rsaKeys, ecKey
}

// sign returns a compact JWT of claims signed with k.
func (k signingKey) sign(t *testing.T, claims map[string]any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: k.alg, Key: jose.JSONWebKey{Key: k.priv, KeyID: k.kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (k signingKey) public() jose.JSONWebKey {
	return jose.JSONWebKey{Key: k.priv.Public(), KeyID: k.kid, Algorithm: string(k.alg), Use: "sig"}
}

// issuer is an OIDC issuer on 127.0.0.1: a discovery document and a JWKS
// that a test can change or take down.
type issuer struct {
	srv *httptest.Server

	mu        sync.Mutex
	keys      []jose.JSONWebKey
	algs      []string // id_token_signing_alg_values_supported; nil: left out
	down      bool     // discovery and JWKS answer 503
	jwksDown  bool     // the JWKS answers 503
	jwksMoved string   // the JWKS redirects there; "" serves it
	discovers int
	jwksGets  int
	movedGets int // fetches of /jwks-moved, which serves the JWKS too
}

func newIssuer(t *testing.T, keys ...signingKey) *issuer {
	t.Helper()
	is := &issuer{}
	for _, k := range keys {
		is.keys = append(is.keys, k.public())
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		is.mu.Lock()
		defer is.mu.Unlock()
		is.discovers++
		if is.down {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		doc := map[string]any{
			"issuer":                 is.srv.URL,
			"jwks_uri":               is.srv.URL + "/jwks",
			"authorization_endpoint": is.srv.URL + "/authorize",
			"token_endpoint":         is.srv.URL + "/token",
		}
		if is.algs != nil {
			doc["id_token_signing_alg_values_supported"] = is.algs
		}
		_ = json.NewEncoder(w).Encode(doc)
	})
	jwks := func(w http.ResponseWriter, r *http.Request) {
		is.mu.Lock()
		defer is.mu.Unlock()
		is.jwksGets++
		if r.URL.Path == "/jwks-moved" {
			is.movedGets++
		} else if is.jwksMoved != "" {
			http.Redirect(w, r, is.jwksMoved, http.StatusFound)
			return
		}
		if is.down || is.jwksDown {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: is.keys})
	}
	mux.HandleFunc("GET /jwks", jwks)
	mux.HandleFunc("GET /jwks-moved", jwks)
	is.srv = httptest.NewServer(mux) // 127.0.0.1
	t.Cleanup(is.srv.Close)
	return is
}

func (is *issuer) set(f func(is *issuer)) {
	is.mu.Lock()
	defer is.mu.Unlock()
	f(is)
}

// claims returns valid claims for sub, with extra added (a nil value
// deletes a claim).
func (is *issuer) claims(sub string, extra map[string]any) map[string]any {
	now := time.Now()
	c := map[string]any{
		"iss": is.srv.URL,
		"aud": audience,
		"sub": sub,
		"iat": now.Unix(),
		"exp": now.Add(5 * time.Minute).Unix(),
	}
	for k, v := range extra {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

// fakeClock is the clock of the verifier's rediscovery.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// oauthAuth is an authenticator of is's tokens with o's grants (Issuer,
// Audience and PrincipalClaim filled in when empty), a static token
// "desktop", and a fake rediscovery clock.
func oauthAuth(t *testing.T, is *issuer, o config.OAuth) (*Authenticator, *fakeClock) {
	t.Helper()
	if o.Issuer == "" {
		o.Issuer = is.srv.URL
	}
	if o.Audience == "" {
		o.Audience = audience
	}
	if o.PrincipalClaim == "" {
		o.PrincipalClaim = "sub"
	}
	a := New(&config.Auth{
		Tokens: []config.AuthToken{{Name: "desktop", Token: desktopToken, Allow: []string{"*"}}},
		OAuth:  &o,
	}, &Options{Client: is.srv.Client()})
	clk := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	a.oauth.now = clk.Now
	return a, clk
}

// captureLogs makes a log at debug level into the returned buffer.
func captureLogs(a *Authenticator) *syncbuf.Buffer {
	l := &syncbuf.Buffer{}
	a.logger = slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return l
}

const invalidChallenge = `Bearer realm="toolgate", ` + metadataRef + `, error="invalid_token"`

func TestOAuthAccepted(t *testing.T) {
	rk, ek := testKeys(t)
	k1 := signingKey{"k1", jose.RS256, rk[0]}
	ke := signingKey{"ke", jose.ES256, ek}
	is := newIssuer(t, k1, ke)
	a, _ := oauthAuth(t, is, config.OAuth{
		Allow: []string{"base__*"},
		Deny:  []string{"*__delete*"},
		Permissions: []config.OAuthPermission{
			{When: map[string]string{"scope": "tools:read"}, Allow: []string{"*__get*", "*__list*"}},
			{When: map[string]string{"groups": "admins"}, Allow: []string{"admin__*"}, Deny: []string{"admin__nuke"}},
			{When: map[string]string{"tenant": "acme"}, Allow: []string{"acme__*"}},
			{When: map[string]string{"scope": "tools:read", "tenant": "acme"}, Allow: []string{"both__*"}},
			{When: map[string]string{"email_verified": "true"}, Allow: []string{"verified__*"}},
		},
	})
	for _, tc := range []struct {
		name          string
		key           signingKey
		claims        map[string]any
		permit, block []string
	}{
		{
			name: "scope string, array claim, string claim",
			key:  k1,
			claims: is.claims("alice", map[string]any{
				"scope":  "a tools:read b",
				"groups": []string{"users", "admins"},
				"tenant": "acme",
			}),
			permit: []string{"base__x", "fs__get_file", "gh__list_repos", "admin__x", "acme__x", "both__x"},
			block:  []string{"base__delete_all", "admin__nuke", "fs__write", "other__x", "verified__x"},
		},
		{
			name: "EC key, no matching claims",
			key:  ke,
			claims: is.claims("bob", map[string]any{
				"scope":  "tools:readonly tools:read:all", // no scope is tools:read
				"groups": "admins",                        // a plain string claim equal to the value
				"tenant": "acme-evil",
			}),
			permit: []string{"base__x", "admin__x"},
			block:  []string{"fs__get_file", "acme__x", "both__x", "admin__nuke"},
		},
		{
			name:   "scope as an array, a boolean claim, aud as a list",
			key:    k1,
			claims: is.claims("carol", map[string]any{"scope": []string{"tools:read"}, "email_verified": true, "aud": []string{"other", audience}}),
			permit: []string{"fs__get_file", "verified__x"},
			block:  []string{"acme__x", "admin__x"},
		},
		{
			name:   "expired within the 30s leeway",
			key:    k1,
			claims: is.claims("dave", map[string]any{"exp": time.Now().Add(-10 * time.Second).Unix()}),
			permit: []string{"base__x"},
		},
		{
			name:   "nbf within the leeway",
			key:    k1,
			claims: is.claims("erin", map[string]any{"nbf": time.Now().Add(time.Minute).Unix()}),
			permit: []string{"base__x"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &recorder{}
			tok := tc.key.sign(t, tc.claims)
			w := serve(t, a, h, "Bearer "+tok)
			if w.Code != http.StatusOK {
				t.Fatalf("status %d, WWW-Authenticate %q, body %s", w.Code, w.Header().Get("WWW-Authenticate"), w.Body)
			}
			if h.id == nil || h.id.Name != tc.claims["sub"] || h.id.Policy == nil {
				t.Fatalf("identity %q, want %v with a policy", principal.NameOf(h.id), tc.claims["sub"])
			}
			if h.id.Token != tok {
				t.Errorf("identity's Token is not the access token presented (token exchange needs it)")
			}
			for _, tool := range tc.permit {
				if !h.id.Permits(tool) {
					t.Errorf("%s may not call %s", h.id.Name, tool)
				}
			}
			for _, tool := range tc.block {
				if h.id.Permits(tool) {
					t.Errorf("%s may call %s", h.id.Name, tool)
				}
			}
		})
	}
	// Static tokens still work beside OAuth.
	h := &recorder{}
	if w := serve(t, a, h, "Bearer "+desktopToken); w.Code != http.StatusOK || h.id.Name != "desktop" || h.id.Token != "" {
		t.Errorf("static token with OAuth on: status %d, identity %q (a static token is never kept as Token)", w.Code, principal.NameOf(h.id))
	}
}

// hs256 returns a token of claims signed with HS256 and secret, by hand:
// go-jose would not sign with a public key.
func hs256(claims map[string]any, secret []byte) string {
	enc := base64.RawURLEncoding
	hdr, _ := json.Marshal(map[string]string{"alg": "HS256", "typ": "JWT", "kid": "k1"})
	payload, _ := json.Marshal(claims)
	in := enc.EncodeToString(hdr) + "." + enc.EncodeToString(payload)
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(in))
	return in + "." + enc.EncodeToString(m.Sum(nil))
}

// unsigned returns a token of claims with alg none.
func unsigned(claims map[string]any) string {
	enc := base64.RawURLEncoding
	hdr, _ := json.Marshal(map[string]string{"alg": "none", "typ": "JWT"})
	payload, _ := json.Marshal(claims)
	return enc.EncodeToString(hdr) + "." + enc.EncodeToString(payload) + "."
}

func TestOAuthRefused(t *testing.T) {
	rk, ek := testKeys(t)
	k1 := signingKey{"k1", jose.RS256, rk[0]}
	ke := signingKey{"ke", jose.ES256, ek}
	stranger := signingKey{"k1", jose.RS256, rk[2]}       // the kid of k1, another key
	unknown := signingKey{"k9", jose.RS256, rk[2]}        // a kid the issuer never served
	strangerEC := signingKey{"ke", jose.ES256, mustEC(t)} // the kid of ke, another key
	pubDER, err := x509.MarshalPKIXPublicKey(&rk[0].PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	jwkJSON, _ := k1.public().MarshalJSON()

	for _, algs := range [][]string{nil, {"RS256", "ES256", "HS256", "none"}} {
		t.Run("discovery algs "+strings.Join(algs, ","), func(t *testing.T) {
			is := newIssuer(t, k1, ke)
			is.algs = algs
			other := newIssuer(t, k1) // another issuer with the same key
			a, _ := oauthAuth(t, is, config.OAuth{Allow: []string{"*"}})
			logs := captureLogs(a)
			cases := []struct{ name, tok string }{
				{"expired beyond the leeway", k1.sign(t, is.claims("alice", map[string]any{"exp": time.Now().Add(-40 * time.Second).Unix()}))},
				{"expired long ago", k1.sign(t, is.claims("alice", map[string]any{"exp": time.Now().Add(-24 * time.Hour).Unix()}))},
				{"no exp", k1.sign(t, is.claims("alice", map[string]any{"exp": nil}))},
				{"nbf beyond the leeway", k1.sign(t, is.claims("alice", map[string]any{"nbf": time.Now().Add(6 * time.Minute).Unix()}))},
				{"wrong audience", k1.sign(t, is.claims("alice", map[string]any{"aud": "https://other.example/mcp"}))},
				{"audience of the metadata URL", k1.sign(t, is.claims("alice", map[string]any{"aud": "https://gw.example/.well-known/oauth-protected-resource/mcp"}))},
				{"audience with a trailing slash", k1.sign(t, is.claims("alice", map[string]any{"aud": audience + "/"}))},
				{"no audience", k1.sign(t, is.claims("alice", map[string]any{"aud": nil}))},
				{"wrong issuer", k1.sign(t, is.claims("alice", map[string]any{"iss": "https://idp.example"}))},
				{"issuer with a trailing slash", k1.sign(t, is.claims("alice", map[string]any{"iss": is.srv.URL + "/"}))},
				{"another issuer's token", k1.sign(t, other.claims("alice", nil))},
				{"no issuer", k1.sign(t, is.claims("alice", map[string]any{"iss": nil}))},
				{"signed by another key with a known kid", stranger.sign(t, is.claims("alice", nil))},
				{"signed by an unknown key", unknown.sign(t, is.claims("alice", nil))},
				{"signed by another EC key", strangerEC.sign(t, is.claims("alice", nil))},
				{"alg none", unsigned(is.claims("alice", nil))},
				{"HS256 with the DER public key", hs256(is.claims("alice", nil), pubDER)},
				{"HS256 with the PEM public key", hs256(is.claims("alice", nil), pubPEM)},
				{"HS256 with the JWK", hs256(is.claims("alice", nil), jwkJSON)},
				{"no sub", k1.sign(t, is.claims("alice", map[string]any{"sub": nil}))},
				{"empty sub", k1.sign(t, is.claims("", nil))},
				{"numeric sub", k1.sign(t, is.claims("alice", map[string]any{"sub": 42}))},
				{"sub with a control character", k1.sign(t, is.claims("al\nice", nil))},
				{"sub of 129 characters", k1.sign(t, is.claims(strings.Repeat("a", 129), nil))},
				{"garbage with two dots", "abc.def.ghi"},
				{"two dots", ".."},
				{"header only", strings.Split(k1.sign(t, is.claims("alice", nil)), ".")[0] + ".."},
				{"tampered payload", tamper(t, k1.sign(t, is.claims("alice", nil)))},
			}
			var body string
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					h := &recorder{}
					w := serve(t, a, h, "Bearer "+tc.tok)
					b := checkRefused(t, w, http.StatusUnauthorized, invalidChallenge, tc.tok, "alice")
					// Logs may say why, but never repeat the token or its signature.
					if parts := strings.Split(tc.tok, "."); strings.Contains(logs.String(), tc.tok) || len(parts[2]) > 8 && strings.Contains(logs.String(), parts[2]) {
						t.Errorf("the log repeats the token: %s", logs)
					}
					if h.id != nil {
						t.Errorf("the next handler ran as %q", h.id.Name)
					}
					if body != "" && b != body {
						t.Errorf("body %s differs from another refusal's %s", b, body)
					}
					body = b
				})
			}
			// Nothing was presented: no error attribute, the metadata still named.
			w := serve(t, a, &recorder{})
			checkRefused(t, w, http.StatusUnauthorized, `Bearer realm="toolgate", `+metadataRef)
			// The issuer was fine throughout: the valid token is accepted.
			if w := serve(t, a, &recorder{}, "Bearer "+k1.sign(t, is.claims("alice", nil))); w.Code != http.StatusOK {
				t.Errorf("valid token: status %d", w.Code)
			}
		})
	}
}

func mustEC(t *testing.T) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// tamper changes tok's sub to mallory, keeping the signature.
func tamper(t *testing.T, tok string) string {
	parts := strings.Split(tok, ".")
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	c["sub"] = "mallory"
	raw, _ = json.Marshal(c)
	parts[1] = base64.RawURLEncoding.EncodeToString(raw)
	return strings.Join(parts, ".")
}

func TestOAuthPrincipalClaim(t *testing.T) {
	rk, _ := testKeys(t)
	k1 := signingKey{"k1", jose.RS256, rk[0]}
	is := newIssuer(t, k1)
	a, _ := oauthAuth(t, is, config.OAuth{PrincipalClaim: "email", Allow: []string{"*"}})
	h := &recorder{}
	if w := serve(t, a, h, "Bearer "+k1.sign(t, is.claims("u-1", map[string]any{"email": "alice@example.com"}))); w.Code != http.StatusOK || h.id.Name != "alice@example.com" {
		t.Fatalf("status %d, identity %+v", w.Code, h.id)
	}
	w := serve(t, a, &recorder{}, "Bearer "+k1.sign(t, is.claims("u-1", nil)))
	checkRefused(t, w, http.StatusUnauthorized, invalidChallenge)
}

// TestOAuthPrincipalNameTaken: a principal owns its sessions and thread
// instances by name, so a token whose principal claim names a static
// token's principal (or stdio) must not become that principal.
func TestOAuthPrincipalNameTaken(t *testing.T) {
	rk, _ := testKeys(t)
	k1 := signingKey{"k1", jose.RS256, rk[0]}
	is := newIssuer(t, k1)
	a, _ := oauthAuth(t, is, config.OAuth{Allow: []string{"*"}})
	for _, sub := range []string{"desktop", config.StdioPrincipal} {
		h := &recorder{}
		w := serve(t, a, h, "Bearer "+k1.sign(t, is.claims(sub, nil)))
		checkRefused(t, w, http.StatusUnauthorized, invalidChallenge)
		if h.id != nil {
			t.Errorf("a token with sub %q became principal %q", sub, h.id.Name)
		}
	}
	// The static token keeps its principal.
	h := &recorder{}
	if w := serve(t, a, h, "Bearer "+desktopToken); w.Code != http.StatusOK || h.id != a.Identity("desktop") {
		t.Errorf("static token: status %d, identity %+v", w.Code, h.id)
	}
}

func TestOAuthKeyRotation(t *testing.T) {
	rk, ek := testKeys(t)
	k1 := signingKey{"k1", jose.RS256, rk[0]}
	k2 := signingKey{"k2", jose.RS256, rk[1]}
	ke := signingKey{"ke", jose.ES256, ek}
	is := newIssuer(t, k1)
	a, clk := oauthAuth(t, is, config.OAuth{Allow: []string{"*"}})

	if w := serve(t, a, &recorder{}, "Bearer "+k1.sign(t, is.claims("alice", nil))); w.Code != http.StatusOK {
		t.Fatalf("k1 before rotation: status %d", w.Code)
	}
	// Not served yet: refused.
	checkRefused(t, serve(t, a, &recorder{}, "Bearer "+k2.sign(t, is.claims("alice", nil))), http.StatusUnauthorized, invalidChallenge)

	// The issuer rotates to k2 (and adds an EC key); k1 is retired. The
	// JWKS is fetched again at most once per refetchEvery.
	is.set(func(is *issuer) { is.keys = []jose.JSONWebKey{k2.public(), ke.public()} })
	clk.Add(refetchEvery)
	for _, k := range []signingKey{k2, ke} {
		h := &recorder{}
		if w := serveSettled(t, a, http.StatusOK, h, "Bearer "+k.sign(t, is.claims("bob", nil))); w.Code != http.StatusOK || h.id.Name != "bob" {
			t.Fatalf("%s after rotation: status %d, identity %+v", k.kid, w.Code, h.id)
		}
	}
	// k1 is gone from the refetched set.
	checkRefused(t, serveSettled(t, a, http.StatusUnauthorized, &recorder{}, "Bearer "+k1.sign(t, is.claims("alice", nil))), http.StatusUnauthorized, invalidChallenge)

	// Discovery ran once; every key came from the cache or one refetch.
	is.mu.Lock()
	defer is.mu.Unlock()
	if is.discovers != 1 {
		t.Errorf("discovery fetched %d times, want 1", is.discovers)
	}
}

func TestOAuthIssuerDown(t *testing.T) {
	rk, _ := testKeys(t)
	k1 := signingKey{"k1", jose.RS256, rk[0]}
	is := newIssuer(t, k1)
	is.down = true
	a, clk := oauthAuth(t, is, config.OAuth{Allow: []string{"*"}})
	tok := k1.sign(t, is.claims("alice", nil))

	retryAfter := func(w *httptest.ResponseRecorder) int {
		t.Helper()
		checkRefused(t, w, http.StatusServiceUnavailable, "", tok)
		n, err := strconv.Atoi(w.Header().Get("Retry-After"))
		if err != nil || n <= 0 {
			t.Fatalf("Retry-After = %q", w.Header().Get("Retry-After"))
		}
		return n
	}
	if n := retryAfter(serve(t, a, &recorder{}, "Bearer "+tok)); n < 10 || n > 11 {
		t.Errorf("Retry-After = %d right after the failure, want 10 or 11", n)
	}
	// Within the interval, no request reaches the issuer, and Retry-After
	// counts down.
	clk.Add(4 * time.Second)
	if n := retryAfter(serve(t, a, &recorder{}, "Bearer "+tok)); n < 6 || n > 7 {
		t.Errorf("Retry-After = %d 4s later, want 6 or 7", n)
	}
	is.mu.Lock()
	if is.discovers != 1 {
		t.Errorf("discovery attempted %d times within the interval, want 1", is.discovers)
	}
	is.down = false
	is.mu.Unlock()
	// Still within the interval: no retry yet.
	retryAfter(serve(t, a, &recorder{}, "Bearer "+tok))
	// Static tokens never depend on the issuer.
	if w := serve(t, a, &recorder{}, "Bearer "+desktopToken); w.Code != http.StatusOK {
		t.Errorf("static token while the issuer is down: status %d", w.Code)
	}
	// Past the interval the next request discovers again.
	clk.Add(6 * time.Second)
	h := &recorder{}
	if w := serve(t, a, h, "Bearer "+tok); w.Code != http.StatusOK || h.id.Name != "alice" {
		t.Fatalf("after the issuer came back: status %d, body %s", w.Code, w.Body)
	}
}

func TestOAuthJWKSDown(t *testing.T) {
	rk, _ := testKeys(t)
	k1 := signingKey{"k1", jose.RS256, rk[0]}
	k2 := signingKey{"k2", jose.RS256, rk[1]}
	is := newIssuer(t, k1)
	a, clk := oauthAuth(t, is, config.OAuth{Allow: []string{"*"}})
	if w := serve(t, a, &recorder{}, "Bearer "+k1.sign(t, is.claims("alice", nil))); w.Code != http.StatusOK {
		t.Fatalf("status %d", w.Code)
	}
	is.set(func(is *issuer) { is.jwksDown = true; is.keys = append(is.keys, k2.public()) })
	clk.Add(refetchEvery)
	// Cached keys keep working.
	if w := serveSettled(t, a, http.StatusOK, &recorder{}, "Bearer "+k1.sign(t, is.claims("alice", nil))); w.Code != http.StatusOK {
		t.Errorf("cached key while the JWKS is down: status %d", w.Code)
	}
	// A new key cannot be fetched: 503, not 401.
	tok := k2.sign(t, is.claims("alice", nil))
	w := serveSettled(t, a, http.StatusServiceUnavailable, &recorder{}, "Bearer "+tok)
	checkRefused(t, w, http.StatusServiceUnavailable, "", tok)
	if w.Header().Get("Retry-After") == "" {
		t.Error("no Retry-After")
	}
	// The failure is remembered for refetchEvery (issue 31, item 8).
	is.set(func(is *issuer) { is.jwksDown = false })
	if w := serve(t, a, &recorder{}, "Bearer "+tok); w.Code != http.StatusServiceUnavailable {
		t.Errorf("within refetchEvery of the failed fetch: status %d, want 503", w.Code)
	}
	clk.Add(refetchEvery)
	if w := serveSettled(t, a, http.StatusOK, &recorder{}, "Bearer "+tok); w.Code != http.StatusOK {
		t.Errorf("after the JWKS came back: status %d", w.Code)
	}
}

// serveSettled is serve for a request whose fate depends on what the
// issuer's JWKS holds now, right after an earlier fetch of it. go-oidc hands
// a fetch's keys to its waiters before it caches them and forgets the
// fetch, so a request in between sees the old cache or joins the finished
// fetch and gets its old keys (in production that client gets one wrong
// answer). serveSettled repeats the request, yielding in between, until
// its status is want, a bounded number of times.
func serveSettled(t *testing.T, a *Authenticator, want int, next http.Handler, authz ...string) *httptest.ResponseRecorder {
	t.Helper()
	var w *httptest.ResponseRecorder
	for range 1000 {
		if w = serve(t, a, next, authz...); w.Code == want {
			break
		}
		runtime.Gosched()
	}
	return w
}

// TestOAuthCanceledRequestDuringDiscovery: a client that gives up on its
// request while the issuer is being discovered must not make the issuer
// look unreachable to everyone else for the next ten seconds.
func TestOAuthCanceledRequestDuringDiscovery(t *testing.T) {
	rk, _ := testKeys(t)
	k1 := signingKey{"k1", jose.RS256, rk[0]}
	is := newIssuer(t, k1)
	a, _ := oauthAuth(t, is, config.OAuth{Allow: []string{"*"}})

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "http://gw.example/mcp", nil)
	r.Header.Set("Authorization", "Bearer a.b.c") // anyone can send this
	a.Middleware(&recorder{}).ServeHTTP(httptest.NewRecorder(), r)

	h := &recorder{}
	if w := serve(t, a, h, "Bearer "+k1.sign(t, is.claims("alice", nil))); w.Code != http.StatusOK {
		t.Fatalf("valid token after a canceled request: status %d, Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
}

func TestOAuthRate(t *testing.T) {
	rk, _ := testKeys(t)
	k1 := signingKey{"k1", jose.RS256, rk[0]}
	is := newIssuer(t, k1)
	a, _ := oauthAuth(t, is, config.OAuth{Allow: []string{"*"}, Rate: "1/h", Burst: 2})
	take := func(sub string) time.Duration {
		t.Helper()
		h := &recorder{}
		if w := serve(t, a, h, "Bearer "+k1.sign(t, is.claims(sub, nil))); w.Code != http.StatusOK {
			t.Fatalf("status %d", w.Code)
		}
		return h.id.Policy.Take()
	}
	// Each principal has its own bucket, kept across its requests and
	// shared with Identity (the embedding API).
	if d := take("alice"); d != 0 {
		t.Fatalf("alice #1: %v", d)
	}
	if d := a.Identity("alice").Policy.Take(); d != 0 {
		t.Fatalf("alice #2 through Identity: %v", d)
	}
	if d := take("alice"); d <= 0 || d > time.Hour {
		t.Errorf("alice #3: %v, want a wait of up to an hour", d)
	}
	if d := take("bob"); d != 0 {
		t.Errorf("bob #1: %v", d)
	}
}

func TestOAuthIdentity(t *testing.T) {
	rk, _ := testKeys(t)
	is := newIssuer(t, signingKey{"k1", jose.RS256, rk[0]})
	a, _ := oauthAuth(t, is, config.OAuth{Allow: []string{"fs__*"}, Deny: []string{"fs__write*"},
		Permissions: []config.OAuthPermission{{When: map[string]string{"scope": "admin"}, Allow: []string{"*"}}}})
	// A name in Go gets the oauth section's own grant, no claim's.
	id := a.Identity("alice")
	if id == nil || id.Name != "alice" || !id.Permits("fs__read") || id.Permits("fs__write") || id.Permits("git__push") {
		t.Errorf("Identity(alice) with OAuth on = %+v", id)
	}
	if id := a.Identity("desktop"); id == nil || !id.Permits("git__push") {
		t.Errorf("Identity(desktop) = %+v, want the static token's", id)
	}
	// Identity never contacts the issuer.
	is.mu.Lock()
	defer is.mu.Unlock()
	if is.discovers != 0 {
		t.Errorf("Identity discovered the issuer")
	}
}

func TestServeMetadata(t *testing.T) {
	rk, _ := testKeys(t)
	is := newIssuer(t, signingKey{"k1", jose.RS256, rk[0]})
	get := func(a *Authenticator) (*httptest.ResponseRecorder, map[string]any) {
		t.Helper()
		w := httptest.NewRecorder()
		a.ServeMetadata(w, httptest.NewRequest(http.MethodGet, "http://gw.example"+MetadataPath+"/mcp", nil))
		var md map[string]any
		if w.Code == http.StatusOK {
			if err := json.Unmarshal(w.Body.Bytes(), &md); err != nil {
				t.Fatalf("metadata %s: %v", w.Body, err)
			}
		}
		return w, md
	}

	a, _ := oauthAuth(t, is, config.OAuth{Scopes: []string{"tools:read", "tools:write"}})
	w, md := get(a)
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" || w.Header().Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("status %d, headers %v", w.Code, w.Header())
	}
	want := map[string]any{
		"resource":                 audience,
		"authorization_servers":    []any{is.srv.URL},
		"bearer_methods_supported": []any{"header"},
		"scopes_supported":         []any{"tools:read", "tools:write"},
	}
	for k, v := range want {
		if got, _ := json.Marshal(md[k]); string(got) != mustJSON(v) {
			t.Errorf("%s = %s, want %s", k, got, mustJSON(v))
		}
	}
	if u, err := url.Parse(md["authorization_servers"].([]any)[0].(string)); err != nil || u.Hostname() != "127.0.0.1" {
		t.Errorf("authorization server %v", md["authorization_servers"])
	}

	a, _ = oauthAuth(t, is, config.OAuth{})
	if _, md := get(a); md == nil || md["scopes_supported"] != nil || md["resource"] != audience {
		t.Errorf("without scopes: %v", md)
	}

	if w, _ := get(staticAuth(t)); w.Code != http.StatusNotFound {
		t.Errorf("OAuth off: status %d, want 404", w.Code)
	}
	// No request reached the issuer.
	is.mu.Lock()
	defer is.mu.Unlock()
	if is.discovers != 0 {
		t.Errorf("ServeMetadata discovered the issuer")
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestOAuthConcurrentFirstRequests: requests racing to discover the issuer
// discover it once, and all get in.
func TestOAuthConcurrentFirstRequests(t *testing.T) {
	rk, ek := testKeys(t)
	k1 := signingKey{"k1", jose.RS256, rk[0]}
	ke := signingKey{"ke", jose.ES256, ek}
	is := newIssuer(t, k1, ke)
	a, _ := oauthAuth(t, is, config.OAuth{Allow: []string{"*"}, Rate: "100/s"})
	toks := []string{k1.sign(t, is.claims("alice", nil)), ke.sign(t, is.claims("bob", nil)), desktopToken}
	var wg sync.WaitGroup
	codes := make([]int, 24)
	for i := range codes {
		wg.Go(func() {
			h := &recorder{}
			w := serve(t, a, h, "Bearer "+toks[i%len(toks)])
			codes[i] = w.Code
			if h.id != nil {
				h.id.Policy.Take()
			}
		})
	}
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusOK {
			t.Errorf("request %d: status %d", i, c)
		}
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	if is.discovers != 1 {
		t.Errorf("discovered %d times, want 1", is.discovers)
	}
}

// TestOAuthMadeUpKeysDoNotHammerTheIssuer: tokens naming key IDs the
// issuer never had make toolgate fetch the JWKS at most once per
// refetchEvery, however many arrive.
func TestOAuthMadeUpKeysDoNotHammerTheIssuer(t *testing.T) {
	rk, _ := testKeys(t)
	k1 := signingKey{"k1", jose.RS256, rk[0]}
	is := newIssuer(t, k1)
	a, clk := oauthAuth(t, is, config.OAuth{Allow: []string{"*"}})
	if w := serve(t, a, &recorder{}, "Bearer "+k1.sign(t, is.claims("alice", nil))); w.Code != http.StatusOK {
		t.Fatalf("status %d", w.Code)
	}
	is.mu.Lock()
	before := is.jwksGets
	is.mu.Unlock()
	for i := range 50 {
		bogus := signingKey{fmt.Sprintf("made-up-%d", i), jose.RS256, rk[1]}
		checkRefused(t, serve(t, a, &recorder{}, "Bearer "+bogus.sign(t, is.claims("mallory", nil))), http.StatusUnauthorized, invalidChallenge)
	}
	is.mu.Lock()
	if n := is.jwksGets - before; n != 0 {
		t.Errorf("50 made-up key IDs within refetchEvery fetched the JWKS %d times, want 0", n)
	}
	is.mu.Unlock()
	clk.Add(refetchEvery)
	for i := range 50 {
		bogus := signingKey{fmt.Sprintf("again-%d", i), jose.RS256, rk[1]}
		serve(t, a, &recorder{}, "Bearer "+bogus.sign(t, is.claims("mallory", nil)))
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	if n := is.jwksGets - before; n != 1 {
		t.Errorf("50 made-up key IDs after refetchEvery fetched the JWKS %d times, want 1", n)
	}
}

// TestOAuthJWKSFailureRemembered: while the JWKS fails, tokens naming
// keys toolgate does not hold make it fetch the JWKS at most once per
// refetchEvery, as successes do, and concurrent ones share one fetch
// (issue 31, item 8: 25 bad tokens made 22 fetches).
func TestOAuthJWKSFailureRemembered(t *testing.T) {
	rk, _ := testKeys(t)
	k1 := signingKey{"k1", jose.RS256, rk[0]}
	is := newIssuer(t, k1)
	a, clk := oauthAuth(t, is, config.OAuth{Allow: []string{"*"}})
	if w := serve(t, a, &recorder{}, "Bearer "+k1.sign(t, is.claims("alice", nil))); w.Code != http.StatusOK {
		t.Fatalf("status %d", w.Code)
	}
	is.set(func(is *issuer) { is.jwksDown = true })
	clk.Add(refetchEvery)
	is.mu.Lock()
	before := is.jwksGets
	is.mu.Unlock()
	var wg sync.WaitGroup
	for i := range 25 {
		bogus := signingKey{fmt.Sprintf("made-up-%d", i), jose.RS256, rk[1]}
		tok := "Bearer " + bogus.sign(t, is.claims("mallory", nil))
		wg.Go(func() {
			if w := serve(t, a, &recorder{}, tok); w.Code == http.StatusOK {
				t.Errorf("a token of a made-up key was accepted")
			}
		})
	}
	wg.Wait()
	is.mu.Lock()
	defer is.mu.Unlock()
	if n := is.jwksGets - before; n != 1 {
		t.Errorf("25 tokens of unknown keys while the JWKS fails fetched it %d times, want 1", n)
	}
}

// TestOAuthJWKSRedirect: a JWKS that redirects to another origin is not
// followed there (its keys would escape the cache and its cap), and one
// that redirects within its origin is cached like any (issue 31, item 8:
// a redirecting JWKS was fetched 42 times).
func TestOAuthJWKSRedirect(t *testing.T) {
	rk, _ := testKeys(t)
	k1 := signingKey{"k1", jose.RS256, rk[0]}
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		elsewhere.Add(1)
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{k1.public()}})
	}))
	t.Cleanup(other.Close)
	for _, tc := range []struct {
		name   string
		target func(is *issuer) string
		want   int
	}{
		{"cross-origin", func(*issuer) string { return other.URL + "/keys" }, http.StatusServiceUnavailable},
		{"same origin", func(is *issuer) string { return is.srv.URL + "/jwks-moved" }, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := newIssuer(t, k1)
			is.set(func(is *issuer) { is.jwksMoved = tc.target(is) })
			a, _ := oauthAuth(t, is, config.OAuth{Allow: []string{"*"}})
			elsewhere.Store(0)
			for i := range 10 {
				k := k1
				if i > 0 {
					k = signingKey{fmt.Sprintf("made-up-%d", i), jose.RS256, rk[1]}
				}
				w := serve(t, a, &recorder{}, "Bearer "+k.sign(t, is.claims("alice", nil)))
				if i == 0 && w.Code != tc.want {
					t.Errorf("a token of the redirected JWKS's key: status %d, want %d", w.Code, tc.want)
				}
			}
			if n := elsewhere.Load(); n != 0 {
				t.Errorf("the other origin was asked for keys %d times, want 0", n)
			}
			is.mu.Lock()
			defer is.mu.Unlock()
			if tc.want == http.StatusOK && is.movedGets != 1 {
				t.Errorf("10 tokens fetched the moved JWKS %d times, want 1 (cached)", is.movedGets)
			}
		})
	}
}

// TestOAuthDiscoveryCapped: a discovery document larger than
// maxFetchBytes is refused, whether its Content-Length says so or it just
// keeps coming, without reading it all (issue 31, item 8: a 200 MB
// document took RSS to 441.8 MB).
func TestOAuthDiscoveryCapped(t *testing.T) {
	const huge = 64 << 20
	for _, declared := range []bool{true, false} {
		t.Run(fmt.Sprintf("declared %v", declared), func(t *testing.T) {
			var written atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if declared {
					w.Header().Set("Content-Length", fmt.Sprint(huge))
				}
				chunk := bytes.Repeat([]byte(" "), 64<<10)
				for written.Load() < huge {
					n, err := w.Write(chunk)
					written.Add(int64(n))
					if err != nil || r.Context().Err() != nil {
						return
					}
				}
			}))
			t.Cleanup(srv.Close)
			a := New(&config.Auth{OAuth: &config.OAuth{Issuer: srv.URL, Audience: audience, PrincipalClaim: "sub", Allow: []string{"*"}}},
				&Options{Client: srv.Client()})
			rk, _ := testKeys(t)
			k1 := signingKey{"k1", jose.RS256, rk[0]}
			w := serve(t, a, &recorder{}, "Bearer "+k1.sign(t, map[string]any{"iss": srv.URL, "aud": audience, "sub": "x", "exp": time.Now().Add(time.Minute).Unix()}))
			if w.Code != http.StatusServiceUnavailable {
				t.Errorf("status %d, want 503 (the issuer's document refused)", w.Code)
			}
			srv.CloseClientConnections()
			if n := written.Load(); n >= huge/2 {
				t.Errorf("the issuer wrote %d bytes of its %d-byte document before toolgate gave up, want far fewer", n, huge)
			}
		})
	}
}
