package tests

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

// whoami is an MCP server (mcp-go, over streamable HTTP or SSE) behind
// bearer authentication by as: its tool whoami answers with the user
// whose token the request carried and the MCP session it came in, and it
// records which users each session's requests were made as.
type whoami struct {
	url string

	mu       sync.Mutex
	sessions map[string]map[string]bool // MCP session → users seen in it
}

type userKey struct{}

func newWhoami(t *testing.T, as *testAS, transport string) *whoami {
	t.Helper()
	w := &whoami{sessions: map[string]map[string]bool{}}
	s := mcpserver.NewMCPServer("whoami", "1", mcpserver.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("whoami", mcp.WithDescription("says whose token called it")),
		func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			user, _ := ctx.Value(userKey{}).(string)
			return mcp.NewToolResultText(fmt.Sprintf("user=%s session=%s", user, mcpserver.ClientSessionFromContext(ctx).SessionID())), nil
		})
	withUser := func(ctx context.Context, r *http.Request) context.Context {
		return context.WithValue(ctx, userKey{}, r.Header.Get("X-Test-User"))
	}
	var (
		h    http.Handler
		path string
		stop func(context.Context) error
	)
	switch transport {
	case "sse":
		sse := mcpserver.NewSSEServer(s, mcpserver.WithSSEContextFunc(withUser))
		h, path, stop = sse, "/sse", sse.Shutdown
	default:
		sh := mcpserver.NewStreamableHTTPServer(s, mcpserver.WithHTTPContextFunc(withUser))
		h, path, stop = sh, "/mcp", sh.Shutdown
	}
	var srv *httptest.Server
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-protected-resource"+path, func(rw http.ResponseWriter, _ *http.Request) {
		answerJSON(rw, http.StatusOK, map[string]any{"resource": srv.URL + path, "authorization_servers": []string{as.srv.URL}})
	})
	mux.HandleFunc("/", func(rw http.ResponseWriter, r *http.Request) {
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		user, ok := as.user(tok)
		if !ok {
			rw.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer error="invalid_token", resource_metadata="%s/.well-known/oauth-protected-resource%s"`, srv.URL, path))
			http.Error(rw, "invalid token", http.StatusUnauthorized)
			return
		}
		session := r.Header.Get("Mcp-Session-Id")
		if session == "" {
			session = r.URL.Query().Get("sessionId") // SSE's messages
		}
		if session != "" {
			w.mu.Lock()
			if w.sessions[session] == nil {
				w.sessions[session] = map[string]bool{}
			}
			w.sessions[session][user] = true
			w.mu.Unlock()
		}
		r.Header.Set("X-Test-User", user)
		h.ServeHTTP(rw, r)
	})
	srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), stopTimeout)
		defer cancel()
		_ = stop(ctx)
		srv.Close()
	})
	w.url = srv.URL + path
	return w
}

// newTokenStoreSetup starts an authorization server and makes a token
// store's key file, with no upstream (the test brings its own).
func newTokenStoreSetup(t *testing.T) *oauthSetup {
	t.Helper()
	dir := t.TempDir()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	keyFile := filepath.Join(dir, "token.key")
	if err := os.WriteFile(keyFile, []byte(base64.StdEncoding.EncodeToString(key)), 0o600); err != nil {
		t.Fatal(err)
	}
	return &oauthSetup{as: newTestAS(t), store: filepath.Join(dir, "tokens.json"), keyFile: keyFile, browser: buildTestdata(t, "conformanceclient") + " browse"}
}

// checkSessions fails t if any upstream session's requests were made
// with the tokens of more than one user.
func (w *whoami) checkSessions(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for s, users := range w.sessions {
		if len(users) > 1 {
			t.Errorf("upstream session %s was used with the tokens of %v", s, users)
		}
	}
}

var loginLink = regexp.MustCompile(`http://127\.0\.0\.1:\d+/authorize\?\S+`)

// wantUser checks that the call answered for user.
func wantUser(t *testing.T, c *client.Client, tool, user string) {
	t.Helper()
	text, isErr := callOAuthTool(t, c, tool)
	if isErr || !strings.HasPrefix(text, "user="+user+" ") {
		t.Fatalf("%s as %s = %q (error %v), want user=%s", tool, user, text, isErr, user)
	}
}

// wantLink checks that the call failed with class needs_auth and a login
// link, and returns the link.
func wantLink(t *testing.T, c *client.Client, tool, who string) string {
	t.Helper()
	text, isErr := callOAuthTool(t, c, tool)
	link := loginLink.FindString(text)
	if !isErr || !strings.HasPrefix(text, "needs_auth: ") || link == "" || !strings.Contains(text, "then call again") {
		t.Fatalf("%s as %s without a token = %q (error %v), want needs_auth with a login link", tool, who, text, isErr)
	}
	return link
}

// follow plays the principal's browser: it opens link, follows the
// authorization server's redirect to toolgate's callback, and returns
// toolgate's answer.
func follow(t *testing.T, link string) (int, string) {
	t.Helper()
	resp, err := newHTTPClient().Get(link)
	if err != nil {
		t.Fatalf("following the login link: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestOAuthUpstreamPerPrincipal runs a per-principal upstream end to end,
// over streamable HTTP and over SSE: each principal gets a login link
// from its first call, authorizes through toolgate's callback, and calls
// with its own token over its own upstream session; the other principal
// gets a link until it authorizes, never the first one's token; each
// refreshes its own token; logging one out leaves the other. The
// gateway's own token (auth login without --principal) lists the tools
// and is never used for a call.
func TestOAuthUpstreamPerPrincipal(t *testing.T) {
	for _, transport := range []string{"streamable-http", "sse"} {
		t.Run(transport, func(t *testing.T) { testPerPrincipal(t, transport) })
	}
}

func testPerPrincipal(t *testing.T, transport string) {
	o := newTokenStoreSetup(t)
	up := newWhoami(t, o.as, transport)
	addr := freeAddr(t)
	yaml := fmt.Sprintf(`auth:
  tokens:
    - {name: alice, token: alice-token-0123456789abcdef}
    - {name: bob, token: bob-token-0123456789abcdef01}
upstreams:
  - name: notes
    transport: %s
    url: %q
    startup_timeout: 10s
    oauth:
      per_principal: true
      callback_url: http://%s/oauth/callback
token_store:
  path: %q
  key_file: %q
guards:
  loop: {action: "off"}
`, transport, up.url, addr, o.store, o.keyFile)
	cfg := writeConfig(t, yaml)
	if stdout, stderr, code := o.toolgate(t, "auth", "login", "notes", "--config", cfg); code != 0 {
		t.Fatalf("auth login (the gateway's token, for the tool list): exit %d\n%s\n%s", code, stdout, stderr)
	}
	srv := startServeAt(t, yaml, addr, listenTimeout)
	alice, err := authClient(t, srv, "alice-token-0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	bob, err := authClient(t, srv, "bob-token-0123456789abcdef01")
	if err != nil {
		t.Fatal(err)
	}
	waitTools(t, alice, "notes__whoami")

	aliceLink := wantLink(t, alice, "notes__whoami", "alice")
	bobLink := wantLink(t, bob, "notes__whoami", "bob")
	if aliceLink == bobLink {
		t.Fatal("alice and bob got the same login link")
	}
	o.as.mu.Lock()
	o.as.nextUser = "alice"
	o.as.mu.Unlock()
	if code, body := follow(t, aliceLink); code != http.StatusOK || !strings.Contains(body, "authorized for principal alice") {
		t.Fatalf("alice's login: HTTP %d %s", code, body)
	}
	wantUser(t, alice, "notes__whoami", "alice")
	if again := wantLink(t, bob, "notes__whoami", "bob"); again != bobLink {
		t.Errorf("bob's second link %s differs from his pending one", again)
	}
	if code, body := follow(t, aliceLink); code != http.StatusBadRequest || !strings.Contains(body, "unknown, used or expired") {
		t.Errorf("alice's link used a second time: HTTP %d %s, want it refused", code, body)
	}
	o.as.mu.Lock()
	o.as.nextUser = "bob"
	o.as.mu.Unlock()
	if code, body := follow(t, bobLink); code != http.StatusOK || !strings.Contains(body, "authorized for principal bob") {
		t.Fatalf("bob's login: HTTP %d %s", code, body)
	}
	wantUser(t, bob, "notes__whoami", "bob")
	wantUser(t, alice, "notes__whoami", "alice")

	// Expiry at the server: each principal refreshes its own token.
	before, _, _ := o.as.counts()
	o.as.expireAccess()
	wantUser(t, alice, "notes__whoami", "alice")
	wantUser(t, bob, "notes__whoami", "bob")
	if after, _, _ := o.as.counts(); after-before != 2 {
		t.Errorf("%d refresh requests after the expiry, want 2 (one per principal)", after-before)
	}

	// Bob logs out: his tokens are revoked; alice's stay.
	if stdout, stderr, code := o.toolgate(t, "auth", "logout", "notes", "--principal", "bob", "--config", cfg); code != 0 || !strings.Contains(stdout, "revoked") {
		t.Fatalf("auth logout --principal bob: exit %d\n%s\n%s", code, stdout, stderr)
	}
	wantLink(t, bob, "notes__whoami", "bob")
	wantUser(t, alice, "notes__whoami", "alice")

	up.checkSessions(t)
	_, _, issued := o.as.counts()
	for _, tok := range issued {
		if strings.Contains(srv.Stderr(), tok) {
			t.Error("an upstream token appears in serve's log")
		}
	}
}

// TestOAuthUpstreamPerPrincipalTokenExchange runs per-principal token
// exchange end to end over an SSE upstream: each principal's own inbound
// OAuth access token (toolgate's auth.oauth) is exchanged (RFC 8693) for
// its upstream token, over its own upstream session; a principal of a
// static token has nothing to exchange and is refused, never given the
// gateway's token (subject_token, which only lists the tools).
func TestOAuthUpstreamPerPrincipalTokenExchange(t *testing.T) {
	o := newTokenStoreSetup(t)
	up := newWhoami(t, o.as, "sse")
	is := newIssuer(t)
	const aud = "https://gw.example/mcp"
	o.as.exchangeable("gateway-subject-token-0123456789", "gateway")
	carolTok := is.token(t, aud, "carol", time.Hour, nil)
	daveTok := is.token(t, aud, "dave", time.Hour, nil)
	o.as.exchangeable(carolTok, "carol")
	o.as.exchangeable(daveTok, "dave")
	srv := startServe(t, fmt.Sprintf(`auth:
  tokens:
    - {name: alice, token: alice-token-0123456789abcdef}
  oauth:
    issuer: %s
    audience: %s
    allow: ["*"]
upstreams:
  - name: tx
    transport: sse
    url: %q
    startup_timeout: 10s
    oauth:
      grant: token_exchange
      per_principal: true
      token_exchange:
        subject_token: gateway-subject-token-0123456789
token_store:
  path: %q
  key_file: %q
guards:
  loop: {action: "off"}
`, is.srv.URL, aud, up.url, o.store, o.keyFile))
	carol, err := authClient(t, srv, carolTok)
	if err != nil {
		t.Fatal(err)
	}
	dave, err := authClient(t, srv, daveTok)
	if err != nil {
		t.Fatal(err)
	}
	alice, err := authClient(t, srv, "alice-token-0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	waitTools(t, carol, "tx__whoami")
	wantUser(t, carol, "tx__whoami", "carol")
	wantUser(t, dave, "tx__whoami", "dave")
	text, isErr := callOAuthTool(t, alice, "tx__whoami")
	if !isErr || !strings.HasPrefix(text, "permission: ") || !strings.Contains(text, "static token") {
		t.Errorf("tx__whoami as alice (a static token) = %q (error %v), want a permission error", text, isErr)
	}
	// Expiry at the server: carol refreshes her own token.
	o.as.expireAccess()
	wantUser(t, carol, "tx__whoami", "carol")
	wantUser(t, dave, "tx__whoami", "dave")
	up.checkSessions(t)
	o.as.mu.Lock()
	exchanges := o.as.exchanges
	o.as.mu.Unlock()
	if exchanges != 3 { // the gateway's (tool list), carol's and dave's
		t.Errorf("%d token exchanges, want 3", exchanges)
	}
	if strings.Contains(srv.Stderr(), carolTok) {
		t.Error("carol's inbound token appears in serve's log")
	}
}
