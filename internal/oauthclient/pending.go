package oauthclient

import (
	"cmp"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"
	"time"

	"golang.org/x/oauth2"
)

// LinkLife is how long a principal's login link stays valid: the
// authorization it starts must come back to the callback within it.
const LinkLife = 10 * time.Minute

// pending is a per-principal authorization code flow whose redirect has
// not come back yet.
type pending struct {
	principal string
	state     string
	verifier  string
	rec       *Record
	d         *Discovery
	url       string
	expires   time.Time
}

// webLogin reports whether a principal without a token is sent a login
// link (an authorization code flow whose redirect comes back to
// toolgate's callback route) rather than told to run a command.
func (c *Client) webLogin(principal string) bool {
	return c.cfg.PerPrincipal && c.cfg.RedirectURL != "" && principal != "" && c.cfg.Grant == GrantAuthorizationCode
}

// link returns the principal's login link: the authorization URL of a
// flow started for it (discovery, registration with the callback as
// redirect URI, PKCE), or of the one still pending. At most one flow is
// pending per principal: a new one replaces an expired one.
func (c *Client) link(ctx context.Context, principal string, prev *Record, ch Challenge) (string, error) {
	now := time.Now()
	c.mu.Lock()
	c.prunePending(now)
	if p := c.pendingOf(principal); p != nil {
		c.mu.Unlock()
		return p.url, nil
	}
	c.mu.Unlock()

	d, err := Discover(ctx, c.hc, c.cfg.ServerURL, ch)
	if err != nil {
		return "", &StepError{Upstream: c.cfg.Upstream, Step: "discovery", Err: err}
	}
	if d.Server.AuthorizationEndpoint == "" {
		return "", &StepError{Upstream: c.cfg.Upstream, Step: "discovery", Err: errors.New("the authorization server metadata has no authorization_endpoint")}
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
	if err := c.credentials(ctx, r, d, prev, c.cfg.RedirectURL); err != nil {
		return "", err
	}
	p := &pending{principal: principal, state: oauth2.GenerateVerifier(), verifier: oauth2.GenerateVerifier(), rec: r, d: d, expires: now.Add(LinkLife)}
	p.url = c.oauth2Config(r, d, c.cfg.RedirectURL).AuthCodeURL(p.state, oauth2.S256ChallengeOption(p.verifier), oauth2.SetAuthURLParam("resource", r.Resource))
	c.mu.Lock()
	defer c.mu.Unlock()
	if q := c.pendingOf(principal); q != nil {
		return q.url, nil // another call started one meanwhile
	}
	c.pending = append(c.pending, p)
	return p.url, nil
}

// pendingOf is principal's pending flow, or nil; c.mu is held.
func (c *Client) pendingOf(principal string) *pending {
	for _, p := range c.pending {
		if p.principal == principal {
			return p
		}
	}
	return nil
}

// prunePending drops the flows expired at now; c.mu is held.
func (c *Client) prunePending(now time.Time) {
	c.pending = slices.DeleteFunc(c.pending, func(p *pending) bool { return !now.Before(p.expires) })
}

// takePending removes and returns the pending flow of state, or nil. The
// states are compared in constant time.
func (c *Client) takePending(state string) *pending {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.prunePending(time.Now())
	for i, p := range c.pending {
		if subtle.ConstantTimeCompare([]byte(p.state), []byte(state)) == 1 {
			c.pending = slices.Delete(c.pending, i, i+1)
			return p
		}
	}
	return nil
}

// Callback is what a redirect to toolgate's callback route brought.
type Callback struct {
	State, Code string
	// Error and ErrorDescription are the authorization server's refusal.
	Error, ErrorDescription string
}

// Complete finishes the per-principal flow whose login link the redirect
// cb comes from: it exchanges the code (with the flow's PKCE verifier)
// and stores the principal's token. ok is false when cb's state is none
// of this client's pending flows (another upstream's, expired, used
// already, or forged); a flow is settled by its first redirect, whatever
// it brings.
func (c *Client) Complete(ctx context.Context, cb Callback) (principal string, ok bool, err error) {
	p := c.takePending(cb.State)
	if p == nil {
		return "", false, nil
	}
	fail := func(step string, err error) (string, bool, error) {
		return p.principal, true, stepErr(c.cfg.Upstream, step, err)
	}
	if cb.Error != "" {
		msg := cb.Error
		if cb.ErrorDescription != "" {
			msg += ": " + cb.ErrorDescription
		}
		return fail("authorization", fmt.Errorf("the authorization server redirected with error %s", msg))
	}
	if cb.Code == "" {
		return fail("authorization", errors.New("the redirect has no code"))
	}
	r := p.rec
	opts := []oauth2.AuthCodeOption{oauth2.VerifierOption(p.verifier), oauth2.SetAuthURLParam("resource", r.Resource)}
	if r.AuthMethod == AuthPrivateKeyJWT {
		a, err := c.clientAssertion(r.ClientID, r.Issuer)
		if err != nil {
			return p.principal, true, err
		}
		opts = append(opts, oauth2.SetAuthURLParam("client_assertion_type", assertionTypeJWT), oauth2.SetAuthURLParam("client_assertion", a))
	}
	xctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	tok, err := c.oauth2Config(r, p.d, c.cfg.RedirectURL).Exchange(c.ctx(xctx), cb.Code, opts...)
	if err != nil {
		return fail("token", tokenError(err))
	}
	if err := checkToken(tok); err != nil {
		return fail("token", err)
	}
	r.Token = tok
	if err := c.storeRecord(r); err != nil {
		return p.principal, true, err
	}
	s := c.state(p.principal)
	s.mu.Lock()
	s.rec, s.needsAuth, s.gaveUp = r, "", nil
	s.mu.Unlock()
	c.logger.Info("upstream authorized by a principal", "upstream", c.cfg.Upstream, "principal", p.principal)
	return p.principal, true, nil
}

// Principals are the principals holding a token for the upstream, by
// name: in the store, and those authorized in this process.
func (c *Client) Principals() ([]string, error) {
	var out []string
	if c.cfg.Store != nil {
		all, err := c.cfg.Store.List()
		if err != nil {
			return nil, &StepError{Upstream: c.cfg.Upstream, Step: "token store", Err: err}
		}
		for _, r := range all {
			if r.Upstream == c.cfg.Upstream && r.Server == c.cfg.ServerURL && r.Principal != "" && r.Token != nil {
				out = append(out, r.Principal)
			}
		}
	}
	c.mu.Lock()
	states := make(map[string]*state, len(c.states))
	for name, s := range c.states {
		states[name] = s
	}
	c.mu.Unlock()
	for name, s := range states {
		s.mu.Lock()
		if name != "" && s.rec != nil && s.rec.Token != nil {
			out = append(out, name)
		}
		s.mu.Unlock()
	}
	slices.SortFunc(out, cmp.Compare[string])
	return slices.Compact(out), nil
}
