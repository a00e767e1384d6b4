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

// Who may see a source's catalog (issue 31, item 2) is package surface's
// rule (surface/scope.go); the front applies it where mcp-go would
// otherwise answer: a read or subscribe of a URI the caller may not see
// is refused as of an unknown URI, prompts/list and prompts/get go
// through visiblePrompts, the completions and the lists in surface.go.

// sourceTools returns the names of the tools each source serves, by
// [registry.Tool.Source], from tools.
func sourceTools(tools map[string]*frontTool) map[string][]string {
	by := map[string][]string{}
	for name, t := range tools {
		by[t.Def.Source] = append(by[t.Def.Source], name)
	}
	return by
}

// admitRead answers a resources/read of a URI that x's principal may not
// read, or that no source serves, alike: -32002 (-32602 in 2026-07-28) as
// for an unknown resource. nil lets the read go on.
func (f *Front) admitRead(x *exchange, m *message) *answer {
	var p struct {
		URI string `json:"uri"`
	}
	if json.Unmarshal(m.params, &p) != nil || p.URI == "" || f.cats.Readable(x.ident, p.URI) {
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
	return f.cats.Prompts(f.identity(ctx), prompts)
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
