package oauthclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"golang.org/x/oauth2"
)

// MaxAuthorizations bounds the authorizations one request may start: the
// first, and step-ups after 403 insufficient_scope. A server that keeps
// asking for more is given up on, not looped on.
const MaxAuthorizations = 3

// Transport is an http.RoundTripper that sends an upstream's requests
// with its token, and on the server's challenge obtains, refreshes or
// steps up the token and sends the request again.
type Transport struct {
	Base   http.RoundTripper
	Client *Client
	// Principal names whose token a request goes with, for per-principal
	// upstreams, and the principal's inbound token for token exchange
	// (""). Nil: the gateway's token.
	Principal func(ctx context.Context) (name, inbound string)
}

// RoundTrip sends req with the token. On 401 it refreshes a token the
// server refused (one refresh at a time, see [Client.Refresh]) or starts
// a flow ([Client.Acquire]); on 403 insufficient_scope it starts a flow
// for the scopes asked; each time it sends req again, at most
// MaxAuthorizations flows in all. A 401 or 403 it cannot cure is returned
// as an error saying so.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	var principal, inbound string
	if t.Principal != nil {
		principal, inbound = t.Principal(ctx)
	}
	body, err := replayable(req)
	if err != nil {
		return nil, err
	}
	refreshed, flows := false, 0
	for {
		tok, err := t.Client.Token(ctx, principal)
		if err != nil {
			return nil, err
		}
		resp, err := t.Base.RoundTrip(withToken(req, body, tok))
		if err != nil {
			return nil, err
		}
		ch := ParseChallenge(resp.Header)
		stepUp := resp.StatusCode == http.StatusForbidden && ch.Error == "insufficient_scope"
		if resp.StatusCode != http.StatusUnauthorized && !stepUp {
			return resp, nil
		}
		drain(resp)
		if resp.StatusCode == http.StatusUnauthorized && tok != nil && !refreshed {
			refreshed = true
			ok, err := t.Client.Refresh(ctx, principal, tok)
			if _, na := errors.AsType[*NeedsAuthError](err); na && t.Client.webLogin(principal) {
				err = nil // the refresh token was refused: the flow below gives the principal a login link
			}
			if err != nil {
				return nil, err
			}
			if ok {
				continue
			}
		}
		if flows == MaxAuthorizations {
			t.Client.giveUp(principal, ch)
			return nil, fmt.Errorf("upstream %q still answers HTTP %d (%s) after %d authorizations; check the scopes it asks for (%q) against what its authorization server grants", t.Client.Upstream(), resp.StatusCode, orNone(ch.Error), flows, ch.Scope)
		}
		flows++
		if err := t.Client.Acquire(ctx, principal, inbound, tok, ch); err != nil {
			return nil, err
		}
	}
}

func orNone(s string) string {
	if s == "" {
		return "no error code"
	}
	return s
}

// replayable returns a function giving a fresh copy of req's body for each
// attempt (nil for none).
func replayable(req *http.Request) (func() io.ReadCloser, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	if req.GetBody != nil {
		return func() io.ReadCloser { b, _ := req.GetBody(); return b }, nil
	}
	b, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	return func() io.ReadCloser { return io.NopCloser(bytes.NewReader(b)) }, nil
}

// withToken is a copy of req with body and tok's Authorization header.
func withToken(req *http.Request, body func() io.ReadCloser, tok *oauth2.Token) *http.Request {
	r := req.Clone(req.Context())
	if body != nil {
		r.Body = body()
	}
	if tok != nil {
		r.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	}
	return r
}

// drain reads and closes a response being retried, so that its
// connection can be reused.
func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}
