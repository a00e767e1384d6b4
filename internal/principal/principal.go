// Package principal carries who makes a request, and what they may do,
// through a context: from the HTTP authentication that established it to
// the MCP front, the call pipeline and the thread pool. It has no
// dependencies, so every layer can read it.
package principal

import (
	"context"
	"time"
)

// Stdio is the principal of every call made over stdio: the process that
// launched toolgate.
const Stdio = "stdio"

// Policy is what a principal may do. A nil Policy permits everything.
type Policy interface {
	// Permits reports whether the principal may see and call tool.
	Permits(tool string) bool
	// Take takes one call from the principal's rate limit: 0 when the
	// call may run now, else how long until one could (nothing is taken
	// then).
	Take() time.Duration
}

// Identity is an authenticated principal.
type Identity struct {
	// Name identifies the principal in logs, metrics, events and hooks,
	// and owns sessions and thread instances.
	Name string
	// Policy is what it may do; nil permits everything.
	Policy Policy
	// Admin may read what names every tool and every principal's calls
	// (/metrics, /readyz, all of /events and /ui).
	Admin bool
	// Endpoint is the virtual server (config endpoints) the principal
	// came through, "" for the default endpoint; Policy then permits
	// only the endpoint's tools.
	Endpoint string
	// Token is the OAuth access token that authenticated the request, for
	// upstreams that exchange it (per-principal token exchange); "" for
	// static tokens and stdio. A secret: never log or show it.
	Token string
}

// Permits reports whether id may see and call tool; a nil id or Policy may.
func (id *Identity) Permits(tool string) bool {
	return id == nil || id.Policy == nil || id.Policy.Permits(tool)
}

// NameOf is id's name, or "" for nil.
func NameOf(id *Identity) string {
	if id == nil {
		return ""
	}
	return id.Name
}

type key struct{}

// With returns ctx carrying id.
func With(ctx context.Context, id *Identity) context.Context {
	return context.WithValue(ctx, key{}, id)
}

// From returns the identity ctx carries, or nil.
func From(ctx context.Context) *Identity {
	id, _ := ctx.Value(key{}).(*Identity)
	return id
}
