package oauthclient

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// RFC 8693 and RFC 7523 identifiers.
const (
	grantTokenExchange  = "urn:ietf:params:oauth:grant-type:token-exchange"
	grantJWTBearer      = "urn:ietf:params:oauth:grant-type:jwt-bearer"
	tokenTypeAccess     = "urn:ietf:params:oauth:token-type:access_token"
	tokenTypeIDJAG      = "urn:ietf:params:oauth:token-type:id-jag"
	assertionTypeJWT    = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
	clientAssertionLife = 5 * time.Minute
)

// authStyle is x/oauth2's way of sending the client's credentials for a
// token endpoint authentication method.
func authStyle(method string) oauth2.AuthStyle {
	if method == AuthBasic {
		return oauth2.AuthStyleInHeader
	}
	return oauth2.AuthStyleInParams
}

// tokenRequest makes one request to r's token endpoint with params (the
// grant and its parameters) and scopes, authenticated as r's client. It
// uses x/oauth2's clientcredentials, whose grant_type may be replaced
// (the library allows it for this), for every grant but the
// authorization code's: refresh_token (which x/oauth2's own refresher
// sends without the RFC 8707 resource), client_credentials, jwt-bearer
// and token-exchange.
func (c *Client) tokenRequest(ctx context.Context, r *Record, params map[string]string, scopes []string) (*oauth2.Token, error) {
	v := url.Values{}
	for k, p := range params {
		if p != "" {
			v.Set(k, p)
		}
	}
	secret := r.ClientSecret
	if r.AuthMethod == AuthPrivateKeyJWT {
		a, err := c.clientAssertion(r.ClientID, r.Issuer)
		if err != nil {
			return nil, err
		}
		v.Set("client_assertion_type", assertionTypeJWT)
		v.Set("client_assertion", a)
		secret = ""
	}
	if r.AuthMethod == AuthNone {
		secret = ""
	}
	cc := clientcredentials.Config{
		ClientID: r.ClientID, ClientSecret: secret, TokenURL: r.TokenEndpoint,
		Scopes: scopes, EndpointParams: v, AuthStyle: authStyle(r.AuthMethod),
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	tok, err := cc.Token(c.ctx(ctx))
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("the token endpoint did not answer within %v", c.cfg.Timeout)
	}
	return tok, err
}

// exchange runs the token_exchange grant with the subject token subject
// (the configured one when empty): directly at r's server (RFC 8693), or,
// with an identity provider configured, in the two steps of SEP-990.
func (c *Client) exchange(ctx context.Context, r *Record, subject string) (*oauth2.Token, error) {
	x := c.cfg.Exchange
	if subject == "" {
		subject = x.SubjectToken
	}
	if subject == "" {
		return nil, &StepError{Upstream: c.cfg.Upstream, Step: "token exchange", Err: errors.New("there is no subject token to exchange: set upstreams[].oauth.token_exchange.subject_token, or use per_principal with a principal that has an inbound token")}
	}
	typ := x.SubjectTokenType
	if typ == "" {
		typ = tokenTypeAccess
	}
	if x.IdPTokenEndpoint == "" {
		tok, err := c.tokenRequest(ctx, r, map[string]string{
			"grant_type": grantTokenExchange, "subject_token": subject, "subject_token_type": typ,
			"requested_token_type": tokenTypeAccess, "resource": r.Resource,
		}, r.Scopes)
		return tok, stepErr(c.cfg.Upstream, "token exchange", tokenError(err))
	}
	idp := &Record{ClientID: x.IdPClientID, ClientSecret: x.IdPClientSecret, TokenEndpoint: x.IdPTokenEndpoint, AuthMethod: AuthPost}
	if x.IdPClientSecret == "" {
		idp.AuthMethod = AuthNone
	}
	jag, err := c.tokenRequest(ctx, idp, map[string]string{
		"grant_type": grantTokenExchange, "subject_token": subject, "subject_token_type": typ,
		"requested_token_type": tokenTypeIDJAG, "audience": r.Issuer, "resource": r.Resource,
	}, r.Scopes)
	if err != nil {
		return nil, &StepError{Upstream: c.cfg.Upstream, Step: "token exchange at the identity provider", Err: tokenError(err)}
	}
	tok, err := c.tokenRequest(ctx, r, map[string]string{"grant_type": grantJWTBearer, "assertion": jag.AccessToken}, r.Scopes)
	return tok, stepErr(c.cfg.Upstream, "jwt-bearer grant", tokenError(err))
}

// clientAssertion signs the RFC 7523 client assertion of private_key_jwt:
// issuer and subject the client, audience the authorization server's
// issuer, valid for five minutes, with a random jti.
func (c *Client) clientAssertion(clientID, audience string) (string, error) {
	key, alg, err := parsePrivateKey(c.cfg.PrivateKeyPEM)
	if err != nil {
		return "", &StepError{Upstream: c.cfg.Upstream, Step: "client assertion", Err: err}
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return "", &StepError{Upstream: c.cfg.Upstream, Step: "client assertion", Err: err}
	}
	jti := make([]byte, 16)
	_, _ = rand.Read(jti)
	now := time.Now()
	return jwt.Signed(signer).Claims(jwt.Claims{
		Issuer: clientID, Subject: clientID, Audience: jwt.Audience{audience},
		IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now.Add(-time.Minute)),
		Expiry: jwt.NewNumericDate(now.Add(clientAssertionLife)), ID: hex.EncodeToString(jti),
	}).Serialize()
}
