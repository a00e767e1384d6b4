package mcpup

import (
	"context"
	"net/http"

	"github.com/toolgate/toolgate/internal/oauthclient"
	"github.com/toolgate/toolgate/retry"
)

// newOAuth builds the upstream's OAuth client from cfg and returns the
// transport that sends its requests with the token, on u's own HTTP
// transport (the authorization server's requests go on it too).
func (u *upstream) newOAuth(cfg oauthclient.Config) http.RoundTripper {
	cfg.Upstream, cfg.ServerURL, cfg.Base = u.cfg.Name, u.cfg.URL, u.httpTransport
	if cfg.Logger == nil {
		cfg.Logger = u.m.logger
	}
	u.oauth = oauthclient.New(cfg)
	return &oauthclient.Transport{Base: u.httpTransport, Client: u.oauth}
}

// NeedsAuth returns the upstreams that wait for a person to authorize
// them (`toolgate auth login`), each with why.
func (m *Manager) NeedsAuth() map[string]string {
	out := map[string]string{}
	for _, u := range m.ups {
		if u.oauth == nil {
			continue
		}
		if why := u.oauth.NeedsAuth(); why != "" {
			out[u.cfg.Name] = why
		}
	}
	return out
}

// needsAuth is the failure of a call or connection that waits for a
// person to authorize the upstream (na, the cause of err): class
// needs_auth, with the login link or the command to run.
func (u *upstream) needsAuth(na *oauthclient.NeedsAuthError, err error) *retry.Error {
	return &retry.Error{Class: retry.NeedsAuth, Msg: u.redact(na.Error()), Err: err}
}

// Complete finishes the per-principal authorization whose redirect
// brought cb ([oauthclient.Client.Complete]) at whichever upstream
// started it: it returns that upstream and the principal now authorized.
// ok is false when no upstream started it (an unknown, expired or used
// state).
func (m *Manager) Complete(ctx context.Context, cb oauthclient.Callback) (upstream, principal string, ok bool, err error) {
	for _, u := range m.ups {
		if !u.perPrincipal {
			continue
		}
		p, ok, err := u.oauth.Complete(ctx, cb)
		if ok {
			if err != nil {
				err = u.errorf(retry.NeedsAuth, err, "%v", err)
			}
			return u.cfg.Name, p, true, err
		}
	}
	return "", "", false, nil
}
