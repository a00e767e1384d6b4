// Package restsource loads the configuration's rest and openapi sections
// into REST tools bound to their executors: a rest section's tool, or a
// tool per operation of an OpenAPI document (read from a file or fetched),
// optionally behind a catalog (catalog: search). It checks the sections'
// names, places every problem in the configuration file, and keeps what
// loading left behind ([State]): the operations skipped, the sources not
// loaded, each document's checksum.
//
// It does not register the tools, run them, or serve the catalogs: the
// gateway gives it the REST executor's compile step and the catalog
// constructor ([Loader]) and registers what it returns.
package restsource

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/executors/rest"
	"github.com/toolgate/toolgate/executors/rest/openapi"
	"github.com/toolgate/toolgate/gateway/internal/catalogtool"
	"github.com/toolgate/toolgate/gateway/internal/configerr"
	"github.com/toolgate/toolgate/registry"
)

// maxSourceToolBytes bounds what an openapi source served as one tool per
// operation (catalog: tools) may register: the bytes of its tools' input
// schemas and descriptions, which every tools/list sends and the registry
// compiles. Stripe's 452 tools take 1.2 MB; Microsoft Graph's 11,422 would
// take 1 GB, or 64 MB with each schema capped, and tens of minutes to
// compile. A source over it is not loaded, with a problem that says to
// serve it with catalog: search. A variable for tests only.
var maxSourceToolBytes = 16 << 20

// Loader loads the rest and openapi sections. Compile and State are
// required.
type Loader struct {
	// Compile makes a tool of a spec, bound to its executor: the REST
	// executor's Add.
	Compile func(rest.Spec) (registry.Tool, executors.Executor, error)
	// NewCatalog starts the catalog of openapi source name, whose document
	// is d, for a source served with catalog: search. Required when the
	// configuration has one.
	NewCatalog func(name string, d *openapi.Document) *catalogtool.Catalog
	// Bound, when not nil, is told the registry source and URL of each
	// tool bound (the gateway gives its backend a circuit breaker).
	Bound func(source, url string)
	// Client fetches the documents given by URL; nil means
	// http.DefaultClient.
	Client *http.Client
	// Logger logs each source's tools, warnings and skipped operations;
	// nil discards.
	Logger *slog.Logger
	// State records what loading the OpenAPI sources left behind.
	State *State
}

// pendingTool is a REST tool on its way to registration: a rest section's
// spec, compiled by bind, or a tool an OpenAPI document made, compiled
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

func (l *Loader) logger() *slog.Logger {
	if l.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l.Logger
}

// All compiles cfg's rest and openapi sections into REST tools bound to
// their executors, for the caller to register in one batch, and returns
// the catalogs of the sources served with catalog: search (their tools
// are among tools; their meta-tools are the caller's to make). Every
// problem is returned at once, each as file:line:col: path: message;
// with problems, nothing else is.
func (l *Loader) All(ctx context.Context, cfg *config.Config) (tools []executors.Bound, cats []*catalogtool.Catalog, problems []error) {
	secrets := Secrets(cfg.Secrets())
	problems = NameErrors(cfg)
	var specs []pendingTool
	for i, t := range cfg.Rest {
		specs = append(specs, restSpec(t, i, secrets))
	}
	for i := range cfg.OpenAPI {
		kept, cat, more := l.openapiTools(ctx, cfg, i, secrets)
		specs = append(specs, kept...)
		if cat != nil {
			cats = append(cats, cat)
		}
		problems = append(problems, more...)
	}
	tools, more := l.bind(cfg, specs)
	if problems = append(problems, more...); len(problems) > 0 {
		return nil, nil, problems
	}
	return tools, cats, nil
}

// REST builds the tool of cfg.Rest[i], or returns its problems.
func (l *Loader) REST(cfg *config.Config, i int) ([]executors.Bound, []error) {
	return l.bind(cfg, []pendingTool{restSpec(cfg.Rest[i], i, Secrets(cfg.Secrets()))})
}

