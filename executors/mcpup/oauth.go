package mcpup

import (
	"net/http"

	"github.com/toolgate/toolgate/internal/oauthclient"
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
