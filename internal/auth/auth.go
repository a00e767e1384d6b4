// Package auth authenticates toolgate's HTTP requests (static bearer
// tokens and OAuth 2.1 JWT access tokens, per the MCP authorization spec)
// and decides what each principal may do: which tools it may see and call,
// and at what rate. JWTs are checked by go-oidc (signature against the
// issuer's JWKS, iss, aud, exp, nbf); nothing here parses a JWT by hand.
package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"
	"unicode"

	"golang.org/x/time/rate"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/internal/httpheader"
	"github.com/toolgate/toolgate/internal/principal"
	"github.com/toolgate/toolgate/internal/rpcrefusal"
)

// MetadataPath is where the protected resource metadata (RFC 9728) is
// served; the MCP path is appended to it as well.
const MetadataPath = "/.well-known/oauth-protected-resource"

// Authenticator authenticates requests for one configuration. Its methods
// are safe for concurrent use.
type Authenticator struct {
	tokens []staticToken
	oauth  *verifier // nil without auth.oauth
	// named holds the static tokens' identities by principal name, for
	// Identity.
	named map[string]*principal.Identity
	// oauthGrant is the oauth section's own grant; limits holds the rate
	// limiters of OAuth principals, by name.
	oauthGrant config.Grant
	limits     limiters
	bucket     BucketFunc      // never nil
	admins     map[string]bool // auth.admins
	logger     *slog.Logger
	warnEvery  *rate.Limiter // paces the outage warning
}

type staticToken struct {
	sum [sha256.Size]byte
	id  *principal.Identity
}

// Options configure [New]. The zero value works; a nil *Options is
// accepted.
type Options struct {
	// Client fetches the issuer's discovery document and keys. Default:
	// a client with a 10s timeout.
	Client *http.Client
	// Logger receives authentication failures worth an operator's
	// attention. Default: discard.
	Logger *slog.Logger
	// Bucket builds each principal's rate limit. Default: a token bucket
	// on this replica ([NewLocal]); auth.rate_scope: cluster gives one
	// counted across the replicas.
	Bucket BucketFunc
}

// BucketFunc builds the rate limit of principal: perSecond calls a
// second, with burst.
type BucketFunc func(principal string, perSecond float64, burst int) Bucket

// Bucket is a principal's rate limit. Its methods are safe for
// concurrent use.
type Bucket interface {
	// Take takes one call: 0 when it may run now, else how long until
	// one could (nothing is taken then).
	Take() time.Duration
	// Idle reports whether the principal has not called for as long as
	// its bucket takes to refill: it may be dropped and made anew.
	Idle() bool
}

