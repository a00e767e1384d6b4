package mcpup

import (
	"context"
	"sync"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/internal/oauthclient"
	"github.com/toolgate/toolgate/internal/principal"
	"github.com/toolgate/toolgate/retry"
)

// principalConn is one principal's own session with a per-principal
// upstream ([oauthclient.Config.PerPrincipal]): its requests carry that
// principal's token, never another's. It is opened on the principal's
// first call and opened again on the call after it died; it lives until
// the Manager closes.
type principalConn struct {
	u    *upstream
	name string
	via  *httpVia
	life context.Context // the Manager's, cancelled by close
	stop context.CancelFunc

	dialMu sync.Mutex // held while dialling: one dial at a time

	mu      sync.Mutex // guards c, inbound and closed
	c       *conn
	inbound string // the principal's latest inbound OAuth token, for token exchange
	closed  bool
}

// principalConn returns the principal's session holder, making it on
// first use.
func (u *upstream) principalConn(name string) *principalConn {
	u.principalsMu.Lock()
	defer u.principalsMu.Unlock()
	pc := u.principals[name]
	if pc == nil {
		life, stop := context.WithCancel(u.m.ctx)
		pc = &principalConn{u: u, name: name, life: life, stop: stop}
		pc.via = u.newVia(&oauthclient.Transport{Base: u.httpTransport, Client: u.oauth, Principal: pc.principal})
		u.principals[name] = pc
	}
	return pc
}

// principal names the principal whose token the session's requests
// carry, and its inbound token, which token exchange exchanges.
func (pc *principalConn) principal(context.Context) (name, inbound string) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.name, pc.inbound
}

// executeAsPrincipal runs the call on the calling principal's own session
// of u. A call without a principal is refused: no token is anyone's.
func (m *Manager) executeAsPrincipal(ctx context.Context, u *upstream, orig string, call executors.Call) (executors.Result, error) {
	id := principal.From(ctx)
	if id == nil || id.Name == "" {
		return executors.Result{}, retry.Errorf(retry.Permission, "upstream %q keeps a token per principal (oauth.per_principal) and this call has no authenticated principal; call through toolgate's authenticated endpoint", u.cfg.Name)
	}
	if u.oauth.ExchangesInbound() && id.Token == "" {
		return executors.Result{}, retry.Errorf(retry.Permission, "upstream %q exchanges each principal's own OAuth access token (token_exchange, per_principal), and principal %q authenticated with a static token; call with an OAuth access token of auth.oauth's issuer", u.cfg.Name, id.Name)
	}
	c, err := u.principalConn(id.Name).conn(ctx, id.Token)
	if err != nil {
		if ctx.Err() != nil {
			return executors.Result{}, ctxError(u.cfg.Name, orig, ctx.Err())
		}
		return executors.Result{}, err
	}
	return c.call(ctx, orig, call)
}

// conn returns the principal's live session, opening it (within ctx and
// the startup timeout) when there is none or it died. inbound, when not
// empty, replaces the inbound token remembered for token exchange.
func (pc *principalConn) conn(ctx context.Context, inbound string) (*conn, error) {
	pc.mu.Lock()
	if inbound != "" {
		pc.inbound = inbound
	}
	c := pc.c
	pc.mu.Unlock()
	if c != nil && !c.isDead() {
		return c, nil
	}
	pc.dialMu.Lock()
	defer pc.dialMu.Unlock()
	pc.mu.Lock()
	c, closed := pc.c, pc.closed
	pc.mu.Unlock()
	switch {
	case closed:
		return nil, retry.Errorf(retry.Unavailable, "upstream %q is shut down", pc.u.cfg.Name)
	case c != nil && !c.isDead():
		return c, nil // opened by another call meanwhile
	case c != nil:
		c.close()
	}
	c, err := pc.u.dialVia(pc.life, ctx, "", pc.via)
	if err != nil {
		return nil, err
	}
	pc.mu.Lock()
	if pc.closed {
		pc.mu.Unlock()
		c.close()
		return nil, retry.Errorf(retry.Unavailable, "upstream %q is shut down", pc.u.cfg.Name)
	}
	pc.c = c
	pc.mu.Unlock()
	pc.u.m.logger.Info("upstream session of a principal opened", "upstream", pc.u.cfg.Name, "principal", pc.name)
	return c, nil
}

// close ends the principal's session; later calls are refused.
func (pc *principalConn) close() {
	pc.mu.Lock()
	c := pc.c
	pc.c, pc.closed = nil, true
	pc.mu.Unlock()
	pc.stop()
	if c != nil {
		c.close()
	}
}

// closePrincipals ends every principal's session of u.
func (u *upstream) closePrincipals() {
	u.principalsMu.Lock()
	pcs := make([]*principalConn, 0, len(u.principals))
	for _, pc := range u.principals {
		pcs = append(pcs, pc)
	}
	u.principalsMu.Unlock()
	for _, pc := range pcs {
		pc.close()
	}
}

// dialLister opens the session that lists a per-principal upstream's
// tools: with the gateway's own token when it has one (`toolgate auth
// login NAME`, or token_exchange.subject_token), else with the first
// principal, by name, that has a stored token. It is used for nothing
// else: no call goes through it.
func (u *upstream) dialLister(lifetime context.Context) (*conn, error) {
	names, err := u.oauth.Principals()
	if err != nil {
		return nil, u.errorf(retry.Unavailable, err, "listing upstream %q's tools: %v", u.cfg.Name, err)
	}
	// The gateway's own token first ("": none needed for token exchange
	// with a subject_token, or one from `toolgate auth login NAME`).
	names = append([]string{""}, names...)
	var last error
	for _, name := range names {
		via := u.newVia(&oauthclient.Transport{Base: u.httpTransport, Client: u.oauth, Principal: func(context.Context) (string, string) { return name, "" }})
		c, err := u.dialVia(lifetime, lifetime, "", via)
		if err == nil {
			return c, nil
		}
		last = err
		if lifetime.Err() != nil {
			break
		}
	}
	if e, ok := last.(*retry.Error); ok && e.Class == retry.NeedsAuth && len(names) == 1 {
		return nil, u.errorf(retry.NeedsAuth, last, "upstream %q keeps a token per principal; to list its tools toolgate needs a token of its own "+
			"(run `%s`, or set token_exchange.subject_token) or one principal's (the same command with --principal NAME)", u.cfg.Name, u.oauth.LoginCommand())
	}
	return nil, last
}
