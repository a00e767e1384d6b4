package mcpfront

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/internal/principal"
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
//
// who sent msg: a name that repairs to a tool who may not see is unknown
// to it, and suggestions list only tools it may see.
func (f *Front) preflight(msg []byte, who *principal.Identity) (reply, forward []byte) {
	if !bytes.Contains(msg, []byte(`tools/call`)) {
		return nil, msg
	}
	var repaired string
	var err error
	method, name, id, scanned := scanCall(msg)
	if scanned {
		if !isRequestID(id) || string(method) != string(mcp.MethodToolsCall) || name == nil {
			return nil, msg
		}
		if repaired, err = f.b.Resolve(name); err == nil && repaired == "" {
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
	if !scanned {
		repaired, err = f.b.Resolve([]byte(*req.Params.Name))
	}
	if err == nil && repaired != "" && !who.Permits(repaired) {
		// Repaired to a tool who may not see: as unknown as any. A tool
		// named exactly gets the pipeline's permission result instead,
		// which names only that tool.
		err = &registry.NotFoundError{Name: *req.Params.Name, Available: -1}
	}
	err = visibleOnly(err, who)
	if err == nil {
		if repaired == "" {
			return nil, msg
		}
		if out, ok := renameTool(msg, repaired); ok {
			f.logger.Debug("tool name repaired", "tool", repaired)
			return nil, out
		}
		return nil, msg
	}
	suggestions := []string{}
	if nf, ok := errors.AsType[*registry.NotFoundError](err); ok && nf.Suggestions != nil {
		suggestions = nf.Suggestions
	}
	return rpcError(req.ID, mcp.INVALID_PARAMS, err.Error(), map[string]any{"suggestions": suggestions}), nil
}

// visibleOnly returns err, a name resolution's error, as id may see it:
// a NotFoundError suggests only tools id may see, and counts none.
func visibleOnly(err error, id *principal.Identity) error {
	nf, ok := errors.AsType[*registry.NotFoundError](err)
	if !ok || id == nil || id.Policy == nil {
		return err
	}
	v := &registry.NotFoundError{Name: nf.Name, Available: -1}
	for _, s := range nf.Suggestions {
		if id.Permits(s) {
			v.Suggestions = append(v.Suggestions, s)
		}
	}
	v.Ambiguous = nf.Ambiguous && len(v.Suggestions) > 1
	return v
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

// rpcError is the JSON-RPC error response to the request with id (null
// when id is nil: a message toolgate rejects before it can read its id)
// with code, message and, when not nil, data.
func rpcError(id json.RawMessage, code int, message string, data any) []byte {
	type errorObj struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    any    `json:"data,omitempty"`
	}
	if id == nil {
		id = json.RawMessage("null")
	}
	b, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   errorObj        `json:"error"`
	}{mcp.JSONRPC_VERSION, id, errorObj{code, message, data}})
	if err != nil {
		// Unreachable: id is nil or a valid JSON value taken from the
		// request, and data is built by toolgate.
		return []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal error"}}`)
	}
	return b
}

// jsonRPCError is the JSON-RPC error response with a null id.
func jsonRPCError(code int, message string) []byte { return rpcError(nil, code, message, nil) }
