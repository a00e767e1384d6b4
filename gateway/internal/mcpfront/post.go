package mcpfront

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/gateway/internal/eventstream"
	"github.com/toolgate/toolgate/internal/principal"
)

// The streamable HTTP endpoint's POST: one handler for every message of
// both protocol eras. It reads the body under the cap and decodes it once;
// a legacy message is served in the session its Mcp-Session-Id names
// (looked up once), a 2026-07-28 one with no session at all; a tools/call
// runs through the front's own call path (call.go), any other method
// through mcp-go's dispatcher; the answer, and what the request causes
// before it, go out on the request's own response (package eventstream).

// servedVersions are the protocol revisions toolgate serves over
// streamable HTTP, newest first: every revision mcp-go knows.
var servedVersions = slices.Clone(mcp.ValidProtocolVersions)

// servePost serves one POST to the MCP path; sid is its Mcp-Session-Id.
func (f *Front) servePost(w http.ResponseWriter, r *http.Request, p *httpParts, sid string) {
	if !isJSONContent(r) {
		writeJSON(w, http.StatusBadRequest, jsonRPCError(mcp.INVALID_REQUEST,
			"a message must be sent with Content-Type: application/json"))
		return
	}
	b := p.readBody(w, r)
	if b == nil {
		return
	}
	defer p.bodies.Release(b)
	body := b.Bytes()
	if isBatch(body) {
		if !versionRefused(w, r, nil) {
			f.serveHTTPBatch(w, r, sid, body)
		}
		return
	}
	m, reject := decodeMessage(body)
	if versionRefused(w, r, m.id) {
		return
	}
	if reject != nil {
		writeJSON(w, http.StatusBadRequest, reject)
		return
	}
	if mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion)) || m.modern() {
		// 2026-07-28: no session, whatever Mcp-Session-Id says.
		f.serveModern(w, r, &m)
		return
	}
	switch {
	case m.method == string(mcp.MethodInitialize):
		f.serveInitialize(w, r, &m)
		return
	case sid == "" && m.method == string(mcp.MethodServerDiscover):
		// The discovery probe of a client that speaks 2026-07-28 without
		// its _meta: mcp-go answers it for a legacy request ("method not
		// found"), in a session of its own.
		x := f.exchange(r, requestSession(principal.From(r.Context())), nil)
		f.serveRequest(w, x, &m, legacyStatus)
		return
	}
	s := f.ownSession(w, r, sid)
	if s == nil {
		return
	}
	if !s.Begin() {
		writeUnknownSession(w) // expiring just now
		return
	}
	defer s.Finish()
	x := f.exchange(r, s, nil)
	switch {
	case m.response:
		f.serveResponse(w, s, &m)
	case m.notification():
		f.serveNotification(w, x, &m)
	default:
		f.serveRequest(w, x, &m, legacyStatus)
	}
}

// exchange is the exchange of a message POSTed in session s (or a
// 2026-07-28 request's, with info): the caller is who the request's
// authentication says, else who opened the session.
func (f *Front) exchange(r *http.Request, s *session, info *server.RequestProtocolInfo) *exchange {
	x := &exchange{ident: s.identity(r.Context()), info: info, header: r.Header}
	ctx := f.mcp.WithContext(r.Context(), s.mcpSession())
	if info != nil {
		ctx = server.WithRequestProtocolInfo(server.WithSupportedProtocolVersions(ctx, servedVersions), info)
	} else {
		x.s = s
	}
	x.ctx = ctx
	return x
}

// serveRequest answers request m on its own response: status maps the
// answer's JSON-RPC error code to the HTTP status.
func (f *Front) serveRequest(w http.ResponseWriter, x *exchange, m *message, status func(code int) int) {
	st := eventstream.NewReply(w)
	x.stream, x.ctx = st, eventstream.With(x.ctx, st)
	a := f.traced(x, m)
	if st == nil {
		eventstream.Answer(w, status(a.code), a.body)
		return
	}
	st.Finish(status(a.code), a.body)
}

