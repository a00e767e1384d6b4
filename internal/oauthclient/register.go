package oauthclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
)

// credentials settles the client's identity at the authorization server
// of d into r: the configured credentials; else a registration made
// before at the same server; else the Client ID Metadata Document URL
// where the server supports it; else Dynamic Client Registration
// (RFC 7591) with redirectURI ("" for grants without one).
func (c *Client) credentials(ctx context.Context, r *Record, d *Discovery, prev *Record, redirectURI string) error {
	switch {
	case c.cfg.ClientID != "":
		r.ClientID, r.ClientSecret = c.cfg.ClientID, c.cfg.ClientSecret
	case prev != nil && prev.Issuer == d.Server.Issuer && prev.ClientID != "":
		r.ClientID, r.ClientSecret, r.AuthMethod = prev.ClientID, prev.ClientSecret, prev.AuthMethod
		return nil
	case d.Server.ClientIDMetadataDocumentSupported && c.cfg.ClientMetadataURL != "":
		r.ClientID = c.cfg.ClientMetadataURL
	case d.Server.RegistrationEndpoint != "":
		return stepErr(c.cfg.Upstream, "registration", c.register(ctx, r, d, redirectURI))
	default:
		return &StepError{Upstream: c.cfg.Upstream, Step: "registration", Err: errors.New("the authorization server offers no dynamic client registration and no client_id is configured; register toolgate there and set upstreams[].oauth.client_id (and client_secret)")}
	}
	r.AuthMethod = c.chooseMethod(r.ClientSecret != "", d.Server.TokenEndpointAuthMethodsSupported)
	return nil
}

// chooseMethod picks the token endpoint authentication method: the
// configured one; private_key_jwt with a key; none without a secret;
// else client_secret_basic unless the server supports only
// client_secret_post (RFC 8414: basic is the default).
func (c *Client) chooseMethod(secret bool, supported []string) string {
	switch {
	case c.cfg.AuthMethod != "":
		return c.cfg.AuthMethod
	case len(c.cfg.PrivateKeyPEM) > 0:
		return AuthPrivateKeyJWT
	case !secret:
		return AuthNone
	case len(supported) > 0 && !slices.Contains(supported, AuthBasic) && slices.Contains(supported, AuthPost):
		return AuthPost
	}
	return AuthBasic
}

// registration is an RFC 7591 client registration request and response.
type registration struct {
	ClientName              string   `json:"client_name,omitempty"`
	RedirectURIs            []string `json:"redirect_uris,omitempty"`
	GrantTypes              []string `json:"grant_types,omitempty"`
	ResponseTypes           []string `json:"response_types,omitempty"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method,omitempty"`
	ClientID                string   `json:"client_id,omitempty"`
	ClientSecret            string   `json:"client_secret,omitempty"`
}

// register registers toolgate at d's registration endpoint, asking for
// no client authentication where the server supports it (a loopback
// client keeps no secret better than it keeps its tokens), else for the
// method the server supports.
func (c *Client) register(ctx context.Context, r *Record, d *Discovery, redirectURI string) error {
	req := registration{ClientName: "toolgate", TokenEndpointAuthMethod: AuthNone}
	if redirectURI != "" {
		req.RedirectURIs = []string{redirectURI}
		req.GrantTypes = []string{"authorization_code", "refresh_token"}
		req.ResponseTypes = []string{"code"}
	} else {
		req.GrantTypes = []string{"client_credentials"}
	}
	if sup := d.Server.TokenEndpointAuthMethodsSupported; len(sup) > 0 && !slices.Contains(sup, AuthNone) {
		req.TokenEndpointAuthMethod = AuthBasic
		if !slices.Contains(sup, AuthBasic) && slices.Contains(sup, AuthPost) {
			req.TokenEndpointAuthMethod = AuthPost
		}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, d.Server.RegistrationEndpoint, bytes.NewReader(body))
	if err != nil {
		return err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	resp, err := c.hc.Do(hreq)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxMetadataBytes))
		return fmt.Errorf("%s answered HTTP %d", redactURL(d.Server.RegistrationEndpoint), resp.StatusCode)
	}
	var got registration
	if err := decodeLimited(resp.Body, d.Server.RegistrationEndpoint, &got); err != nil {
		return err
	}
	if got.ClientID == "" {
		return fmt.Errorf("%s registered toolgate but returned no client_id", redactURL(d.Server.RegistrationEndpoint))
	}
	r.ClientID, r.ClientSecret = got.ClientID, got.ClientSecret
	r.AuthMethod = got.TokenEndpointAuthMethod
	if r.AuthMethod == "" {
		r.AuthMethod = AuthNone
		if r.ClientSecret != "" {
			r.AuthMethod = req.TokenEndpointAuthMethod
			if r.AuthMethod == AuthNone {
				r.AuthMethod = AuthBasic
			}
		}
	}
	return nil
}
