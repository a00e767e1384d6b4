package gateway

import (
	"context"

	"github.com/toolgate/toolgate/gateway/internal/threadname"
)

// CloseThread ends the thread named thread (the [ThreadMetaKey] value its
// calls carried) for the principal ctx names, as [Gateway.Call] scopes
// it: every stateful tool instance the thread holds is discarded, idle ones
// closed before CloseThread returns and ones in use when their call ends,
// so the thread's next call starts from fresh instances. An embedding host
// calls it when a conversation ends instead of waiting for the instances'
// idle timeout. Unknown threads, and names that could not name a thread,
// are ignored.
func (g *Gateway) CloseThread(ctx context.Context, thread string) {
	principal := ""
	if id := g.embedderIdentity(ctx); id != nil {
		principal = id.Name
	}
	if id, err := threadname.Named(map[string]any{ThreadMetaKey: thread}, principal); err == nil && id != "" {
		g.pool.CloseThread(id)
	}
}