// serveNotification handles notification m, and answers 202 with no body,
// as the transport spec says; one mcp-go refuses gets its JSON-RPC error
// with 400, as the spec asks for input the server cannot accept.
func (f *Front) serveNotification(w http.ResponseWriter, x *exchange, m *message) {
	if a := f.handle(x, m); a.body != nil {
		writeJSON(w, http.StatusBadRequest, a.body)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// serveResponse takes the client's answer m to a request of the front's
// (ask.go). An answer to anything else (a ping toolgate never sent) is
// accepted and dropped.
func (f *Front) serveResponse(w http.ResponseWriter, s *session, m *message) {
	switch _, ours := askIDKey(m.id); {
	case m.id != nil && s.answer(m.id, m.raw), !ours:
		w.WriteHeader(http.StatusAccepted)
	default:
		writeJSON(w, http.StatusBadRequest, jsonRPCError(mcp.INVALID_REQUEST,
			"no request of this session waits for an answer with id "+string(m.id)+": it was answered already, or the request that asked has ended"))
	}
}

// legacyStatus is the HTTP status of every legacy answer: 200, the
// JSON-RPC error in the body.
func legacyStatus(int) int { return http.StatusOK }

// serveInitialize makes a session for initialize m, within a slot of
// server.max_sessions: mcp-go's dispatcher answers it in the new session,
// which is then registered (its thread begins: Backend.SessionStarted) and
// its ID sent back in Mcp-Session-Id.
func (f *Front) serveInitialize(w http.ResponseWriter, r *http.Request, m *message) {
	if m.id == nil {
		writeJSON(w, http.StatusBadRequest, jsonRPCError(mcp.INVALID_REQUEST, "initialize is a request: give it an id"))
		return
	}
	ctx, sl, ok := f.reserve(w, r.Context())
	if !ok {
		return
	}
	defer sl.Release()
	s := newSession(principal.From(ctx), f.o.Replica.ID)
	resp := f.mcp.HandleMessage(f.mcp.WithContext(ctx, s), m.raw)
	body, err := json.Marshal(resp)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, rpcError(m.id, mcp.INTERNAL_ERROR, "encoding the initialize result failed", nil))
		return
	}
	var res struct {
		Result *struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	if json.Unmarshal(body, &res) != nil || res.Result == nil {
		writeJSON(w, http.StatusOK, body) // mcp-go's error: no session
		return
	}
	v := res.Result.ProtocolVersion
	s.version.Store(&v)
	if err := f.mcp.RegisterSession(ctx, s); err != nil {
		writeJSON(w, http.StatusInternalServerError, rpcError(m.id, mcp.INTERNAL_ERROR, "registering the session failed: "+err.Error(), nil))
		return
	}
	w.Header().Set(server.HeaderKeySessionID, s.id)
	writeJSON(w, http.StatusOK, append(body, '\n'))
}

// ownSession returns the live streamable HTTP session sid names, when r's
// principal owns it; else nil, having answered 400 (no Mcp-Session-Id) or
// 404 (none, another transport's, or another principal's: as if it did
// not exist).
func (f *Front) ownSession(w http.ResponseWriter, r *http.Request, sid string) *session {
	if sid == "" {
		writeMissingSession(w)
		return nil
	}
	s := f.liveClient(sid)
	if !s.own() || !s.ownedBy(r) {
		writeUnknownSession(w)
		return nil
	}
	return s
}

// writeMissingSession answers a message sent without a session that needs
// one (400: the transport spec asks for it when the header is missing).
func writeMissingSession(w http.ResponseWriter) {
	writeJSON(w, http.StatusBadRequest, jsonRPCError(mcp.INVALID_REQUEST,
		"missing Mcp-Session-Id header: send initialize first and repeat the session ID it returns on every request"))
}

// writeUnknownSession answers a request in a session the front does not
// have (404): the client must initialize again.
func writeUnknownSession(w http.ResponseWriter) {
	writeJSON(w, http.StatusNotFound, jsonRPCError(mcp.INVALID_REQUEST,
		"unknown or expired Mcp-Session-Id: send initialize again for a new session"))
}

// writeLongSessionID answers a request whose Mcp-Session-Id is longer than
// any session's.
func writeLongSessionID(w http.ResponseWriter) {
	writeJSON(w, http.StatusBadRequest, jsonRPCError(mcp.INVALID_REQUEST,
		fmt.Sprintf("Mcp-Session-Id longer than %d bytes: repeat the session ID initialize returned", maxSessionIDLen)))
}

// Protocol revision 2026-07-28 (docs/protocol-2026.md): a request whose
// Mcp-Protocol-Version header or params._meta names 2026-07-28 (or later)
// has no session and no initialize; its client's capabilities come in its
// own _meta.

// serveModern serves one message of the 2026-07-28 era.
func (f *Front) serveModern(w http.ResponseWriter, r *http.Request, m *message) {
	info, reject := modernInfo(r, m)
	if reject.body != nil {
		writeJSON(w, modernStatus(reject.code), reject.body)
		return
	}
	if f.o.Peers != nil && (f.forwardRetry(w, r, m) || f.forwardHandle(w, r, m, info) || f.forwardThread(w, r, m, info)) {
		return
	}
	f.serveModernHere(w, r, m, info)
}

// serveModernHere serves a 2026-07-28 message m, whose headers were
// checked (info), on this replica.
func (f *Front) serveModernHere(w http.ResponseWriter, r *http.Request, m *message, info *server.RequestProtocolInfo) {
	s := requestSession(principal.From(r.Context()))
	x := f.exchange(r, s, info)
	switch {
	case m.response:
		writeJSON(w, http.StatusBadRequest, rpcError(m.id, mcp.INVALID_REQUEST, fmt.Sprintf(
			"client-to-server responses are not supported in protocol version %s: server-initiated requests were replaced by multi round-trip requests (input_required results)",
			mcp.ProtocolVersion20260728), nil))
	case m.notification():
		f.serveNotification(w, x, m)
	case m.method == string(mcp.MethodSubscriptionsListen):
		f.serveListen(w, x, s, m)
	case m.method == string(mcp.MethodPromptsGet) && f.retryRefused(w, x, m):
	default:
		f.serveRequest(w, x, m, modernStatus)
	}
}

// modernInfo checks a 2026-07-28 message as the revision asks of a POST
// (no Last-Event-ID; the version in both the header and _meta, the same
// and served; the client's capabilities in _meta; Mcp-Method and Mcp-Name
// agreeing with the body: standardHeaders) and returns its protocol
// information, or the error answering it.
func modernInfo(r *http.Request, m *message) (*server.RequestProtocolInfo, answer) {
	hv, mv := r.Header.Get(mcp.HeaderProtocolVersion), m.meta.Version()
	switch {
	case r.Header.Get(mcp.HeaderLastEventID) != "":
		return nil, errorAnswer(m.id, mcp.HEADER_MISMATCH, fmt.Sprintf(
			"Last-Event-ID is not supported in protocol version %s: streams are not resumable; send the request again with a new id", mcp.ProtocolVersion20260728), nil)
	case hv == "":
		return nil, errorAnswer(m.id, mcp.HEADER_MISMATCH, mcp.HeaderProtocolVersion+" header is required for requests carrying "+mcp.MetaKeyProtocolVersion, nil)
	case mv == "":
		return nil, errorAnswer(m.id, mcp.INVALID_PARAMS, "missing or invalid _meta field "+mcp.MetaKeyProtocolVersion, nil)
	case hv != mv:
		return nil, errorAnswer(m.id, mcp.HEADER_MISMATCH, fmt.Sprintf("%s header %s does not match the request's %s %s", mcp.HeaderProtocolVersion, hv, mcp.MetaKeyProtocolVersion, mv), nil)
	case !slices.Contains(servedVersions, mv):
		e := mcp.UnsupportedProtocolVersionError{Version: mv, Supported: servedVersions}.JSONRPCError()
		return nil, errorAnswer(m.id, e.Error.Code, e.Error.Message, e.Error.Data)
	}
	// mv is not "": m.meta is not nil.
	info := &server.RequestProtocolInfo{Modern: true, ProtocolVersion: mv, ClientInfo: m.meta.ClientInfo,
		ClientCapabilities: m.meta.Caps, LogLevel: m.meta.LogLevel}
	if m.method == "" || m.id == nil {
		return info, answer{}
	}
	if info.ClientCapabilities == nil {
		return nil, errorAnswer(m.id, mcp.INVALID_PARAMS, "missing or invalid _meta field "+mcp.MetaKeyClientCapabilities+": send the client's capabilities ({} for none) with every request", nil)
	}
	if err := standardHeaders(r.Header, m); err != nil {
		return nil, errorAnswer(m.id, mcp.HEADER_MISMATCH, err.Error(), nil)
	}
	return info, answer{}
}

// standardHeaders checks the Mcp-Method and Mcp-Name headers of 2026-07-28
// request m against its body (SEP-2243): Mcp-Method is its method, and for
// a tools/call, prompts/get or resources/read, Mcp-Name (Base64 in the
// =?base64?...?= wrapper, or as it is) is its params' name, or uri. The
// errors are mcp-go's, as mcp.ValidateStandardHeaders words them; unlike
// that function it reads the name of a tools/call decoded with the message
// rather than decode the params again.
func standardHeaders(h http.Header, m *message) error {
	method := mcp.MCPMethod(m.method)
	switch hm := h.Get(mcp.HeaderMethod); {
	case hm == "":
		return mcp.HeaderMismatchError{Header: mcp.HeaderMethod, Reason: "missing required header"}
	case hm != m.method:
		return mcp.HeaderMismatchError{Header: mcp.HeaderMethod, Reason: fmt.Sprintf("header value %q does not match body value %q", hm, m.method)}
	case !mcp.MethodRequiresNameHeader(method):
		return nil
	}
	hn := h.Get(mcp.HeaderName)
	if hn == "" {
		return mcp.HeaderMismatchError{Header: mcp.HeaderName, Reason: fmt.Sprintf("missing required header for method %q", method)}
	}
	name, ok := mcp.DecodeHeaderValue(hn)
	if !ok {
		return mcp.HeaderMismatchError{Header: mcp.HeaderName, Reason: "invalid Base64 encoding"}
	}
	bodyName, ok := m.headerName()
	if !ok {
		return mcp.HeaderMismatchError{Header: mcp.HeaderName, Reason: fmt.Sprintf("failed to extract name from parameters for method %q", method)}
	}
	if name != bodyName {
		return mcp.HeaderMismatchError{Header: mcp.HeaderName, Reason: fmt.Sprintf("header value %q does not match body value %q", name, bodyName)}
	}
	return nil
}

// modernStatus is the HTTP status the revision maps a JSON-RPC error code
// to (0: a result).
func modernStatus(code int) int {
	switch code {
	case mcp.METHOD_NOT_FOUND:
		return http.StatusNotFound
	case mcp.HEADER_MISMATCH, mcp.MISSING_REQUIRED_CLIENT_CAPABILITY, mcp.UNSUPPORTED_PROTOCOL_VERSION,
		mcp.INVALID_REQUEST, mcp.INVALID_PARAMS, mcp.PARSE_ERROR:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// versionRefused checks the Mcp-Protocol-Version header of any request
// (an unknown or malformed value) and reports whether it wrote the
// refusal: -32022 with the versions served, whatever era the client
// speaks, so that it can read the list. id is the request's id, or nil.
func versionRefused(w http.ResponseWriter, r *http.Request, id json.RawMessage) bool {
	vs := r.Header.Values(mcp.HeaderProtocolVersion)
	switch {
	case len(vs) == 0:
		return false
	case len(vs) > 1:
		writeJSON(w, http.StatusBadRequest, rpcError(id, mcp.HEADER_MISMATCH,
			fmt.Sprintf("%s sent %d times: send it once", mcp.HeaderProtocolVersion, len(vs)), nil))
		return true
	case !slices.Contains(servedVersions, vs[0]):
		e := mcp.UnsupportedProtocolVersionError{Version: vs[0], Supported: servedVersions}.JSONRPCError()
		writeJSON(w, http.StatusBadRequest, rpcError(id, e.Error.Code, e.Error.Message, e.Error.Data))
		return true
	}
	return false
}

// writeModernStream answers a GET or DELETE of the 2026-07-28 era, which
// has neither: 405 with Allow: POST.
func writeModernStream(w http.ResponseWriter, method string) {
	w.Header().Set("Allow", http.MethodPost)
	writeJSON(w, http.StatusMethodNotAllowed, jsonRPCError(mcp.INVALID_REQUEST,
		fmt.Sprintf("%s is not part of protocol version %s: POST requests, and subscriptions/listen for notifications",
			method, mcp.ProtocolVersion20260728)))
}

// serveListen serves subscriptions/listen m: mcp-go's dispatcher
// acknowledges it and holds it until the client goes away, while the
// notifications the client subscribed to reach s, registered for the
// request's length (its broadcasts reach registered sessions), and go out
// on the request's stream, each tagged with the subscription's id.
func (f *Front) serveListen(w http.ResponseWriter, x *exchange, s *session, m *message) {
	st := eventstream.NewReply(w)
	if st == nil {
		writeJSON(w, http.StatusInternalServerError, rpcError(m.id, mcp.INTERNAL_ERROR, "subscriptions/listen needs a response that can stream", nil))
		return
	}
	ctx, cancel := context.WithCancel(x.ctx)
	defer cancel()
	defer context.AfterFunc(f.streams, cancel)() // the front closing, or EndStreams, ends the stream
	x.stream, x.ctx = st, eventstream.With(ctx, st)
	s.id, s.listen = "listen-"+rand.Text(), true
	s.notes = make(chan mcp.JSONRPCNotification, sessionQueue)
	s.Initialize()
	if err := f.mcp.RegisterSession(ctx, s); err != nil {
		writeJSON(w, http.StatusInternalServerError, rpcError(m.id, mcp.INTERNAL_ERROR, "opening the subscription failed: "+err.Error(), nil))
		return
	}
	var subID any
	_ = json.Unmarshal(m.id, &subID)
	st.Open()
	pumped := make(chan struct{})
	stop := make(chan struct{})
	go func() {
		defer close(pumped)
		for {
			select {
			case n := <-s.notes:
				st.Send(mustJSON(tagSubscription(n, subID)))
			case <-stop:
				return
			}
		}
	}()
	a := f.handle(x, m)
	f.mcp.UnregisterSession(context.WithoutCancel(ctx), s.id)
	close(stop)
	<-pumped
	st.Finish(http.StatusOK, a.body)
}

// tagSubscription is n with the id of the subscriptions/listen request
// whose stream carries it in its _meta.
func tagSubscription(n mcp.JSONRPCNotification, id any) mcp.JSONRPCNotification {
	meta := maps.Clone(n.Params.Meta)
	if meta == nil {
		meta = map[string]any{}
	}
	meta[mcp.MetaKeySubscriptionID] = id
	n.Params.Meta = meta
	return n
}
