package tests

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// TestServeRefusesPublicListenWithoutAuth: without an auth section, serve
// will not listen beyond loopback, and says in one line what to do.
func TestServeRefusesPublicListenWithoutAuth(t *testing.T) {
	cfg := writeConfig(t, "builtin: [calc]\n")
	for _, addr := range []string{"0.0.0.0:0", ":0"} {
		r := runCLI(t, "serve", "--config", cfg, "--listen", addr)
		if r.code == 0 {
			t.Fatalf("serve --listen %s without auth: %v", addr, r)
		}
		line := strings.TrimSpace(r.stderr)
		if strings.Count(line, "\n") != 0 || !strings.Contains(line, "--insecure-no-auth") || !strings.Contains(line, "auth") ||
			!strings.Contains(line, addr) {
			t.Errorf("serve --listen %s: stderr %q, want one line naming the address, auth and --insecure-no-auth", addr, r.stderr)
		}
	}
}

// authClient is an initialized streamable HTTP client of srv sending token.
func authClient(t *testing.T, srv *server, token string) (*client.Client, error) {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(srv.URL+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = protocolVersion
	req.Params.ClientInfo = mcp.Implementation{Name: "toolgate-e2e", Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		return nil, err
	}
	return c, nil
}

func listNames(t *testing.T, c *client.Client) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	res, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

// TestAuthStaticTokensEndToEnd runs the real binary with two tokens.
func TestAuthStaticTokensEndToEnd(t *testing.T) {
	t.Setenv("E2E_OPS_TOKEN", "ops-token-0123456789abcdef")
	srv := startServe(t, `
builtin: [calc, clock_now, scratchpad]
auth:
  tokens:
    - name: ops
      token: ${E2E_OPS_TOKEN}
      deny: ["scratch*"]
    - name: dev
      token: dev-token-0123456789abcdef
      allow: ["scratchpad"]
`)
	if _, err := authClient(t, srv, "wrong-token-0123456789abcdef"); err == nil {
		t.Fatal("a wrong token initialized a session")
	}
	ops, err := authClient(t, srv, "ops-token-0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := listNames(t, ops), []string{"calc", "clock_now"}; !slices.Equal(got, want) {
		t.Errorf("ops sees %v, want %v", got, want)
	}
	res := mustCall(t, ops, "scratchpad", map[string]any{"op": "get", "key": "k"}, "")
	if !res.IsError || !strings.Contains(resultText(res), "permission") {
		t.Errorf("ops calling scratchpad = %q, want a permission error", resultText(res))
	}
	dev, err := authClient(t, srv, "dev-token-0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := listNames(t, dev), []string{"scratchpad"}; !slices.Equal(got, want) {
		t.Errorf("dev sees %v, want %v", got, want)
	}
	if strings.Contains(srv.Stderr(), "ops-token-0123456789abcdef") {
		t.Error("a token reached the log")
	}
}

// issuer is an OIDC issuer for tests: discovery and a JWKS on 127.0.0.1,
// signing with a key the test generates.
type issuer struct {
	srv *httptest.Server
	key *rsa.PrivateKey
}

func newIssuer(t *testing.T) *issuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	is := &issuer{key: key}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": is.srv.URL, "jwks_uri": is.srv.URL + "/jwks",
			"id_token_signing_alg_values_supported": []string{"RS256"},
		})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	})
	is.srv = httptest.NewServer(mux)
	t.Cleanup(is.srv.Close)
	return is
}

// token signs claims over the standard ones (iss, aud, sub, exp, nbf).
func (is *issuer) token(t *testing.T, aud, sub string, exp time.Duration, extra map[string]any) string {
	t.Helper()
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: is.key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	std := jwt.Claims{Issuer: is.srv.URL, Audience: jwt.Audience{aud}, Subject: sub,
		Expiry: jwt.NewNumericDate(now.Add(exp)), NotBefore: jwt.NewNumericDate(now.Add(-time.Minute)), IssuedAt: jwt.NewNumericDate(now.Add(-time.Minute))}
	tok, err := jwt.Signed(sig).Claims(std).Claims(extra).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestAuthOAuthEndToEnd runs the real binary as an OAuth resource server.
func TestAuthOAuthEndToEnd(t *testing.T) {
	is := newIssuer(t)
	const aud = "https://gw.example/mcp"
	srv := startServe(t, fmt.Sprintf(`
builtin: [calc, clock_now, scratchpad]
auth:
  tokens:
    - name: admin
      token: admin-token-0123456789abcdef
  oauth:
    issuer: %s
    audience: %s
    scopes: [tools:read]
    allow: [clock_now]
    permissions:
      - when: {scope: tools:read}
        allow: [calc]
`, is.srv.URL, aud))

	t.Run("metadata", func(t *testing.T) {
		for _, path := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
			code, body := get(t, srv.URL+path)
			var md struct {
				Resource string   `json:"resource"`
				Servers  []string `json:"authorization_servers"`
				Scopes   []string `json:"scopes_supported"`
			}
			if code != http.StatusOK || json.Unmarshal([]byte(body), &md) != nil || md.Resource != aud ||
				!slices.Equal(md.Servers, []string{is.srv.URL}) || !slices.Equal(md.Scopes, []string{"tools:read"}) {
				t.Errorf("GET %s: HTTP %d %s", path, code, body)
			}
		}
	})

	t.Run("401 names the metadata", func(t *testing.T) {
		resp, err := http.Post(srv.URL+"/mcp", "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := `resource_metadata="https://gw.example/.well-known/oauth-protected-resource/mcp"`
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), want) {
			t.Errorf("HTTP %d, WWW-Authenticate %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	})

	t.Run("bad tokens", func(t *testing.T) {
		for name, tok := range map[string]string{
			"expired":        is.token(t, aud, "u1", -2*time.Minute, nil),
			"wrong audience": is.token(t, "https://other.example/mcp", "u1", time.Hour, nil),
			"garbage":        "a.b.c",
			// Principals own sessions and threads: no token may become a
			// static token's principal, or stdio.
			"a static token's principal": is.token(t, aud, "admin", time.Hour, nil),
			"stdio":                      is.token(t, aud, "stdio", time.Hour, nil),
		} {
			if _, err := authClient(t, srv, tok); err == nil {
				t.Errorf("%s token accepted", name)
			}
		}
	})

	t.Run("scopes give tools", func(t *testing.T) {
		reader, err := authClient(t, srv, is.token(t, aud, "reader", time.Hour, map[string]any{"scope": "openid tools:read"}))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := listNames(t, reader), []string{"calc", "clock_now"}; !slices.Equal(got, want) {
			t.Errorf("tools:read sees %v, want %v", got, want)
		}
		plain, err := authClient(t, srv, is.token(t, aud, "plain", time.Hour, nil))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := listNames(t, plain), []string{"clock_now"}; !slices.Equal(got, want) {
			t.Errorf("no scope sees %v, want %v", got, want)
		}
		res := mustCall(t, plain, "calc", map[string]any{"expression": "1+1"}, "")
		if !res.IsError || !strings.Contains(resultText(res), "permission") {
			t.Errorf("calc without the scope = %q", resultText(res))
		}
	})
}
