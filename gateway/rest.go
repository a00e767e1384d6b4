package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/executors/rest"
	"github.com/toolgate/toolgate/executors/rest/openapi"
	"github.com/toolgate/toolgate/gateway/internal/catalogtool"
	"github.com/toolgate/toolgate/internal/httpheader"
	"github.com/toolgate/toolgate/registry"
)

const specFetchTimeout = 30 * time.Second

// maxSourceToolBytes bounds what an openapi source served as one tool per
// operation (catalog: tools) may register: the bytes of its tools' input
// schemas and descriptions, which every tools/list sends and the registry
// compiles. Stripe's 452 tools take 1.2 MB; Microsoft Graph's 11,422 would
// take 1 GB, or 64 MB with each schema capped, and tens of minutes to
// compile. A source over it is not loaded, with a problem that says to
// serve it with catalog: search. A variable for tests only.
var maxSourceToolBytes = 16 << 20

// pendingTool is a REST tool on its way to registration: a rest section's
// spec, compiled by bindREST, or a tool an OpenAPI document made, compiled
// already.
type pendingTool struct {
	spec rest.Spec
	path string // config path of the definition, for its errors
	// fromDoc marks a spec made from an OpenAPI document, already added:
	// tool and exec are its.
	fromDoc bool
	tool    registry.Tool
	exec    executors.Executor
}

// restTools compiles the config's rest and openapi sections into REST
// tools bound to their executors, for the caller to register in one batch.
// Every problem is reported at once, each as file:line:col: path: message
// (see [configErrors]).
func (g *Gateway) restTools(cfg *config.Config) ([]executors.Bound, error) {
	secrets := restSecrets(cfg.Secrets())
	errs := nameErrors(cfg)
	var specs []pendingTool
	for i, t := range cfg.Rest {
		specs = append(specs, restSpec(t, i, secrets))
	}
	var metaTools []executors.Bound // the catalogs' meta-tools (catalogtool.go)
	for i := range cfg.OpenAPI {
		kept, meta, problems := g.openapiTools(cfg, i, secrets)
		specs = append(specs, kept...)
		metaTools = append(metaTools, meta...)
		errs = append(errs, problems...)
	}
	bound, problems := g.bindREST(cfg, specs)
	if errs = append(errs, problems...); len(errs) > 0 {
		return nil, joinProblems(errs...)
	}
	return append(bound, metaTools...), nil
}

// restSpec is the REST executor's spec of t, cfg.Rest[i].
func restSpec(t config.RESTTool, i int, secrets []string) pendingTool {
	return pendingTool{path: fmt.Sprintf("rest[%d]", i), spec: rest.Spec{
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
		MaxResponseBytes: t.MaxResponseBytes,
		AllowedHosts:     t.AllowedHosts,
		Secrets:          secrets,
	}}
}

