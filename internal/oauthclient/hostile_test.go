package oauthclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/oauth2"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fault is one way an authorization server misbehaves.
type fault string

const (
	bigMetadata     fault = "metadata over 1 MiB"
	offHostRedirect fault = "metadata redirects to another host"
	wrongIssuer     fault = "issuer does not match"
	noClientID      fault = "registration without client_id"
	noAccessToken   fault = "token response without access_token"
	macToken        fault = "token_type mac"
	wrongState      fault = "redirect with another state"
	callbackError   fault = "redirect with an error"
	slowToken       fault = "slow token endpoint"
)

// hostileAS is an authorization server (and the protected resource
// metadata pointing at it) that misbehaves as f says.
func hostileAS(t *testing.T, f fault) (prmURL string) {
	t.Helper()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": "elsewhere"})
	}))
	t.Cleanup(other.Close)
	var srv *httptest.Server
	mux := http.NewServeMux()
	mux.HandleFunc("GET /prm", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"resource": "http://mcp.test/mcp", "authorization_servers": []string{srv.URL}})
	})
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		switch f {
		case bigMetadata:
			_, _ = fmt.Fprintf(w, `{"issuer":%q,"x":"%s"}`, srv.URL, strings.Repeat("a", MaxMetadataBytes))
			return
		case offHostRedirect:
			http.Redirect(w, r, other.URL+"/meta", http.StatusFound)
			return
		}
		issuer := srv.URL
		if f == wrongIssuer {
			issuer = "https://attacker.example"
		}
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": issuer, "authorization_endpoint": srv.URL + "/authorize", "token_endpoint": srv.URL + "/token",
			"registration_endpoint": srv.URL + "/register", "code_challenge_methods_supported": []string{"S256"},
		})
	})
	mux.HandleFunc("POST /register", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusCreated)
		if f == noClientID {
			_, _ = w.Write([]byte(`{"client_name":"toolgate"}`))
			return
		}
		_, _ = w.Write([]byte(`{"client_id":"c1","token_endpoint_auth_method":"none"}`))
	})
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		u, _ := url.Parse(q.Get("redirect_uri"))
		v := url.Values{"code": {"the-code"}, "state": {q.Get("state")}}
		switch f {
		case wrongState:
			v.Set("state", "forged")
		case callbackError:
			v = url.Values{"error": {"access_denied"}, "error_description": {"the user said no"}, "state": {q.Get("state")}}
		}
		u.RawQuery = v.Encode()
		http.Redirect(w, r, u.String(), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch f {
		case noAccessToken:
			_, _ = w.Write([]byte(`{"token_type":"Bearer","expires_in":60}`))
		case macToken:
			_, _ = w.Write([]byte(`{"access_token":"at-1","token_type":"mac","expires_in":60}`))
		case slowToken:
			_ = r.ParseForm() // read the body, so that the client's hang-up is seen
			<-r.Context().Done()
		default:
			_, _ = w.Write([]byte(`{"access_token":"at-1","token_type":"Bearer","expires_in":60}`))
		}
	})
	srv = httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/prm"
}

// fetchBrowser plays the person's browser: it follows the authorization
// URL's redirects to the loopback callback.
type fetchBrowser struct{ tr *http.Transport }

func (b fetchBrowser) Open(ctx context.Context, u string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Transport: b.tr}).Do(req)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

func testStore(t *testing.T) *Store {
	t.Helper()
	s, err := OpenStore(filepath.Join(t.TempDir(), "tokens.json"), make([]byte, 32), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestHostileAuthorizationServer checks that each misbehaviour of an
// authorization server gives an error naming the upstream and the step,
// stores no token, and leaves the other upstream's record alone.
func TestHostileAuthorizationServer(t *testing.T) {
	cases := []struct {
		f    fault
		step string
		want string
	}{
		{bigMetadata, "discovery", "more than 1048576 bytes"},
		{offHostRedirect, "discovery", "to another host"},
		{wrongIssuer, "discovery", `its issuer "https://attacker.example" is not`},
		{noClientID, "registration", "returned no client_id"},
		{noAccessToken, "token", "access_token"},
		{macToken, "token", `token_type is "mac", not Bearer`},
		{wrongState, "authorization", "state does not match"},
		{callbackError, "authorization", "error access_denied: the user said no"},
		{slowToken, "token", "did not answer within"},
	}
	for _, tc := range cases {
		t.Run(string(tc.f), func(t *testing.T) {
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			store := testStore(t)
			other := &Record{Upstream: "other", Server: "http://other.test/mcp", Token: &oauth2.Token{AccessToken: "keep", TokenType: "Bearer"}}
			if err := store.Put(other); err != nil {
				t.Fatal(err)
			}
			c := New(Config{
				Upstream: "hostile", ServerURL: "http://mcp.test/mcp", Base: tr, Store: store,
				Browser: fetchBrowser{tr}, Timeout: 2 * time.Second, LoginCommand: "toolgate auth login hostile",
			})
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			err := c.Acquire(ctx, "", "", nil, Challenge{ResourceMetadata: hostileAS(t, tc.f)})
			if err == nil {
				t.Fatal("Acquire succeeded")
			}
			msg := err.Error()
			if !strings.Contains(msg, `upstream "hostile": OAuth `+tc.step+":") || !strings.Contains(msg, tc.want) {
				t.Errorf("error = %q, want one naming the upstream, step %q and %q", msg, tc.step, tc.want)
			}
			if r, _ := store.Get("hostile", ""); r != nil {
				t.Errorf("a record was stored: %+v", r)
			}
			if r, _ := store.Get("other", ""); r == nil || r.Token.AccessToken != "keep" {
				t.Errorf("the other upstream's record is %+v, want it kept", r)
			}
			if c.NeedsAuth() == "" {
				t.Error("the upstream does not report that it needs authorization")
			}
		})
	}
}