// OpenAPI builds the tools of cfg.OpenAPI[i] while serving, reading its
// document again, or returns its problems. A source served through a
// catalog (catalog: search) cannot be built while serving: the catalogs
// are fixed when the gateway starts.
func (l *Loader) OpenAPI(ctx context.Context, cfg *config.Config, i int) ([]executors.Bound, []error) {
	o := cfg.OpenAPI[i]
	if cmp.Or(o.Catalog, cfg.Defaults.Catalog) == config.CatalogSearch {
		return nil, []error{cfg.Locate(config.Problem{Path: fmt.Sprintf("openapi[%d].catalog", i),
			Msg: "a source served with catalog: search cannot be added or changed while serving; restart toolgate"})}
	}
	l.State.Forget(o.Name)
	kept, _, problems := l.openapiTools(ctx, cfg, i, Secrets(cfg.Secrets()))
	bs, more := l.bind(cfg, kept)
	return bs, append(problems, more...)
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
// and its catalog when it is served behind one. A source whose document
// cannot be read or used is a problem only when it is the only source of
// tools; otherwise the gateway starts without it, logs why, and State
// records it.
func (l *Loader) openapiTools(ctx context.Context, cfg *config.Config, i int, secrets []string) (kept []pendingTool, cat *catalogtool.Catalog, problems []error) {
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
		return nil, nil, configerr.Place(cfg, path, err)
	}
	log := l.logger()
	unusable := func(perr error) {
		if onlySource {
			problems = append(problems, perr)
			return
		}
		l.State.failed(o.Name, perr)
		log.Error("openapi source not loaded; serving without it", "source", o.Name, "error", perr.Error())
	}
	doc, err := ReadSpec(ctx, l.Client, o.Spec, src.MaxSpecBytes)
	if err != nil {
		unusable(cfg.Locate(config.Problem{Path: path + ".spec", Msg: err.Error()}))
		return nil, nil, problems
	}
	src.Spec = doc
	l.State.setSum(o.Name, doc)
	d, err := openapi.Open(src)
	if err != nil {
		// Open has checked src's settings (above); what is left is the
		// document's: it does not load, or has no base URL.
		for _, e := range configerr.Place(cfg, path+".spec", err) {
			unusable(e)
		}
		return nil, nil, problems
	}
	for _, w := range d.Warnings() {
		log.Warn("openapi source", "source", o.Name, "warning", w.Msg)
	}
	if cmp.Or(o.Catalog, cfg.Defaults.Catalog) == config.CatalogSearch {
		cat = l.NewCatalog(o.Name, d)
	}
	kept, skipped, over := l.operationTools(o.Name, path, d, cat)
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
	l.State.loaded(skipped)
	if cat == nil {
		log.Info(fmt.Sprintf("openapi source %q: %d tools, %d operations skipped", o.Name, len(kept), len(skipped)),
			"source", o.Name, "tools", len(kept), "skipped", len(skipped))
		return kept, nil, problems
	}
	// Its tools are registered (they dispatch through the pipeline) but
	// listed as three meta-tools.
	log.Info(fmt.Sprintf("openapi source %q: %d tools behind %s, %d operations skipped", o.Name, len(kept), cat.MetaName(catalogtool.Search), len(skipped)),
		"source", o.Name, "tools", len(kept), "skipped", len(skipped), "catalog", string(config.CatalogSearch))
	return kept, cat, problems
}

// operationTools makes a tool of each operation of source's document d
// (config path path) that converts and that the REST executor can send,
// behind cat when it is not nil, and lists the operations skipped. over
// reports that, served as one tool each, the tools' schemas and
// descriptions passed maxSourceToolBytes.
func (l *Loader) operationTools(source, path string, d *openapi.Document, cat *catalogtool.Catalog) (kept []pendingTool, skipped []SkippedOperation, over bool) {
	log := l.logger()
	skip := func(op SkippedOperation) {
		skipped = append(skipped, op)
		log.Debug("openapi operation skipped", "source", source, "operation", op.Operation, "tool", op.Tool, "reason", op.Reason)
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
				log.Debug("openapi operation", "source", source, "operation", w.Operation, "tool", w.Tool, "note", w.Msg)
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
		t, exec, err := l.Compile(sp)
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

// bind compiles the specs of the rest section (those of documents are
// compiled already) and binds every tool to its executor, telling Bound
// of each.
func (l *Loader) bind(cfg *config.Config, specs []pendingTool) (bound []executors.Bound, problems []error) {
	for _, p := range specs {
		t, exec := p.tool, p.exec
		if !p.fromDoc {
			var err error
			if t, exec, err = l.Compile(p.spec); err != nil {
				problems = append(problems, configerr.Place(cfg, p.path, err)...)
				continue
			}
		}
		bound = append(bound, executors.Bound{Tool: t, Exec: exec})
		if l.Bound != nil {
			l.Bound(p.spec.Source, p.spec.URL)
		}
	}
	return bound, problems
}

// minSecretLen is the shortest value from the environment that REST calls
// scrub from results. Shorter ones ("1000", "debug") are settings, and
// replacing every occurrence of them would corrupt results.
const minSecretLen = 6

// Secrets returns the values of all (the configuration's values from the
// environment) that REST calls scrub from results and errors: those of
// at least 6 bytes.
func Secrets(all []string) []string {
	var out []string
	for _, s := range all {
		if len(s) >= minSecretLen {
			out = append(out, s)
		}
	}
	return out
}
