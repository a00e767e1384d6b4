package config

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Endpoint is a virtual MCP server on the same toolgate (docs/endpoints.md):
// a curated bundle of the gateway's tools, with instructions of its own,
// served over streamable HTTP at server.mcp_path + "/" + Name (and, with
// server.sse, legacy SSE at /sse/Name), and over stdio with `toolgate
// stdio --endpoint NAME`. A principal's own permissions still apply
// inside an endpoint: it sees the tools both allow. Without endpoints, the
// one endpoint at server.mcp_path serves every tool, as always.
type Endpoint struct {
	// Name names the endpoint in its path, logs and events: lowercase
	// letters, digits, - and _, starting with a letter or digit.
	Name string `yaml:"name"`
	// Tools are globs over every source's tool names (gh__*, calc); the
	// endpoint serves the tools one of them matches, with the resources,
	// prompts and log messages of their sources. Required.
	Tools []string `yaml:"tools"`
	// Instructions are what initialize tells the endpoint's clients.
	// Default: the gateway's own.
	Instructions string `yaml:"instructions"`
	// Principals are globs over the names of the auth section's
	// principals who may use the endpoint; others get 403. Default ["*"]:
	// every authenticated principal. Needs auth.
	Principals []string `yaml:"principals"`
	// Catalog is how the endpoint lists its tools: [CatalogTools] lists
	// each; [CatalogSearch] lists the gateway-wide search meta-tools
	// (toolgate_search, toolgate_describe, toolgate_call), which find,
	// describe and call the endpoint's tools, and those of them the
	// top-level catalog.always names. Default (empty): the top-level
	// catalog.mode.
	Catalog Catalog `yaml:"catalog"`
}

// Search reports whether e lists its tools as the search meta-tools,
// under the top-level catalog section top.
func (e Endpoint) Search(top GatewayCatalog) bool {
	if e.Catalog == "" {
		return top.Search()
	}
	return e.Catalog == CatalogSearch
}

// endpointName is the shape of an endpoint's name: one path segment.
var endpointName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// reservedEndpoints are names that would shadow toolgate's own routes
// where server.mcp_path is "/".
var reservedEndpoints = []string{"sse", "message", "metrics", "healthz", "readyz", "events", "ui", "oauth"}

// endpoints checks the endpoints section.
func (c *checker) endpoints(cfg *Config) {
	if c.broken["endpoints"] {
		return
	}
	first := map[string]int{}
	for i, e := range cfg.Endpoints {
		p := fmt.Sprintf("endpoints[%d]", i)
		switch {
		case e.Name == "":
			c.fail(p+".name", "", "is required: one path segment, like github")
		case !endpointName.MatchString(e.Name):
			c.fail(p+".name", quoteShort(e.Name), "must be lowercase letters, digits, - and _ (at most 63, starting with a letter or digit), like github")
		case slices.Contains(reservedEndpoints, e.Name):
			c.fail(p+".name", quoteShort(e.Name), "is reserved for toolgate's own /%s; pick another name", e.Name)
		default:
			if j, dup := first[e.Name]; dup {
				c.fail(p+".name", quoteShort(e.Name), "is already the name of endpoints[%d]; each endpoint needs its own", j)
			}
			first[e.Name] = i
		}
		if len(e.Tools) == 0 {
			c.fail(p+".tools", "", "is required: globs of the tools the endpoint serves, like [\"gh__*\"]")
		}
		c.globs(p+".tools", e.Tools)
		if !cfg.Auth.Enabled() && slices.ContainsFunc(e.Principals, func(g string) bool { return g != "*" }) {
			c.fail(p+".principals", "", "needs authentication: without an auth section every client is one anonymous principal; remove principals or configure auth")
		}
		c.globs(p+".principals", e.Principals)
		if !e.Catalog.Valid() {
			c.fail(p+".catalog", quoteShort(string(e.Catalog)), "must be %s or %s; search lists the meta-tools toolgate_search, toolgate_describe and toolgate_call in place of the endpoint's tools", CatalogTools, CatalogSearch)
		}
	}
}

// EndpointPath is where endpoint name is served over streamable HTTP,
// below mcpPath.
func EndpointPath(mcpPath, name string) string {
	return strings.TrimSuffix(mcpPath, "/") + "/" + name
}