// New returns the authenticator of a, or nil when a configures no
// authentication.
func New(a *config.Auth, o *Options) *Authenticator {
	if !a.Enabled() {
		return nil
	}
	var opts Options
	if o != nil {
		opts = *o
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Bucket == nil {
		opts.Bucket = func(_ string, perSecond float64, burst int) Bucket { return NewLocal(perSecond, burst) }
	}
	au := &Authenticator{named: map[string]*principal.Identity{}, admins: map[string]bool{}, logger: opts.Logger, bucket: opts.Bucket,
		warnEvery: rate.NewLimiter(rate.Every(10*time.Second), 1)}
	for _, n := range a.Admins {
		au.admins[n] = true
	}
	for _, t := range a.Tokens {
		id := &principal.Identity{Name: t.Name, Policy: newPolicy(t.Allow, t.Deny, bucketOf(au.bucket, t.Name, t.Grant())), Admin: au.admins[t.Name]}
		au.tokens = append(au.tokens, staticToken{sum: sha256.Sum256([]byte(t.Token)), id: id})
		au.named[t.Name] = id
	}
	if o := a.OAuth; o != nil {
		if opts.Client == nil {
			opts.Client = &http.Client{Timeout: 10 * time.Second}
		}
		au.oauth = newVerifier(o, opts.Client)
		au.oauthGrant = o.Grant()
		au.limits.max = maxLimiters
		au.limits.make = opts.Bucket
	}
	return au
}

// Identity returns the identity of a principal named in Go (the embedding
// API): a static token's, with its tools and rate; else, with OAuth on,
// one with the oauth section's own grant (no claims); else nil.
func (a *Authenticator) Identity(name string) *principal.Identity {
	if a == nil {
		return nil
	}
	if id, ok := a.named[name]; ok {
		return id
	}
	if a.oauth != nil {
		return &principal.Identity{Name: name, Policy: newPolicy(a.oauthGrant.Allow, a.oauthGrant.Deny, a.limits.get(name, a.oauthGrant))}
	}
	return &principal.Identity{Name: name, Policy: denyAll{}}
}

// failure is an authentication failure as the client learns it: which
// check failed is never said.
type failure struct {
	presented bool // a bearer token was sent
	status    int  // 401, or 503 when the issuer could not be reached
	retry     time.Duration
}

// authenticate returns the identity of r's bearer token.
func (a *Authenticator) authenticate(r *http.Request) (*principal.Identity, *failure) {
	tok, ok := ParseBearer(r.Header.Values("Authorization"))
	if !ok {
		return nil, &failure{status: http.StatusUnauthorized}
	}
	sum := sha256.Sum256([]byte(tok))
	var found *principal.Identity
	for _, t := range a.tokens { // every token, whatever matches: constant time
		if subtle.ConstantTimeCompare(sum[:], t.sum[:]) == 1 {
			found = t.id
		}
	}
	if found != nil {
		return found, nil
	}
	if a.oauth == nil || strings.Count(tok, ".") != 2 {
		return nil, &failure{presented: true, status: http.StatusUnauthorized}
	}
	claims, err := a.oauth.verify(r.Context(), tok)
	if err != nil {
		if u, ok := err.(*unreachableError); ok {
			if a.warnEvery.Allow() {
				// At most one line per interval: every request during an
				// outage would otherwise log one.
				a.logger.Warn("oauth: the issuer's keys could not be fetched", "issuer", a.oauth.issuer, "error", u.err.Error())
			}
			return nil, &failure{presented: true, status: http.StatusServiceUnavailable, retry: u.retry}
		}
		a.logger.Debug("oauth: token refused", "error", err.Error())
		return nil, &failure{presented: true, status: http.StatusUnauthorized}
	}
	name, ok := claimString(claims, a.oauth.principalClaim)
	if !ok {
		a.logger.Debug("oauth: token has no usable principal claim", "claim", a.oauth.principalClaim)
		return nil, &failure{presented: true, status: http.StatusUnauthorized}
	}
	if _, clash := a.named[name]; clash || name == principal.Stdio {
		// Principals own sessions and threads: a token must not become a
		// static token's principal, or stdio's.
		a.logger.Warn("oauth: token refused: its principal is also a static token's name (or stdio); rename the token in auth.tokens",
			"claim", a.oauth.principalClaim)
		return nil, &failure{presented: true, status: http.StatusUnauthorized}
	}
	// Sessions and thread instances belong to a principal by name: a token
	// must not become a static token's principal, or stdio.
	if _, taken := a.named[name]; taken || name == config.StdioPrincipal {
		a.logger.Warn("oauth: token refused: its principal claim names a static token's principal or stdio", "claim", a.oauth.principalClaim, "principal", name)
		return nil, &failure{presented: true, status: http.StatusUnauthorized}
	}
	allow, deny := a.oauth.grants(claims)
	return &principal.Identity{Name: name, Policy: newPolicy(allow, deny, a.limits.get(name, a.oauthGrant)), Admin: a.admins[name], Token: tok}, nil
}

// claimString is claim c of claims as a principal name: a non-empty
// string of at most 128 printable characters.
func claimString(claims map[string]any, c string) (string, bool) {
	s, ok := claims[c].(string)
	if !ok || s == "" || len(s) > 128 {
		return "", false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return "", false
		}
	}
	return s, true
}

// Middleware authenticates every request before next: a request without
// a valid bearer token gets 401 with WWW-Authenticate; one with a token
// carries its identity in its context ([principal.From]).
func (a *Authenticator) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, f := a.authenticate(r)
		if f != nil {
			a.refuse(w, f)
			return
		}
		next.ServeHTTP(w, r.WithContext(principal.With(r.Context(), id)))
	})
}

// refuse answers an unauthenticated request. The body is a JSON-RPC error,
// as MCP clients parse; it says what is needed, never what was wrong.
func (a *Authenticator) refuse(w http.ResponseWriter, f *failure) {
	challenge := `Bearer realm="toolgate"`
	if a.oauth != nil {
		challenge += fmt.Sprintf(`, resource_metadata=%q`, a.oauth.metadataURL)
	}
	msg := "authentication required: send Authorization: Bearer <token>"
	if f.presented {
		challenge += `, error="invalid_token"`
		msg = "the bearer token was not accepted: send Authorization: Bearer <a valid token for this server>"
	}
	if f.status == http.StatusServiceUnavailable {
		msg = "the authorization server's signing keys could not be fetched; retry later"
		w.Header().Set("Retry-After", fmt.Sprint(int(f.retry.Seconds())+1))
	} else {
		w.Header().Set("WWW-Authenticate", challenge)
	}
	rpcrefusal.Write(w, f.status, rpcrefusal.Unauthorized, msg)
}

