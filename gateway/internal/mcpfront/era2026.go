package mcpfront

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/internal/principal"
)

// Protocol revision 2026-07-28 over streamable HTTP (docs/protocol-2026.md).
//
// mcp-go serves both eras on one endpoint and decides per request: a
// request whose Mcp-Protocol-Version header or params._meta names
// 2026-07-28 (or later) is "modern" — no session, no initialize, its
// client's capabilities in its own _meta — and every other one is served
// in its legacy session. toolgate routes the same way, before its session
// checks (a modern request carries no Mcp-Session-Id, and one it carries
// is ignored, as the revision says), and makes on modern requests the
// checks its session paths make on legacy ones: the protocol version
// (-32022 with the versions served), and Mcp-Method and Mcp-Name, which
// must agree with the body before preflight may rewrite a repaired name.

// servedVersions are the protocol revisions toolgate serves over
// streamable HTTP, newest first: every revision mcp-go knows.
var servedVersions = slices.Clone(mcp.ValidProtocolVersions)

// servesVersion reports whether v is one of servedVersions.
func servesVersion(v string) bool { return slices.Contains(servedVersions, v) }

// unsupportedVersion is the revision's own answer to a request naming
// version v (in its header or its _meta), which toolgate does not serve:
// -32022 with the versions it does serve, in a JSON-RPC error body with the
// request's id (null when unreadable). HTTP status 400, as the revision
// maps the code. It is the answer for legacy requests too: mcp-go would
// answer those in plain text ("Unsupported protocol version"), and a
// client must be able to read the list whatever it speaks.
func writeUnsupportedVersion(w http.ResponseWriter, id json.RawMessage, v string) {
	e := mcp.UnsupportedProtocolVersionError{Version: v, Supported: servedVersions}.JSONRPCError()
	writeJSON(w, http.StatusBadRequest, rpcError(id, e.Error.Code, e.Error.Message, e.Error.Data))
}

// versionRefused checks the Mcp-Protocol-Version header of any request
// (an unknown or malformed value) and reports whether it wrote the
// refusal. id is the request's id, or nil.
func versionRefused(w http.ResponseWriter, r *http.Request, id json.RawMessage) bool {
	vs := r.Header.Values(mcp.HeaderProtocolVersion)
	if len(vs) == 0 {
		return false
	}
	if len(vs) > 1 {
		writeJSON(w, http.StatusBadRequest, rpcError(id, mcp.HEADER_MISMATCH,
			fmt.Sprintf("%s sent %d times: send it once", mcp.HeaderProtocolVersion, len(vs)), nil))
		return true
	}
	if !servesVersion(vs[0]) {
		writeUnsupportedVersion(w, id, vs[0])
		return true
	}
	return false
}

// isModern reports whether a POSTed message belongs to the 2026-07-28 era
// as mcp-go decides it (detectRequestEra): its header or its _meta names
// such a version. The header is read first; the body is decoded only when
// it mentions the _meta key at all.
func isModern(r *http.Request, msg []byte) bool {
	if mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion)) {
		return true
	}
	if !bytes.Contains(msg, []byte(mcp.MetaKeyProtocolVersion)) {
		return false
	}
	var m struct {
		Params struct {
			Meta *mcp.Meta `json:"_meta"`
		} `json:"params"`
	}
	return json.Unmarshal(msg, &m) == nil && mcp.IsModernProtocol(m.Params.Meta.ProtocolVersion())
}

// serveModern serves one POSTed message of the 2026-07-28 era: no session
// is looked up, created or counted (Mcp-Session-Id is ignored), and the
// caller is who the request's own authentication says. Preflight answers
// unknown tools and repairs names as for legacy sessions; before it may
// rewrite a name, Mcp-Method and Mcp-Name must agree with what the body
// says (the check mcp-go would make against the rewritten body, which no
// longer matches the client's header), and the header is rewritten with
// the body. Everything else — the _meta checks, server/discover,
// subscriptions/listen, cache hints — is mcp-go's.
func (f *Front) serveModern(w http.ResponseWriter, r *http.Request, p *httpParts, b *body, msg, method []byte, id json.RawMessage) {
	if string(method) == string(mcp.MethodToolsCall) && isRequestID(id) {
		if reply := checkCallHeaders(r, msg, id); reply != nil {
			writeJSON(w, http.StatusBadRequest, reply)
			return
		}
		reply, fwd := f.preflight(msg, principal.From(r.Context()))
		if reply != nil {
			// -32602, which the revision maps to 400.
			writeJSON(w, http.StatusBadRequest, reply)
			return
		}
		if len(fwd) != len(msg) || !bytes.Equal(fwd, msg) {
			if _, name, _, ok := scanCall(fwd); ok {
				r.Header.Set(mcp.HeaderName, string(name))
			}
			msg = fwd
		}
	}
	replay(r, b, msg)
	p.streamable.ServeHTTP(w, r)
}

// checkCallHeaders checks the Mcp-Method and Mcp-Name headers of a
// tools/call against its body, as mcp-go would (mcp.ValidateStandardHeaders),
// and returns the -32020 error to answer, or nil when they agree. Only a
// request the scanner reads is checked here; mcp-go checks the others.
func checkCallHeaders(r *http.Request, msg []byte, id json.RawMessage) []byte {
	_, name, _, ok := scanCall(msg)
	if !ok || name == nil {
		return nil
	}
	var params struct {
		Params json.RawMessage `json:"params"`
	}
	hm := r.Header.Get(mcp.HeaderMethod)
	hn := r.Header.Get(mcp.HeaderName)
	if hm == string(mcp.MethodToolsCall) && hn == string(name) {
		return nil // the common case: no decoding
	}
	if json.Unmarshal(msg, &params) != nil {
		return nil
	}
	err := mcp.ValidateStandardHeaders(r.Header.Get, r.Header.Get(mcp.HeaderProtocolVersion), mcp.MethodToolsCall, params.Params)
	if err == nil {
		return nil
	}
	return rpcError(id, mcp.HEADER_MISMATCH, err.Error(), nil)
}

// writeModernStream answers a GET or DELETE of the 2026-07-28 era, which
// has neither: 405 with Allow: POST, as mcp-go answers, but with a
// JSON-RPC error body rather than its plain text.
func writeModernStream(w http.ResponseWriter, method string) {
	w.Header().Set("Allow", http.MethodPost)
	writeJSON(w, http.StatusMethodNotAllowed, jsonRPCError(mcp.INVALID_REQUEST,
		fmt.Sprintf("%s is not part of protocol version %s: POST requests, and subscriptions/listen for notifications",
			method, mcp.ProtocolVersion20260728)))
}
