package mcpfront

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/internal/mcppeer"
	"github.com/toolgate/toolgate/internal/principal"
)

// Who may see a source's catalog (issue 31, item 2): a source's resources,
// resource templates and prompts, and completion and subscriptions of
// them, are visible only to principals its tools are visible to. A
// principal with a policy sees a source's catalog when the policy permits
// at least one of the source's tools; a source that serves no tools, when
// the policy permits its namespace itself (Catalog.Namespace, which the
// globs "*" and "<name>__*" match). A client without a policy (no
// authentication, stdio) sees every catalog. What a principal may not see
// is answered as what does not exist: left out of the lists, a read or a
// subscribe refused as an unknown URI, a prompt as an unknown name, a
// completion with no values.

// sourceTools returns the names of the tools each source serves, by
// [registry.Tool.Source], from tools.
func sourceTools(tools map[string]*frontTool) map[string][]string {
	by := map[string][]string{}
	for name, t := range tools {
		by[t.Def.Source] = append(by[t.Def.Source], name)
	}
	return by
}

// entitled reports whether id may see cat's source.
func (f *Front) entitled(id *principal.Identity, cat *Catalog) bool {
	return f.entitledTo(id, cat.source, cat.Namespace)
}

// entitledTo reports whether id may see what source (whose namespace is
// namespace, "" if none) serves besides tools: its catalog, its log
// messages.
func (f *Front) entitledTo(id *principal.Identity, source, namespace string) bool {
	if id == nil || id.Policy == nil {
		return true
	}
	names := (*f.bySource.Load())[source]
	if len(names) == 0 {
		return namespace != "" && id.Policy.Permits(namespace)
	}
	for _, n := range names {
		if id.Policy.Permits(n) {
			return true
		}
	}
	return false
}

// visibleTo returns the function that reports whether id may see a
// catalog, deciding once per catalog: a list asks for each entry.
func (f *Front) visibleTo(id *principal.Identity) func(*Catalog) bool {
	if id == nil || id.Policy == nil {
		return func(*Catalog) bool { return true }
	}
	seen := map[*Catalog]bool{}
	return func(c *Catalog) bool {
		if c == nil {
			return false
		}
		v, ok := seen[c]
		if !ok {
			v = f.entitled(id, c)
			seen[c] = v
		}
		return v
	}
}

// readable reports whether id may read (and subscribe to) uri: a source
// it may see serves it.
func (f *Front) readable(id *principal.Identity, uri string) bool {
	cat := f.surface().owner(uri)
	return cat != nil && f.entitled(id, cat)
}

// admitRead answers a resources/read of a URI that x's principal may not
// read, or that no source serves, alike: -32002 (-32602 in 2026-07-28) as
// for an unknown resource. nil lets the read go on.
func (f *Front) admitRead(x *exchange, m *message) *answer {
	var p struct {
		URI string `json:"uri"`
	}
	if json.Unmarshal(m.params, &p) != nil || p.URI == "" || f.readable(x.ident, p.URI) {
		return nil // mcp-go answers what is not a read it can serve
	}
	code := mcp.RESOURCE_NOT_FOUND
	if x.info != nil {
		code = mcp.INVALID_PARAMS
	}
	a := errorAnswer(m.id, code, fmt.Sprintf("unknown resource URI %q: read a URI that resources/list or a template of resources/templates/list gives you", p.URI), nil)
	return &a
}

// visiblePrompts is the prompt filter of mcp-go's prompts/list and
// prompts/get: the prompts of the sources the caller may see.
func (f *Front) visiblePrompts(ctx context.Context, prompts []mcp.Prompt) []mcp.Prompt {
	id := f.identity(ctx)
	if id == nil || id.Policy == nil {
		return prompts
	}
	visible, served := f.visibleTo(id), f.surface().prompts
	out := prompts[:0:0]
	for _, p := range prompts {
		if visible(served[p.Name].cat) {
			out = append(out, p)
		}
	}
	return out
}

// keep returns the entries of list for which ok holds, in order.
func keep[T any](list []T, ok func(T) bool) []T {
	out := make([]T, 0, len(list))
	for _, e := range list {
		if ok(e) {
			out = append(out, e)
		}
	}
	return out
}

// forward sends a client's request about cat's catalog to its source,
// with who sends it in ctx ([principal.With]): the source's side counts
// it against that principal's rate and passes it through the hooks.
func (f *Front) forward(ctx context.Context, cat *Catalog, peer mcppeer.Peer, method string, params any) (json.RawMessage, error) {
	if id := f.identity(ctx); id != nil && principal.From(ctx) != id {
		ctx = principal.With(ctx, id)
	}
	return cat.Forward(ctx, peer, method, params)
}

// overRate takes one request of id's rate (auth rate), which a
// resources/subscribe counts against as a call does, and returns the
// answer to request rid when id is over it; nil when it may go on.
func overRate(id *principal.Identity, rid json.RawMessage) *answer {
	if id == nil || id.Policy == nil {
		return nil
	}
	wait := id.Policy.Take()
	if wait <= 0 {
		return nil
	}
	a := errorAnswer(rid, mcp.INVALID_REQUEST, fmt.Sprintf("rate_limited: principal %q is over its rate limit (auth rate); send it again in %s", id.Name, wait.Round(time.Millisecond)),
		map[string]any{"retry_after_ms": wait.Milliseconds()})
	return &a
}
