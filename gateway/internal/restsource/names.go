package restsource

import (
	"fmt"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/gateway/internal/configerr"
	"github.com/toolgate/toolgate/registry"
)

// NameErrors checks that the names the rest and openapi sections give
// tools and prefixes are unique and do not clash: a rest tool may be
// neither a source's prefix nor a name under it (registry.UnderPrefix).
// Each name's own form is checked by its owner (registry through the REST
// executor, openapi); the upstreams' names are checked by their builder.
func NameErrors(cfg *config.Config) []error {
	var errs []error
	fail := func(path, got, format string, args ...any) {
		errs = append(errs, cfg.Locate(config.Problem{Path: path, Got: got, Msg: fmt.Sprintf(format, args...)}))
	}
	sources := map[string]int{}
	for i, o := range cfg.OpenAPI {
		if registry.ValidatePrefix(o.Name) != nil {
			continue // openapi reports it
		}
		if j, dup := sources[o.Name]; dup {
			fail(fmt.Sprintf("openapi[%d].name", i), o.Name, "duplicate source name, already used by openapi[%d]; rename one", j)
			continue
		}
		sources[o.Name] = i
	}
	names := map[string]int{}
	for i, t := range cfg.Rest {
		path := fmt.Sprintf("rest[%d].name", i)
		if registry.ValidateName(t.Name) != nil {
			continue // the REST executor reports it
		}
		if j, dup := names[t.Name]; dup {
			fail(path, t.Name, "duplicate tool name, already used by rest[%d]; rename one", j)
			continue
		}
		names[t.Name] = i
		for j, o := range cfg.OpenAPI {
			if registry.ValidatePrefix(o.Name) == nil && registry.UnderPrefix(t.Name, o.Name) {
				fail(path, t.Name, "clashes with openapi[%d], whose tools are named %s<operationId>; rename the tool or the source", j, registry.Prefixed(configerr.Shown(cfg, o.Name, "<its name>"), ""))
				break
			}
		}
	}
	return errs
}
