package config

import (
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/internal/httpheader"
)

// Defaults and limits of the auth section.
const (
	defaultPrincipalSessions = 100
	defaultPrincipalClaim    = "sub"
	maxRatePerSecond         = 1e6
)

// Auth configures inbound authentication: who may use the HTTP endpoints,
// as which principal, with which tools and at what rate. Without it (no
// tokens and no oauth), HTTP requests have no principal, every tool is
// open to every client, and `toolgate serve` refuses to listen beyond
// loopback unless started with --insecure-no-auth. stdio is never
// authenticated: the process that launched toolgate is the principal
// "stdio", with every tool.
//
// A request presenting a bearer token is checked against the static tokens
// first, then, when oauth is set, as a JWT.
type Auth struct {
	// Tokens are static bearer tokens, each naming its principal.
	// Default none.
	Tokens []AuthToken `yaml:"tokens"`
	// OAuth makes toolgate an OAuth 2.1 resource server, as the MCP
	// authorization spec describes: it accepts JWT access tokens of one
	// issuer. Default none.
	OAuth *OAuth `yaml:"oauth"`
	// MaxSessions caps the MCP sessions one principal may hold open at
	// once; past it that principal's new sessions get 503 with Retry-After
	// and everyone else is unaffected; server.max_sessions still caps
	// everyone's together. Default 100 (0 in a Config built in Go means
	// the default).
	MaxSessions int `yaml:"max_sessions"`
	// Admins names the principals (static token names, or OAuth principal
	// claims) that may read /metrics and /readyz, which name every tool,
	// upstream and backend, and every principal's calls at /events and
	// /ui. Everyone else gets 403 there and sees only its own calls.
	// Default none.
	Admins []string `yaml:"admins"`
	// MaxInstances caps the stateful tool instances (the state of its
	// session and named threads) one principal may hold; past it, the
	// principal's own least recently used instance is evicted. 0 gives
	// each principal an equal share of threads.max_instances. Either way
	// an instance of another principal is never evicted while that
	// principal holds no more than its cap. Default 0.
	MaxInstances int `yaml:"max_instances"`
	// RateScope is where the principals' rate limits are counted: replica
	// (each replica on its own) or cluster (all together, in
	// cluster.redis). Default replica.
	RateScope RateScope `yaml:"rate_scope"`
}

// SessionCap is MaxSessions, or its default when 0.
func (a *Auth) SessionCap() int {
	if a.MaxSessions == 0 {
		return defaultPrincipalSessions
	}
	return a.MaxSessions
}

// Enabled reports whether any authentication is configured.
func (a *Auth) Enabled() bool { return len(a.Tokens) > 0 || a.OAuth != nil }

// Grant is what a principal may call, and how often: the allow, deny,
// rate and burst keys of a token or of the oauth section.
type Grant struct {
	// Allow lists globs ([path.Match] syntax) of the tool names the
	// principal may see and call. Deny lists globs it may not; deny wins
	// over allow.
	Allow, Deny []string
	// Rate is a token bucket over the principal's tool calls, written
	// N/s, N/m or N/h (20/s, 600/m); a call over it fails with class
	// rate_limited and the wait in _meta. "" sets no limit.
	Rate string
	// Burst is how many calls may be made at once before the rate applies.
	// 0: one second's worth of Rate, at least 1.
	Burst int
}

// AuthToken is one static bearer token.
type AuthToken struct {
	// Name is the principal the token authenticates: in logs, metrics,
	// events and hooks. Required; unique among the tokens.
	Name string `yaml:"name"`
	// Token is the secret the client sends as Authorization: Bearer
	// <token>. Write it as ${NAME} so it stays out of the file. Required;
	// at least 16 characters; unique.
	Token string `yaml:"token"`
	// Allow lists globs of the tool names the principal may see and call
	// (see [Grant]). Default every tool ("*").
	Allow []string `yaml:"allow"`
	// Deny lists globs of tool names it may not; deny wins. Default none.
	Deny []string `yaml:"deny"`
	// Rate limits the principal's tool calls, written N/s, N/m or N/h.
	// Default none.
	Rate string `yaml:"rate"`
	// Burst is the token bucket's size. Default one second's worth of
	// Rate, at least 1.
	Burst int `yaml:"burst"`
}

// Grant returns the token's allow, deny, rate and burst.
func (t AuthToken) Grant() Grant { return Grant{t.Allow, t.Deny, t.Rate, t.Burst} }