// openapiTools reads the document of cfg.OpenAPI[i] and returns its tools,
// and, behind a catalog, the catalog's meta-tools. A source whose document
// cannot be read or used is a problem only when it is the only source of
// tools; otherwise toolgate starts without it, logs why, and /readyz says
// degraded.
func (g *Gateway) openapiTools(cfg *config.Config, i int, secrets []string) (kept []pendingTool, meta []executors.Bound, problems []error) {
	o := cfg.OpenAPI[i]
	path := fmt.Sprintf("openapi[%d]", i)
	onlySource := len(cfg.OpenAPI) == 1 && len(cfg.Rest) == 0 && len(cfg.Upstreams) == 0 && len(cfg.Builtin) == 0
	src := openapi.Source{
		Name:             o.Name,
		Location:         o.Spec,
		BaseURL:          o.BaseURL,
		Include:          o.Include,
		Exclude:          o.Exclude,
		Headers:          o.Headers,
		Auth:             o.Auth,
		MaxSpecBytes:     o.MaxSpecBytes,
		Timeout:          o.Timeout.D(),
		MaxResponseBytes: o.MaxResponseBytes,
		Secrets:          secrets,
	}
	// The source's own settings first: a document is not fetched for a
	// source that cannot be used.
	if err := src.Validate(); err != nil {
		return nil, nil, configErrors(cfg, path, err)
	}
	unusable := func(perr error) {
		if onlySource {
			problems = append(problems, perr)
			return
		}
		g.openapi.failed(o.Name, perr)
		g.logger.Error("openapi source not loaded; serving without it", "source", o.Name, "error", perr.Error())
	}
	doc, err := g.readSpec(o.Spec, src.MaxSpecBytes)
	if err != nil {
		unusable(cfg.Locate(config.Problem{Path: path + ".spec", Msg: err.Error()}))
		return nil, nil, problems
	}
	src.Spec = doc
	g.openapi.setSum(o.Name, doc)
	d, err := openapi.Open(src)
	if err != nil {
		// Open has checked src's settings (above); what is left is the
		// document's: it does not load, or has no base URL.
		for _, e := range configErrors(cfg, path+".spec", err) {
			unusable(e)
		}
		return nil, nil, problems
	}
	for _, w := range d.Warnings() {
		g.logger.Warn("openapi source", "source", o.Name, "warning", w.Msg)
	}
	var cat *catalogtool.Catalog
	if cmp.Or(o.Catalog, cfg.Defaults.Catalog) == config.CatalogSearch {
		cat = g.newCatalog(o.Name, d)
	}
	kept, skipped, over := g.operationTools(o.Name, path, d, cat)
	if over {
		// Served as one tool each, a document this large would take
		// minutes and gigabytes to register, and no client could list it;
		// behind a catalog its tools are built on first use.
		unusable(cfg.Locate(config.Problem{Path: path + ".spec", Msg: fmt.Sprintf(
			"its %d operations make more tools than a client can list: their input schemas and descriptions pass %d MiB before the last; "+
				"serve it with catalog: search (three meta-tools; each tool is built on first use), or select fewer operations with include or exclude",
			d.Len(), maxSourceToolBytes>>20)}))
		return nil, nil, problems
	}
	g.openapi.loaded(skipped)
	if cat == nil {
		g.logger.Info(fmt.Sprintf("openapi source %q: %d tools, %d operations skipped", o.Name, len(kept), len(skipped)),
			"source", o.Name, "tools", len(kept), "skipped", len(skipped))
		return kept, nil, problems
	}
	// Its tools are registered (they dispatch through the pipeline) but
	// listed as three meta-tools.
	if g.catalogs == nil {
		g.catalogs = map[string]*catalogtool.Catalog{}
	}
	g.catalogs[cat.Source()] = cat
	g.logger.Info(fmt.Sprintf("openapi source %q: %d tools behind %s, %d operations skipped", o.Name, len(kept), cat.MetaName(catalogtool.Search), len(skipped)),
		"source", o.Name, "tools", len(kept), "skipped", len(skipped), "catalog", string(config.CatalogSearch))
	return kept, cat.Tools(catalogCallExec{g: g, c: cat}), problems
}

// operationTools makes a tool of each operation of source's document d
// (config path path) that converts and that the REST executor can send,
// behind cat when it is not nil, and lists the operations skipped. over
// reports that, served as one tool each, the tools' schemas and
// descriptions passed maxSourceToolBytes.
func (g *Gateway) operationTools(source, path string, d *openapi.Document, cat *catalogtool.Catalog) (kept []pendingTool, skipped []SkippedOperation, over bool) {
	skip := func(op SkippedOperation) {
		skipped = append(skipped, op)
		g.logger.Debug("openapi operation skipped", "source", source, "operation", op.Operation, "tool", op.Tool, "reason", op.Reason)
	}
	size := 0 // bytes of the kept tools' input schemas and descriptions
	for i := range d.Len() {
		// A source behind a catalog builds each tool's input schema on
		// first use (catalogtool): the outline says all else.
		var sp rest.Spec
		var ws []openapi.Warning
		var ok bool
		if cat != nil {
			sp, ws, ok = d.Outline(i)
		} else {
			sp, ws, ok = d.Spec(i)
		}
		for _, w := range ws {
			if w.Skipped {
				skip(SkippedOperation{Source: source, Operation: w.Operation, Tool: w.Tool, Reason: w.Msg})
			} else {
				g.logger.Debug("openapi operation", "source", source, "operation", w.Operation, "tool", w.Tool, "note", w.Msg)
			}
		}
		if !ok {
			continue
		}
		op := d.Operation(i)
		if cat != nil && cat.IsMeta(sp.Name) {
			skip(SkippedOperation{Source: source, Operation: op.Method + " " + op.Path, Tool: sp.Name,
				Reason: "its tool name is one of the catalog's meta-tools (catalog: search); exclude it, or rename the source"})
			continue
		}
		if cat != nil {
			sp.InputSchema = cat.StubSchema()
		}
		// A spec the REST executor refuses is skipped like any operation
		// the importer could not convert: the document's problem, not the
		// file's.
		t, exec, err := g.rest.Add(sp)
		if err != nil {
			skip(SkippedOperation{Source: source, Operation: sp.Method + " " + sp.URL, Tool: sp.Name,
				Reason: "the REST executor cannot send it: " + strings.ReplaceAll(err.Error(), "\n", "; ")})
			continue
		}
		if cat != nil {
			exec = cat.Add(t, op, i, exec)
		} else if size += len(t.InputSchema) + len(t.Description); size > maxSourceToolBytes {
			return nil, skipped, true
		}
		kept = append(kept, pendingTool{path: path, spec: sp, fromDoc: true, tool: t, exec: exec})
	}
	return kept, skipped, false
}

