package auth

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/internal/principal"
)

const (
	desktopToken = "desk-0123456789abcdef"
	ciToken      = "ci.0123456789~abc+/de=="
)

// staticAuth is an authenticator with two static tokens: desktop (every
// tool but fs__write_*) and ci (fs__read_* and git__*, rate 2/s).
func staticAuth(t *testing.T) *Authenticator {
	t.Helper()
	a := New(&config.Auth{Tokens: []config.AuthToken{
		{Name: "desktop", Token: desktopToken, Allow: []string{"*"}, Deny: []string{"fs__write_*"}},
		{Name: "ci", Token: ciToken, Allow: []string{"fs__read_*", "git__*"}, Deny: []string{"git__push"}, Rate: "2/s", Burst: 2},
	}}, nil)
	if a == nil {
		t.Fatal("New returned nil for a config with tokens")
	}
	return a
}

// recorder is the handler behind Middleware: it answers 200 and keeps the
// identity of the last request it saw.
type recorder struct{ id *principal.Identity }

func (h *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.id = principal.From(r.Context())
	w.WriteHeader(http.StatusOK)
}

// serve sends one POST through a.Middleware with the given Authorization
// header values (none: no header).
func serve(t *testing.T, a *Authenticator, next http.Handler, authz ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "http://gw.example/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	for _, v := range authz {
		r.Header.Add("Authorization", v)
	}
	w := httptest.NewRecorder()
	a.Middleware(next).ServeHTTP(w, r)
	return w
}

// refusal is the JSON-RPC error body of a refused request.
type refusal struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// checkRefused checks that w is a refusal with status and challenge, whose
// body is a JSON-RPC error that repeats none of secrets, and returns the body.
func checkRefused(t *testing.T, w *httptest.ResponseRecorder, status int, challenge string, secrets ...string) string {
	t.Helper()
	if w.Code != status {
		t.Fatalf("status = %d, want %d; body %s", w.Code, status, w.Body)
	}
	if got := w.Header().Values("WWW-Authenticate"); challenge != "" && (len(got) != 1 || got[0] != challenge) {
		t.Errorf("WWW-Authenticate = %q, want %q", got, challenge)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	body := w.Body.String()
	var rf refusal
	if err := json.Unmarshal([]byte(body), &rf); err != nil {
		t.Fatalf("body %q is not JSON: %v", body, err)
	}
	if rf.JSONRPC != "2.0" || string(rf.ID) != "null" || rf.Error.Code != -32001 || rf.Error.Message == "" {
		t.Errorf("body = %s, want a JSON-RPC error with id null", body)
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(body, s) {
			t.Errorf("body %s repeats the presented token %q", body, s)
		}
	}
	return body
}

func TestNewWithoutAuth(t *testing.T) {
	a := New(&config.Auth{}, nil)
	if a != nil {
		t.Fatalf("New(no auth) = %v, want nil", a)
	}
	if id := a.Identity("desktop"); id != nil {
		t.Errorf("nil Authenticator: Identity = %+v, want nil", id)
	}
	w := httptest.NewRecorder()
	a.ServeMetadata(w, httptest.NewRequest(http.MethodGet, MetadataPath, nil))
	if w.Code != http.StatusNotFound {
		t.Errorf("nil Authenticator: ServeMetadata status = %d, want 404", w.Code)
	}
}

func TestStaticTokenAccepted(t *testing.T) {
	a := staticAuth(t)
	for _, tc := range []struct {
		header, name  string
		permit, block []string
	}{
		{"Bearer " + desktopToken, "desktop", []string{"fs__read_file", "git__push", "x"}, []string{"fs__write_file", "fs__write_"}},
		{"bearer " + desktopToken, "desktop", nil, nil}, // the scheme in any case
		{"BEARER   " + desktopToken, "desktop", nil, nil},
		{"Bearer " + ciToken, "ci", []string{"fs__read_file", "git__status"}, []string{"git__push", "fs__write_file", "fs__reader", "x"}},
	} {
		h := &recorder{}
		w := serve(t, a, h, tc.header)
		if w.Code != http.StatusOK {
			t.Errorf("%q: status %d, body %s", tc.header, w.Code, w.Body)
			continue
		}
		if h.id == nil || h.id.Name != tc.name || h.id.Policy == nil {
			t.Errorf("%q: identity %+v, want %s with a policy", tc.header, h.id, tc.name)
			continue
		}
		for _, tool := range tc.permit {
			if !h.id.Permits(tool) {
				t.Errorf("%s may not call %s", tc.name, tool)
			}
		}
		for _, tool := range tc.block {
			if h.id.Permits(tool) {
				t.Errorf("%s may call %s", tc.name, tool)
			}
		}
		if h.id != a.Identity(tc.name) {
			t.Errorf("%s: the request's identity is not Identity(%q)", tc.name, tc.name)
		}
	}
}

func TestStaticTokenRefused(t *testing.T) {
	a := staticAuth(t)
	const (
		absent  = `Bearer realm="toolgate"`
		invalid = `Bearer realm="toolgate", error="invalid_token"`
	)
	bodies := map[string]string{} // challenge → body: the same whatever was wrong
	for _, tc := range []struct {
		name      string
		headers   []string
		challenge string // "": only the realm is checked
	}{
		{"no header", nil, absent},
		{"empty header", []string{""}, absent},
		{"scheme only", []string{"Bearer"}, absent},
		{"scheme and space", []string{"Bearer "}, absent},
		{"basic", []string{"Basic ZGVza3RvcDpkZXNr"}, absent},
		{"basic with the token", []string{"Basic " + desktopToken}, absent},
		{"token without scheme", []string{desktopToken}, absent},
		{"two headers", []string{"Bearer " + desktopToken, "Bearer " + desktopToken}, absent},
		{"two headers, one wrong", []string{"Bearer " + desktopToken, "Bearer nope"}, absent},
		{"illegal characters", []string{"Bearer desk-0123456789abcdef!"}, ""},
		{"inner padding", []string{"Bearer desk=0123456789abcdef"}, ""},
		{"comma", []string{"Bearer " + desktopToken + ", Basic x"}, ""},
		{"token with a space", []string{"Bearer desk 0123456789abcdef"}, ""},
		{"wrong token", []string{"Bearer desk-0123456789abcdeF"}, invalid},
		{"prefix of a token", []string{"Bearer desk-0123456789abcde"}, invalid},
		{"token with more", []string{"Bearer " + desktopToken + "0"}, invalid},
		{"three parts, no oauth", []string{"Bearer a.b.c"}, invalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &recorder{}
			w := serve(t, a, h, tc.headers...)
			var secrets []string
			for _, v := range tc.headers {
				if _, tok, ok := strings.Cut(v, " "); ok {
					secrets = append(secrets, strings.TrimSpace(tok))
				}
			}
			body := checkRefused(t, w, http.StatusUnauthorized, tc.challenge, secrets...)
			if h.id != nil {
				t.Errorf("the next handler ran as %q", h.id.Name)
			}
			if c := w.Header().Get("WWW-Authenticate"); !strings.HasPrefix(c, `Bearer realm="toolgate"`) {
				t.Errorf("WWW-Authenticate = %q", c)
			}
			if tc.challenge != "" {
				if b, ok := bodies[tc.challenge]; ok && b != body {
					t.Errorf("body %s differs from another refusal's %s: it says which check failed", body, b)
				}
				bodies[tc.challenge] = body
			}
		})
	}
}

