package config

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseUpstreamOAuth(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "toolgate.yaml")
	in := yamlLines(
		"upstreams:",
		"  - name: linear",
		"    transport: streamable-http",
		"    url: https://mcp.example.com/mcp",
		"    oauth:",
		"      client_id: toolgate",
		"      client_secret: ${SECRET}",
		"      scopes: [read, write]",
		"      redirect_port: 8976",
		"  - name: m2m",
		"    transport: sse",
		"    url: https://m2m.example.com/sse",
		"    oauth: {grant: client_credentials, client_id: svc, private_key_file: keys/svc.pem}",
		"token_store: {path: state/tokens.json, key_file: /etc/toolgate/key}",
	)
	cfg, err := Parse(file, in, &Options{LookupEnv: envOf(map[string]string{"SECRET": "s3cret-value"})})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := &UpstreamOAuth{ClientID: "toolgate", ClientSecret: "s3cret-value", Scopes: []string{"read", "write"}, RedirectPort: 8976}
	if diff := cmp.Diff(want, cfg.Upstreams[0].OAuth); diff != "" {
		t.Errorf("upstreams[0].oauth mismatch (-want +got):\n%s", diff)
	}
	if got := cfg.Upstreams[1].OAuth.PrivateKeyFile; got != filepath.Join(dir, "keys/svc.pem") {
		t.Errorf("private_key_file = %q, want it resolved against the file's directory", got)
	}
	if got := cfg.TokenStore; got.Path != filepath.Join(dir, "state/tokens.json") || got.KeyFile != "/etc/toolgate/key" {
		t.Errorf("token_store = %+v", got)
	}
}

func TestParseUpstreamOAuthErrors(t *testing.T) {
	in := yamlLines(
		"upstreams:",
		"  - {name: a, transport: stdio, command: x, oauth: {client_id: c}}",
		"  - name: b",
		"    transport: streamable-http",
		"    url: https://b.example/mcp",
		"    headers: {Authorization: 'Bearer x'}",
		"    oauth: {grant: implicit, token_endpoint_auth: private_key_jwt, redirect_port: 70000}",
		"  - name: c",
		"    transport: sse",
		"    url: https://c.example/sse",
		"    oauth: {grant: client_credentials, client_metadata_url: 'http://c.example/meta.json'}",
		"  - name: d",
		"    transport: sse",
		"    url: https://d.example/sse",
		"    oauth: {grant: token_exchange, client_secret: '${TOP}'}",
	)
	_, err := Parse("t.yaml", in, &Options{LookupEnv: envOf(map[string]string{"TOP": "top-secret"})})
	if err == nil {
		t.Fatal("Parse succeeded")
	}
	want := []string{
		`t.yaml:2:45: upstreams[0].oauth: applies to sse and streamable-http upstreams only; a stdio server gets its credentials through env`,
		`t.yaml:6:30: upstreams[1].headers.Authorization: cannot be set with oauth, which sends the Authorization header itself; remove one of them`,
		`t.yaml:7:20: upstreams[1].oauth.grant: must be one of authorization_code, client_credentials, token_exchange; got "implicit"`,
		`t.yaml:7:51: upstreams[1].oauth.token_endpoint_auth: private_key_jwt needs private_key_file, a PEM private key`,
		`t.yaml:7:83: upstreams[1].oauth.redirect_port: must be a port from 1 to 65535, or 0 (left out) for a free port each time; got 70000`,
		`t.yaml:11:5: upstreams[2].oauth.client_id: is required with grant client_credentials, with client_secret or private_key_file`,
		`t.yaml:11:61: upstreams[2].oauth.client_metadata_url: must be an https URL with a path, like https://example.com/toolgate-client.json; got "http://c.example/meta.json"`,
		`t.yaml:15:5: upstreams[3].oauth.client_id: is required with client_secret or private_key_file: they are the credentials of a client registered beforehand`,
		`t.yaml:15:5: upstreams[3].oauth.token_exchange: is required with grant token_exchange: write its subject_token and, for SEP-990, idp_token_endpoint`,
	}
	if diff := cmp.Diff(want, errLines(t, err)); diff != "" {
		t.Errorf("errors mismatch (-want +got):\n%s", diff)
	}
	if strings.Contains(err.Error(), "top-secret") {
		t.Errorf("an error shows a secret:\n%v", err)
	}
}

func TestParseUpstreamOAuthPerPrincipal(t *testing.T) {
	in := yamlLines(
		"auth: {tokens: [{name: alice, token: alice-token-0123456789}]}",
		"upstreams:",
		"  - name: a",
		"    transport: streamable-http",
		"    url: https://a.example/mcp",
		"    oauth: {per_principal: true, callback_url: 'https://tg.example/oauth/callback'}",
	)
	cfg, err := Parse("t.yaml", in, nil)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if o := cfg.Upstreams[0].OAuth; !o.PerPrincipal || o.CallbackURL != "https://tg.example/oauth/callback" {
		t.Errorf("oauth = %+v", o)
	}
}

func TestParseUpstreamOAuthPerPrincipalErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []string
		want []string
	}{{
		name: "without auth",
		in: []string{
			"upstreams:",
			"  - {name: a, transport: sse, url: 'https://a.example/sse', oauth: {per_principal: true, callback_url: 'https://tg.example/oauth/callback'}}",
		},
		want: []string{`t.yaml:2:84: upstreams[0].oauth.per_principal: needs authenticated principals: configure the auth section (tokens or oauth)`},
	}, {
		name: "grants and callback",
		in: []string{
			"auth: {tokens: [{name: alice, token: alice-token-0123456789}]}",
			"upstreams:",
			"  - {name: a, transport: sse, url: 'https://a.example/sse', oauth: {per_principal: true}}",
			"  - {name: b, transport: sse, url: 'https://b.example/sse', oauth: {per_principal: true, grant: client_credentials, client_id: c, client_secret: s3cret-value}}",
			"  - {name: c, transport: sse, url: 'https://c.example/sse', oauth: {per_principal: true, grant: token_exchange, token_exchange: {}}}",
			"  - {name: d, transport: sse, url: 'https://d.example/sse', oauth: {per_principal: true, callback_url: 'https://tg.example/cb'}}",
			"  - {name: e, transport: sse, url: 'https://e.example/sse', oauth: {callback_url: 'https://tg.example/oauth/callback'}}",
		},
		want: []string{
			`t.yaml:3:84: upstreams[0].oauth.per_principal: with grant authorization_code needs callback_url: toolgate's /oauth/callback as browsers reach it, like https://toolgate.example.com/oauth/callback`,
			`t.yaml:4:84: upstreams[1].oauth.per_principal: cannot be used with grant client_credentials, whose token is the gateway's own; use authorization_code or token_exchange`,
			`t.yaml:5:84: upstreams[2].oauth.per_principal: with grant token_exchange needs auth.oauth: the principal's inbound OAuth access token is what is exchanged`,
			`t.yaml:6:104: upstreams[3].oauth.callback_url: must be an absolute http or https URL ending in /oauth/callback, like https://toolgate.example.com/oauth/callback; got "https://tg.example/cb"`,
			`t.yaml:7:83: upstreams[4].oauth.callback_url: applies to per_principal only (the redirect of each principal's authorization); remove it or set per_principal: true`,
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.yaml", yamlLines(tc.in...), nil)
			if err == nil {
				t.Fatal("Parse succeeded")
			}
			if diff := cmp.Diff(tc.want, errLines(t, err)); diff != "" {
				t.Errorf("errors mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