// bindREST compiles the specs of the rest section (those of documents are
// compiled already) and binds every tool to its executor, with its
// backend's circuit state for the metrics.
func (g *Gateway) bindREST(cfg *config.Config, specs []pendingTool) (bound []executors.Bound, problems []error) {
	for _, p := range specs {
		t, exec := p.tool, p.exec
		if !p.fromDoc {
			var err error
			if t, exec, err = g.rest.Add(p.spec); err != nil {
				problems = append(problems, configErrors(cfg, p.path, err)...)
				continue
			}
		}
		bound = append(bound, executors.Bound{Tool: t, Exec: exec})
		backend := restBackend(p.spec.URL)
		g.res.restHost.Store(p.spec.Source, backend)
		g.metrics.CircuitState(backend, g.res.backend(backend).State())
	}
	return bound, problems
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
			x = inFileOrder(cfg, path, x)
			out = append(out, cfg.Locate(config.Problem{Path: joinPath(path, x.Field), Key: x.Key, Got: x.Value, Msg: x.Msg}))
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

func joinPath(path, field string) string {
	if field == "" {
		return path
	}
	return path + "." + field
}

// inFileOrder returns fe, or for a header written twice in different
// cases (a REST tool's, an OpenAPI source's or an upstream's headers) the
// same problem reported at the spelling written last: the owner sees only
// a map, the file knows the order.
func inFileOrder(cfg *config.Config, path string, fe *registry.FieldError) *registry.FieldError {
	d, ok := errors.AsType[*httpheader.DuplicateError](fe.Err)
	if !ok {
		return fe
	}
	// The field's parent ("headers") is the same for both spellings.
	parent := strings.TrimSuffix(fe.Field, registry.FieldPath("", d.Name))
	sw := d.Swapped()
	other := &registry.FieldError{Field: parent + registry.FieldPath("", sw.Name), Key: sw.Key, Value: sw.Value, Msg: sw.Msg, Err: sw.Err}
	at := cfg.Locate(config.Problem{Path: joinPath(path, fe.Field), Key: true})
	otherAt := cfg.Locate(config.Problem{Path: joinPath(path, other.Field), Key: true})
	if cmp.Or(cmp.Compare(otherAt.Line, at.Line), cmp.Compare(otherAt.Col, at.Col)) > 0 {
		return other
	}
	return fe
}

// nameErrors checks that the names the rest and openapi sections give
// tools and prefixes are unique and do not clash: a rest tool may be
// neither a source's prefix nor a name under it (registry.UnderPrefix).
// Each name's own form is checked by its owner (registry through the REST
// executor, openapi); [upstreamNameErrors] checks the upstreams'.
func nameErrors(cfg *config.Config) []error {
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
				fail(path, t.Name, "clashes with openapi[%d], whose tools are named %s<operationId>; rename the tool or the source", j, registry.Prefixed(shownName(cfg, o.Name, "<its name>"), ""))
				break
			}
		}
	}
	return errs
}

