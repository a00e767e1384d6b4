package config

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// OAuth grants and token endpoint authentication methods an upstream may
// name.
var (
	oauthGrants      = []string{"authorization_code", "client_credentials", "token_exchange"}
	oauthAuthMethods = []string{"client_secret_basic", "client_secret_post", "none", "private_key_jwt"}
)

// UpstreamOAuth makes toolgate an OAuth 2.1 client of an sse or
// streamable-http upstream that follows the MCP authorization
// specification: on the server's 401 it discovers the authorization
// server, registers (unless ClientID is given) and obtains a token, which
// it stores encrypted ([TokenStore]) and refreshes. docs/oauth-upstream.md
// explains each grant.
type UpstreamOAuth struct {
	// Grant is authorization_code (a person authorizes once with `toolgate
	// auth login NAME`), client_credentials (machine to machine; needs
	// client_id) or token_exchange (RFC 8693; see TokenExchange). Default
	// authorization_code.
	Grant string `yaml:"grant"`
	// ClientID and ClientSecret are credentials registered beforehand at
	// the authorization server. Without a client_id toolgate uses
	// ClientMetadataURL where the server supports Client ID Metadata
	// Documents, else Dynamic Client Registration.
	ClientID     string `yaml:"client_id"`
	ClientSecret string `yaml:"client_secret"`
	// ClientMetadataURL is the https URL of a Client ID Metadata Document
	// describing toolgate, used as its client_id. Default none.
	ClientMetadataURL string `yaml:"client_metadata_url"`
	// PrivateKeyFile is a PEM private key (EC P-256/384/521 or RSA) for
	// private_key_jwt client authentication, relative to the config
	// file's directory. Default none.
	PrivateKeyFile string `yaml:"private_key_file"`
	// TokenEndpointAuth forces the token endpoint authentication method:
	// client_secret_basic, client_secret_post, none or private_key_jwt.
	// Default: chosen from the credentials and what the server supports.
	TokenEndpointAuth string `yaml:"token_endpoint_auth"`
	// Scopes are asked for besides those the server's challenge or
	// metadata names. Default none.
	Scopes []string `yaml:"scopes"`
	// RedirectPort is the port of the loopback redirect
	// (http://127.0.0.1:PORT/callback) for authorization servers that
	// register exact redirect URIs. Default 0: a free port each time.
	RedirectPort int `yaml:"redirect_port"`
	// PerPrincipal keeps one token, and one upstream session, per
	// authenticated principal of toolgate: each authorizes the upstream
	// itself (authorization_code: through the link its first call
	// returns) or has its own inbound OAuth token exchanged
	// (token_exchange). Needs the auth section. Default false: one token
	// for the whole gateway.
	PerPrincipal bool `yaml:"per_principal"`
	// CallbackURL is the URL of toolgate's /oauth/callback route as a
	// person's browser reaches it, like
	// https://toolgate.example.com/oauth/callback: the redirect URI of
	// per-principal authorization code flows. Required with per_principal
	// and grant authorization_code; for nothing else.
	CallbackURL string `yaml:"callback_url"`
	// Timeout bounds one request to the authorization server. Default 30s.
	Timeout Duration `yaml:"timeout"`
	// TokenExchange configures grant token_exchange.
	TokenExchange *TokenExchange `yaml:"token_exchange"`
}

// TokenExchange is an RFC 8693 token exchange: a subject token (with
// per_principal, the principal's own inbound OAuth access token) is
// exchanged for the upstream's access token, at the upstream's authorization
// server, or, with idp_token_endpoint, through an identity assertion
// grant from the identity provider (SEP-990).
type TokenExchange struct {
	// SubjectToken is the token exchanged; write it as ${ENV}. Required
	// without per_principal; with it, optional and used only to list the
	// upstream's tools (each principal's calls exchange its own token).
	SubjectToken string `yaml:"subject_token"`
	// SubjectTokenType is its RFC 8693 type. Default
	// urn:ietf:params:oauth:token-type:access_token.
	SubjectTokenType string `yaml:"subject_token_type"`
	// IdPTokenEndpoint is the identity provider's token endpoint for
	// SEP-990 Enterprise-Managed Authorization. Default none.
	IdPTokenEndpoint string `yaml:"idp_token_endpoint"`
	// IdPClientID and IdPClientSecret authenticate toolgate there.
	IdPClientID     string `yaml:"idp_client_id"`
	IdPClientSecret string `yaml:"idp_client_secret"`
}