// ServeMetadata serves the protected resource metadata (RFC 9728) when
// OAuth is on, and 404 otherwise. It needs no authentication, and any
// origin may read it.
func (a *Authenticator) ServeMetadata(w http.ResponseWriter, _ *http.Request) {
	if a == nil || a.oauth == nil {
		http.NotFound(w, nil)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Access-Control-Allow-Origin", "*")
	w.Header().Set("Cache-Control", "max-age=3600")
	_, _ = w.Write(a.oauth.metadata)
}

// ParseBearer returns the token of the one Authorization header values
// holds, when it is "Bearer <token>" (the scheme in any case, RFC 9110)
// with a token of RFC 6750's token68 characters.
func ParseBearer(values []string) (string, bool) {
	if len(values) != 1 {
		return "", false
	}
	scheme, tok, ok := strings.Cut(values[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimLeft(tok, " ")
	if len(tok) > maxTokenLen || !httpheader.Token68(tok) {
		return "", false
	}
	return tok, true
}

// maxTokenLen bounds a bearer token; JWTs with many claims stay far
// below it.
const maxTokenLen = 16 << 10

// policy is a principal's tools and rate.
type policy struct {
	allow, deny []string
	lim         Bucket // nil: no limit
}

func newPolicy(allow, deny []string, lim Bucket) *policy {
	return &policy{allow: allow, deny: deny, lim: lim}
}

// Permits reports whether tool matches an allow glob and no deny glob.
func (p *policy) Permits(tool string) bool {
	return matchAny(p.allow, tool) && !matchAny(p.deny, tool)
}

// Take takes one call from the bucket, or says how long until one is there.
func (p *policy) Take() time.Duration {
	if p.lim == nil {
		return 0
	}
	return p.lim.Take()
}

func matchAny(globs []string, name string) bool {
	for _, g := range globs {
		if ok, err := path.Match(g, name); err == nil && ok {
			return true
		}
	}
	return false
}

// denyAll is the policy of a principal nobody configured.
type denyAll struct{}

func (denyAll) Permits(string) bool { return false }
func (denyAll) Take() time.Duration { return 0 }

// bucketOf is the bucket make builds for principal name's grant g, or
// nil when g has no rate.
func bucketOf(make BucketFunc, name string, g config.Grant) Bucket {
	r, burst := g.Limit()
	if r == 0 {
		return nil
	}
	return make(name, r, burst)
}

// Local is a token bucket counted on this replica alone.
type Local struct{ lim *rate.Limiter }

// NewLocal returns a bucket of perSecond calls a second with burst,
// counted here.
func NewLocal(perSecond float64, burst int) *Local {
	return &Local{lim: rate.NewLimiter(rate.Limit(perSecond), burst)}
}

// Take takes one call, or says how long until one is there.
func (l *Local) Take() time.Duration {
	// Allow takes nothing when it refuses (a canceled Reserve could: it
	// gives back nothing once another call has reserved after it).
	now := time.Now()
	if l.lim.AllowN(now, 1) {
		return 0
	}
	wait := time.Duration((1 - l.lim.TokensAt(now)) / float64(l.lim.Limit()) * float64(time.Second))
	return max(wait, time.Nanosecond)
}

// Idle reports whether the bucket is full again.
func (l *Local) Idle() bool { return l.lim.TokensAt(time.Now()) >= float64(l.lim.Burst()) }

// maxLimiters bounds the OAuth principals whose buckets are kept; past it
// the full buckets (those of principals idle long enough to have
// refilled) are dropped.
const maxLimiters = 1 << 16

// limiters holds a rate limiter per OAuth principal.
type limiters struct {
	make BucketFunc // nil: local buckets
	max  int
	// mu guards m and pruned.
	mu     sync.Mutex
	m      map[string]Bucket
	pruned time.Time // the last pruning of refilled buckets
}

func (l *limiters) get(name string, g config.Grant) Bucket {
	r, burst := g.Limit()
	if r == 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if lim, ok := l.m[name]; ok {
		return lim
	}
	if l.m == nil {
		l.m = map[string]Bucket{}
	}
	if len(l.m) >= l.max {
		// Full: drop the buckets that have refilled (their principals
		// have been idle), at most once a second; if none has, drop one
		// at random, so that the new principal's bucket is kept.
		if now := time.Now(); now.Sub(l.pruned) >= time.Second {
			l.pruned = now
			for k, lim := range l.m {
				if lim.Idle() {
					delete(l.m, k)
				}
			}
		}
		for k := range l.m {
			if len(l.m) < l.max {
				break
			}
			delete(l.m, k)
		}
	}
	var lim Bucket
	if l.make != nil {
		lim = l.make(name, r, burst)
	} else {
		lim = NewLocal(r, burst)
	}
	l.m[name] = lim
	return lim
}

// metadataURL is where the metadata of resource is served: the
// well-known path inserted before the resource's path (RFC 9728 §3.1).
func metadataURL(resource string) string {
	u, err := url.Parse(resource)
	if err != nil || u.Host == "" {
		return MetadataPath
	}
	p := strings.TrimSuffix(u.Path, "/")
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: MetadataPath + p}).String()
}

var (
	_ principal.Policy = (*policy)(nil)
	_ Bucket           = (*Local)(nil)
)