// OAuth configures JWT access tokens from one authorization server.
type OAuth struct {
	// Issuer is the authorization server's issuer URL; its OIDC discovery
	// document names the JWKS whose keys sign the tokens. Tokens must carry
	// it as iss. Required.
	Issuer string `yaml:"issuer"`
	// Audience is this toolgate's resource identifier (its MCP URL, as a
	// rule); tokens must carry it in aud. Required.
	Audience string `yaml:"audience"`
	// PrincipalClaim names the claim that identifies the principal.
	// Default sub.
	PrincipalClaim string `yaml:"principal_claim"`
	// Scopes lists the scopes toolgate's protected resource metadata
	// advertises (RFC 9728 scopes_supported). Default none.
	Scopes []string `yaml:"scopes"`
	// Allow and Deny apply to every principal with a valid token, before
	// Permissions add to them. Default none: tools come from Permissions.
	Allow []string `yaml:"allow"`
	Deny  []string `yaml:"deny"`
	// Rate and Burst limit each principal's tool calls, as for a token;
	// every principal has its own bucket. Default none.
	Rate  string `yaml:"rate"`
	Burst int    `yaml:"burst"`
	// Permissions add tools by claim: each applies to a token whose claims
	// match all of its When entries.
	Permissions []OAuthPermission `yaml:"permissions"`
}

// Grant returns the oauth section's own allow, deny, rate and burst.
func (o *OAuth) Grant() Grant { return Grant{o.Allow, o.Deny, o.Rate, o.Burst} }

// OAuthPermission grants tools to tokens whose claims match When.
type OAuthPermission struct {
	// When maps claim names to a value the claim must hold: equal to a
	// string claim, an element of an array claim, or, for scope and scp,
	// one of the space-separated scopes. Required: at least one entry.
	When map[string]string `yaml:"when"`
	// Allow and Deny as in [Grant]; the principal's allow and deny lists
	// are the union of every matching permission's and the oauth
	// section's own.
	Allow []string `yaml:"allow"`
	Deny  []string `yaml:"deny"`
}

// ParseRate parses a rate written N/s, N/m or N/h into calls per second.
func ParseRate(s string) (float64, error) {
	num, unit, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return 0, fmt.Errorf("must be calls per unit, like 20/s, 600/m or 1000/h")
	}
	n, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || n <= 0 || math.IsInf(n, 0) {
		return 0, fmt.Errorf("must start with a positive number of calls, like 20/s")
	}
	var per float64
	switch strings.TrimSpace(unit) {
	case "s":
		per = 1
	case "m":
		per = 60
	case "h":
		per = 3600
	default:
		return 0, fmt.Errorf("must end in /s, /m or /h, like 20/s")
	}
	r := n / per
	if r > maxRatePerSecond {
		return 0, fmt.Errorf("must be at most %g calls per second", float64(maxRatePerSecond))
	}
	return r, nil
}

// Limit returns g's rate in calls per second and its burst; 0, 0 when g
// sets no rate. Call it on a validated config.
func (g Grant) Limit() (perSecond float64, burst int) {
	if g.Rate == "" {
		return 0, 0
	}
	r, err := ParseRate(g.Rate)
	if err != nil {
		return 0, 0
	}
	if burst = g.Burst; burst <= 0 {
		burst = max(int(math.Ceil(r)), 1)
	}
	return r, burst
}

// minTokenLen is the shortest static token accepted.
const minTokenLen = 16

// completeAuth fills the defaults of the auth section that depend on what
// was written.
func completeAuth(cfg *Config) {
	a := &cfg.Auth
	for i := range a.Tokens {
		if a.Tokens[i].Allow == nil {
			a.Tokens[i].Allow = []string{"*"}
		}
	}
	if a.OAuth != nil && a.OAuth.PrincipalClaim == "" {
		a.OAuth.PrincipalClaim = defaultPrincipalClaim
	}
}

