// Package catalogtool serves tools through search (issues 15 and 30): a
// catalog's tools are registered, so that they dispatch, validate, count
// in metrics and show in toolgate tools, but they are hidden from
// tools/list, which lists three meta-tools instead:
//
//	<prefix>search    keyword search over the tools' names, titles,
//	                  descriptions and parameter names (an OpenAPI
//	                  tool's operationId, tags and path too); names and
//	                  one-line summaries, best first, at most maxResults
//	<prefix>describe  one tool's description and input schema
//	<prefix>call      one tool called by name, through the whole pipeline
//
// A catalog is one of two sorts:
//
//   - an OpenAPI source's ([New]): a fixed set of tools, each registered
//     with a stub schema and built on first use (openapi.go);
//   - a tracking catalog ([NewTracking]): the registered tools a
//     predicate selects (an upstream's, the rest tools, every tool of the
//     gateway), kept up to date by [Catalog.Track] from the registry's
//     changes, so an upstream's list_changed updates it. It may include
//     OpenAPI catalogs ([Catalog.Include]), searched and described through
//     them.
//
// This package owns the catalogs: search, describe and the hidden tools'
// building on first use; and a gateway's [Set] of them: which catalog
// hides which tool, the tracking catalogs following the registry, and
// the suggestions of an unknown name pointing at search tools. <prefix>call is the gateway's
// (gateway/catalogtool.go): it re-enters the pipeline as toolgate_batch
// does, its executor finding the outer call in its context and running
// the inner call ([Catalog.Resolve] names its tool) with the outer call's
// principal, session and thread, so validation, permissions, guards,
// hooks, limits, metrics and events apply to it as to a direct call, and
// its result is the direct call's. search and describe show only the
// tools the caller's principal may call.
//
// A hidden tool is not in the MCP front: a client that calls it by name is
// told it is unknown and pointed at <prefix>call ([Catalog.HiddenError]).
// toolgate_batch and gateway.Gateway.Call reach hidden tools by name,
// through the pipeline.
//
// The package does not import gateway: what it needs of it comes in an
// [Env].
package catalogtool

