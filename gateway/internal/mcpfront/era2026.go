package mcpfront

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

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
		if f.retryRefused(w, r, string(mcp.MethodToolsCall), msg, id) {
			return
		}
		if _, name, _, ok := scanCall(msg); ok && f.serveModernCall(w, r, p, msg, name, id) {
			return
		}
	}
	if string(method) == string(mcp.MethodPromptsGet) && isRequestID(id) && f.retryRefused(w, r, string(mcp.MethodPromptsGet), msg, id) {
		return
	}
	replay(r, b, msg)
	serveRequest(p.streamable, w, r, method, isRequestID(id))
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

// The 2026-07-28 tools/call fast path.
//
// mcp-go's modern POST path costs about twice its legacy one per call
// (docs/benchmarks.md, "Both protocol eras"): it decodes the body's _meta
// four times (detectRequestEra, extractRequestProtocolInfo, extractMeta,
// the request itself), re-encodes the tool's input schema on every call to
// look for x-mcp-header annotations (mcp.ExtractParamHeaderBindings),
// builds a streamable session with its channels and starts a forwarder
// goroutine for each request (docs/mcp-go-upstream.md). For the common
// tools/call — one that can produce no notification: no progressToken, no
// logLevel, not task-augmented or a multi-round-trip retry, a tool without
// x-mcp-header parameters — the front decodes the request once, makes the
// same checks and calls the tool's mcp-go handler itself, then answers as mcp-go would (resultType and serverInfo in the
// result, TestModernCallMatchesMCPGo). Every other modern request goes to
// mcp-go.

// modernCall is what the fast path reads of a tools/call: everything, in
// one decoding; _meta's members stay raw, and only those the call's
// handler can use are decoded.
type modernCall struct {
	JSONRPC string          `json:"jsonrpc"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
	Params  struct {
		callMembers
		InputResponses json.RawMessage `json:"inputResponses"`
		RequestState   json.RawMessage `json:"requestState"`
	} `json:"params"`
}

// modernSession is the session of a fast-path call: nothing is ever sent
// on it (the call asked for no notification), and what is, is dropped.
type modernSession struct{ ch chan mcp.JSONRPCNotification }

func (s *modernSession) SessionID() string { return "" }
func (s *modernSession) NotificationChannel() chan<- mcp.JSONRPCNotification {
	return s.ch
}
func (s *modernSession) Initialize()       {}
func (s *modernSession) Initialized() bool { return true }

// serveModernCall serves a 2026-07-28 tools/call on the fast path and
// reports whether it did; false leaves the request, untouched, to mcp-go.
func (f *Front) serveModernCall(w http.ResponseWriter, r *http.Request, p *httpParts, msg, name []byte, id json.RawMessage) bool {
	if r.Header.Get(mcp.HeaderLastEventID) != "" || name == nil {
		return false
	}
	var m modernCall
	if json.Unmarshal(msg, &m) != nil || m.Params.Name != string(name) ||
		m.JSONRPC != mcp.JSONRPC_VERSION || m.Result != nil || m.Error != nil {
		return false // mcp-go answers, or refuses, what is not a plain tools/call
	}
	_, id, ok := replyID(id)
	if !ok {
		return false
	}
	mp := m.Params
	var version string
	caps := mp.Meta[mcp.MetaKeyClientCapabilities]
	if json.Unmarshal(mp.Meta[mcp.MetaKeyProtocolVersion], &version) != nil || version != r.Header.Get(mcp.HeaderProtocolVersion) ||
		mp.Meta["progressToken"] != nil || mp.Meta[mcp.MetaKeyLogLevel] != nil || len(caps) == 0 || caps[0] != '{' ||
		mp.Task != nil || mp.InputResponses != nil || mp.RequestState != nil {
		return false
	}
	tool := f.mcp.GetTool(mp.Name)
	if tool == nil || bytes.Contains(tool.Tool.RawInputSchema, []byte("x-mcp-header")) {
		return false
	}
	info := &server.RequestProtocolInfo{Modern: true, ProtocolVersion: version, ClientCapabilities: &mcp.ClientCapabilities{}}
	if json.Unmarshal(caps, info.ClientCapabilities) != nil {
		return false
	}
	if ci := mp.Meta[mcp.MetaKeyClientInfo]; ci != nil {
		info.ClientInfo = &mcp.Implementation{}
		if json.Unmarshal(ci, info.ClientInfo) != nil {
			return false
		}
	}
	// The handler reads _meta's other members (toolgate/thread); the
	// protocol's own are in info.
	req, ok := toolCallRequest(mp.Name, mp.Arguments, mp.Meta, true)
	if !ok {
		return false
	}
	if p.postRefused(w, r, "a request") {
		return true
	}
	req.Header = r.Header
	ctx := f.mcp.WithContext(r.Context(), &modernSession{ch: make(chan mcp.JSONRPCNotification, 1)})
	ctx = server.WithRequestProtocolInfo(ctx, info)
	res, err := tool.Handler(ctx, req)
	if err == nil && res != nil {
		if res.GetResultType() == "" {
			res.SetResultType(mcp.ResultTypeComplete)
		}
		if meta := res.EnsureResultMeta(); meta.ServerInfo() == nil {
			meta.SetServerInfo(mcp.Implementation{Name: f.o.Name, Version: f.o.Version})
		}
	}
	writeJSON(w, http.StatusOK, append(callReply(id, res, err), '\n'))
	return true
}
