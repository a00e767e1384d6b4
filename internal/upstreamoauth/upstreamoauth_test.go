package upstreamoauth

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/internal/oauthclient"
)

func TestLoginCommand(t *testing.T) {
	for _, tc := range []struct{ source, want string }{
		{"", "toolgate auth login linear"},
		{config.EmbeddedSource, "toolgate auth login linear"},
		{"/etc/toolgate.yaml", "toolgate auth login linear --config /etc/toolgate.yaml"},
	} {
		if got := LoginCommand(tc.source, "linear"); got != tc.want {
			t.Errorf("LoginCommand(%q) = %q, want %q", tc.source, got, tc.want)
		}
	}
}

func parse(t *testing.T, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("t.yaml", []byte(yaml), nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestSettings(t *testing.T) {
	cfg := parse(t, `
upstreams:
  - name: plain
    transport: streamable-http
    url: https://plain.example/mcp
  - name: linear
    transport: streamable-http
    url: https://linear.example/mcp
    oauth:
      client_id: tg
      client_secret: "s3cret-client"
      scopes: [read]
`)
	if c, err := Settings(cfg, 0, nil, nil); c != nil || err != nil {
		t.Errorf("Settings(no oauth) = %v, %v; want nil, nil", c, err)
	}
	c, err := Settings(cfg, 1, nil, nil)
	if err != nil || c == nil {
		t.Fatalf("Settings(linear) = %v, %v", c, err)
	}
	if c.ClientID != "tg" || c.ClientSecret != "s3cret-client" || !slices.Equal(c.Scopes, []string{"read"}) || c.LoginCommand != "toolgate auth login linear --config t.yaml" {
		t.Errorf("Settings(linear) = %+v", c)
	}
	if got := Secrets(cfg.Upstreams[1]); !slices.Equal(got, []string{"s3cret-client"}) {
		t.Errorf("Secrets = %q, want the client secret", got)
	}
	if got := Secrets(cfg.Upstreams[0]); got != nil {
		t.Errorf("Secrets(no oauth) = %q", got)
	}
}

func TestSettingsBadPrivateKey(t *testing.T) {
	key := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(key, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := parse(t, `
upstreams:
  - name: svc
    transport: streamable-http
    url: https://svc.example/mcp
    oauth:
      grant: client_credentials
      client_id: tg
      token_endpoint_auth: private_key_jwt
      private_key_file: `+key+`
`)
	_, err := Settings(cfg, 0, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "t.yaml:") || !strings.Contains(err.Error(), "upstreams[0].oauth.private_key_file") || !strings.Contains(err.Error(), "PEM EC or RSA private key") {
		t.Errorf("Settings(bad key) = %v; want the file:line:col of private_key_file and what to write", err)
	}
}

// completer settles the flow whose state is its own.
type completer struct {
	state, upstream string
	err             error
}

func (c completer) Complete(_ context.Context, cb oauthclient.Callback) (string, string, bool, error) {
	if cb.State != c.state {
		return "", "", false, nil
	}
	return c.upstream, "alice", true, c.err
}

func TestCallback(t *testing.T) {
	ups := []completer{{state: "s1", upstream: "one"}, {state: "s2", upstream: "two", err: errors.New("the code was refused")}}
	h := Callback(func() []completer { return ups }, slog.New(slog.DiscardHandler))
	for _, tc := range []struct {
		query string
		code  int
		want  string
	}{
		{"state=s1&code=x", http.StatusOK, "upstream one is authorized for principal alice"},
		{"state=s2&code=x", http.StatusBadRequest, "authorizing upstream two failed: the code was refused"},
		{"state=nope&code=x", http.StatusBadRequest, "this login link is unknown, used or expired"},
	} {
		w := httptest.NewRecorder()
		h(w, httptest.NewRequest(http.MethodGet, CallbackPath+"?"+tc.query, nil))
		if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.want) || w.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("callback ?%s = %d %q (%v), want %d and %q, no-store", tc.query, w.Code, w.Body.String(), w.Header(), tc.code, tc.want)
		}
	}
}