func TestRate(t *testing.T) {
	a := staticAuth(t)
	p := a.Identity("ci").Policy
	for i := range 2 {
		if d := p.Take(); d != 0 {
			t.Fatalf("Take #%d = %v, want 0 (burst 2)", i+1, d)
		}
	}
	// A refused Take takes nothing: the wait stays about half a second
	// (rate 2/s) however often it is asked.
	for i := range 3 {
		if d := p.Take(); d <= 0 || d > 500*time.Millisecond {
			t.Fatalf("Take #%d past the burst = %v, want a wait in (0, 500ms]", i+3, d)
		}
	}
	// The bucket is the principal's: a request with its token finds it empty.
	h := &recorder{}
	if w := serve(t, a, h, "Bearer "+ciToken); w.Code != http.StatusOK {
		t.Fatalf("status %d", w.Code)
	}
	if d := h.id.Policy.Take(); d <= 0 {
		t.Errorf("Take through the token = %v, want a wait", d)
	}
	// Unlimited principals never wait.
	p = a.Identity("desktop").Policy
	for range 100 {
		if d := p.Take(); d != 0 {
			t.Fatalf("desktop (no rate) Take = %v", d)
		}
	}
}

func TestIdentity(t *testing.T) {
	a := staticAuth(t)
	id := a.Identity("desktop")
	if id == nil || id.Name != "desktop" || !id.Permits("fs__read_file") || id.Permits("fs__write_file") {
		t.Errorf("Identity(desktop) = %+v", id)
	}
	for _, name := range []string{"nobody", "", "stdio", "Desktop"} {
		id := a.Identity(name)
		if id == nil || id.Name != name || id.Policy == nil {
			t.Errorf("Identity(%q) = %+v, want a policy permitting nothing", name, id)
			continue
		}
		for _, tool := range []string{"fs__read_file", "x", ""} {
			if id.Permits(tool) {
				t.Errorf("Identity(%q) permits %q with OAuth off", name, tool)
			}
		}
		if d := id.Policy.Take(); d != 0 {
			t.Errorf("Identity(%q).Take = %v", name, d)
		}
	}
}

