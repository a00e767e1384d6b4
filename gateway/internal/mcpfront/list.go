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
		t.listed.writeTo(b)
	}
	b.WriteString(`]}}`)
	return b.Bytes()
}

// listedTool is a tool's definition encoded as tools/list sends it:
// own[:descAt], desc, own[descAt:schemaAt], schema, own[schemaAt:], one
// after the other. desc is the registry's description (Def.Description)
// when the encoding has it unchanged, as one with nothing to escape, and
// schema the registry's input schema (Def.InputSchema) when the encoding
// has it unchanged, as a compact one: so the front keeps no second copy
// of either. Otherwise each is empty and own has it encoded.
type listedTool struct {
	own              []byte
	descAt, schemaAt int
	desc             string
	schema           []byte
}

// encodeListed encodes w as tools/list sends it.
func encodeListed(w *mcp.Tool) listedTool {
	b, _ := json.Marshal(w) // a definition decoded from JSON or built by the gateway: cannot fail
	var l listedTool
	schemaAt, schemaEnd := len(b), len(b)
	if i := valueAt(b, `"inputSchema":`, w.RawInputSchema); i >= 0 {
		l.schema, schemaAt, schemaEnd = w.RawInputSchema, i, i+len(w.RawInputSchema)
	}
	descAt, descEnd := 0, 0
	if w.Description != "" {
		if i := valueAt(b[:schemaAt], `"description":`, []byte(`"`+w.Description+`"`)); i >= 0 {
			l.desc, descAt, descEnd = w.Description, i+1, i+1+len(w.Description)
		}
	}
	if l.desc == "" && l.schema == nil {
		l.own, l.schemaAt = b, len(b)
		return l
	}
	l.own = slices.Concat(b[:descAt], b[descEnd:schemaAt], b[schemaEnd:])
	l.descAt, l.schemaAt = descAt, schemaAt-(descEnd-descAt)
	return l
}

// valueAt returns where in b the value of the first key (`"name":`)
// starts when that value is v, or -1.
func valueAt(b []byte, key string, v []byte) int {
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		return -1
	}
	start := i + len(key)
	if start+len(v) > len(b) || !bytes.Equal(b[start:start+len(v)], v) {
		return -1
	}
	return start
}

// len is the length of the encoding.
func (l *listedTool) len() int { return len(l.own) + len(l.desc) + len(l.schema) }

// writeTo writes the encoding to b.
func (l *listedTool) writeTo(b *bytes.Buffer) {
	b.Write(l.own[:l.descAt])
	b.WriteString(l.desc)
	b.Write(l.own[l.descAt:l.schemaAt])
	b.Write(l.schema)
	b.Write(l.own[l.schemaAt:])
}
