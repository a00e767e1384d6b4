package mcpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/internal/jsonscan"
)

// The tools/call fast path of a streamable HTTP session (2025 revisions).
//
// For each POST, mcp-go's streamable handler runs its DNS-rebinding and
// header checks, looks the session up, starts a forwarder goroutine with
// its channels, decodes the message twice (its shape, then the request),
// routes it through HandleMessage's method switch and hooks, and encodes
// the response: a profile put that at over a third of toolgate's CPU per
// proxied call (docs/benchmarks.md, section 10). For a session's
// tools/call that mcp-go's own stream is not needed for, the front makes
// the same checks once and calls the tool's mcp-go handler itself, in the
// session, answering what mcp-go would (TestSessionCallMatchesMCPGo). A
// call's progress and its upstream's log messages still reach the client
// on the call's own stream (callstream.go).
//
// mcp-go's stream is needed — and the call goes to mcp-go — when the
// session's client declared sampling, elicitation or roots: an upstream's
// request to the client during the call goes out on the call's POST
// stream through mcp-go's request-scoped stream (doc.go fact 24), which
// only mcp-go's POST handling sets up. Also for a task-augmented call, a
// resumption (Last-Event-ID), a tool mcp-go does not have, and anything
// the fast path would answer otherwise than mcp-go (a Host mcp-go
// refuses, a body it cannot decode).