func TestPermits(t *testing.T) {
	for _, tc := range []struct {
		allow, deny []string
		tool        string
		want        bool
	}{
		{nil, nil, "x", false},
		{[]string{"*"}, nil, "anything", true},
		{[]string{"*"}, []string{"*"}, "anything", false},
		{[]string{"fs__*"}, []string{"fs__write_*"}, "fs__read", true},
		{[]string{"fs__*"}, []string{"fs__write_*"}, "fs__write_file", false},
		{[]string{"fs__write_file"}, []string{"fs__write_*"}, "fs__write_file", false}, // deny wins over an exact allow
		{[]string{"fs__?"}, nil, "fs__ab", false},
		{[]string{"fs__[a-c]*"}, nil, "fs__bz", true},
		{[]string{"fs__[^a-c]*"}, nil, "fs__bz", false},
		{[]string{"fs__[!a-c]*"}, nil, "fs__bz", true}, // path.Match negates with ^; ! is a member
		{[]string{`fs__\*`}, nil, "fs__*", true},
		{[]string{`fs__\*`}, nil, "fs__x", false},
		{[]string{"FS__*"}, nil, "fs__x", false},     // case matters
		{[]string{"[", "fs__*"}, nil, "fs__x", true}, // a malformed glob matches nothing
		{[]string{"*"}, []string{"["}, "x", true},    // config refuses it; here it denies nothing
		{[]string{"a", "b", "c*"}, []string{"cd"}, "ce", true},
	} {
		p := newPolicy(tc.allow, tc.deny, nil)
		if got := p.Permits(tc.tool); got != tc.want {
			t.Errorf("allow %q deny %q: Permits(%q) = %v, want %v", tc.allow, tc.deny, tc.tool, got, tc.want)
		}
	}
}

func TestParseBearer(t *testing.T) {
	long := strings.Repeat("a", maxTokenLen)
	for _, tc := range []struct {
		in     []string
		want   string
		wantOK bool
	}{
		{[]string{"Bearer abc"}, "abc", true},
		{[]string{"bearer abc"}, "abc", true},
		{[]string{"bEaReR abc"}, "abc", true},
		{[]string{"Bearer   abc"}, "abc", true},
		{[]string{"Bearer a-b.c_d~e+f/g"}, "a-b.c_d~e+f/g", true},
		{[]string{"Bearer abc=="}, "abc==", true},
		{[]string{"Bearer eyJ.eyJ.sig"}, "eyJ.eyJ.sig", true},
		{[]string{"Bearer " + long}, long, true},
		{[]string{"Bearer " + long + "a"}, "", false},
		{nil, "", false},
		{[]string{}, "", false},
		{[]string{""}, "", false},
		{[]string{"Bearer"}, "", false},
		{[]string{"Bearer "}, "", false},
		{[]string{"Bearer    "}, "", false},
		{[]string{"Bearer\tabc"}, "", false},
		{[]string{"Bearerabc"}, "", false},
		{[]string{"Bearer: abc"}, "", false},
		{[]string{"Basic abc"}, "", false},
		{[]string{"Bearer abc def"}, "", false},
		{[]string{"Bearer abc "}, "", false},
		{[]string{"Bearer abc\t"}, "", false},
		{[]string{"Bearer a=b"}, "", false},
		{[]string{"Bearer a=="}, "a==", true},
		{[]string{"Bearer ="}, "", false}, // token68 needs a character before the padding
		{[]string{"Bearer ==="}, "", false},
		{[]string{"Bearer a,b"}, "", false},
		{[]string{"Bearer a\"b"}, "", false},
		{[]string{"Bearer a\x00b"}, "", false},
		{[]string{"Bearer ab\u00e9"}, "", false},
		{[]string{"Bearer abc", "Bearer abc"}, "", false},
		{[]string{"Bearer abc", ""}, "", false},
	} {
		got, ok := ParseBearer(tc.in)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("ParseBearer(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.wantOK)
		}
	}
}

// BenchmarkParseBearerPadding parses the worst token the length bound
// lets in: one character and then padding.
func BenchmarkParseBearerPadding(b *testing.B) {
	v := []string{"Bearer a" + strings.Repeat("=", maxTokenLen-1)}
	for b.Loop() {
		if _, ok := ParseBearer(v); !ok {
			b.Fatal("refused")
		}
	}
}

func TestMetadataURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://gw.example/mcp":        "https://gw.example/.well-known/oauth-protected-resource/mcp",
		"https://gw.example/mcp/":       "https://gw.example/.well-known/oauth-protected-resource/mcp",
		"https://gw.example":            "https://gw.example/.well-known/oauth-protected-resource",
		"https://gw.example/":           "https://gw.example/.well-known/oauth-protected-resource",
		"https://gw.example:8443/a/mcp": "https://gw.example:8443/.well-known/oauth-protected-resource/a/mcp",
		"http://127.0.0.1:8080/mcp?x=1": "http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp",
		"not a url":                     MetadataPath,
	} {
		if got := metadataURL(in); got != want {
			t.Errorf("metadataURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestLimitersEviction: past max principals, the buckets of principals
// idle long enough to have refilled are dropped, never a drained one (that
// would hand its principal a full bucket).
func TestLimitersEviction(t *testing.T) {
	g := config.Grant{Rate: "1/h", Burst: 1}
	l := limiters{max: 2}
	a := l.get("a", g)
	b := l.get("b", g)
	if l.get("a", g) != a || l.get("b", g) != b {
		t.Fatal("a principal's bucket is not kept")
	}
	newPolicy(nil, nil, a).Take() // a is drained, b is full
	c := l.get("c", g)
	if l.get("a", g) != a {
		t.Error("the drained bucket of a was dropped")
	}
	if l.get("c", g) != c {
		t.Error("c's bucket was not kept in b's place")
	}
	if d := newPolicy(nil, nil, l.get("a", g)).Take(); d <= 0 {
		t.Errorf("a's bucket refilled: Take = %v", d)
	}
	if r, _ := (config.Grant{}).Limit(); r != 0 || l.get("d", config.Grant{}) != nil {
		t.Error("a grant without rate has a limiter")
	}
}

func TestNewDefaultClient(t *testing.T) {
	a := New(&config.Auth{OAuth: &config.OAuth{Issuer: "https://idp.example", Audience: "https://gw.example/mcp", PrincipalClaim: "sub"}}, nil)
	if a == nil || a.oauth == nil || a.oauth.client == nil || a.oauth.client.Timeout != 10*time.Second {
		t.Fatalf("New with OAuth and no client: %+v", a)
	}
	if a.oauth.metadataURL != "https://gw.example/.well-known/oauth-protected-resource/mcp" {
		t.Errorf("metadataURL = %q", a.oauth.metadataURL)
	}
}

// TestRateConcurrentRefusals: a refused Take takes nothing, also when
// many are refused at once (the calls of one toolgate_batch): the wait
// never grows past what the rate says.
func TestRateConcurrentRefusals(t *testing.T) {
	a := staticAuth(t)
	p := a.Identity("ci").Policy // 2/s, burst 2
	p.Take()
	p.Take()
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			<-start
			for range 50 {
				if d := p.Take(); d <= 0 || d > 500*time.Millisecond {
					t.Errorf("Take = %v, want a wait in (0, 500ms]", d)
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if d := p.Take(); d <= 0 || d > 500*time.Millisecond {
		t.Errorf("after concurrent refusals: Take = %v, want a wait in (0, 500ms]", d)
	}
}

// fakeBucket records what it was built for and refuses every call.
type fakeBucket struct {
	principal string
	perSecond float64
	burst     int
}

func (f *fakeBucket) Take() time.Duration { return time.Minute }
func (f *fakeBucket) Idle() bool          { return false }

// Options.Bucket builds the rate limit of every principal with a rate,
// static and OAuth alike (auth.rate_scope: cluster), and of none without.
func TestBucketOption(t *testing.T) {
	var built []*fakeBucket
	a := New(&config.Auth{
		Tokens: []config.AuthToken{
			{Name: "ci", Token: ciToken, Allow: []string{"*"}, Rate: "2/s", Burst: 3},
			{Name: "desktop", Token: desktopToken, Allow: []string{"*"}},
		},
		OAuth: &config.OAuth{Issuer: "https://idp.example", Audience: "https://gw.example/mcp", PrincipalClaim: "sub", Rate: "1/m"},
	}, &Options{Bucket: func(principal string, perSecond float64, burst int) Bucket {
		b := &fakeBucket{principal, perSecond, burst}
		built = append(built, b)
		return b
	}})
	if d := a.Identity("ci").Policy.Take(); d != time.Minute {
		t.Errorf("ci's Take = %v, want the built bucket's minute", d)
	}
	if d := a.Identity("desktop").Policy.Take(); d != 0 {
		t.Errorf("desktop (no rate) Take = %v, want 0", d)
	}
	if d := a.Identity("carol").Policy.Take(); d != time.Minute {
		t.Errorf("OAuth principal carol's Take = %v, want the built bucket's minute", d)
	}
	want := []fakeBucket{{"ci", 2, 3}, {"carol", 1.0 / 60, 1}}
	if len(built) != len(want) {
		t.Fatalf("built %d buckets, want %d (%v)", len(built), len(want), want)
	}
	for i, b := range built {
		if *b != want[i] {
			t.Errorf("bucket %d built for %+v, want %+v", i, *b, want[i])
		}
	}
}
