package mcpup

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/internal/oauthclient"
	"github.com/toolgate/toolgate/internal/principal"
	"github.com/toolgate/toolgate/retry"
)

// TestPerPrincipalRefusals checks the calls of a per-principal upstream
// that no token may serve: one without a principal, and, with token
// exchange, one of a principal that has no inbound token to exchange
// (the gateway's subject token is never used for it). Neither reaches
// the upstream.
func TestPerPrincipalRefusals(t *testing.T) {
	for _, tc := range []struct {
		name  string
		grant string
		id    *principal.Identity
		want  string
	}{
		{"no principal", oauthclient.GrantAuthorizationCode, nil, "has no authenticated principal"},
		{"static token, token exchange", oauthclient.GrantTokenExchange, &principal.Identity{Name: "alice"}, `principal "alice" authenticated with a static token`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New([]Upstream{{
				Name: "notes", Transport: TransportStreamableHTTP, URL: "http://127.0.0.1:1/mcp",
				OAuth: &oauthclient.Config{Grant: tc.grant, PerPrincipal: true, Exchange: oauthclient.TokenExchange{SubjectToken: "gateway-subject"}},
			}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			ctx := context.Background()
			if tc.id != nil {
				ctx = principal.With(ctx, tc.id)
			}
			_, err = m.ups[0].bind("whoami").Execute(ctx, executors.Call{})
			re, ok := errors.AsType[*retry.Error](err)
			if !ok || re.Class != retry.Permission || !strings.Contains(re.Msg, tc.want) {
				t.Fatalf("Execute = %v, want a permission error saying %q", err, tc.want)
			}
			if n := len(m.ups[0].principals); n != 0 {
				t.Errorf("%d principal sessions were made, want none", n)
			}
		})
	}
}
