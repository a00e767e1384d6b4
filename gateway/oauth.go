package gateway

import (
	"github.com/toolgate/toolgate/internal/oauthclient"
	"github.com/toolgate/toolgate/internal/upstreamoauth"
)

// WithOAuthBrowser lets upstreams whose OAuth grant needs a person
// (authorization_code) authorize inline, through b, the first time they
// ask: for the command-line `tools` and `call`. Without it (`serve`) such
// an upstream is reported as needing authorization, with the command to
// run.
func WithOAuthBrowser(b oauthclient.Browser) Option { return func(o *options) { o.browser = b } }

// upstreamNeedsAuth maps each upstream waiting for a person to authorize
// it to the command that does, for /readyz and /ui.
func (g *Gateway) upstreamNeedsAuth() map[string]string {
	out := map[string]string{}
	for name := range g.ups.NeedsAuth() {
		out[name] = upstreamoauth.LoginCommand(g.cfg.Source, name)
	}
	return out
}
