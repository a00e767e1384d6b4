package mcpfront

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/gateway/internal/forward"
	"github.com/toolgate/toolgate/internal/principal"
)

// A front in a cluster: its session IDs and requestStates name their
// replica, and a request naming another replica's goes there
// (Options.Peers), one hop; when it cannot, the client is told to start
// over, as the spec says for a session that is gone.
// The forward functions here run only in a cluster (Options.Peers not
// nil): a lone toolgate's request skips them with one check.

// sessionOwner is the replica a session ID names: "" for a lone toolgate's
// (or one no toolgate issued).
func sessionOwner(sid string) string {
	rest, ok := strings.CutPrefix(sid, sessionIDPrefix)
	if !ok {
		return ""
	}
	owner, _, ok := strings.Cut(rest, ".")
	if !ok {
		return ""
	}
	return owner
}

// forwardSession forwards a request in a session another replica of the
// cluster (f.o.Peers, not nil) owns to that replica, and reports whether
// it did. A session whose replica cannot be reached is gone: 404, and the
// client initializes again (anywhere).
func (f *Front) forwardSession(w http.ResponseWriter, r *http.Request, sid string) bool {
	if sid == "" {
		return false
	}
	owner := sessionOwner(sid)
	if owner == "" || f.o.Replica.Owns(owner) {
		return false
	}
	return f.o.Peers.Forward(w, r, nil, owner, func(w http.ResponseWriter, _ *http.Request) { writeUnknownSession(w) })
}

// forwardRetry forwards a 2026-07-28 retry (a tools/call or prompts/get
// with a requestState) to the replica holding the call it continues, and
// reports whether it did. Only a requestState sealed for the caller by a
// replica of the cluster names an owner; anything else is served here,
// which refuses it. A retry whose replica cannot be reached gets -32602:
// call the tool again.
func (f *Front) forwardRetry(w http.ResponseWriter, r *http.Request, m *message) bool {
	if m.id == nil {
		return false
	}
	var state string
	switch {
	case m.call != nil:
		state = m.call.RequestState
	case m.method == string(mcp.MethodPromptsGet):
		var p mcp.MultiRoundTripParams
		_ = json.Unmarshal(m.params, &p) // what does not decode has no state
		state = p.RequestState
	}
	if state == "" {
		return false
	}
	owner, err := f.mrtr.Owner(principal.NameOf(principal.From(r.Context())), state)
	if err != nil || f.o.Replica.Owns(owner) {
		return false
	}
	id := m.id
	return f.o.Peers.Forward(w, r, m.raw, owner, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusBadRequest, rpcError(id, mcp.INVALID_PARAMS,
			"requestState was issued by replica "+owner+", which did not answer: its call is lost; call the tool again without inputResponses and requestState", nil))
	})
}

// forwardThread forwards a 2026-07-28 tools/call naming a thread in _meta
// (threadctx.MetaKey) to the replica owning that thread of the caller
// (forward.Owner over the replicas live), and reports whether it did. A
// thread's instances live on one replica, so every call naming it goes
// there, whichever replica the balancer chose. When the owner cannot be
// reached the call runs here, in this replica's instance of the thread.
func (f *Front) forwardThread(w http.ResponseWriter, r *http.Request, m *message, info *server.RequestProtocolInfo) bool {
	if m.call == nil || m.id == nil {
		return false
	}
	name := m.call.Meta.Thread()
	if name == "" {
		return false
	}
	key := principal.NameOf(principal.From(r.Context())) + "\x00" + name
	owner := forward.Owner(key, f.o.Peers.Live())
	if owner == "" || f.o.Replica.Owns(owner) {
		return false
	}
	return f.o.Peers.Forward(w, r, m.raw, owner, f.hereInstead(m, info))
}

// handleHeader is the header a 2026-07-28 client sends a thread handle in
// (the handle argument's x-mcp-header, in a cluster).
const handleHeader = mcp.HeaderParamPrefix + "Toolgate-Thread"

// forwardHandle forwards a 2026-07-28 tools/call passing a thread handle
// (in its header, else its "thread" argument) that another replica of the
// cluster minted for the caller to that replica, and reports whether it
// did. A handle no replica minted for the caller is served here, which
// refuses it. When the owner cannot be reached the call runs here: the
// gateway then runs it in a new thread and tells the model its state is
// lost.
func (f *Front) forwardHandle(w http.ResponseWriter, r *http.Request, m *message, info *server.RequestProtocolInfo) bool {
	if f.o.HandleOwner == nil || m.call == nil || m.id == nil {
		return false
	}
	handle := r.Header.Get(handleHeader)
	if handle == "" && bytes.Contains(m.call.Arguments, []byte(`"thread"`)) {
		var args struct {
			Thread string `json:"thread"`
		}
		_ = json.Unmarshal(m.call.Arguments, &args) // what does not decode names no handle
		handle = args.Thread
	}
	if handle == "" {
		return false
	}
	owner, ok := f.o.HandleOwner(principal.NameOf(principal.From(r.Context())), handle)
	if !ok || f.o.Replica.Owns(owner) {
		return false
	}
	return f.o.Peers.Forward(w, r, m.raw, owner, f.hereInstead(m, info))
}

// hereInstead serves m here when its owner cannot be reached: the
// fallback a forward of a 2026-07-28 call takes. It copies m, so that the
// caller's message stays on its stack when nothing is forwarded: a
// closure taking m itself would move every message to the heap, an
// allocation on every call of a lone toolgate too.
func (f *Front) hereInstead(m *message, info *server.RequestProtocolInfo) func(http.ResponseWriter, *http.Request) {
	mc := *m
	return func(w http.ResponseWriter, r *http.Request) { f.serveModernHere(w, r, &mc, info) }
}
