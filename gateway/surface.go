package gateway

import (
	"context"
	"encoding/json"

	"github.com/toolgate/toolgate/executors/mcpup"
	"github.com/toolgate/toolgate/gateway/internal/mcpfront"
	"github.com/toolgate/toolgate/internal/mcppeer"
)

// The MCP surface beyond tools: what upstreams offer besides tools
// (resources, resource templates, prompts, completion, logging) reaches
// the MCP front here, and the front's requests about them reach the
// upstreams. The two sides speak through mcpup.Catalog/Forward and
// mcpfront.Catalog, so that neither imports the other; each call's client
// (mcppeer.Peer) travels to the upstream side in the call's context
// (mcpup.WithPeer), which relays the upstream's sampling, elicitation and
// roots requests and its log messages to it.

// upstreamCatalog serves upstream's catalog, as it listed it, through the
// front.
func (g *Gateway) upstreamCatalog(upstream string, c *mcpup.Catalog) {
	cat := &mcpfront.Catalog{
		Resources:   c.Resources,
		Templates:   c.Templates,
		Subscribe:   c.Subscribe,
		Completions: c.Completions,
		Namespace:   c.Namespace,
		Forward: func(ctx context.Context, peer mcppeer.Peer, method string, params any) (json.RawMessage, error) {
			if peer != nil {
				ctx = mcpup.WithPeer(ctx, peer)
			}
			return g.forwardSurface(ctx, upstream, method, params)
		},
	}
	for _, p := range c.Prompts {
		cat.Prompts = append(cat.Prompts, mcpfront.CatalogPrompt{Name: p.Name, Orig: p.Orig, Raw: p.Raw})
	}
	for _, f := range g.fronts() {
		f.SetCatalog("upstream:"+upstream, cat)
	}
}

// SetLogLevel passes the most verbose level a session set to every
// upstream that logs.
func (b frontBackend) SetLogLevel(ctx context.Context, level string) {
	b.g.ups.SetLogLevel(ctx, level)
}
