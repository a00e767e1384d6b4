// Package upstreamoauth turns an upstream's oauth section of the
// configuration into [oauthclient] settings, and serves what toolgate
// shows of those upstreams: the command that authorizes one and the
// browser's way back from a principal's authorization. It knows the configuration and oauthclient;
// it does not know the gateway, the upstream managers or MCP.
package upstreamoauth

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/internal/oauthclient"
)

// CallbackPath is the route where a principal's browser comes back from
// authorizing a per-principal upstream (upstreams[].oauth.callback_url
// names it as browsers reach it).
const CallbackPath = "/oauth/callback"

// LoginCommand is the command that authorizes upstream name of the
// configuration at source.
func LoginCommand(source, name string) string {
	if source == "" || source == config.EmbeddedSource {
		return "toolgate auth login " + name
	}
	return fmt.Sprintf("toolgate auth login %s --config %s", name, source)
}

// OpenStore opens the token store cfg names, with the key from
// $TOOLGATE_TOKEN_KEY or token_store.key_file.
func OpenStore(cfg *config.Config) (*oauthclient.Store, error) {
	key, prev, err := oauthclient.LoadKey(os.Getenv, cfg.TokenStore.KeyFile)
	if err != nil {
		return nil, err
	}
	return oauthclient.OpenStore(cfg.TokenStore.StorePath(), key, prev)
}

// StoreFor opens the token store when an upstream of cfg has oauth, and
// returns nil when none has.
func StoreFor(cfg *config.Config) (*oauthclient.Store, error) {
	for _, u := range cfg.Upstreams {
		if u.OAuth == nil {
			continue
		}
		store, err := OpenStore(cfg)
		if err != nil {
			return nil, fmt.Errorf("upstream %s has oauth, whose tokens are stored encrypted: %w", u.Name, err)
		}
		return store, nil
	}
	return nil, nil
}

// Settings returns the OAuth client settings of cfg.Upstreams[i] (nil
// when it has no oauth section), sharing store and browser (either may be
// nil). A private key that does not read is an error at its position.
func Settings(cfg *config.Config, i int, store *oauthclient.Store, browser oauthclient.Browser) (*oauthclient.Config, error) {
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

// Secrets are the values of u's oauth section that must never show:
// its client secret and subject tokens.
func Secrets(u config.Upstream) []string {
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

// A Completer settles the authorization flows of one upstream's
// principals (an upstream manager): ok is false when the callback's state
// names none of its flows.
type Completer interface {
	Complete(ctx context.Context, cb oauthclient.Callback) (upstream, principal string, ok bool, err error)
}

// Callback serves [CallbackPath]: it finishes a principal's
// authorization of a per-principal upstream. The redirect's state names
// the flow, which its login link started for that principal alone, and
// one of upstreams settles it once. It needs no bearer token (a browser
// sends none); it answers in plain text.
func Callback[C Completer](upstreams func() []C, logger *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-store")
		q := r.URL.Query()
		cb := oauthclient.Callback{State: q.Get("state"), Code: q.Get("code"), Error: q.Get("error"), ErrorDescription: q.Get("error_description")}
		for _, m := range upstreams() {
			up, who, ok, err := m.Complete(r.Context(), cb)
			if !ok {
				continue
			}
			if err != nil {
				logger.Warn("a principal's upstream authorization failed", "upstream", up, "principal", who, "error", err.Error())
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
}
