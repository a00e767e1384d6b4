package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/executors/rest"
	"github.com/toolgate/toolgate/executors/rest/openapi"
	"github.com/toolgate/toolgate/registry"
)

const (
	specFetchTimeout = 30 * time.Second
	maxSpecBytes     = 16 << 20
)

// restTools compiles the config's rest and openapi sections into REST
// tools bound to their executors, for the caller to register in one batch.
// Every problem is reported at once, each as file:line:col: path: message
// (see [configErrors]).
func (g *Gateway) restTools(cfg *config.Config) ([]executors.Bound, error) {
	secrets := restSecrets(cfg.Secrets())
	type pending struct {
		spec rest.Spec
		path string // config path of the definition, for its errors
	}
	var specs []pending
	errs := nameErrors(cfg)
	for i, t := range cfg.Rest {
		specs = append(specs, pending{path: fmt.Sprintf("rest[%d]", i), spec: rest.Spec{
			Name:             t.Name,
			Description:      t.Description,
			Source:           "rest:" + t.Name,
			Method:           t.Method,
			URL:              t.URL,
			Query:            t.Query,
			Headers:          t.Headers,
			Body:             t.Body,
			InputSchema:      t.InputSchema,
			Idempotent:       t.Idempotent,
			Timeout:          t.Timeout.D(),
			Retry:            retrySpec(cfg, t.Retry),
			MaxResponseBytes: t.MaxResponseBytes,
			AllowedHosts:     t.AllowedHosts,
			Secrets:          secrets,
		}})
	}
	for i, o := range cfg.OpenAPI {
		path := fmt.Sprintf("openapi[%d]", i)
		doc, err := g.readSpec(o.Spec)
		if err != nil {
			errs = append(errs, cfg.Locate(config.Problem{Path: path + ".spec", Msg: err.Error()}))
			continue
		}
		got, warnings, err := openapi.Specs(openapi.Source{
			Name:             o.Name,
			Spec:             doc,
			Location:         o.Spec,
			BaseURL:          o.BaseURL,
			Filter:           registry.Filter{Include: o.Include, Exclude: o.Exclude},
			Headers:          o.Headers,
			Timeout:          o.Timeout.D(),
			Retry:            retrySpec(cfg, o.Retry),
			MaxResponseBytes: o.MaxResponseBytes,
			Secrets:          secrets,
		})
		for _, w := range warnings {
			g.logger.Warn("openapi operation skipped", "source", o.Name, "operation", w.Operation, "reason", w.Msg)
		}
		if err != nil {
			errs = append(errs, configErrors(cfg, path, err)...)
			continue
		}
		for _, s := range got {
			specs = append(specs, pending{path: path, spec: s})
		}
	}
	var bound []executors.Bound
	for _, p := range specs {
		t, exec, err := g.rest.Add(p.spec)
		if err != nil {
			errs = append(errs, configErrors(cfg, p.path, err)...)
			continue
		}
		bound = append(bound, executors.Bound{Tool: t, Exec: exec})
		backend := restBackend(p.spec.URL)
		g.res.restHost[p.spec.Source] = backend
		g.metrics.circuitState(backend, g.res.backends.Get(backend).State())
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return bound, nil
}

// configErrors places each problem in err (a tree of errors joined with
// errors.Join and wrapped) in the configuration file: a
// *registry.FieldError at path.<its field>, anything else at path itself.
func configErrors(cfg *config.Config, path string, err error) []error {
	var out []error
	// top is the outermost error of the branch being walked: a leaf that is
	// not a FieldError is reported with the context its wrappers added.
	var walk func(e, top error)
	walk = func(e, top error) {
		switch x := e.(type) {
		case *registry.FieldError:
			p := path
			if x.Field != "" {
				p += "." + x.Field
			}
			out = append(out, cfg.Locate(config.Problem{Path: p, Key: x.Key, Got: x.Value, Msg: x.Msg}))
		case interface{ Unwrap() []error }:
			for _, c := range x.Unwrap() {
				walk(c, c)
			}
		case interface{ Unwrap() error }:
			if inner := x.Unwrap(); inner != nil {
				walk(inner, top)
				return
			}
			out = append(out, cfg.Locate(config.Problem{Path: path, Msg: top.Error()}))
		default:
			out = append(out, cfg.Locate(config.Problem{Path: path, Msg: top.Error()}))
		}
	}
	walk(err, err)
	return out
}

// nameErrors checks that the names the rest, openapi and upstreams
// sections give tools and prefixes are unique and do not clash: a rest
// tool may be neither a source's prefix nor a name under it
// (registry.UnderPrefix). Each name's own form is checked by its owner
// (registry through the REST executor, openapi and mcpup).
func nameErrors(cfg *config.Config) []error {
	var errs []error
	fail := func(path, got, format string, args ...any) {
		errs = append(errs, cfg.Locate(config.Problem{Path: path, Got: got, Msg: fmt.Sprintf(format, args...)}))
	}
	sources := map[string]int{}
	for i, o := range cfg.OpenAPI {
		if o.Name == "" {
			continue
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
		if t.Name == "" {
			continue
		}
		if j, dup := names[t.Name]; dup {
			fail(path, t.Name, "duplicate tool name, already used by rest[%d]; rename one", j)
			continue
		}
		names[t.Name] = i
		for j, o := range cfg.OpenAPI {
			if registry.UnderPrefix(t.Name, o.Name) {
				fail(path, t.Name, "clashes with openapi[%d], whose tools are named %s<operationId>; rename the tool or the source", j, registry.Prefixed(o.Name, ""))
				break
			}
		}
	}
	ups := map[string]int{}
	for i, u := range cfg.Upstreams {
		path := fmt.Sprintf("upstreams[%d].name", i)
		if u.Name == "" {
			continue
		}
		if j, dup := ups[u.Name]; dup {
			fail(path, u.Name, "duplicate upstream name, already used by upstreams[%d]; rename one", j)
			continue
		}
		ups[u.Name] = i
		if j, clash := sources[u.Name]; clash {
			fail(path, u.Name, "clashes with openapi[%d] of the same name (both prefix tool names with %s); rename one", j, registry.Prefixed(u.Name, ""))
			continue
		}
		for j, t := range cfg.Rest {
			if registry.UnderPrefix(t.Name, u.Name) {
				fail(path, u.Name, "clashes with rest[%d] (%s), as this upstream's tools are named %s<tool>; rename the upstream or the tool", j, registry.QuoteValue(t.Name), registry.Prefixed(u.Name, ""))
				break
			}
		}
	}
	return errs
}

// minSecretLen is the shortest value from the environment that REST tools
// scrub from results. Shorter ones ("1000", "debug") are settings, and
// replacing every occurrence of them would corrupt results.
const minSecretLen = 6

func restSecrets(all []string) []string {
	var out []string
	for _, s := range all {
		if len(s) >= minSecretLen {
			out = append(out, s)
		}
	}
	return out
}

// readSpec reads an OpenAPI document from a file or an http(s) URL.
func (g *Gateway) readSpec(location string) ([]byte, error) {
	if !strings.HasPrefix(location, "http://") && !strings.HasPrefix(location, "https://") {
		f, err := os.Open(location)
		if err != nil {
			return nil, fmt.Errorf("reading the spec: %w", err)
		}
		defer f.Close()
		return readCapped(f)
	}
	ctx, cancel := context.WithTimeout(g.root, specFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, location, nil)
	if err != nil {
		return nil, fmt.Errorf("fetching the spec: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		// *url.Error repeats the URL, which may carry a token.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return nil, fmt.Errorf("fetching the spec from %s: %w", req.URL.Host, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching the spec: HTTP %s", strconv.Itoa(resp.StatusCode))
	}
	return readCapped(resp.Body)
}

func readCapped(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxSpecBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the spec: %w", err)
	}
	if len(b) > maxSpecBytes {
		return nil, fmt.Errorf("the spec is larger than %d bytes", maxSpecBytes)
	}
	return b, nil
}
