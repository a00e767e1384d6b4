package mcpfront

import (
	"encoding/json"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
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
	Params struct {
		Name      string                     `json:"name"`
		Arguments json.RawMessage            `json:"arguments"`
		Meta      map[string]json.RawMessage `json:"_meta"`
		Task      json.RawMessage            `json:"task"`
	} `json:"params"`
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
	if json.Unmarshal(msg, &m) != nil || m.Params.Task != nil {
		return false
	}
	mp := m.Params
	tool := f.mcp.GetTool(mp.Name)
	if tool == nil {
		return false
	}
	var req mcp.CallToolRequest
	req.Method = string(mcp.MethodToolsCall)
	req.Params.Name = mp.Name
	if len(mp.Arguments) > 0 {
		req.Params.RawArguments = mp.Arguments
		if json.Unmarshal(mp.Arguments, &req.Params.Arguments) != nil {
			return false
		}
	}
	if mp.Meta != nil {
		meta := &mcp.Meta{}
		for k, v := range mp.Meta {
			var val any
			if json.Unmarshal(v, &val) != nil {
				return false
			}
			if k == "progressToken" {
				meta.ProgressToken = val
				continue
			}
			if meta.AdditionalFields == nil {
				meta.AdditionalFields = map[string]any{}
			}
			meta.AdditionalFields[k] = val
		}
		req.Params.Meta = meta
	}
	req.Header = r.Header
	p.fastCalls.Add(1)
	cs, cw, cr := withCallStream(w, r)
	res, err := tool.Handler(f.mcp.WithContext(cr.Context(), c.session), req)
	var reply []byte
	if err == nil && res != nil {
		reply, err = json.Marshal(struct {
			JSONRPC string              `json:"jsonrpc"`
			ID      json.RawMessage     `json:"id"`
			Result  *mcp.CallToolResult `json:"result"`
		}{mcp.JSONRPC_VERSION, id, res})
	}
	if err != nil || res == nil {
		// Unreachable with the front's handlers (front.go), which return
		// every failure as a result.
		reply = rpcError(id, mcp.INTERNAL_ERROR, "the tool call failed", nil)
	}
	writeJSON(cw, http.StatusOK, append(reply, '\n'))
	if cs != nil {
		cs.end()
	}
	return true
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