// TokenStore is where the OAuth tokens of upstreams are kept, encrypted
// with AES-256-GCM under a 32-byte key from $TOOLGATE_TOKEN_KEY or
// KeyFile (base64). The file has mode 0600.
type TokenStore struct {
	// Path is the store file, relative to the config file's directory.
	// Default $XDG_STATE_HOME/toolgate/tokens.json (~/.local/state/...).
	Path string `yaml:"path"`
	// KeyFile holds the key, base64, when $TOOLGATE_TOKEN_KEY is not set.
	KeyFile string `yaml:"key_file"`
}

// StorePath is the token store's file: Path, or the default under the
// user's state directory.
func (t TokenStore) StorePath() string {
	if t.Path != "" {
		return t.Path
	}
	dir := os.Getenv("XDG_STATE_HOME")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(dir, "toolgate", "tokens.json")
}

// completeOAuth resolves the token store's and the private keys' paths
// against the config file's directory.
func completeOAuth(cfg *Config, file string) {
	resolve := func(p string) string {
		if p == "" || filepath.IsAbs(p) || file == EmbeddedSource {
			return p
		}
		return filepath.Join(filepath.Dir(file), p)
	}
	cfg.TokenStore.Path = resolve(cfg.TokenStore.Path)
	cfg.TokenStore.KeyFile = resolve(cfg.TokenStore.KeyFile)
	for i := range cfg.Upstreams {
		if o := cfg.Upstreams[i].OAuth; o != nil {
			o.PrivateKeyFile = resolve(o.PrivateKeyFile)
		}
	}
}

// upstreamOAuth checks upstreams[i].oauth.
func (c *checker) upstreamOAuth(cfg *Config, i int, u Upstream) {
	o := u.OAuth
	p := fmt.Sprintf("upstreams[%d].oauth", i)
	if u.Transport == "stdio" {
		c.fail(p, "", "applies to sse and streamable-http upstreams only; a stdio server gets its credentials through env")
		return
	}
	for k := range u.Headers {
		if strings.EqualFold(k, "Authorization") {
			c.fail(fmt.Sprintf("upstreams[%d].headers.%s", i, k), "", "cannot be set with oauth, which sends the Authorization header itself; remove one of them")
		}
	}
	grant := o.Grant
	switch {
	case grant == "":
		grant = "authorization_code"
	case !slices.Contains(oauthGrants, grant):
		c.fail(p+".grant", quoteShort(grant), "must be one of %s", strings.Join(oauthGrants, ", "))
	}
	if m := o.TokenEndpointAuth; m != "" && !slices.Contains(oauthAuthMethods, m) {
		c.fail(p+".token_endpoint_auth", quoteShort(m), "must be one of %s", strings.Join(oauthAuthMethods, ", "))
	}
	switch {
	case o.TokenEndpointAuth == "private_key_jwt" && o.PrivateKeyFile == "":
		c.fail(p+".token_endpoint_auth", "", "private_key_jwt needs private_key_file, a PEM private key")
	case strings.HasPrefix(o.TokenEndpointAuth, "client_secret_") && o.ClientSecret == "":
		c.fail(p+".token_endpoint_auth", "", "%s needs client_secret; write it as ${ENV_VAR}", o.TokenEndpointAuth)
	}
	if (o.ClientSecret != "" || o.PrivateKeyFile != "") && o.ClientID == "" {
		c.fail(p+".client_id", "", "is required with client_secret or private_key_file: they are the credentials of a client registered beforehand")
	}
	if o.ClientSecret != "" && o.PrivateKeyFile != "" {
		c.fail(p+".private_key_file", "", "cannot be set with client_secret; the client authenticates one way; remove one")
	}
	if o.ClientMetadataURL != "" {
		if mu, err := url.Parse(o.ClientMetadataURL); err != nil || mu.Scheme != "https" || mu.Host == "" || mu.Path == "" || mu.Path == "/" {
			c.fail(p+".client_metadata_url", quoteShort(o.ClientMetadataURL), "must be an https URL with a path, like https://example.com/toolgate-client.json")
		}
	}
	if o.RedirectPort < 0 || o.RedirectPort > 65535 {
		c.fail(p+".redirect_port", strconv.Itoa(o.RedirectPort), "must be a port from 1 to 65535, or 0 (left out) for a free port each time")
	}
	if o.Timeout < 0 {
		c.fail(p+".timeout", o.Timeout.String(), "must be positive, like 30s; leave it out for 30s")
	}
	switch grant {
	case "client_credentials":
		if o.ClientID == "" {
			c.fail(p+".client_id", "", "is required with grant client_credentials, with client_secret or private_key_file")
		} else if o.ClientSecret == "" && o.PrivateKeyFile == "" {
			c.fail(p+".client_secret", "", "or private_key_file is required with grant client_credentials")
		}
	case "token_exchange":
		x := o.TokenExchange
		switch {
		case x == nil && o.PerPrincipal:
			c.fail(p+".token_exchange", "", "is required with grant token_exchange: write {} to exchange each principal's own token at the upstream's authorization server, or idp_token_endpoint for SEP-990")
		case x == nil:
			c.fail(p+".token_exchange", "", "is required with grant token_exchange: write its subject_token and, for SEP-990, idp_token_endpoint")
		case x.SubjectToken == "" && !o.PerPrincipal:
			c.fail(p+".token_exchange.subject_token", "", "is required with grant token_exchange unless per_principal is set (each principal's own token is exchanged then); write it as ${ENV_VAR}")
		case x.IdPTokenEndpoint != "" && !absHTTP(x.IdPTokenEndpoint):
			c.fail(p+".token_exchange.idp_token_endpoint", quoteShort(x.IdPTokenEndpoint), "must be an absolute http or https URL")
		}
	default:
		if o.TokenExchange != nil {
			c.fail(p+".token_exchange", "", "applies to grant token_exchange only; remove it or set grant: token_exchange")
		}
	}
	c.perPrincipal(cfg, i, u, grant)
}

