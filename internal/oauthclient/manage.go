package oauthclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// probeBody is the request `auth login` sends to learn the server's
// challenge: an initialize, which a protected server answers with 401.
const probeBody = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"toolgate","version":"1"}}}`

// Login authorizes the upstream for principal now: it asks the server for
// its challenge (an unauthenticated initialize) and runs the configured
// grant, with the Browser for the authorization code grant. A server
// that does not answer 401 needs no authorization; Login says so.
func (c *Client) Login(ctx context.Context, principal, subject string) error {
	ch, err := c.probe(ctx)
	if err != nil {
		return err
	}
	c.Forget(principal)
	s := c.state(principal)
	s.mu.Lock()
	if c.cfg.Store != nil {
		if r, err := c.cfg.Store.Get(c.cfg.Upstream, principal); err == nil && r != nil && r.Server == c.cfg.ServerURL {
			s.rec = r // keep its registration; its token is replaced
		}
	}
	var used = s.rec
	s.mu.Unlock()
	if used != nil && used.Token != nil {
		return c.Acquire(ctx, principal, subject, used.Token, ch)
	}
	return c.Acquire(ctx, principal, subject, nil, ch)
}

// probe sends an unauthenticated initialize and returns the challenge of
// the 401 answer.
func (c *Client) probe(ctx context.Context) (Challenge, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.cfg.ServerURL, strings.NewReader(probeBody))
	if err != nil {
		return Challenge{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := c.hc.Do(req)
	if err != nil {
		return Challenge{}, &StepError{Upstream: c.cfg.Upstream, Step: "discovery", Err: fmt.Errorf("reaching the server: %w", err)}
	}
	drain(resp)
	if resp.StatusCode != http.StatusUnauthorized {
		return Challenge{}, &StepError{Upstream: c.cfg.Upstream, Step: "discovery", Err: fmt.Errorf("the server answered an unauthenticated initialize with HTTP %d, not 401: it asks for no authorization", resp.StatusCode)}
	}
	return ParseChallenge(resp.Header), nil
}

// Logout revokes the principal's tokens where the authorization server
// offers revocation (RFC 7009: the refresh token, then the access token)
// and forgets them. It reports whether the server revoked them; a
// failure to revoke is returned after the tokens are forgotten.
func (c *Client) Logout(ctx context.Context, principal string) (revoked bool, err error) {
	if c.cfg.Store == nil {
		return false, errors.New("no token store")
	}
	r, err := c.cfg.Store.Get(c.cfg.Upstream, principal)
	if err != nil || r == nil {
		return false, err
	}
	s := c.state(principal)
	s.mu.Lock()
	s.rec = nil
	s.mu.Unlock()
	if err := c.cfg.Store.Delete(c.cfg.Upstream, principal); err != nil {
		return false, err
	}
	if r.RevocationEndpoint == "" || r.Token == nil {
		return false, nil
	}
	for _, t := range []struct{ v, hint string }{{r.Token.RefreshToken, "refresh_token"}, {r.Token.AccessToken, "access_token"}} {
		if t.v == "" {
			continue
		}
		if err := c.revoke(ctx, r, t.v, t.hint); err != nil {
			return false, &StepError{Upstream: c.cfg.Upstream, Step: "revocation", Err: err}
		}
	}
	return true, nil
}

// revoke asks r's revocation endpoint to revoke token (RFC 7009),
// authenticated as r's client.
func (c *Client) revoke(ctx context.Context, r *Record, token, hint string) error {
	v := url.Values{"token": {token}, "token_type_hint": {hint}}
	if r.AuthMethod != AuthBasic {
		v.Set("client_id", r.ClientID)
		if r.AuthMethod == AuthPost {
			v.Set("client_secret", r.ClientSecret)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.RevocationEndpoint, strings.NewReader(v.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if r.AuthMethod == AuthBasic {
		req.SetBasicAuth(url.QueryEscape(r.ClientID), url.QueryEscape(r.ClientSecret))
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	drain(resp)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered HTTP %d", redactURL(r.RevocationEndpoint), resp.StatusCode)
	}
	return nil
}

// Status is what `toolgate auth status` shows of one record: never a
// token.
type Status struct {
	Upstream, Principal string
	Authorized          bool
	Refreshable         bool
	ExpiresIn           time.Duration // 0: no expiry known
	Scopes              []string
	Issuer              string
}

// StatusOf summarises r.
func StatusOf(r *Record, now time.Time) Status {
	s := Status{Upstream: r.Upstream, Principal: r.Principal, Scopes: r.Scopes, Issuer: r.Issuer}
	if r.Token != nil {
		s.Authorized = true
		s.Refreshable = r.Token.RefreshToken != ""
		if !r.Token.Expiry.IsZero() {
			s.ExpiresIn = r.Token.Expiry.Sub(now).Truncate(time.Second)
		}
	}
	return s
}