import (
	"bytes"
	"container/list"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/executors/rest"
	"github.com/toolgate/toolgate/executors/rest/openapi"
	"github.com/toolgate/toolgate/internal/principal"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

// Meta-tool suffixes: <prefix>search, <prefix>describe, <prefix>call
// ([Catalog.MetaName]).
const (
	Search   = "search"
	Describe = "describe"
	Call     = "call"
)

// maxResults caps the results of one search; defaultResults is how many a
// search without a limit returns.
const (
	maxResults     = 50
	defaultResults = 10
)

// callTimeout bounds a whole <prefix>call, as a backstop only: the
// inner call runs under its own tool's deadline.
const callTimeout = 24 * time.Hour

// Env is what a catalog needs of the gateway that serves it. Tool must be
// set; Compile, Replace and CheckArgs are used by OpenAPI catalogs only.
// Each may be called from any goroutine.
type Env struct {
	// Logger logs the notes of tools built and failures to put stubs
	// back; nil discards.
	Logger *slog.Logger
	// Compile makes a tool of an operation's spec: the REST executor's
	// Add.
	Compile func(rest.Spec) (registry.Tool, executors.Executor, error)
	// Replace swaps registered tools for new definitions of the same
	// names and sources, keeping their executors.
	Replace func(ts ...registry.Tool) error
	// Tool returns the registered tool called name.
	Tool func(name string) (*registry.Tool, bool)
	// CheckArgs checks arguments against a tool's input schema, as the
	// pipeline's validate step does; its error is of class validation.
	CheckArgs func(t *registry.Tool, args map[string]any) error
}

// Catalog is a set of tools served as meta-tools. An OpenAPI catalog is
// built with [New] and [Catalog.Add] before it is served, a tracking
// catalog with [NewTracking] and [Catalog.Include]; after that only which
// tools are built (OpenAPI) or tracked (tracking) changes. Its methods are
// then safe for concurrent use.
type Catalog struct {
	name   string // what the meta-tools' texts call it: the source's name, or "" for every tool
	prefix string // the meta-tools' names' prefix: "fs__", "toolgate_"
	env    Env

	// An OpenAPI catalog's (openapi.go); fixed once served.
	source string // the hidden tools' registry source, "openapi:<name>"
	doc    *openapi.Document
	stub   json.RawMessage // the hidden tools' input schema until built
	// buildMu serializes building and unbuilding tools.
	buildMu sync.Mutex
	// mu guards the entries' built state and the recency list.
	mu       sync.Mutex
	recent   list.List // built entries, most recently used first
	bytes    int       // the built entries' schema bytes
	maxBytes int       // the bound on bytes: maxBuiltSchemaBytes
	builds   int       // how many tools were built, for tests

	member func(*registry.Tool) bool // which registered tools a tracking catalog holds; nil for OpenAPI catalogs
	// tmu guards ix and subs.
	tmu  sync.RWMutex
	ix   index      // its tools
	subs []*Catalog // the OpenAPI catalogs it includes
}

// TrackOptions say which registered tools a tracking catalog holds and
// how its meta-tools are named.
type TrackOptions struct {
	// Name is what the meta-tools' titles and descriptions call the
	// catalog's tools: "fs" gives "the fs tools"; "" gives "the tools".
	Name string
	// Prefix is put before search, describe and call to name the
	// meta-tools: "fs__" gives fs__search; "toolgate_" toolgate_search.
	// Required.
	Prefix string
	// Member reports whether the catalog holds a registered tool. The
	// catalog's own meta-tools are never held. nil holds every tool.
	Member func(*registry.Tool) bool
}

// newCatalog is the part of a catalog both sorts share.
func newCatalog(name, prefix string, env Env) *Catalog {
	if env.Logger == nil {
		env.Logger = slog.New(slog.DiscardHandler)
	}
	return &Catalog{name: name, prefix: prefix, env: env, ix: newIndex()}
}

// NewTracking starts a tracking catalog of the registered tools o.Member
// selects, served with env (Tool set). It holds no tool until
// [Catalog.Track] gives it some: the caller tracks the registry's tools
// first, then every change.
func NewTracking(o TrackOptions, env Env) *Catalog {
	c := newCatalog(o.Name, o.Prefix, env)
	c.member = o.Member
	if c.member == nil {
		c.member = func(*registry.Tool) bool { return true }
	}
	return c
}

// Include makes c, a tracking catalog, search, describe and call the
// tools of sub, an OpenAPI catalog, too (which c's Member should then
// leave out).
func (c *Catalog) Include(sub *Catalog) {
	c.tmu.Lock()
	defer c.tmu.Unlock()
	c.subs = append(c.subs, sub)
}

// Track updates c, a tracking catalog, with a change of the registry:
// removed names are forgotten, and each added tool is held when it is a
// member (a replaced tool is in both). It is a no-op for OpenAPI
// catalogs.
func (c *Catalog) Track(added []*registry.Tool, removed []string) {
	if c.member == nil {
		return
	}
	var es []*entry // made before locking: an upstream may list thousands
	for _, t := range added {
		if !c.IsMeta(t.Name) && c.member(t) {
			es = append(es, toolEntry(t))
		}
	}
	c.tmu.Lock()
	defer c.tmu.Unlock()
	for _, n := range removed {
		c.ix.remove(n)
	}
	for _, e := range es {
		c.ix.put(e)
	}
}

// Len is how many tools c holds, its included catalogs' too.
func (c *Catalog) Len() int {
	c.tmu.RLock()
	defer c.tmu.RUnlock()
	n := c.ix.len()
	for _, s := range c.subs {
		n += s.Len()
	}
	return n
}

// MetaName is the name of the catalog's meta-tool suffix: [Search],
// [Describe] or [Call].
func (c *Catalog) MetaName(suffix string) string { return c.prefix + suffix }

// IsMeta reports whether name is one of the catalog's meta-tools.
func (c *Catalog) IsMeta(name string) bool {
	return name == c.MetaName(Search) || name == c.MetaName(Describe) || name == c.MetaName(Call)
}

// holder is an entry with the catalog that holds it.
type holder struct {
	c *Catalog
	e *entry
}

// search returns the tools id may call that match terms, best first, at
// most limit of them, and how many matched in all.
func (c *Catalog) search(terms []string, limit int, id *principal.Identity) ([]hit, int) {
	best := top{limit: limit}
	add := func(e *entry, t tally) {
		if id.Permits(e.name) {
			best.offer(hit{Name: e.name, Summary: e.summary, Operation: e.operation, matched: t.matched, score: t.score})
		}
	}
	c.tmu.RLock()
	c.ix.match(terms, add)
	subs := c.subs
	c.tmu.RUnlock()
	for _, s := range subs {
		s.tmu.RLock()
		s.ix.match(terms, add)
		s.tmu.RUnlock()
	}
	return best.hits, best.total
}

// lookup finds the entry called name (its registered name, or the name
// after the catalog's prefix) and the catalog holding it.
func (c *Catalog) lookup(name string) (holder, bool) {
	c.tmu.RLock()
	defer c.tmu.RUnlock()
	for _, n := range []string{name, c.prefix + name} {
		if e, ok := c.ix.get(n); ok {
			return holder{c, e}, true
		}
	}
	for _, s := range c.subs {
		if h, ok := s.lookup(name); ok {
			return h, true
		}
	}
	return holder{}, false
}

// permittedNames lists the names of c's tools id may call.
func (c *Catalog) permittedNames(id *principal.Identity) []string {
	c.tmu.RLock()
	defer c.tmu.RUnlock()
	var names []string
	for n := range c.ix.names {
		if id.Permits(n) {
			names = append(names, n)
		}
	}
	for _, s := range c.subs {
		names = append(names, s.permittedNames(id)...)
	}
	return names
}

// find returns the entry name names, for id. An unknown name, or one id
// may not call when mayCall, is a not_found error suggesting close names
// id may call: a tool id may not call is not told apart from one that
// does not exist.
func (c *Catalog) find(name string, id *principal.Identity, mayCall bool) (holder, error) {
	h, ok := c.lookup(name)
	if ok && (!mayCall || id.Permits(h.e.name)) {
		return h, nil
	}
	msg := fmt.Sprintf("%s has no tool %q", c.label(), shorten(name))
	if sug := registry.Suggest(name, c.permittedNames(id), 3); len(sug) > 0 {
		msg += fmt.Sprintf("; did you mean %s?", strings.Join(quoteAll(sug), ", "))
	}
	return holder{}, retry.Errorf(retry.NotFound, "%s; find tools with %s", msg, c.MetaName(Search))
}

// label is what messages call the catalog: its name, or "toolgate".
func (c *Catalog) label() string {
	if c.name == "" {
		return "toolgate"
	}
	return c.name
}

// shorten cuts a name quoted back in an error to 100 bytes.
func shorten(s string) string {
	if len(s) <= 100 {
		return s
	}
	return strings.ToValidUTF8(s[:100], "") + "…"
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// Tools returns the three meta-tools of c, bound to their executors:
// search's and describe's, and callExec, the gateway's executor of
// <prefix>call, which runs the inner call through the pipeline
// ([Catalog.Resolve] finds its tool). Their registry source is
// "catalog:<name>" ("catalog:toolgate" for a catalog of every tool).
func (c *Catalog) Tools(callExec executors.Executor) []executors.Bound {
	search, describe, call := c.MetaName(Search), c.MetaName(Describe), c.MetaName(Call)
	readOnly := true
	src := "catalog:" + c.label()
	whose, the := c.name+"'s", "the "+c.name
	if c.name == "" {
		whose, the = "this gateway's", "the"
	}
	what := fmt.Sprintf("%s tools", whose)
	if c.doc != nil {
		what = fmt.Sprintf("%s tools (%d of them, one per API operation)", whose, c.Len())
	}
	return []executors.Bound{
		{Tool: registry.Tool{
			Name:  search,
			Title: fmt.Sprintf("Search %s tools", the),
			Description: fmt.Sprintf("Finds %s by keywords or by what a tool does, matched against their names, titles, descriptions and parameter names. "+
				"Returns the best matches first, each with its name and a one-line summary. "+
				"Then read a tool's arguments with %s and call it with %s.", what, describe, call),
			Kind:        registry.Stateless,
			Source:      src,
			InputSchema: json.RawMessage(fmt.Sprintf(searchSchema, defaultResults, maxResults, maxQueryBytes)),
			Idempotent:  true,
			Annotations: registry.Annotations{ReadOnlyHint: &readOnly},
		}, Exec: metaExec{c: c, op: Search}},
		{Tool: registry.Tool{
			Name:        describe,
			Title:       fmt.Sprintf("Describe one of %s tools", the),
			Description: fmt.Sprintf("Returns one of %s: its description and the JSON Schema of its arguments, to call it with %s. Find names with %s.", what, call, search),
			Kind:        registry.Stateless,
			Source:      src,
			InputSchema: json.RawMessage(describeSchema),
			Idempotent:  true,
			Annotations: registry.Annotations{ReadOnlyHint: &readOnly},
		}, Exec: metaExec{c: c, op: Describe}},
		{Tool: registry.Tool{
			Name:  call,
			Title: fmt.Sprintf("Call one of %s tools", the),
			Description: fmt.Sprintf("Calls one of %s by name with its arguments, exactly as if it were called directly: "+
				"the arguments must match the schema %s returns, and the result is the tool's own. Find names with %s.", what, describe, search),
			Kind:        registry.Stateless,
			Source:      src,
			InputSchema: json.RawMessage(callSchema),
			Timeout:     callTimeout,
		}, Exec: callExec},
	}
}

const searchSchema = `{
  "type": "object",
  "properties": {
    "query": {"type": "string", "minLength": 1, "maxLength": %[3]d, "description": "Keywords, or a few words on what the tool does, like \"list customers\" or \"read a file\"; a tool matching more of them ranks higher."},
    "limit": {"type": "integer", "minimum": 1, "maximum": %[2]d, "description": "How many results to return. Default %[1]d."}
  },
  "required": ["query"],
  "additionalProperties": false
}`

const describeSchema = `{
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1, "description": "The tool's name, as search returned it."}
  },
  "required": ["name"],
  "additionalProperties": false
}`

const callSchema = `{
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1, "description": "The tool's name, as search returned it."},
    "arguments": {"type": "object", "description": "The tool's arguments, matching the input schema describe returns. Default {}."}
  },
  "required": ["name"],
  "additionalProperties": false
}`

// metaExec runs a catalog's search and describe meta-tools.
type metaExec struct {
	c  *Catalog
	op string // Search or Describe
}

var _ executors.Executor = metaExec{}

// Execute runs search or describe. The caller's identity, when it has
// one, is in ctx (the permit step put it there): only the tools it may
// call are shown.
func (x metaExec) Execute(ctx context.Context, ec executors.Call) (executors.Result, error) {
	id := principal.From(ctx)
	switch x.op {
	case Search:
		q, _ := ec.Args["query"].(string)
		terms, err := parseQuery(q)
		if err != nil {
			return executors.Result{}, err
		}
		limit := defaultResults
		if n, ok := ec.Args["limit"].(float64); ok {
			limit = min(max(int(n), 1), maxResults)
		}
		hits, total := x.c.search(terms, limit, id)
		out := struct {
			Tools []hit `json:"tools"`
			Total int   `json:"total"`
		}{Tools: hits, Total: total}
		if out.Tools == nil {
			out.Tools = []hit{}
		}
		return jsonResult(out)
	case Describe:
		name, _ := ec.Args["name"].(string)
		h, err := x.c.find(name, id, true)
		if err != nil {
			return executors.Result{}, err
		}
		t, err := h.c.builtTool(h.e)
		if err != nil {
			return executors.Result{}, err
		}
		out := struct {
			Name         string          `json:"name"`
			Title        string          `json:"title,omitempty"`
			Operation    string          `json:"operation,omitempty"`
			Description  string          `json:"description"`
			InputSchema  json.RawMessage `json:"inputSchema"`
			OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
		}{h.e.name, t.Title, h.e.operation, t.Description, t.InputSchema, t.OutputSchema}
		return jsonResult(out)
	}
	return executors.Result{}, retry.Errorf(retry.Internal, "unknown catalog operation %q", x.op)
}

// Resolve returns the registered name of the tool <prefix>call names
// (name, with or without the catalog's prefix) for the outer call's
// identity id; an OpenAPI tool is built first when id may call it, so
// that the pipeline checks the arguments against the tool's real schema
// (a stub's executor checks them otherwise). A tool id may not call is
// found all the same: the pipeline's permit step answers as for a direct
// call, naming only that tool. An unknown name is a not_found error
// suggesting close names id may call.
func (c *Catalog) Resolve(name string, id *principal.Identity) (string, error) {
	h, err := c.find(name, id, false)
	if err != nil {
		return "", err
	}
	if h.c.doc != nil && id.Permits(h.e.name) {
		if _, err := h.c.builtTool(h.e); err != nil {
			return "", err
		}
	}
	return h.e.name, nil
}

// jsonResult is a result holding v as text and as structured content.
func jsonResult(v any) (executors.Result, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // summaries and descriptions are read by a model: "<" stays "<"
	if err := enc.Encode(v); err != nil {
		return executors.Result{}, retry.Wrap(retry.Internal, "encoding the result", err)
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	return executors.Result{
		Content:    []executors.Content{{Type: executors.TextContent, Text: string(b)}},
		Structured: json.RawMessage(b),
	}, nil
}

// HiddenError is the answer to an MCP client that calls t, one of the
// catalog's hidden tools, by name: unknown to tools/list, with the
// catalog's call tool suggested. It wraps a *registry.NotFoundError whose
// suggestions the MCP front sends.
func (c *Catalog) HiddenError(name string, t *registry.Tool) error {
	call := c.MetaName(Call)
	nf := &registry.NotFoundError{Name: name, Suggestions: []string{call}, Available: -1}
	return &hiddenToolError{msg: fmt.Sprintf("tool %q is served through %s: call %s with {\"name\": %q, \"arguments\": {...}} (see %s for its arguments)",
		name, call, call, t.Name, c.MetaName(Describe)), nf: nf}
}

// hiddenToolError is [Catalog.HiddenError]'s error: its own message, and
// the NotFoundError whose suggestions the MCP front sends.
type hiddenToolError struct {
	msg string
	nf  *registry.NotFoundError
}

func (e *hiddenToolError) Error() string { return e.msg }
func (e *hiddenToolError) Unwrap() error { return e.nf }
