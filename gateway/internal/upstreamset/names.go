package upstreamset

import (
	"fmt"
	"strings"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/gateway/internal/configerr"
	"github.com/toolgate/toolgate/registry"
)

// NameErrors checks that cfg's upstreams' names are unique and clear of
// the openapi sources' and the rest tools' names (an upstream's tools are
// named <name>__<tool>), and the prefixes of those that set one (see
// prefixErrors). Each name's own form is checked by mcpup. A name
// holding a secret is not shown ([configerr.Shown]).
func NameErrors(cfg *config.Config) []error {
	shown := func(name, instead string) string { return configerr.Shown(cfg, name, instead) }
	var errs []error
	fail := func(path, got, format string, args ...any) {
		errs = append(errs, cfg.Locate(config.Problem{Path: path, Got: got, Msg: fmt.Sprintf(format, args...)}))
	}
	sources := map[string]int{}
	for i, o := range cfg.OpenAPI {
		if _, dup := sources[o.Name]; !dup && registry.ValidatePrefix(o.Name) == nil {
			sources[o.Name] = i
		}
	}
	ups := map[string]int{}
	for i, u := range cfg.Upstreams {
		path := fmt.Sprintf("upstreams[%d].name", i)
		if registry.ValidatePrefix(u.Name) != nil {
			continue // mcpup reports it
		}
		if j, dup := ups[u.Name]; dup {
			fail(path, u.Name, "duplicate upstream name, already used by upstreams[%d]; rename one", j)
			continue
		}
		ups[u.Name] = i
		if u.Prefix != nil {
			continue // prefixErrors checks it
		}
		if j, clash := sources[u.Name]; clash {
			fail(path, u.Name, "clashes with openapi[%d] of the same name (both prefix tool names with %s); rename one", j, registry.Prefixed(shown(u.Name, "<this name>"), ""))
			continue
		}
		for j, t := range cfg.Rest {
			if registry.UnderPrefix(t.Name, u.Name) {
				fail(path, u.Name, "clashes with rest[%d] (%s), as this upstream's tools are named %s<tool>; rename the upstream or the tool", j, shown(registry.QuoteValue(t.Name), "its name"), registry.Prefixed(shown(u.Name, "<this name>"), ""))
				break
			}
		}
	}
	return append(errs, prefixErrors(cfg)...)
}

// prefixErrors checks the upstreams that set prefix: a non-empty prefix
// may be no other upstream's or openapi source's, and no rest tool's name
// may start with it. An empty one is checked as tools are listed: the
// registry refuses a name another source holds.
func prefixErrors(cfg *config.Config) []error {
	shown := func(name, instead string) string { return configerr.Shown(cfg, name, instead) }
	var errs []error
	taken := map[string]string{} // effective prefix → who has it
	for i, o := range cfg.OpenAPI {
		taken[o.Name+registry.Separator] = fmt.Sprintf("openapi[%d]", i)
	}
	for i, u := range cfg.Upstreams {
		if u.Prefix == nil {
			taken[u.Name+registry.Separator] = fmt.Sprintf("upstreams[%d]", i)
		}
	}
	for i, u := range cfg.Upstreams {
		if u.Prefix == nil || *u.Prefix == "" {
			continue
		}
		p := *u.Prefix
		path := fmt.Sprintf("upstreams[%d].prefix", i)
		shownP := shown(registry.QuoteValue(p), "this prefix")
		if other, clash := taken[p]; clash {
			errs = append(errs, cfg.Locate(config.Problem{Path: path, Got: p, Msg: fmt.Sprintf("%s is also the prefix of %s's tools; give one of them another prefix", shownP, other)}))
			continue
		}
		taken[p] = fmt.Sprintf("upstreams[%d]", i)
		for j, t := range cfg.Rest {
			if strings.HasPrefix(t.Name, p) {
				errs = append(errs, cfg.Locate(config.Problem{Path: path, Got: p, Msg: fmt.Sprintf("clashes with rest[%d] (%s), whose name starts with %s; change the prefix or rename the tool", j, shown(registry.QuoteValue(t.Name), "its name"), shownP)}))
				break
			}
		}
	}
	return errs
}
