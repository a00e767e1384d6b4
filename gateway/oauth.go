package gateway

import (
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/internal/oauthclient"
)

// WithOAuthBrowser lets upstreams whose OAuth grant needs a person
// (authorization_code) authorize inline, through b, the first time they
// ask: for the command-line `tools` and `call`. Without it (`serve`) such
// an upstream is reported as needing authorization, with the command to
// run.
func WithOAuthBrowser(b oauthclient.Browser) Option { return func(o *options) { o.browser = b } }

// LoginCommand is the command that authorizes upstream name of the
// configuration at source.
func LoginCommand(source, name string) string {
	if source == "" || source == config.EmbeddedSource {
		return "toolgate auth login " + name
	}
	return fmt.Sprintf("toolgate auth login %s --config %s", name, source)
}

// OpenTokenStore opens the token store cfg names, with the key from
// $TOOLGATE_TOKEN_KEY or token_store.key_file.
func OpenTokenStore(cfg *config.Config) (*oauthclient.Store, error) {
	key, prev, err := oauthclient.LoadKey(os.Getenv, cfg.TokenStore.KeyFile)
	if err != nil {
		return nil, err
	}
	return oauthclient.OpenStore(cfg.TokenStore.StorePath(), key, prev)
}

// OAuthConfig returns the OAuth client settings of cfg.Upstreams[i] (nil
// when it has no oauth section), sharing store and browser (either may be
// nil). A private key that does not read is an error at its position.
func OAuthConfig(cfg *config.Config, i int, store *oauthclient.Store, browser oauthclient.Browser) (*oauthclient.Config, error) {
	u := cfg.Upstreams[i]
	o := u.OAuth
	if o == nil {
		return nil, nil
	}
	c := &oauthclient.Config{
		Grant: o.Grant, ClientID: o.ClientID, ClientSecret: o.ClientSecret,
		ClientMetadataURL: o.ClientMetadataURL, AuthMethod: o.TokenEndpointAuth,
		Scopes: o.Scopes, RedirectPort: o.RedirectPort,
		PerPrincipal: o.PerPrincipal, RedirectURL: o.CallbackURL,
		Timeout: o.Timeout.D(), Store: store, Browser: browser,
		LoginCommand: LoginCommand(cfg.Source, u.Name),
	}
	if x := o.TokenExchange; x != nil {
		c.Exchange = oauthclient.TokenExchange{
			SubjectToken: x.SubjectToken, SubjectTokenType: x.SubjectTokenType,
			IdPTokenEndpoint: x.IdPTokenEndpoint, IdPClientID: x.IdPClientID, IdPClientSecret: x.IdPClientSecret,
		}
	}
	if o.PrivateKeyFile != "" {
		b, err := os.ReadFile(o.PrivateKeyFile)
		if err == nil {
			err = oauthclient.CheckPrivateKey(b)
		}
		if err != nil {
			path := fmt.Sprintf("upstreams[%d].oauth.private_key_file", i)
			return nil, cfg.Locate(config.Problem{Path: path, Got: o.PrivateKeyFile, Msg: fmt.Sprintf("is not a usable private key: %v; write the path of a PEM EC or RSA private key", err)})
		}
		c.PrivateKeyPEM = b
	}
	return c, nil
}

// oauthSecrets are the values of cfg's oauth sections that must never
// show: client secrets and subject tokens.
func oauthSecrets(u config.Upstream) []string {
	o := u.OAuth
	if o == nil {
		return nil
	}
	s := []string{o.ClientSecret}
	if x := o.TokenExchange; x != nil {
		s = append(s, x.SubjectToken, x.IdPClientSecret)
	}
	out := s[:0]
	for _, v := range s {
		if strings.TrimSpace(v) != "" {
			out = append(out, v)
		}
	}
	return out
}

// needsAuthDesc is the metric of the upstreams waiting for a person.
var needsAuthDesc = prometheus.NewDesc("toolgate_upstream_needs_auth",
	"1 while an upstream waits for a person to authorize it (toolgate auth login), else 0; only upstreams with oauth.",
	[]string{"upstream"}, nil)

// needsAuthCollector reads the upstreams' authorization state at scrape
// time: those with oauth, as a reload leaves them.
type needsAuthCollector struct{ g *Gateway }

func (c *needsAuthCollector) Describe(ch chan<- *prometheus.Desc) { ch <- needsAuthDesc }

func (c *needsAuthCollector) Collect(ch chan<- prometheus.Metric) {
	waiting := c.g.ups.NeedsAuth()
	for _, n := range c.g.ups.WithOAuth() {
		v := 0.0
		if _, ok := waiting[n]; ok {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(needsAuthDesc, prometheus.GaugeValue, v, n)
	}
}

// upstreamNeedsAuth maps each upstream waiting for a person to authorize
// it to the command that does, for /readyz and /ui.
func (g *Gateway) upstreamNeedsAuth() map[string]string {
	out := map[string]string{}
	for name := range g.ups.NeedsAuth() {
		out[name] = LoginCommand(g.cfg.Source, name)
	}
	return out
}

// OAuthCallbackPath is the route where a principal's browser comes back
// from authorizing a per-principal upstream (upstreams[].oauth.
// callback_url names it as browsers reach it).
const OAuthCallbackPath = "/oauth/callback"

// serveOAuthCallback finishes a principal's authorization of a
// per-principal upstream: the redirect's state names the flow, which its
// login link started for that principal alone, and settles it once. It
// needs no bearer token (a browser sends none); it answers in plain text.
func (g *Gateway) serveOAuthCallback(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	q := r.URL.Query()
	cb := oauthclient.Callback{State: q.Get("state"), Code: q.Get("code"), Error: q.Get("error"), ErrorDescription: q.Get("error_description")}
	for _, m := range g.ups.All() {
		up, who, ok, err := m.Complete(r.Context(), cb)
		if !ok {
			continue
		}
		if err != nil {
			g.logger.Warn("a principal's upstream authorization failed", "upstream", up, "principal", who, "error", err.Error())
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, "toolgate: authorizing upstream %s failed: %v\nCall the tool again for a new link.\n", up, err)
			return
		}
		fmt.Fprintf(w, "toolgate: upstream %s is authorized for principal %s. You can close this window and call the tool again.\n", up, who)
		return
	}
	w.WriteHeader(http.StatusBadRequest)
	fmt.Fprintf(w, "toolgate: this login link is unknown, used or expired (a link works once, within %v); call the tool again for a new one.\n", oauthclient.LinkLife)
}
