package tests

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// oauthSetup is an upstream behind a real authorization server, and the
// configuration of toolgate that reaches it with OAuth.
type oauthSetup struct {
	as      *testAS
	yaml    string
	store   string
	keyFile string
	browser string // $BROWSER: the scripted browser that follows the redirect
}

// newOAuthSetup starts the authorization server and the protected
// conformance fixture, and writes the token store's key to a file.
func newOAuthSetup(t *testing.T, seen func(user string)) *oauthSetup {
	t.Helper()
	as := newTestAS(t)
	mcpURL := protectedResource(t, as, startConformanceFixture(t), seen)
	dir := t.TempDir()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	keyFile := filepath.Join(dir, "token.key")
	if err := os.WriteFile(keyFile, []byte(base64.StdEncoding.EncodeToString(key)), 0o600); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(dir, "tokens.json")
	yaml := fmt.Sprintf(`upstreams:
  - name: fx
    transport: streamable-http
    url: %q
    startup_timeout: 10s
    oauth:
      grant: authorization_code
token_store:
  path: %q
  key_file: %q
guards:
  loop: {action: "off"}  # the same call, many times, is the point here
`, mcpURL, store, keyFile)
	return &oauthSetup{as: as, yaml: yaml, store: store, keyFile: keyFile, browser: buildTestdata(t, "conformanceclient") + " browse"}
}

// toolgate runs the toolgate binary with args and the scripted browser,
// and returns its stdout, stderr and exit code.
func (o *oauthSetup) toolgate(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, toolgateBin, args...)
	cmd.Env = append(os.Environ(), "BROWSER="+o.browser)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return out.String(), errb.String(), ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("toolgate %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errb.String(), 0
}

// TestOAuthUpstreamLifecycle runs an OAuth upstream end to end: `auth
// login` through the loopback redirect, the token stored encrypted, a
// call, a server-side expiry under 16 concurrent calls (one refresh, no
// failure), a revoked refresh token (needs_auth in /readyz and the
// metric, the call's error naming the command), `auth status` and `auth
// logout` (RFC 7009 revocation).
func TestOAuthUpstreamLifecycle(t *testing.T) {
	o := newOAuthSetup(t, nil)
	cfg := writeConfig(t, o.yaml)

	stdout, stderr, code := o.toolgate(t, "auth", "login", "fx", "--config", cfg)
	if code != 0 || !strings.Contains(stdout, "upstream fx authorized") {
		t.Fatalf("auth login: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	checkStore(t, o)

	srv := startServe(t, o.yaml)
	waitReady(t, srv)
	c := connectListening(t, srv)
	if text, isErr := callOAuthTool(t, c, "fx__test_simple_text"); isErr || !strings.Contains(text, "simple text") {
		t.Fatalf("first call: %q (error %v)", text, isErr)
	}

	// Expiry at the server: every call gets 401 once, one refresh serves all.
	before, _, _ := o.as.counts()
	o.as.expireAccess()
	var wg sync.WaitGroup
	errs := make(chan string, 16)
	for range 16 {
		wg.Go(func() {
			if text, isErr := callOAuthTool(t, c, "fx__test_simple_text"); isErr {
				errs <- text
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("a call during the refresh failed: %s", e)
	}
	if after, _, _ := o.as.counts(); after-before != 1 {
		t.Errorf("16 calls after expiry made %d refresh requests, want exactly 1", after-before)
	}

	// A revoked refresh token: the upstream needs a person again.
	o.as.revokeRefresh()
	o.as.expireAccess()
	text, isErr := callOAuthTool(t, c, "fx__test_simple_text")
	wantCmd := "toolgate auth login fx --config " + srv.ConfigPath
	if !isErr || !strings.Contains(text, wantCmd) {
		t.Errorf("call after the refresh token was revoked = %q (error %v), want an error naming %q", text, isErr, wantCmd)
	}
	code, body := get(t, srv.URL+"/readyz")
	var ready struct {
		Status    string
		NeedsAuth map[string]string `json:"needs_auth"`
	}
	_ = json.Unmarshal([]byte(body), &ready)
	if code != 200 || ready.Status != "degraded" || ready.NeedsAuth["fx"] != wantCmd {
		t.Errorf("/readyz = %d %s, want degraded with needs_auth fx: %q", code, body, wantCmd)
	}
	waitMetric(t, srv.URL, "toolgate_upstream_needs_auth", map[string]string{"upstream": "fx"}, 1)
	code, body = get(t, srv.URL+"/ui/state")
	var ui struct{ Sources []uiSource }
	_ = json.Unmarshal([]byte(body), &ui)
	if i := slices.IndexFunc(ui.Sources, func(s uiSource) bool { return s.Source == "upstream:fx" }); code != 200 || i < 0 || ui.Sources[i].NeedsAuth != wantCmd {
		t.Errorf("/ui/state = %d %s, want source upstream:fx with needs_auth %q", code, body, wantCmd)
	}

	stdout, _, code = o.toolgate(t, "auth", "status", "--config", cfg)
	if code != 0 || !strings.Contains(stdout, "fx") || !strings.Contains(stdout, "needs_auth") {
		t.Errorf("auth status after the revocation: exit %d:\n%s", code, stdout)
	}

	// Log in again, then out: the server revokes both tokens.
	if _, stderr, code := o.toolgate(t, "auth", "login", "fx", "--config", cfg); code != 0 {
		t.Fatalf("second auth login: exit %d: %s", code, stderr)
	}
	stdout, _, code = o.toolgate(t, "auth", "status", "--config", cfg)
	if code != 0 || !strings.Contains(stdout, "authorized") {
		t.Errorf("auth status after login: exit %d:\n%s", code, stdout)
	}
	_, _, issued := o.as.counts()
	for _, tok := range issued {
		if strings.Contains(stdout, tok) || strings.Contains(srv.Stderr(), tok) {
			t.Errorf("a token appears in auth status or serve's log")
		}
	}
	stdout, stderr, code = o.toolgate(t, "auth", "logout", "fx", "--config", cfg)
	if _, revoked, _ := o.as.counts(); code != 0 || !strings.Contains(stdout, "revoked") || len(revoked) != 2 {
		t.Errorf("auth logout: exit %d, revocations %v\nstdout: %s\nstderr: %s", code, revoked, stdout, stderr)
	}
}

// uiSource is a source of /ui/state, as far as needs_auth goes.
type uiSource struct {
	Source    string
	NeedsAuth string `json:"needs_auth"`
}

// checkStore checks that the token store is private (0600) and holds no
// token in clear.
func checkStore(t *testing.T, o *oauthSetup) {
	t.Helper()
	fi, err := os.Stat(o.store)
	if err != nil {
		t.Fatalf("the token store: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("the token store's mode is %v, want 0600", fi.Mode().Perm())
	}
	b, _ := os.ReadFile(o.store)
	_, _, issued := o.as.counts()
	if len(issued) == 0 {
		t.Fatal("the authorization server issued no token")
	}
	for _, tok := range issued {
		if strings.Contains(string(b), tok) {
			t.Errorf("the token store holds a token in clear")
		}
	}
}

// callText calls tool with no arguments through c and returns its text
// and whether the result is an error.
func callOAuthTool(t *testing.T, c *client.Client, tool string) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return err.Error(), true
	}
	var b strings.Builder
	for _, ct := range res.Content {
		if tc, ok := ct.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}
