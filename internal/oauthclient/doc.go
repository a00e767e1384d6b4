// Package oauthclient is toolgate's OAuth 2.1 client for upstream MCP
// servers that follow the MCP authorization specification: it reads a
// server's 401 or 403 challenge, discovers its protected resource and
// authorization server metadata (RFC 9728, RFC 8414, OpenID discovery and
// the 2025-03-26 fallbacks), registers the client (pre-registered
// credentials, a Client ID Metadata Document, or Dynamic Client
// Registration), obtains tokens (authorization code with PKCE S256 and the
// RFC 8707 resource parameter, client credentials, RFC 8693 token
// exchange) and keeps them fresh, one refresh in flight at a time.
//
// The protocol work is golang.org/x/oauth2's (and its clientcredentials);
// this package decides what to ask for, bounds what it reads from a
// server it does not trust, and stores the result encrypted ([Store]).
//
// Nothing here logs or returns a token, a client secret or an
// authorization code: errors name the upstream and the step.
package oauthclient