// shownName returns name for a message about another value, or instead
// when name holds a value that came from the environment: those are never
// shown, and [config.Config.Locate] hides only the value it places.
func shownName(cfg *config.Config, name, instead string) string {
	for _, s := range cfg.Secrets() {
		if s != "" && strings.Contains(name, s) {
			return instead
		}
	}
	return name
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

// readSpec reads an OpenAPI document from a file or an http(s) URL,
// told apart as config told them apart when it checked the location: a
// URL holds "://" (and config has checked its scheme, in any case).
func (g *Gateway) readSpec(location string, limit int64) ([]byte, error) {
	if limit <= 0 {
		limit = openapi.DefaultMaxSpecBytes
	}
	if !strings.Contains(location, "://") {
		f, err := os.Open(location)
		if err != nil {
			return nil, fmt.Errorf("reading the spec: %w", err)
		}
		defer f.Close()
		return readSpecCapped(f, limit)
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
	return readSpecCapped(resp.Body, limit)
}

// readSpecCapped reads a spec of at most limit bytes from r: one byte
// more is an error.
func readSpecCapped(r io.Reader, limit int64) ([]byte, error) {
	b, err := rest.ReadCapped(r, limit+1, -1)
	if err != nil {
		return nil, fmt.Errorf("reading the spec: %w", err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("the spec is larger than max_spec_bytes (%d bytes); raise max_spec_bytes", limit)
	}
	return b, nil
}

// SkippedOperation is an operation of an OpenAPI source that made no
// tool, with why.
type SkippedOperation struct {
	// Source is the openapi source's name.
	Source string
	// Operation is "METHOD /path", with " (operationId)" when it has one.
	Operation string
	// Tool is the name its tool would have had.
	Tool string
	// Reason says why it was skipped.
	Reason string
}

// SkippedOperations returns the operations of the OpenAPI sources that
// made no tool, in source then document order (toolgate tools --skipped).
func (g *Gateway) SkippedOperations() []SkippedOperation {
	g.openapi.mu.Lock()
	defer g.openapi.mu.Unlock()
	return slices.Clone(g.openapi.skipped)
}

// SourceProblems returns the problems of the OpenAPI sources that
// toolgate started without (their document could not be read or used),
// each placed in the configuration file as file:line:col. New fails
// instead when such a source is the only source of tools; toolgate
// validate reports these as errors.
func (g *Gateway) SourceProblems() []error {
	g.openapi.mu.Lock()
	defer g.openapi.mu.Unlock()
	out := make([]error, 0, len(g.openapi.problems))
	for _, p := range g.openapi.problems {
		out = append(out, p.err)
	}
	return out
}

// openapiState is what loading the OpenAPI sources left behind.
type openapiState struct {
	mu       sync.Mutex
	skipped  []SkippedOperation
	problems []sourceProblem
	down     []string // names of the sources not loaded, for /readyz
	// sums are the SHA-256 of each source's document as last read, so that
	// a reload tells a changed document from an unchanged one (sources.go).
	sums map[string][32]byte
}

// setSum records the document source was loaded from.
func (s *openapiState) setSum(source string, doc []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sums == nil {
		s.sums = map[string][32]byte{}
	}
	s.sums[source] = sha256Of(doc)
}

// sum returns the SHA-256 of the document source was last loaded from.
func (s *openapiState) sum(source string) ([32]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sum, ok := s.sums[source]
	return sum, ok
}

// sourceProblem is why an OpenAPI source was not loaded.
type sourceProblem struct {
	source string
	err    error
}

// loaded records the operations of a source that made no tool.
func (s *openapiState) loaded(skipped []SkippedOperation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.skipped = append(s.skipped, skipped...)
}

func (s *openapiState) failed(source string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.problems = append(s.problems, sourceProblem{source, err})
	if !slices.Contains(s.down, source) {
		s.down = append(s.down, source)
	}
}

// forget drops what loading source left behind, before it is loaded
// again or removed.
func (s *openapiState) forget(source string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.skipped = slices.DeleteFunc(s.skipped, func(o SkippedOperation) bool { return o.Source == source })
	s.problems = slices.DeleteFunc(s.problems, func(p sourceProblem) bool { return p.source == source })
	s.down = slices.DeleteFunc(s.down, func(n string) bool { return n == source })
	delete(s.sums, source)
}

// unavailable returns the names of the OpenAPI sources toolgate started
// without, or nil.
func (s *openapiState) unavailable() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.down)
}
