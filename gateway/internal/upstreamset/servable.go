package upstreamset

import (
	"log/slog"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/schemas"
)

// Registered is the registry as Servable reads it ([registry.Registry]).
type Registered interface {
	Get(name string) (*registry.Tool, bool)
}

// Servable returns the tools upstream listed that the registry can take,
// dropping, each with a warning naming it, a tool whose input or output
// schema does not compile, one named as a meta-tool of the upstream's
// catalog (isMeta; nil when it has none) and one whose name another
// source already has in reg (an upstream with prefix "", or two
// upstreams listing the same name under their prefixes): the registry
// would refuse the whole listing for one of them.
func Servable(upstream string, tools []executors.Bound, reg Registered, isMeta func(name string) bool, log *slog.Logger) []executors.Bound {
	source := "upstream:" + upstream
	out := tools[:0:0]
	for _, b := range tools {
		t := &b.Tool
		if _, err := schemas.Compile(t.InputSchema); err != nil {
			log.Warn("dropping an upstream tool whose input schema does not compile", "upstream", upstream, "tool", t.Name, "error", err)
			continue
		}
		if t.OutputSchema != nil {
			if _, err := schemas.Compile(t.OutputSchema); err != nil {
				log.Warn("dropping an upstream tool whose output schema does not compile", "upstream", upstream, "tool", t.Name, "error", err)
				continue
			}
		}
		if isMeta != nil && isMeta(t.Name) {
			log.Warn("dropping an upstream tool named as one of its catalog's meta-tools (catalog: search); exclude it or give the upstream a prefix", "upstream", upstream, "tool", t.Name)
			continue
		}
		if old, ok := reg.Get(t.Name); ok && old.Source != source {
			log.Warn("dropping an upstream tool whose name another source has; give the upstream a prefix", "upstream", upstream, "tool", t.Name, "held_by", old.Source)
			continue
		}
		out = append(out, b)
	}
	return out
}
