package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/toolgate/toolgate/config"
)

// clockSkew is how far past exp a token is still accepted (go-oidc
// itself allows 5 minutes before nbf).
const clockSkew = 30 * time.Second

// rediscoverAfter is how long after a failed discovery the next request
// tries again.
const rediscoverAfter = 10 * time.Second

// verifier checks JWT access tokens of one issuer. The issuer's discovery
// document is fetched at the first token, not at start, so that toolgate
// starts while its authorization server is down; go-oidc caches the JWKS
// and refetches it when a token names a key it does not have.
type verifier struct {
	issuer, audience, principalClaim string
	permissions                      []config.OAuthPermission
	allow, deny                      []string
	client                           *http.Client // fetchClient's: capped, same-origin redirects only
	metadataURL                      string
	metadata                         []byte

	// now is the clock of rediscovery (failedAt): time.Now, but in tests.
	now func() time.Time

	mu       sync.Mutex
	idt      *oidc.IDTokenVerifier // nil until discovery succeeds
	failedAt time.Time
	lastErr  error
}

// unreachableError says the issuer's discovery document could not be
// fetched; retry is when the next attempt will be made.
type unreachableError struct {
	err   error
	retry time.Duration
}

func (e *unreachableError) Error() string { return "oauth issuer unreachable: " + e.err.Error() }

func newVerifier(o *config.OAuth, client *http.Client) *verifier {
	v := &verifier{issuer: o.Issuer, audience: o.Audience, principalClaim: o.PrincipalClaim,
		permissions: o.Permissions, allow: o.Allow, deny: o.Deny, client: fetchClient(client),
		metadataURL: metadataURL(o.Audience), now: time.Now}
	md := map[string]any{
		"resource":                 o.Audience,
		"authorization_servers":    []string{o.Issuer},
		"bearer_methods_supported": []string{"header"},
		"resource_name":            "toolgate",
	}
	if len(o.Scopes) > 0 {
		md["scopes_supported"] = o.Scopes
	}
	v.metadata, _ = json.Marshal(md)
	return v
}

// idTokenVerifier returns go-oidc's verifier, discovering the issuer first
// if that has not succeeded yet.
func (v *verifier) idTokenVerifier(ctx context.Context) (*oidc.IDTokenVerifier, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.idt != nil {
		return v.idt, nil
	}
	if wait := rediscoverAfter - v.now().Sub(v.failedAt); !v.failedAt.IsZero() && wait > 0 {
		return nil, &unreachableError{err: v.lastErr, retry: wait}
	}
	// Not canceled with the request: a client that gives up must not make
	// the issuer look unreachable to everyone for rediscoverAfter.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	// The keys are fetched with a context of their own: go-oidc keeps
	// using it for every later refresh.
	p, err := oidc.NewProvider(oidc.ClientContext(dctx, v.client), v.issuer)
	if err != nil {
		v.failedAt, v.lastErr = v.now(), err
		return nil, &unreachableError{err: err, retry: rediscoverAfter}
	}
	var algs []string
	var claims struct {
		Algs []string `json:"id_token_signing_alg_values_supported"`
	}
	if p.Claims(&claims) == nil {
		algs = claims.Algs
	}
	if len(algs) == 0 {
		algs = []string{oidc.RS256, oidc.RS384, oidc.RS512, oidc.ES256, oidc.ES384, oidc.ES512, oidc.PS256, oidc.PS384, oidc.PS512, oidc.EdDSA}
	}
	jwks := jwksURL(p)
	if jwks == "" {
		v.failedAt, v.lastErr = v.now(), errors.New("the issuer's discovery document has no jwks_uri")
		return nil, &unreachableError{err: v.lastErr, retry: rediscoverAfter}
	}
	// The keys through jwksCache: at most one fetch per refetchEvery,
	// whatever key IDs clients make up, a failure remembered as long.
	kc := *v.client
	kc.Transport = &jwksCache{base: v.client.Transport, url: jwks, now: v.now}
	keys := oidc.NewRemoteKeySet(oidc.ClientContext(context.Background(), &kc), jwks)
	v.idt = oidc.NewVerifier(v.issuer, keys, &oidc.Config{
		ClientID:             v.audience,
		SupportedSigningAlgs: algs,
		Now:                  func() time.Time { return time.Now().Add(-clockSkew) },
	})
	return v.idt, nil
}

// jwksURL is the jwks_uri of p's discovery document.
func jwksURL(p *oidc.Provider) string {
	var c struct {
		JWKS string `json:"jwks_uri"`
	}
	_ = p.Claims(&c)
	return c.JWKS
}

// verify checks tok and returns its claims.
func (v *verifier) verify(ctx context.Context, tok string) (map[string]any, error) {
	idt, err := v.idTokenVerifier(ctx)
	if err != nil {
		return nil, err
	}
	t, err := idt.Verify(ctx, tok)
	if err != nil {
		if strings.Contains(err.Error(), "fetching keys") {
			return nil, &unreachableError{err: err, retry: rediscoverAfter}
		}
		return nil, err
	}
	var claims map[string]any
	if err := t.Claims(&claims); err != nil {
		return nil, fmt.Errorf("decoding claims: %w", err)
	}
	return claims, nil
}

// grants returns the allow and deny globs of a token with claims: the
// oauth section's own plus those of every permission whose when matches.
func (v *verifier) grants(claims map[string]any) (allow, deny []string) {
	allow, deny = slices.Clone(v.allow), slices.Clone(v.deny)
	for _, p := range v.permissions {
		if matches(p.When, claims) {
			allow = append(allow, p.Allow...)
			deny = append(deny, p.Deny...)
		}
	}
	return allow, deny
}

// matches reports whether claims hold every value of when.
func matches(when map[string]string, claims map[string]any) bool {
	for name, want := range when {
		if !claimHolds(name, claims[name], want) {
			return false
		}
	}
	return true
}

func claimHolds(name string, v any, want string) bool {
	switch c := v.(type) {
	case string:
		if name == "scope" || name == "scp" {
			return slices.Contains(strings.Fields(c), want)
		}
		return c == want
	case []any:
		for _, e := range c {
			if s, ok := e.(string); ok && s == want {
				return true
			}
		}
	case bool:
		return fmt.Sprint(c) == want
	case float64:
		return fmt.Sprint(c) == want
	}
	return false
}
