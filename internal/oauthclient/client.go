package oauthclient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
)

// Grants an upstream may use.
const (
	GrantAuthorizationCode = "authorization_code"
	GrantClientCredentials = "client_credentials"
	GrantTokenExchange     = "token_exchange"
)

// Token endpoint authentication methods.
const (
	AuthBasic         = "client_secret_basic"
	AuthPost          = "client_secret_post"
	AuthNone          = "none"
	AuthPrivateKeyJWT = "private_key_jwt"
)

// DefaultTimeout bounds one request to an authorization server when
// [Config.Timeout] is zero.
const DefaultTimeout = 30 * time.Second

// Config is one upstream's OAuth settings.
type Config struct {
	// Upstream is the upstream's name, for messages and the store.
	Upstream string
	// ServerURL is the upstream MCP server's URL.
	ServerURL string
	// Grant is GrantAuthorizationCode (default), GrantClientCredentials or
	// GrantTokenExchange.
	Grant string
	// ClientID and ClientSecret are pre-registered credentials; without a
	// ClientID the client registers itself (ClientMetadataURL or DCR).
	ClientID, ClientSecret string
	// ClientMetadataURL is the URL of toolgate's Client ID Metadata
	// Document, used as the client_id where the server supports it.
	ClientMetadataURL string
	// PrivateKeyPEM is a PKCS#8 (or EC/RSA) private key in PEM for
	// private_key_jwt client authentication.
	PrivateKeyPEM []byte
	// AuthMethod forces a token endpoint authentication method; "" picks
	// one from what the server supports and what credentials there are.
	AuthMethod string
	// Scopes are asked for besides what the server's challenge asks.
	Scopes []string
	// RedirectPort is the loopback redirect's port; 0 picks a free one.
	RedirectPort int
	// Exchange configures GrantTokenExchange.
	Exchange TokenExchange
	// PerPrincipal keeps one token per principal of toolgate.
	PerPrincipal bool
	// RedirectURL, with PerPrincipal and GrantAuthorizationCode, is
	// toolgate's own callback route: a principal without a token gets a
	// [NeedsAuthError] whose URL starts a flow redirecting there, which
	// [Client.Complete] finishes. Empty: the principal is told to run
	// LoginCommand.
	RedirectURL string
	// Base carries the requests to the authorization server. Nil means
	// http.DefaultTransport.
	Base http.RoundTripper
	// Store keeps the records; nil keeps them in memory only.
	Store *Store
	// Browser opens an authorization URL for a person; nil means no
	// person is at hand (`serve`): an upstream needing one is reported
	// with [NeedsAuthError].
	Browser Browser
	// LoginCommand is what the operator runs to authorize, for messages.
	LoginCommand string
	// Timeout bounds one request to the authorization server (discovery,
	// registration, token). Zero means DefaultTimeout.
	Timeout time.Duration
	// Logger receives the "needs authorization" warnings. Nil discards.
	Logger *slog.Logger
}

// TokenExchange configures the token_exchange grant.
type TokenExchange struct {
	// SubjectToken is the token exchanged; with PerPrincipal, the
	// principal's own inbound token is used instead.
	SubjectToken string
	// SubjectTokenType is its RFC 8693 type; default
	// urn:ietf:params:oauth:token-type:access_token.
	SubjectTokenType string
	// IdPTokenEndpoint, when set, makes the exchange the two steps of
	// Enterprise-Managed Authorization (SEP-990): the subject token is
	// exchanged there for an identity assertion grant (ID-JAG), which the
	// upstream's authorization server takes in a jwt-bearer grant.
	// Empty: the subject token is exchanged directly at the upstream's
	// authorization server for an access token.
	IdPTokenEndpoint             string
	IdPClientID, IdPClientSecret string
}

// Client obtains and refreshes the tokens of one upstream. Safe for
// concurrent use.
type Client struct {
	cfg    Config
	hc     *http.Client
	logger *slog.Logger

	mu      sync.Mutex // guards states and pending
	states  map[string]*state
	pending []*pending // per-principal flows waiting for their redirect (pending.go)
}

// state is the token of one principal ("" without per-principal tokens).
type state struct {
	mu        sync.Mutex // held while refreshing: one refresh in flight
	rec       *Record
	needsAuth string // why a person must authorize, or ""
	acquire   sync.Mutex
	// gaveUp is the challenge's scope after which a request gave up
	// (MaxAuthorizations flows did not satisfy it); another flow for it
	// would not either, so none is started until a person logs in again.
	gaveUp *Challenge
}