// auth checks the auth section.
func (c *checker) auth(cfg *Config) {
	a := cfg.Auth
	if a.MaxSessions < 0 {
		c.fail("auth.max_sessions", strconv.Itoa(a.MaxSessions), "must be at least 1, like 100")
	}
	if a.MaxInstances < 0 || cfg.Threads.MaxInstances > 0 && a.MaxInstances > cfg.Threads.MaxInstances {
		c.fail("auth.max_instances", strconv.Itoa(a.MaxInstances), "must be between 0 (an equal share) and threads.max_instances (%d)", cfg.Threads.MaxInstances)
	}
	names := map[string]int{}
	tokens := map[string]int{}
	for i, t := range a.Tokens {
		p := fmt.Sprintf("auth.tokens[%d]", i)
		switch {
		case t.Name == "":
			c.fail(p+".name", "", "is required: the principal this token authenticates, like desktop")
		case t.Name == StdioPrincipal:
			c.fail(p+".name", quoteShort(t.Name), "is reserved for the process that runs toolgate stdio; pick another name")
		case !validPrincipal(t.Name):
			c.fail(p+".name", quoteShort(t.Name), "must be 1 to 128 printable characters without spaces")
		default:
			if j, dup := names[t.Name]; dup {
				c.fail(p+".name", quoteShort(t.Name), "is already the name of auth.tokens[%d]; each token names its own principal", j)
			} else {
				names[t.Name] = i
			}
		}
		switch {
		case t.Token == "":
			c.fail(p+".token", "", "is required; write it as ${ENV_VAR} so the secret stays out of the file")
		case len(t.Token) < minTokenLen:
			// Never shown: it is a secret.
			c.fail(p+".token", "", "is %d characters long; use at least %d random characters (openssl rand -hex 32)", len(t.Token), minTokenLen)
		case !httpheader.Token68(t.Token):
			c.fail(p+".token", "", "may hold only letters, digits and - . _ ~ + / (then = padding), as a bearer token does (RFC 6750); openssl rand -hex 32 makes one")
		default:
			if j, dup := tokens[t.Token]; dup {
				c.fail(p+".token", "", "is the same as auth.tokens[%d].token; give every principal its own token", j)
			} else {
				tokens[t.Token] = i
			}
		}
		c.grant(p, t.Grant())
	}
	if o := a.OAuth; o != nil {
		c.oauth(o)
	}
	for i, n := range a.Admins {
		p := fmt.Sprintf("auth.admins[%d]", i)
		_, isToken := names[n]
		switch {
		case !validPrincipal(n):
			c.fail(p, quoteShort(n), "must name a principal: 1 to 128 printable characters without spaces")
		case !isToken && a.OAuth == nil:
			c.fail(p, quoteShort(n), "names no token in auth.tokens; write a token's name (or the principal claim of an OAuth token, with auth.oauth set)")
		}
	}
}

// StdioPrincipal is the principal of every call made over stdio.
const StdioPrincipal = "stdio"

// validPrincipal reports whether s can name a principal.
func validPrincipal(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, r := range s {
		if r <= ' ' || r == 0x7f {
			return false
		}
	}
	return true
}

func (c *checker) oauth(o *OAuth) {
	const p = "auth.oauth"
	if u, err := url.Parse(o.Issuer); o.Issuer == "" || err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		c.fail(p+".issuer", quoteShort(o.Issuer), "must be the authorization server's issuer URL, like https://idp.example.com")
	} else if u.Scheme == "http" && !IsLoopbackHost(u.Hostname()) {
		c.fail(p+".issuer", quoteShort(o.Issuer), "must use https (http only for a loopback issuer in tests)")
	}
	if o.Audience == "" {
		c.fail(p+".audience", "", "is required: this toolgate's resource identifier, like https://toolgate.example.com/mcp")
	}
	if o.PrincipalClaim == "" {
		c.fail(p+".principal_claim", "", "must name a claim, like sub")
	}
	c.grant(p, o.Grant())
	for i, pm := range o.Permissions {
		pp := fmt.Sprintf("%s.permissions[%d]", p, i)
		if len(pm.When) == 0 {
			c.fail(pp+".when", "", "must name at least one claim and its value, like { scope: tools:read }")
		}
		c.globs(pp+".allow", pm.Allow)
		c.globs(pp+".deny", pm.Deny)
	}
}

// grant checks the allow, deny, rate and burst of the section at p.
func (c *checker) grant(p string, g Grant) {
	c.globs(p+".allow", g.Allow)
	c.globs(p+".deny", g.Deny)
	if g.Rate != "" {
		if _, err := ParseRate(g.Rate); err != nil {
			c.fail(p+".rate", quoteShort(g.Rate), "%v", err)
		}
	} else if g.Burst != 0 {
		c.fail(p+".burst", strconv.Itoa(g.Burst), "applies only with a rate; set rate too, like rate: 20/s")
	}
	if g.Burst < 0 {
		c.fail(p+".burst", strconv.Itoa(g.Burst), "must be at least 1")
	}
}

// globs checks a list of tool-name globs.
func (c *checker) globs(p string, gs []string) {
	for i, g := range gs {
		if g == "" {
			c.fail(fmt.Sprintf("%s[%d]", p, i), "", "is empty; write a tool name or a glob, like fs__read_*")
			continue
		}
		if _, err := path.Match(g, ""); err != nil {
			c.fail(fmt.Sprintf("%s[%d]", p, i), quoteShort(g), "is not a valid glob (* ? [a-z] and \\ escapes)")
		}
	}
}

// IsLoopbackHost reports whether host (a name or an IP, without a port or
// brackets) is localhost or a loopback address. It is the one definition of
// loopback the listen guard, the DNS rebinding rule and this check share.
func IsLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