// perPrincipal checks upstreams[i].oauth's per_principal and
// callback_url.
func (c *checker) perPrincipal(cfg *Config, i int, u Upstream, grant string) {
	o := u.OAuth
	p := fmt.Sprintf("upstreams[%d].oauth", i)
	if !o.PerPrincipal {
		if o.CallbackURL != "" {
			c.fail(p+".callback_url", "", "applies to per_principal only (the redirect of each principal's authorization); remove it or set per_principal: true")
		}
		return
	}
	switch {
	case !cfg.Auth.Enabled():
		c.fail(p+".per_principal", "", "needs authenticated principals: configure the auth section (tokens or oauth)")
	case grant == "client_credentials":
		c.fail(p+".per_principal", "", "cannot be used with grant client_credentials, whose token is the gateway's own; use authorization_code or token_exchange")
	case grant == "token_exchange" && cfg.Auth.OAuth == nil:
		c.fail(p+".per_principal", "", "with grant token_exchange needs auth.oauth: the principal's inbound OAuth access token is what is exchanged")
	case u.Isolation == "thread":
		c.fail(p+".per_principal", "", "cannot be used with isolation thread; per_principal already gives each principal its own upstream session")
	}
	switch {
	case grant != "authorization_code" && o.CallbackURL != "":
		c.fail(p+".callback_url", "", "applies to grant authorization_code only; remove it")
	case grant == "authorization_code" && o.CallbackURL == "":
		c.fail(p+".per_principal", "", "with grant authorization_code needs callback_url: toolgate's /oauth/callback as browsers reach it, like https://toolgate.example.com/oauth/callback")
	case o.CallbackURL != "" && !callbackURL(o.CallbackURL):
		c.fail(p+".callback_url", quoteShort(o.CallbackURL), "must be an absolute http or https URL ending in /oauth/callback, like https://toolgate.example.com/oauth/callback")
	}
}

// callbackURL reports whether s can be toolgate's /oauth/callback route.
func callbackURL(s string) bool {
	pu, err := url.Parse(s)
	return err == nil && absHTTP(s) && strings.HasSuffix(pu.Path, "/oauth/callback") && pu.RawQuery == "" && pu.Fragment == ""
}

func absHTTP(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}
