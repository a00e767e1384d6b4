package mcpfront

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
)

// tools/list, on every transport: the front pages its own list, one
// sorted copy of the tools with each definition encoded once, when the
// tool was set. mcp-go holds no tools.

// frontServes reports whether m is a request the front serves itself,
// on every transport: tools/call and tools/list. mcp-go's dispatcher
// serves every other message.
func frontServes(m *message) bool {
	return m.id != nil && (m.method == string(mcp.MethodToolsCall) || m.method == string(mcp.MethodToolsList))
}

// frontChecks reports whether m is a request the front checks before
// mcp-go's dispatcher serves it: a resources/subscribe (admitSubscribe)
// or resources/read (admitRead).
func frontChecks(m *message) bool {
	return m.id != nil && (m.method == string(mcp.MethodResourcesSubscribe) || m.method == string(mcp.MethodResourcesRead))
}

// toolList is the tools sorted by name, as tools/list pages through them.
type toolList []*frontTool

// sortedTools returns tools sorted by name.
func sortedTools(tools map[string]*frontTool) toolList {
	l := make(toolList, 0, len(tools))
	for _, t := range tools {
		l = append(l, t)
	}
	slices.SortFunc(l, func(a, b *frontTool) int { return strings.Compare(a.Def.Name, b.Def.Name) })
	return l
}

// listTools answers a tools/list: the page after the request's cursor of
// the tools the caller's policy permits, at most PageSize of them, and the
// cursor of the next page when a permitted tool remains. A cursor is the
// base64 of the last name of the page before, as mcp-go's are.
func (f *Front) listTools(x *exchange, m *message) answer {
	var p struct {
		Cursor string `json:"cursor"`
	}
	if len(m.params) > 0 && json.Unmarshal(m.params, &p) != nil {
		return errorAnswer(m.id, mcp.INVALID_PARAMS, "tools/list params must be an object, with cursor a string", nil)
	}
	l := *f.list.Load()
	start := 0
	if p.Cursor != "" {
		after, err := base64.StdEncoding.DecodeString(p.Cursor)
		if err != nil {
			return errorAnswer(m.id, mcp.INVALID_PARAMS, "invalid cursor: send the nextCursor of the page before, or none for the first page", nil)
		}
		start, _ = slices.BinarySearchFunc(l, string(after), func(t *frontTool, k string) int {
			if t.Def.Name <= k {
				return -1
			}
			return 1
		})
	}
	permits := func(string) bool { return true }
	if x.ident != nil && x.ident.Policy != nil {
		permits = x.ident.Policy.Permits
	}
	var page toolList
	next := ""
	for _, t := range l[start:] {
		if !permits(t.Def.Name) {
			continue
		}
		if len(page) == PageSize {
			next = base64.StdEncoding.EncodeToString([]byte(page[len(page)-1].Def.Name))
			break
		}
		page = append(page, t)
	}
	res := mcp.ListToolsResult{Tools: []mcp.Tool{}, PaginatedResult: mcp.PaginatedResult{NextCursor: mcp.Cursor(next)}}
	if x.info != nil {
		// 2026-07-28: required of a list result, as mcp-go gives its own
		// (ttlMs 0 and scope private: its defaults, which toolgate keeps).
		decorate(&res, f.o.Name, f.o.Version)
		res.SetCacheHints(0, mcp.CacheScopePrivate)
	}
	head, err := json.Marshal(res)
	if err != nil || !bytes.HasSuffix(head, []byte(`"tools":[]}`)) {
		return errorAnswer(m.id, mcp.INTERNAL_ERROR, "encoding the tools/list result failed", nil)
	}
	return answer{body: listResponse(m.id, head[:len(head)-len(`]}`)], page)}
}

// listResponse is the JSON-RPC response of id whose result is head (the
// result up to its tools array's '[') followed by page, each tool's
// definition as encoded when it was set.
func listResponse(id, head json.RawMessage, page toolList) []byte {
	n := len(`{"jsonrpc":"2.0","id":,"result":]}}`) + len(id) + len(head)
	for _, t := range page {
		n += t.listed.len() + 1
	}
	b := bytes.NewBuffer(make([]byte, 0, n))
	b.WriteString(`{"jsonrpc":"2.0","id":`)
	b.Write(id)
	b.WriteString(`,"result":`)
	b.Write(head)
	for i, t := range page {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(t.listed.head)
		b.Write(t.listed.schema)
		b.Write(t.listed.tail)
	}
	b.WriteString(`]}}`)
	return b.Bytes()
}

// listedTool is a tool's definition encoded as tools/list sends it: head,
// schema and tail, one after the other. schema is the input schema the
// registry holds (Def.InputSchema) when the encoding has it unchanged, as
// a compact schema is, so that the front keeps no second copy of it;
// otherwise nil, and head is the whole encoding.
type listedTool struct {
	head, schema, tail []byte
}

// encodeListed encodes w as tools/list sends it.
func encodeListed(w *mcp.Tool) listedTool {
	b, _ := json.Marshal(w) // a definition decoded from JSON or built by the gateway: cannot fail
	key := []byte(`"inputSchema":`)
	i := bytes.Index(b, key)
	if i < 0 {
		return listedTool{head: b}
	}
	start := i + len(key)
	end := start + len(w.RawInputSchema)
	if end > len(b) || !bytes.Equal(b[start:end], w.RawInputSchema) {
		return listedTool{head: b}
	}
	// Wherever the key was found, head+schema+tail is b.
	return listedTool{head: bytes.Clone(b[:start]), schema: w.RawInputSchema, tail: bytes.Clone(b[end:])}
}

// len is the length of the encoding.
func (l listedTool) len() int { return len(l.head) + len(l.schema) + len(l.tail) }
