package gateway

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/registry"
)

// preflight is pipeline step 1 (resolve) for messages arriving from a
// transport, before mcp-go sees them. mcp-go answers an unknown tool with a
// fixed "tool 'x' not found" -32602 error without data, and its handlers
// cannot choose a JSON-RPC code, so toolgate answers unknown tools itself:
// for a tools/call request naming no registered tool it returns reply, the
// JSON-RPC -32602 error with up to three suggestions in data.suggestions.
// For a name that resolves by repair it returns forward, the message with
// the name rewritten. Otherwise forward is msg unchanged. Messages that are
// not single, well-formed tools/call requests (batches, notifications,
// garbage) pass through for mcp-go to answer.
func (g *Gateway) preflight(msg []byte) (reply, forward []byte) {
	if !bytes.Contains(msg, []byte(`tools/call`)) {
		return nil, msg
	}
	method, name, hasID, ok := scanCall(msg)
	if ok {
		if !hasID || string(method) != string(mcp.MethodToolsCall) || name == nil {
			return nil, msg
		}
		if _, known := g.reg.Get(string(name)); known {
			return nil, msg // the hot path: no allocation
		}
	}
	// Rare paths (an unknown or miscased name, or escapes the scanner does
	// not decode): parse properly.
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params *struct {
			Name *string `json:"name"`
		} `json:"params"`
	}
	if err := json.Unmarshal(msg, &req); err != nil || req.Method != string(mcp.MethodToolsCall) ||
		len(req.ID) == 0 || string(req.ID) == "null" || req.Params == nil || req.Params.Name == nil {
		return nil, msg
	}
	t, err := g.reg.Resolve(*req.Params.Name, g.cfg.Guards.NameRepair)
	if err == nil {
		if t.Name == *req.Params.Name {
			return nil, msg
		}
		if out, ok := renameTool(msg, t.Name); ok {
			g.logger.Debug("tool name repaired", "tool", t.Name)
			return nil, out
		}
		return nil, msg
	}
	g.metrics.unknownTools.Inc()
	return unknownToolReply(req.ID, err), nil
}

// unknownToolReply is the JSON-RPC error for a call of an unknown tool.
func unknownToolReply(id json.RawMessage, err error) []byte {
	suggestions := []string{}
	if nf, ok := errors.AsType[*registry.NotFoundError](err); ok && nf.Suggestions != nil {
		suggestions = nf.Suggestions
	}
	type errorObj struct {
		Code    int            `json:"code"`
		Message string         `json:"message"`
		Data    map[string]any `json:"data"`
	}
	b, mErr := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   errorObj        `json:"error"`
	}{mcp.JSONRPC_VERSION, id, errorObj{mcp.INVALID_PARAMS, err.Error(), map[string]any{"suggestions": suggestions}}})
	if mErr != nil {
		// Unreachable: every field marshals.
		return []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32602,"message":"unknown tool"}}`)
	}
	return b
}

// renameTool returns msg with params.name set to name, every other field
// kept as sent.
func renameTool(msg []byte, name string) ([]byte, bool) {
	var top map[string]json.RawMessage
	if json.Unmarshal(msg, &top) != nil {
		return nil, false
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(top["params"], &params) != nil {
		return nil, false
	}
	params["name"], _ = json.Marshal(name)
	var err error
	if top["params"], err = json.Marshal(params); err != nil {
		return nil, false
	}
	out, err := json.Marshal(top)
	return out, err == nil
}

// jsonRPCError is a JSON-RPC error response with a null id, for messages
// toolgate rejects before it can read their id.
func jsonRPCError(code int, message string) []byte {
	b, _ := json.Marshal(map[string]any{
		"jsonrpc": mcp.JSONRPC_VERSION, "id": nil,
		"error": map[string]any{"code": code, "message": message},
	})
	return b
}
