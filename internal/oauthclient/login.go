package oauthclient

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"golang.org/x/oauth2"
)

// Browser shows a person the authorization URL: it opens a browser, or
// prints the URL for a headless machine. Open returns once the URL is
// shown; the flow then waits for the redirect.
type Browser interface {
	Open(ctx context.Context, authURL string) error
}

// callbackPath is the loopback redirect URI's path.
const callbackPath = "/callback"

// callback is what the redirect brought: the code, or why not.
type callback struct {
	code string
	err  error
}

// authorizeCode runs the authorization code grant with PKCE (S256) and
// the resource parameter: it listens on a loopback port (RFC 8252:
// 127.0.0.1, a random port unless one is configured), registers the
// client with that redirect URI if need be, has the Browser show the
// authorization URL, takes the code from the redirect whose state
// matches, and exchanges it.
func (c *Client) authorizeCode(ctx context.Context, r *Record, d *Discovery, prev *Record) (*oauth2.Token, error) {
	fail := func(step string, err error) (*oauth2.Token, error) {
		return nil, stepErr(c.cfg.Upstream, step, err)
	}
	if d.Server.AuthorizationEndpoint == "" {
		return fail("discovery", errors.New("the authorization server metadata has no authorization_endpoint"))
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(c.cfg.RedirectPort)))
	if err != nil {
		return fail("authorization", fmt.Errorf("listening for the redirect on 127.0.0.1:%d: %w", c.cfg.RedirectPort, err))
	}
	redirect := fmt.Sprintf("http://%s%s", ln.Addr(), callbackPath)
	state, verifier := oauth2.GenerateVerifier(), oauth2.GenerateVerifier()
	got := make(chan callback, 1)
	srv := &http.Server{Handler: callbackHandler(state, got), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	if err := c.credentials(ctx, r, d, prev, redirect); err != nil {
		return nil, err
	}
	conf := c.oauth2Config(r, d, redirect)
	authURL := conf.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", r.Resource))
	if err := c.cfg.Browser.Open(ctx, authURL); err != nil {
		return fail("authorization", fmt.Errorf("showing the authorization URL: %w", err))
	}
	var cb callback
	select {
	case cb = <-got:
	case <-ctx.Done():
		return fail("authorization", fmt.Errorf("no redirect came back to %s: %w", redirect, ctx.Err()))
	}
	if cb.err != nil {
		return fail("authorization", cb.err)
	}
	opts := []oauth2.AuthCodeOption{oauth2.VerifierOption(verifier), oauth2.SetAuthURLParam("resource", r.Resource)}
	if r.AuthMethod == AuthPrivateKeyJWT {
		a, err := c.clientAssertion(r.ClientID, r.Issuer)
		if err != nil {
			return nil, err
		}
		opts = append(opts, oauth2.SetAuthURLParam("client_assertion_type", assertionTypeJWT), oauth2.SetAuthURLParam("client_assertion", a))
	}
	xctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	tok, err := conf.Exchange(c.ctx(xctx), cb.code, opts...)
	if err != nil {
		if xctx.Err() != nil && ctx.Err() == nil {
			return fail("token", fmt.Errorf("the token endpoint did not answer within %v", c.cfg.Timeout))
		}
		return fail("token", tokenError(err))
	}
	return tok, nil
}

// oauth2Config is x/oauth2's view of r's client at d's server.
func (c *Client) oauth2Config(r *Record, d *Discovery, redirect string) *oauth2.Config {
	secret := r.ClientSecret
	if r.AuthMethod == AuthNone || r.AuthMethod == AuthPrivateKeyJWT {
		secret = ""
	}
	return &oauth2.Config{
		ClientID: r.ClientID, ClientSecret: secret, RedirectURL: redirect, Scopes: r.Scopes,
		Endpoint: oauth2.Endpoint{AuthURL: d.Server.AuthorizationEndpoint, TokenURL: d.Server.TokenEndpoint, AuthStyle: authStyle(r.AuthMethod)},
	}
}

// callbackHandler takes the redirect: the first one to the callback path
// whose state matches settles the flow (a code, or the error the server
// sent); one with another state is refused and settles it as an error,
// as it means someone else's redirect reached this port.
func callbackHandler(state string, got chan<- callback) http.Handler {
	settle := func(cb callback) {
		select {
		case got <- cb:
		default: // settled already
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != callbackPath {
			http.NotFound(w, req)
			return
		}
		q := req.URL.Query()
		if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(state)) != 1 {
			http.Error(w, "toolgate: the state of this redirect does not match the authorization request; start again", http.StatusBadRequest)
			settle(callback{err: errors.New("the redirect's state does not match the request's (a forged or stale redirect); nothing was stored")})
			return
		}
		if e := q.Get("error"); e != "" {
			http.Error(w, "toolgate: the authorization server refused: "+e, http.StatusBadRequest)
			msg := e
			if d := q.Get("error_description"); d != "" {
				msg += ": " + d
			}
			settle(callback{err: fmt.Errorf("the authorization server redirected with error %s", msg)})
			return
		}
		code := q.Get("code")
		if code == "" {
			http.Error(w, "toolgate: the redirect has no code", http.StatusBadRequest)
			settle(callback{err: errors.New("the redirect has no code")})
			return
		}
		_, _ = fmt.Fprintln(w, "toolgate: authorized. You can close this window.")
		settle(callback{code: code})
	})
}