// sessionCall is what the fast path reads of a tools/call, in one
// decoding.
type sessionCall struct {
	JSONRPC string          `json:"jsonrpc"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
	Params  callMembers     `json:"params"`
}

// callMembers are the params of a tools/call both fast paths read, raw
// but for the name.
type callMembers struct {
	Name      string                     `json:"name"`
	Arguments json.RawMessage            `json:"arguments"`
	Meta      map[string]json.RawMessage `json:"_meta"`
	Task      json.RawMessage            `json:"task"`
}

// readSessionCall reads msg into m as decoding it would (keys matched as
// encoding/json matches them, the last of a repeated one kept), without
// decoding: it scans the message once it knows it is JSON. It reports
// false, leaving m to be reset and decoded, when a string it reads has
// escapes or is not a string, or params is not an object.
func readSessionCall(msg []byte, m *sessionCall) bool {
	if !json.Valid(msg) {
		return false
	}
	s := jsonscan.New(msg)
	span := func() json.RawMessage { // the next value, which is valid JSON
		v, _ := s.Raw()
		return v
	}
	str := func() (string, bool) {
		if c, _ := s.Next(); c != '"' {
			return "", false
		}
		v, ok := s.PlainString()
		return string(v), ok
	}
	params := func() bool {
		if c, _ := s.Next(); c != '{' {
			return false
		}
		return s.Object(func(key []byte) bool {
			var ok bool
			switch p := &m.Params; {
			case jsonscan.FoldEq(key, "name"):
				p.Name, ok = str()
				return ok
			case jsonscan.FoldEq(key, "arguments"):
				// msg is a pooled buffer: the call may keep its arguments.
				p.Arguments = bytes.Clone(span())
			case jsonscan.FoldEq(key, "task"):
				p.Task = span()
			case jsonscan.FoldEq(key, "_meta"):
				switch c, _ := s.Next(); c {
				case 'n':
					p.Meta = nil
					return s.Value()
				case '{':
					if p.Meta == nil {
						p.Meta = map[string]json.RawMessage{}
					}
					return s.Object(func(k []byte) bool {
						p.Meta[string(k)] = span()
						return true
					})
				}
				return false
			default:
				return s.Value()
			}
			return true
		})
	}
	return s.Object(func(key []byte) bool {
		var ok bool
		switch {
		case jsonscan.FoldEq(key, "jsonrpc"):
			m.JSONRPC, ok = str()
			return ok
		case jsonscan.FoldEq(key, "result"):
			m.Result = span()
		case jsonscan.FoldEq(key, "error"):
			m.Error = span()
		case jsonscan.FoldEq(key, "params"):
			return params()
		default:
			return s.Value()
		}
		return true
	}) && s.Done()
}

// simpleID is the request ID mcp-go decodes from id, when id is one mcp-go
// also writes back as it came: up to 15 digits (exact as the float64 it
// decodes through), or a string of printable ASCII that encoding/json
// does not escape. false leaves id to be decoded.
func simpleID(id []byte) (mcp.RequestId, bool) {
	if n := len(id); n >= 2 && id[0] == '"' && id[n-1] == '"' {
		for _, c := range id[1 : n-1] {
			if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
				return mcp.RequestId{}, false
			}
		}
		return mcp.NewRequestId(string(id[1 : len(id)-1])), true
	}
	if len(id) == 0 || len(id) > 15 || (id[0] == '0' && len(id) > 1) {
		return mcp.RequestId{}, false
	}
	var v int64
	for _, c := range id {
		if c < '0' || c > '9' {
			return mcp.RequestId{}, false
		}
		v = v*10 + int64(c-'0')
	}
	return mcp.NewRequestId(v), true
}

// replyID reads a request's id as mcp-go does and returns it with the
// bytes mcp-go writes back for it (1.0 is 1); ok is false when it is no
// id. A plain id (simpleID) is taken as it came, without decoding.
func replyID(id json.RawMessage) (rid mcp.RequestId, out json.RawMessage, ok bool) {
	if rid, ok := simpleID(id); ok {
		return rid, id, true
	}
	if json.Unmarshal(id, &rid) != nil {
		return rid, nil, false
	}
	if out, err := json.Marshal(rid); err == nil {
		return rid, out, true
	}
	return rid, id, true
}

// serveSessionCall serves a tools/call of streamable session c on the fast
// path and reports whether it did; false leaves the request, untouched,
// to mcp-go.
func (f *Front) serveSessionCall(w http.ResponseWriter, r *http.Request, p *httpParts, c *clientSession, msg []byte, id json.RawMessage) bool {
	if r.Header.Get(mcp.HeaderLastEventID) != "" || !hostAccepted(r) || !isJSONContent(r) {
		return false
	}
	if ci, ok := c.session.(server.SessionWithClientInfo); !ok {
		return false
	} else if caps := ci.GetClientCapabilities(); caps.Sampling != nil || caps.Elicitation != nil || caps.Roots != nil {
		return false
	}
	var m sessionCall
	if !readSessionCall(msg, &m) {
		m = sessionCall{}
		if json.Unmarshal(msg, &m) != nil {
			return false
		}
	}
	if m.JSONRPC != mcp.JSONRPC_VERSION || m.Result != nil || m.Error != nil || m.Params.Task != nil {
		return false // mcp-go answers, or refuses, what is not a plain tools/call
	}
	rid, idOut, ok := replyID(id)
	if !ok {
		return false
	}
	mp := m.Params
	tool := f.mcp.GetTool(mp.Name)
	if tool == nil {
		return false
	}
	req, ok := toolCallRequest(mp.Name, mp.Arguments, mp.Meta, false)
	if !ok {
		return false
	}
	req.Header = r.Header
	p.fastCalls.Add(1)
	cs, cw, sctx := withCallStream(r.Context(), w)
	if cs != nil {
		defer cs.end()
	}
	// notifications/cancelled of this request cancels ctx, as mcp-go's
	// HandleMessage would have it (c.cancelCall).
	ctx, cancel := context.WithCancel(f.mcp.WithContext(sctx, c.session))
	defer cancel()
	key, call := rid.String(), &fastCall{cancel: cancel}
	c.calls.Store(key, call) // a second call of the same ID takes the entry, as in mcp-go
	defer c.calls.CompareAndDelete(key, call)
	raw := &rawReply{}
	res, err := tool.Handler(context.WithValue(ctx, rawReplyKey{}, raw), req)
	var reply []byte
	if err == nil && res == rawTaken {
		if reply = rawResponse(idOut, raw.result); reply == nil {
			res = passthroughResult(&executors.Result{Passthrough: raw.result})
		}
	}
	if reply == nil {
		reply = callReply(idOut, res, err)
	}
	writeJSON(cw, http.StatusOK, append(reply, '\n'))
	return true
}

// callReply is a fast path's answer to a call of id whose handler
// returned res and err: the result, or callFailure's error.
func callReply(id json.RawMessage, res *mcp.CallToolResult, err error) []byte {
	if err == nil && res != nil {
		reply, merr := json.Marshal(struct {
			JSONRPC string              `json:"jsonrpc"`
			ID      json.RawMessage     `json:"id"`
			Result  *mcp.CallToolResult `json:"result"`
		}{mcp.JSONRPC_VERSION, id, res})
		if merr == nil {
			return reply
		}
		err = merr
	}
	return callFailure(id, err)
}

// rawResponse is the JSON-RPC response of id with result (an upstream's
// result as it came, forwardable, or one textResult encoded), compacted
// as encoding/json compacts a json.RawMessage: a newline in it would
// split an event. It is nil when result is not JSON.
func rawResponse(id, result json.RawMessage) []byte {
	b := bytes.NewBuffer(make([]byte, 0, len(`{"jsonrpc":"2.0","id":,"result":}`)+len(id)+len(result)+1))
	b.WriteString(`{"jsonrpc":"2.0","id":`)
	b.Write(id)
	b.WriteString(`,"result":`)
	if json.Compact(b, result) != nil {
		return nil // not JSON after all: the transports decoded it, so not expected
	}
	b.WriteByte('}')
	return b.Bytes()
}

// toolCallRequest is the request mcp-go decodes from a tools/call's name,
// raw arguments and _meta, for a fast path to call the tool's handler
// with; false when arguments or _meta do not decode. A modern request's
// own _meta members (io.modelcontextprotocol/...) are left out, as mcp-go
// reads them into the request's RequestProtocolInfo instead.
func toolCallRequest(name string, args json.RawMessage, meta map[string]json.RawMessage, modern bool) (mcp.CallToolRequest, bool) {
	var req mcp.CallToolRequest
	req.Method = string(mcp.MethodToolsCall)
	req.Params.Name = name
	if len(args) > 0 {
		req.Params.RawArguments = args
		if json.Unmarshal(args, &req.Params.Arguments) != nil {
			return req, false
		}
	}
	for k, v := range meta {
		if modern && strings.HasPrefix(k, "io.modelcontextprotocol/") {
			continue
		}
		var val any
		if json.Unmarshal(v, &val) != nil {
			return req, false
		}
		if req.Params.Meta == nil {
			req.Params.Meta = &mcp.Meta{}
		}
		if k == "progressToken" {
			req.Params.Meta.ProgressToken = val
			continue
		}
		if req.Params.Meta.AdditionalFields == nil {
			req.Params.Meta.AdditionalFields = map[string]any{}
		}
		req.Params.Meta.AdditionalFields[k] = val
	}
	return req, true
}

// callFailure is a fast path's answer to a call whose handler failed: a
// panic, which the handler recovers (Front.handler) as mcp-go would
// answer it, or an error, which the front's handlers never return.
func callFailure(id json.RawMessage, err error) []byte {
	msg := "the tool call failed"
	if err != nil {
		msg = err.Error()
	}
	return rpcError(id, mcp.INTERNAL_ERROR, msg, nil)
}

// fastCall is a fast-path call in flight, as its session finds it to
// cancel it.
type fastCall struct{ cancel context.CancelFunc }

// cancelCall cancels the fast-path call a notifications/cancelled (msg)
// of session c names, if one is in flight; mcp-go cancels those it runs
// itself.
func (c *clientSession) cancelCall(msg []byte) {
	if c == nil || !bytes.Contains(msg, []byte(mcp.MethodNotificationCancelled)) {
		return
	}
	var n struct {
		Method string `json:"method"`
		Params struct {
			RequestID *mcp.RequestId `json:"requestId"`
		} `json:"params"`
	}
	if json.Unmarshal(msg, &n) != nil || n.Method != string(mcp.MethodNotificationCancelled) || n.Params.RequestID == nil {
		return
	}
	if v, ok := c.calls.LoadAndDelete(n.Params.RequestID.String()); ok {
		v.(*fastCall).cancel()
	}
}

// hostAccepted reports whether mcp-go's DNS-rebinding protection lets r
// through: a request that reached a loopback address must name a loopback
// Host (mcp-go's rejectDNSRebinding, doc.go fact 4). The fast path leaves
// a request it refuses to mcp-go, which answers it.
func hostAccepted(r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return !ok || local == nil || !isLoopbackAddr(local.String()) || isLoopbackAddr(r.Host)
}

// isLoopbackAddr is mcp-go's isLoopbackHost: localhost or a loopback IP,
// with or without a port.
func isLoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// isJSONContent reports whether r's Content-Type is application/json, as
// mcp-go requires of a POST.
func isJSONContent(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	if ct == "application/json" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}
