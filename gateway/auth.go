package gateway

import (
	"context"
	"net/http"
	"time"

	"github.com/toolgate/toolgate/internal/auth"
	"github.com/toolgate/toolgate/internal/principal"
	"github.com/toolgate/toolgate/retry"
)

// WithPrincipal returns ctx naming the principal that [Gateway.Call] calls
// as. With authentication configured, the call then has that principal's
// permissions and rate limit: a static token's by its name, or, for any
// other name with OAuth on, the oauth section's own allow and deny; a name
// that is neither may call nothing. Without authentication the principal
// is only recorded (logs, events, hooks). A call from a context without a
// principal is the embedding program's own, with every tool.
func WithPrincipal(ctx context.Context, name string) context.Context {
	return principal.With(ctx, &principal.Identity{Name: name})
}

// embedderIdentity is the identity a call from [Gateway.Call] runs as:
// the principal ctx names, with its policy when authentication is on.
func (g *Gateway) embedderIdentity(ctx context.Context) *principal.Identity {
	id := principal.From(ctx)
	if id == nil || id.Policy != nil || g.auth == nil {
		return id
	}
	return g.authn().Identity(id.Name)
}

// authn is the authenticator in force: the one New built, until a reload
// replaces it with one for the new tokens (apply.go). Nil without
// authentication; a reload cannot switch authentication on or off.
func (g *Gateway) authn() *auth.Authenticator {
	if a := g.authLive.Load(); a != nil {
		return a
	}
	return g.auth
}

// authenticate is the authentication middleware of every authenticated
// route: each request is checked by the authenticator in force when it
// arrives, so that a token a reload removed is refused at once.
func (g *Gateway) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.authn().Middleware(next).ServeHTTP(w, r)
	})
}

// permit applies the principal's permissions and rate limit (auth): a tool
// it may not use is refused with class permission, naming only that tool;
// a call over its rate with class rate_limited and the wait in _meta. The
// identity goes into ctx for the thread pool, which keeps each principal's
// instances under its own cap. Calls without a principal pass untouched.
func (g *Gateway) permit(next Handler) Handler {
	return func(ctx context.Context, c *Call) (*Result, error) {
		id := c.ident
		if id == nil || id.Policy == nil {
			if id != nil {
				ctx = principal.With(ctx, id)
			}
			return next(ctx, c)
		}
		if !id.Policy.Permits(c.Tool.Name) {
			return errorResult(retry.Errorf(retry.Permission,
				"tool %q is not permitted for principal %q; ask the operator to allow it (auth allow/deny)", c.Tool.Name, id.Name)), nil
		}
		if res := overRate(id); res != nil {
			return res, nil
		}
		if principal.From(ctx) != id {
			ctx = principal.With(ctx, id)
		}
		return next(ctx, c)
	}
}

// adminOnly refuses h, with authentication on, to principals not in
// auth.admins: what it shows names every tool, upstream and backend.
func (g *Gateway) adminOnly(h http.Handler) http.Handler {
	if g.auth == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := principal.From(r.Context()); id == nil || !id.Admin {
			http.Error(w, "forbidden: this endpoint names every tool and backend; it is open to the principals in auth.admins", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// overRate takes one call from id's rate limit and returns the result of
// a call over it: class rate_limited, with the wait in _meta. nil when
// the call may run (or id has no policy).
func overRate(id *principal.Identity) *Result {
	if id == nil || id.Policy == nil {
		return nil
	}
	wait := id.Policy.Take()
	if wait <= 0 {
		return nil
	}
	err := retry.Errorf(retry.RateLimited, "principal %q is over its rate limit (auth rate); call again in %s", id.Name, wait.Round(time.Millisecond))
	err.RetryAfter = wait
	return errorResult(err)
}
