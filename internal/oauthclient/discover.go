package oauthclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// ResourceMetadata is an RFC 9728 protected resource metadata document
// (the fields the client uses).
type ResourceMetadata struct {
	Resource             string   `json:"resource"`
	AuthorizationServers []string `json:"authorization_servers"`
	ScopesSupported      []string `json:"scopes_supported"`
}

// ServerMetadata is an RFC 8414 authorization server metadata document
// (or an OpenID provider configuration; the fields the client uses).
type ServerMetadata struct {
	Issuer                            string   `json:"issuer"`
	AuthorizationEndpoint             string   `json:"authorization_endpoint"`
	TokenEndpoint                     string   `json:"token_endpoint"`
	RegistrationEndpoint              string   `json:"registration_endpoint"`
	RevocationEndpoint                string   `json:"revocation_endpoint"`
	ScopesSupported                   []string `json:"scopes_supported"`
	GrantTypesSupported               []string `json:"grant_types_supported"`
	TokenEndpointAuthMethodsSupported []string `json:"token_endpoint_auth_methods_supported"`
	CodeChallengeMethodsSupported     []string `json:"code_challenge_methods_supported"`
	ClientIDMetadataDocumentSupported bool     `json:"client_id_metadata_document_supported"`
}

// Discovery is what discovery found out about one upstream.
type Discovery struct {
	// Resource is the RFC 8707 resource indicator sent with every
	// authorization and token request: the metadata's resource, or the
	// server's URL when it has none.
	Resource string
	// Resource's scopes_supported, when the metadata listed them.
	ResourceScopes []string
	Server         ServerMetadata
}

// Discover finds the authorization server of the MCP server at serverURL,
// starting from the challenge c of its 401 answer, as the MCP
// authorization specification (2025-11-25) says: the protected resource
// metadata named by the challenge, else at the path-based then the root
// well-known location; then the authorization server's metadata at the
// RFC 8414 and OpenID locations for its issuer. A server with no resource
// metadata is a 2025-03-26 server: its origin is the authorization server,
// whose metadata is at the root or, absent, whose endpoints are /authorize,
// /token and /register.
func Discover(ctx context.Context, hc *http.Client, serverURL string, c Challenge) (*Discovery, error) {
	su, err := url.Parse(serverURL)
	if err != nil {
		return nil, fmt.Errorf("the server URL is invalid: %w", err)
	}
	prm, err := resourceMetadata(ctx, hc, su, c)
	if errors.Is(err, errNotFound) {
		return legacyDiscover(ctx, hc, su)
	}
	if err != nil {
		return nil, fmt.Errorf("protected resource metadata: %w", err)
	}
	if err := checkResource(prm.Resource, su); err != nil {
		return nil, fmt.Errorf("protected resource metadata: %w", err)
	}
	if len(prm.AuthorizationServers) == 0 {
		return nil, errors.New("protected resource metadata: it names no authorization server (authorization_servers is empty)")
	}
	issuer := prm.AuthorizationServers[0]
	as, err := serverMetadata(ctx, hc, issuer)
	if err != nil {
		return nil, fmt.Errorf("authorization server metadata of %s: %w", redactURL(issuer), err)
	}
	d := &Discovery{Resource: prm.Resource, ResourceScopes: prm.ScopesSupported, Server: *as}
	if d.Resource == "" {
		d.Resource = canonicalResource(su)
	}
	return d, nil
}

// resourceMetadata fetches the protected resource metadata: at the URL
// the challenge names, else path-based, else at the root. Every location
// answering 4xx gives errNotFound.
func resourceMetadata(ctx context.Context, hc *http.Client, su *url.URL, c Challenge) (*ResourceMetadata, error) {
	var locations []string
	if c.ResourceMetadata != "" {
		locations = append(locations, c.ResourceMetadata)
	}
	if p := strings.TrimRight(su.Path, "/"); p != "" {
		locations = append(locations, origin(su)+"/.well-known/oauth-protected-resource"+p)
	}
	locations = append(locations, origin(su)+"/.well-known/oauth-protected-resource")
	var last error
	for _, loc := range locations {
		var m ResourceMetadata
		err := getJSON(ctx, hc, loc, &m)
		if errors.Is(err, errNotFound) {
			last = err
			continue
		}
		if err != nil {
			return nil, err
		}
		return &m, nil
	}
	return nil, last
}

