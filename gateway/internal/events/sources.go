package events

import (
	"slices"
	"strings"

	"github.com/toolgate/toolgate/internal/principal"
	"github.com/toolgate/toolgate/registry"
)

// Listing is what the page's sources are built from: the gateway's
// tools and what it knows of their upstreams and backends.
type Listing struct {
	// Tools are the registered tools.
	Tools []*registry.Tool
	// Up is, by upstream name, whether each upstream MCP server is up.
	Up map[string]bool
	// NeedsAuth is, by upstream name, the command that authorizes an
	// upstream waiting for a person.
	NeedsAuth map[string]string
	// Backend returns the backend t's calls go to and its breaker's
	// state; "" and "" without one.
	Backend func(t *registry.Tool) (name, circuit string)
}

// upstreamPrefix begins the source of an upstream MCP server's tools.
const upstreamPrefix = "upstream:"

// Sources are l's tools by source, sorted, that id (nil without
// authentication) may see; the backends they call only for admins
// (host:port, issue 31, item 7). An upstream waiting for authorization
// with no tool id may see is shown to admins only.
func (l *Listing) Sources(id *principal.Identity) []Source {
	admin := id == nil || id.Admin
	var sources []Source
	index := map[string]int{}
	for _, t := range l.Tools {
		if !admin && !id.Permits(t.Name) {
			continue
		}
		i, ok := index[t.Source]
		if !ok {
			i = len(sources)
			index[t.Source] = i
			s := Source{Source: t.Source}
			if name, isUp := strings.CutPrefix(t.Source, upstreamPrefix); isUp {
				up := l.Up[name]
				s.Up = &up
			}
			sources = append(sources, s)
		}
		ut := Tool{Name: t.Name, Kind: string(t.Kind)}
		if name, circuit := l.Backend(t); circuit != "" {
			ut.Circuit = circuit
			if admin {
				ut.Backend = name
			}
		}
		sources[i].Tools = append(sources[i].Tools, ut)
	}
	for name, cmd := range l.NeedsAuth {
		source := upstreamPrefix + name
		i, ok := index[source]
		switch {
		case ok:
			sources[i].NeedsAuth = cmd
		case admin: // no tool of it to permit: only an admin sees it
			up := false
			sources = append(sources, Source{Source: source, Up: &up, NeedsAuth: cmd, Tools: []Tool{}})
		}
	}
	slices.SortFunc(sources, func(a, b Source) int { return strings.Compare(a.Source, b.Source) })
	return sources
}