// giveUp records that flows did not satisfy ch: the upstream needs a
// person (its authorization server grants less than it asks for).
func (c *Client) giveUp(principal string, ch Challenge) {
	s := c.state(principal)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gaveUp = &ch
	_ = c.needAuth(s, fmt.Sprintf("it still answers %s for scopes %q after %d authorizations", orNone(ch.Error), ch.Scope, MaxAuthorizations))
}

// New returns a Client for cfg.
func New(cfg Config) *Client {
	if cfg.Base == nil {
		cfg.Base = http.DefaultTransport
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Grant == "" {
		cfg.Grant = GrantAuthorizationCode
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	hc := safeClient(cfg.Base)
	hc.Timeout = cfg.Timeout
	return &Client{cfg: cfg, hc: hc, logger: logger, states: map[string]*state{}}
}

// Upstream is the upstream's name.
func (c *Client) Upstream() string { return c.cfg.Upstream }

// LoginCommand is what the operator runs to authorize the upstream.
func (c *Client) LoginCommand() string { return c.cfg.LoginCommand }

// ExchangesInbound reports whether each principal's own inbound OAuth
// access token is what is exchanged (per-principal token exchange).
func (c *Client) ExchangesInbound() bool {
	return c.cfg.PerPrincipal && c.cfg.Grant == GrantTokenExchange
}

// PerPrincipal reports whether the upstream keeps a token per principal.
func (c *Client) PerPrincipal() bool { return c.cfg.PerPrincipal }

func (c *Client) state(principal string) *state {
	if !c.cfg.PerPrincipal {
		principal = ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.states[principal]
	if s == nil {
		s = &state{}
		c.states[principal] = s
	}
	return s
}

// NeedsAuth reports why the upstream (gateway-wide) needs a person to
// authorize it, or "" when it does not (or it has per-principal tokens).
func (c *Client) NeedsAuth() string {
	if c.cfg.PerPrincipal {
		return ""
	}
	s := c.state("")
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.needsAuth
}

// ctx returns ctx carrying the client x/oauth2 sends its requests with.
func (c *Client) ctx(ctx context.Context) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, c.hc)
}

// load reads s's record from the store when s has no usable one: a login
// in another process (`toolgate auth login`) shows up this way.
func (c *Client) load(s *state, principal string) error {
	if c.cfg.Store == nil || (s.rec != nil && s.rec.Token != nil && s.needsAuth == "") {
		return nil
	}
	r, err := c.cfg.Store.Get(c.cfg.Upstream, principal)
	if err != nil {
		return &StepError{Upstream: c.cfg.Upstream, Step: "token store", Err: err}
	}
	if r == nil || r.Server != c.cfg.ServerURL || r.Token == nil {
		return nil
	}
	if s.rec == nil || s.rec.Token == nil || r.Token.AccessToken != s.rec.Token.AccessToken {
		s.rec, s.needsAuth, s.gaveUp = r, "", nil
	}
	return nil
}

// Token returns the principal's current access token, refreshed first
// when it has expired (or is about to); nil when there is none yet, so
// that the request goes without one and its challenge starts a flow.
func (c *Client) Token(ctx context.Context, principal string) (*oauth2.Token, error) {
	s := c.state(principal)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := c.load(s, principal); err != nil {
		return nil, err
	}
	if s.rec == nil || s.rec.Token == nil {
		return nil, nil
	}
	if s.rec.Token.Valid() {
		return s.rec.Token, nil
	}
	if s.rec.Token.RefreshToken == "" {
		return nil, nil
	}
	if err := c.refresh(ctx, s, principal); err != nil {
		return nil, err
	}
	return s.rec.Token, nil
}

// Refresh refreshes the principal's token after the upstream refused
// used with a 401, unless another request has refreshed it since. It
// reports whether there is a new token to retry with.
func (c *Client) Refresh(ctx context.Context, principal string, used *oauth2.Token) (bool, error) {
	s := c.state(principal)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rec == nil || s.rec.Token == nil {
		return false, nil
	}
	if s.rec.Token.AccessToken != used.AccessToken {
		return true, nil // refreshed by another request meanwhile
	}
	if s.rec.Token.RefreshToken == "" {
		s.rec.Token = nil
		return false, nil
	}
	if err := c.refresh(ctx, s, principal); err != nil {
		return false, err
	}
	return true, nil
}

// refresh runs the refresh_token grant for s, with s.mu held, and stores
// the result. A refused refresh token leaves the upstream needing a
// person: the record keeps its registration but loses its token.
func (c *Client) refresh(ctx context.Context, s *state, principal string) error {
	r := s.rec
	params := map[string]string{"grant_type": "refresh_token", "refresh_token": r.Token.RefreshToken, "resource": r.Resource}
	tok, err := c.tokenRequest(ctx, r, params, nil)
	if err != nil {
		if isInvalidGrant(err) {
			r.Token = nil
			c.storeRecord(r)
			return c.needAuth(s, "the refresh token was refused")
		}
		return &StepError{Upstream: c.cfg.Upstream, Step: "refresh", Err: tokenError(err)}
	}
	if tok.RefreshToken == "" {
		tok.RefreshToken = r.Token.RefreshToken // RFC 6749 section 6: the old one stays valid
	}
	r.Token = tok
	if err := c.storeRecord(r); err != nil {
		return err
	}
	c.logger.Info("upstream token refreshed", "upstream", c.cfg.Upstream)
	return nil
}

// needAuth marks s as needing a person, logs what to run, and returns the
// error saying so.
func (c *Client) needAuth(s *state, reason string) error {
	e := &NeedsAuthError{Upstream: c.cfg.Upstream, Command: c.cfg.LoginCommand, Reason: reason}
	if s.needsAuth == "" && !c.cfg.PerPrincipal {
		c.logger.Warn("upstream needs authorization", "upstream", c.cfg.Upstream, "reason", reason, "run", c.cfg.LoginCommand)
	}
	s.needsAuth = reason
	return e
}

func (c *Client) storeRecord(r *Record) error {
	if c.cfg.Store == nil {
		return nil
	}
	if err := c.cfg.Store.Put(r); err != nil {
		return &StepError{Upstream: c.cfg.Upstream, Step: "token store", Err: err}
	}
	return nil
}

// Acquire obtains a new token for principal after the upstream answered a
// request made with used (nil: none) with challenge ch: a 401, or a 403
// insufficient_scope asking for more scopes (step-up). It runs discovery,
// registration and the configured grant; the authorization code grant
// needs a [Browser], and without one Acquire returns [NeedsAuthError].
// One acquisition runs at a time per principal; one that finds a token
// newer than used returns at once.
func (c *Client) Acquire(ctx context.Context, principal, subject string, used *oauth2.Token, ch Challenge) error {
	s := c.state(principal)
	s.acquire.Lock()
	defer s.acquire.Unlock()
	s.mu.Lock()
	prev := s.rec
	if g := s.gaveUp; g != nil && g.Error == ch.Error && g.Scope == ch.Scope {
		defer s.mu.Unlock()
		return c.needAuth(s, s.needsAuth)
	}
	if ch.Error != "insufficient_scope" && prev != nil && prev.Token != nil && (used == nil || prev.Token.AccessToken != used.AccessToken) {
		s.mu.Unlock()
		return nil
	}
	if c.cfg.Grant == GrantAuthorizationCode && c.cfg.Browser == nil {
		reason := "no token yet"
		if prev != nil && prev.Token != nil && ch.Error == "insufficient_scope" {
			reason = "the upstream asks for more scopes: " + ch.Scope
		}
		if !c.webLogin(principal) {
			defer s.mu.Unlock()
			return c.needAuth(s, reason)
		}
		s.mu.Unlock()
		link, err := c.link(ctx, principal, prev, ch)
		if err != nil {
			return err
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		e := c.needAuth(s, reason).(*NeedsAuthError)
		e.URL = link
		return e
	}
	s.mu.Unlock()
	r, err := c.obtain(ctx, principal, subject, prev, ch)
	if err != nil {
		if ctx.Err() == nil {
			// Settled until someone acts: the flow is tried again on the
			// next connection attempt, and `auth login` shows the error.
			s.mu.Lock()
			s.needsAuth = "the last authorization failed: " + err.Error()
			s.mu.Unlock()
		}
		return err
	}
	if err := c.storeRecord(r); err != nil {
		return err
	}
	s.mu.Lock()
	s.rec, s.needsAuth = r, ""
	s.mu.Unlock()
	return nil
}

// Forget drops the principal's remembered refusals, so that the next
// challenge starts a flow again (after `toolgate auth login`).
func (c *Client) Forget(principal string) {
	s := c.state(principal)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gaveUp = nil
}

// obtain runs discovery, registration and the grant, and returns the new
// record.
func (c *Client) obtain(ctx context.Context, principal, subject string, prev *Record, ch Challenge) (*Record, error) {
	d, err := Discover(ctx, c.hc, c.cfg.ServerURL, ch)
	if err != nil {
		return nil, &StepError{Upstream: c.cfg.Upstream, Step: "discovery", Err: err}
	}
	r := &Record{
		Upstream: c.cfg.Upstream, Principal: principal, Server: c.cfg.ServerURL,
		Resource: d.Resource, Issuer: d.Server.Issuer, TokenEndpoint: d.Server.TokenEndpoint,
		RevocationEndpoint: d.Server.RevocationEndpoint,
	}
	var prevScopes []string
	if prev != nil && ch.Error == "insufficient_scope" {
		prevScopes = prev.Scopes
	}
	r.Scopes = c.chooseScopes(ch, d, prevScopes)
	var tok *oauth2.Token
	switch c.cfg.Grant {
	case GrantClientCredentials:
		if err = c.credentials(ctx, r, d, prev, ""); err == nil {
			tok, err = c.tokenRequest(ctx, r, map[string]string{"grant_type": "client_credentials", "resource": r.Resource}, r.Scopes)
			err = stepErr(c.cfg.Upstream, "token", tokenError(err))
		}
	case GrantTokenExchange:
		if c.ExchangesInbound() && principal != "" && subject == "" {
			// The configured subject token is the gateway's: never a principal's.
			return nil, &StepError{Upstream: c.cfg.Upstream, Step: "token exchange", Err: fmt.Errorf("principal %q has no inbound OAuth access token to exchange (it authenticated with a static token)", principal)}
		}
		if err = c.credentials(ctx, r, d, prev, ""); err == nil {
			tok, err = c.exchange(ctx, r, subject)
		}
	default:
		tok, err = c.authorizeCode(ctx, r, d, prev)
	}
	if err != nil {
		return nil, err
	}
	if err := checkToken(tok); err != nil {
		return nil, &StepError{Upstream: c.cfg.Upstream, Step: "token", Err: err}
	}
	r.Token = tok
	return r, nil
}

func stepErr(upstream, step string, err error) error {
	if err == nil {
		return nil
	}
	var se *StepError
	if errors.As(err, &se) {
		return err
	}
	return &StepError{Upstream: upstream, Step: step, Err: err}
}

// checkToken refuses a token response toolgate cannot use: one without an
// access token (x/oauth2 refuses those already) or of a type other than
// Bearer.
func checkToken(tok *oauth2.Token) error {
	if tok == nil || tok.AccessToken == "" {
		return errors.New("the token response has no access_token")
	}
	if !strings.EqualFold(tok.TokenType, "bearer") {
		return fmt.Errorf("the token response's token_type is %q, not Bearer; toolgate sends Bearer tokens only", tok.TokenType)
	}
	return nil
}

// chooseScopes picks the scopes to ask for, as the MCP specification's
// scope selection strategy says: the challenge's scope, else the
// resource metadata's scopes_supported, else none (the scope parameter is
// then left out); the configured scopes are always added. A step-up keeps
// the scopes held before. offline_access is added for the authorization
// code grant when the authorization server lists it (SEP-2207), so that
// a refresh token is issued.
func (c *Client) chooseScopes(ch Challenge, d *Discovery, prev []string) []string {
	var s []string
	add := func(xs ...string) {
		for _, x := range xs {
			if x != "" && !slices.Contains(s, x) {
				s = append(s, x)
			}
		}
	}
	add(prev...)
	add(c.cfg.Scopes...)
	switch {
	case ch.Scope != "":
		add(ch.Scopes()...)
	case len(d.ResourceScopes) > 0:
		add(d.ResourceScopes...)
	}
	if c.cfg.Grant == GrantAuthorizationCode && slices.Contains(d.Server.ScopesSupported, "offline_access") {
		add("offline_access")
	}
	return s
}

// Redact replaces the tokens the client holds (every principal's access
// and refresh token) in s with "[redacted]": for messages built from what
// an upstream sends back, which may echo them.
func (c *Client) Redact(s string) string {
	c.mu.Lock()
	states := make([]*state, 0, len(c.states))
	for _, st := range c.states {
		states = append(states, st)
	}
	c.mu.Unlock()
	for _, st := range states {
		st.mu.Lock()
		if r := st.rec; r != nil && r.Token != nil {
			for _, v := range []string{r.Token.AccessToken, r.Token.RefreshToken} {
				if len(v) >= 6 {
					s = strings.ReplaceAll(s, v, "[redacted]")
				}
			}
		}
		st.mu.Unlock()
	}
	return s
}
