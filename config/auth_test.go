package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseAuth(t *testing.T) {
	in := yamlLines(
		"auth:",
		"  tokens:",
		"    - name: desktop",
		"      token: ${DESK}",
		"      deny: [fs__write_*]",
		"      rate: 600/m",
		"  oauth:",
		"    issuer: https://idp.example.com",
		"    audience: https://gw.example.com/mcp",
		"    permissions:",
		"      - when: {scope: tools:read}",
		"        allow: ['*__get*']",
		"  max_instances: 10",
	)
	cfg, err := Parse("t.yaml", in, &Options{LookupEnv: envOf(map[string]string{"DESK": "0123456789abcdef0123"})})
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.Auth
	if !a.Enabled() || a.SessionCap() != 100 || a.MaxInstances != 10 {
		t.Fatalf("auth = %+v", a)
	}
	tok := a.Tokens[0]
	if diff := cmp.Diff(Grant{Allow: []string{"*"}, Deny: []string{"fs__write_*"}, Rate: "600/m"}, tok.Grant()); diff != "" {
		t.Errorf("token grant (-want +got):\n%s", diff)
	}
	if r, b := tok.Grant().Limit(); r != 10 || b != 10 {
		t.Errorf("Limit() = %v, %v; want 10/s with a burst of 10", r, b)
	}
	if a.OAuth.PrincipalClaim != "sub" || a.OAuth.Allow != nil {
		t.Errorf("oauth defaults: %+v", a.OAuth)
	}
	if !slicesHas(cfg.Secrets(), "0123456789abcdef0123") {
		t.Error("the token from the environment is not among the secrets to redact")
	}
}

func slicesHas(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestParseAuthErrors(t *testing.T) {
	env := map[string]string{"SHORT": "abc", "GOOD": "0123456789abcdef0123", "ODD": "0123456789abcdef!0123"}
	tests := []struct {
		name string
		in   []byte
		want []string
	}{
		{"token problems", yamlLines(
			"auth:",
			"  tokens:",
			"    - token: ${SHORT}",
			"    - name: stdio",
			"      token: ${GOOD}",
			"    - name: a b",
			"      token: ${GOOD}",
			"      rate: fast",
			"      allow: ['[']",
		), []string{
			"t.yaml:3:7: auth.tokens[0].name: is required: the principal this token authenticates, like desktop",
			"t.yaml:3:14: auth.tokens[0].token: is 3 characters long; use at least 16 random characters (openssl rand -hex 32) (value came from ${SHORT})",
			`t.yaml:4:13: auth.tokens[1].name: is reserved for the process that runs toolgate stdio; pick another name; got "stdio"`,
			`t.yaml:6:13: auth.tokens[2].name: must be 1 to 128 printable characters without spaces; got "a b"`,
			"t.yaml:7:14: auth.tokens[2].token: is the same as auth.tokens[1].token; give every principal its own token (value came from ${GOOD})",
			`t.yaml:8:13: auth.tokens[2].rate: must be calls per unit, like 20/s, 600/m or 1000/h; got "fast"`,
			`t.yaml:9:15: auth.tokens[2].allow[0]: is not a valid glob (* ? [a-z] and \ escapes); got "["`,
		}},
		{"token characters", yamlLines(
			"auth:",
			"  tokens:",
			"    - name: odd",
			"      token: ${ODD}",
		), []string{
			"t.yaml:4:14: auth.tokens[0].token: may hold only letters, digits and - . _ ~ + / (then = padding), as a bearer token does (RFC 6750); openssl rand -hex 32 makes one (value came from ${ODD})",
		}},
		{"oauth problems", yamlLines(
			"auth:",
			"  oauth:",
			"    issuer: http://idp.example.com",
			"    burst: 3",
			"    permissions:",
			"      - allow: [x]",
		), []string{
			"t.yaml:2:3: auth.oauth.audience: is required: this toolgate's resource identifier, like https://toolgate.example.com/mcp",
			`t.yaml:3:13: auth.oauth.issuer: must use https (http only for a loopback issuer in tests); got "http://idp.example.com"`,
			"t.yaml:4:12: auth.oauth.burst: applies only with a rate; set rate too, like rate: 20/s; got 3",
			"t.yaml:6:9: auth.oauth.permissions[0].when: must name at least one claim and its value, like { scope: tools:read }",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.yaml", tc.in, &Options{LookupEnv: envOf(env)})
			if diff := cmp.Diff(tc.want, errLines(t, err)); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			if err != nil && strings.Contains(err.Error(), "0123456789abcdef") {
				t.Error("an error shows a token")
			}
		})
	}
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string]float64{"20/s": 20, "600/m": 10, "36/h": 0.01, " 2 / s ": 2} {
		if got, err := ParseRate(in); err != nil || got != want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "20", "0/s", "-1/s", "x/s", "2/d", "Inf/s", "2000000/s"} {
		if _, err := ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q) succeeded", in)
		}
	}
}

func TestIsLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "LocalHost": true, "127.0.0.1": true, "127.8.9.10": true, "::1": true,
		"0.0.0.0": false, "": false, "127.example.com": false, "10.0.0.1": false, "::": false, "localhost.evil": false,
	} {
		if got := IsLoopbackHost(host); got != want {
			t.Errorf("IsLoopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
}