// checkResource checks that the metadata's resource is the server's own
// URL or a prefix of it (same origin, path a prefix on a segment
// boundary): metadata naming another resource would make toolgate ask for
// tokens meant for someone else.
func checkResource(resource string, su *url.URL) error {
	if resource == "" {
		return nil
	}
	ru, err := url.Parse(resource)
	if err != nil || ru.Fragment != "" {
		return fmt.Errorf("resource %q is not a valid URL without a fragment", resource)
	}
	rp, sp := strings.TrimRight(ru.Path, "/"), strings.TrimRight(su.Path, "/")
	sameOrigin := strings.EqualFold(ru.Scheme, su.Scheme) && strings.EqualFold(ru.Host, su.Host)
	if !sameOrigin || !(sp == rp || strings.HasPrefix(sp, rp+"/")) {
		return fmt.Errorf("resource %s does not match the server's URL %s; refusing to authorize for it", redactURL(resource), redactURL(su.String()))
	}
	return nil
}

// canonicalResource is the server URL as a resource indicator: without
// query or fragment.
func canonicalResource(su *url.URL) string {
	c := *su
	c.RawQuery, c.Fragment, c.User = "", "", nil
	return c.String()
}

// serverMetadata fetches the metadata of the authorization server whose
// issuer identifier is issuer, trying, for an issuer with a path, the
// RFC 8414 path-inserted, the OpenID path-inserted and the OpenID
// path-appended locations; for one without, the RFC 8414 then the OpenID
// location. The metadata's issuer must be issuer (RFC 8414 section 3.3).
func serverMetadata(ctx context.Context, hc *http.Client, issuer string) (*ServerMetadata, error) {
	iu, err := url.Parse(issuer)
	if err != nil || iu.Host == "" {
		return nil, fmt.Errorf("issuer %q is not a valid URL", issuer)
	}
	o, p := origin(iu), strings.TrimRight(iu.Path, "/")
	locations := []string{
		o + "/.well-known/oauth-authorization-server" + p,
		o + "/.well-known/openid-configuration" + p,
	}
	if p != "" {
		locations = append(locations, o+p+"/.well-known/openid-configuration")
	}
	var last error
	for _, loc := range locations {
		var m ServerMetadata
		err := getJSON(ctx, hc, loc, &m)
		if errors.Is(err, errNotFound) {
			last = err
			continue
		}
		if err != nil {
			return nil, err
		}
		if trimSlash(m.Issuer) != trimSlash(issuer) {
			return nil, fmt.Errorf("its issuer %q is not %q, the server it was fetched for (RFC 8414 section 3.3); refusing it", m.Issuer, issuer)
		}
		return &m, checkEndpoints(&m)
	}
	return nil, fmt.Errorf("none found at %s: %w", strings.Join(locations, ", "), last)
}

// checkEndpoints checks that the metadata has the endpoints every flow
// needs, as absolute http(s) URLs.
func checkEndpoints(m *ServerMetadata) error {
	for _, e := range []struct{ name, v string }{{"token_endpoint", m.TokenEndpoint}} {
		u, err := url.Parse(e.v)
		if e.v == "" || err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return fmt.Errorf("%s %q is not an absolute http(s) URL", e.name, e.v)
		}
	}
	if len(m.CodeChallengeMethodsSupported) > 0 && !slices.Contains(m.CodeChallengeMethodsSupported, "S256") {
		return errors.New("it does not support PKCE S256 (code_challenge_methods_supported); refusing, as the MCP specification requires it")
	}
	return nil
}

// legacyDiscover is discovery for a 2025-03-26 server, which has no
// protected resource metadata: its origin is the authorization server.
// Its metadata is at the root well-known location; without it, the
// endpoints are /authorize, /token and /register at the origin. The
// issuer is not checked against the origin: such servers publish their
// own.
func legacyDiscover(ctx context.Context, hc *http.Client, su *url.URL) (*Discovery, error) {
	o := origin(su)
	d := &Discovery{Resource: canonicalResource(su)}
	err := getJSON(ctx, hc, o+"/.well-known/oauth-authorization-server", &d.Server)
	switch {
	case errors.Is(err, errNotFound):
		d.Server = ServerMetadata{
			Issuer:                o,
			AuthorizationEndpoint: o + "/authorize",
			TokenEndpoint:         o + "/token",
			RegistrationEndpoint:  o + "/register",
		}
	case err != nil:
		return nil, fmt.Errorf("authorization server metadata: %w", err)
	}
	if err := checkEndpoints(&d.Server); err != nil {
		return nil, fmt.Errorf("authorization server metadata: %w", err)
	}
	return d, nil
}
