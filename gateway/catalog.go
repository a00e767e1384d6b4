package gateway

import (
	"bytes"
	"cmp"
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/executors/rest/openapi"
	"github.com/toolgate/toolgate/internal/principal"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

// A catalog serves an OpenAPI source with catalog: search (issue 15): its
// operations' tools are registered, so that they dispatch, validate, count
// in metrics and show in toolgate tools, but they are hidden from
// tools/list, which lists three meta-tools instead (and each tool's input
// schema is built on first use; see [catalog]):
//
//	<source>__search    keyword search over the tools' names, operationIds,
//	                    paths, tags and descriptions; names and one-line
//	                    summaries, best first, at most maxCatalogResults
//	<source>__describe  one tool's description and input schema
//	<source>__call      one tool called by name, through the whole pipeline
//
// <source>__call re-enters the pipeline as toolgate_batch does: its
// executor finds the outer Call in its context and runs the inner call
// with the outer call's principal, session and thread, so validation,
// permissions, guards, hooks, limits, metrics and events apply to it as to
// a direct call, and its result is the direct call's. search and describe
// show only the tools the caller's principal may call.
//
// A hidden tool is not in the MCP front: a client that calls it by name is
// told it is unknown and pointed at <source>__call. toolgate_batch and
// [Gateway.Call] reach hidden tools by name, through the pipeline.

// Meta-tool suffixes: <source>__search, <source>__describe, <source>__call.
const (
	catalogSearch   = "search"
	catalogDescribe = "describe"
	catalogCall     = "call"
)

// maxCatalogResults caps the results of one search; defaultCatalogResults
// is how many a search without a limit returns.
const (
	maxCatalogResults     = 50
	defaultCatalogResults = 10
)

// catalogCallTimeout bounds a whole <source>__call, as a backstop only:
// the inner call runs under its own tool's deadline.
const catalogCallTimeout = 24 * time.Hour

// catalog is one source served as meta-tools. It is built by restTools;
// after New only which of its tools are built changes.
//
// Its hidden tools are registered at start with a stub input schema that
// accepts any object, from the document's outline ([openapi.Document.
// Outline]): building every tool's real schema (every $ref inlined) and
// compiling it is what a large document cannot afford (Microsoft Graph:
// 11,422 tools, 1 GB of JSON Schema, hours of compiling). A tool is built
// on first use, by describe, call or a call by name, and replaces its stub
// in the registry; at most maxBuiltSchemaBytes of built schemas stay, the
// least recently used going back to their stubs.
type catalog struct {
	name    string // the openapi source's name: the meta-tools' prefix
	source  string // the hidden tools' registry source, "openapi:<name>"
	doc     *openapi.Document
	entries []*catalogEntry
	byName  map[string]*catalogEntry
	stub    json.RawMessage // the hidden tools' input schema until built

	// buildMu serializes building and unbuilding tools.
	buildMu sync.Mutex
	// mu guards the entries' built state and the recency list.
	mu       sync.Mutex
	recent   list.List // built entries, most recently used first
	bytes    int       // the built entries' schema bytes
	maxBytes int       // the bound on bytes: maxBuiltSchemaBytes
	builds   int       // how many tools were built, for tests
}

// maxBuiltSchemaBytes bounds the input schemas a catalog keeps built
// (each at most 128 KiB; compiled, several times that).
const maxBuiltSchemaBytes = 4 << 20

// catalogEntry is one hidden tool as search sees it.
type catalogEntry struct {
	name      string // the tool's registered name
	summary   string
	operation string // "METHOD /path"
	// Lower-case search fields, by weight (catalogWeights).
	fields [5]string
	index  int           // the operation's index in the document
	stub   registry.Tool // the tool as registered before it is built
	// built is its element in recent while its real schema is
	// registered; nil while the stub is. Guarded by catalog.mu.
	built *list.Element
	size  int // the built schema's bytes
}

// Weights of a query term found in each of catalogEntry.fields: the tool
// name (its words split at case changes too), operationId and tags count
// most, then the path, the summary, the description.
var catalogWeights = [5]int{8, 4, 4, 2, 1}

// newCatalog starts the catalog of openapi source name, whose document
// is d.
func newCatalog(name string, d *openapi.Document) *catalog {
	c := &catalog{name: name, source: "openapi:" + name, doc: d, byName: map[string]*catalogEntry{}, maxBytes: maxBuiltSchemaBytes}
	c.stub = json.RawMessage(fmt.Sprintf(`{"type":"object","description":"This tool's arguments are built on first use: read them with %s."}`,
		c.metaName(catalogDescribe)))
	return c
}

// stubSchema is the input schema a hidden tool is registered with until
// it is built.
func (c *catalog) stubSchema() json.RawMessage { return c.stub }

// add records t, the outline of the i-th operation of the document, made
// from op, and returns the executor to register it with: exec, once t is
// built.
func (c *catalog) add(g *Gateway, t registry.Tool, op openapi.Operation, i int, exec executors.Executor) executors.Executor {
	part := strings.TrimPrefix(t.Name, registry.Prefixed(c.name, ""))
	e := &catalogEntry{name: t.Name, summary: op.Summary, operation: op.Method + " " + op.Path, index: i, stub: t}
	e.fields = [5]string{
		strings.ToLower(part + " " + splitWords(part)),
		strings.ToLower(op.OperationID + " " + splitWords(op.OperationID) + " " + strings.Join(op.Tags, " ")),
		strings.ToLower(op.Path),
		strings.ToLower(op.Summary),
		strings.ToLower(t.Description),
	}
	c.entries = append(c.entries, e)
	c.byName[t.Name] = e
	return catalogToolExec{g: g, c: c, e: e, rest: exec}
}

// touch reports whether e is built, marking it the most recently used.
func (c *catalog) touch(e *catalogEntry) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.built == nil {
		return false
	}
	c.recent.MoveToFront(e.built)
	return true
}

// build registers e's tool with its real input schema in place of its
// stub, unless it is built, and puts back the stubs of the least recently
// used tools while the built schemas pass maxBuiltSchemaBytes. A tool the
// document no longer makes (its conversion failed) is an error.
func (c *catalog) build(g *Gateway, e *catalogEntry) error {
	if c.touch(e) {
		return nil
	}
	c.buildMu.Lock()
	defer c.buildMu.Unlock()
	if c.touch(e) {
		return nil
	}
	spec, ws, ok := c.doc.Spec(e.index)
	if !ok {
		reason := "its operation could not be converted"
		if len(ws) > 0 {
			reason = ws[0].Msg
		}
		return retry.Errorf(retry.Internal, "building tool %q: %s", e.name, reason)
	}
	for _, w := range ws {
		g.logger.Debug("openapi operation", "source", c.name, "operation", w.Operation, "tool", w.Tool, "note", w.Msg)
	}
	t, _, err := g.rest.Add(spec)
	if err != nil {
		return retry.Wrap(retry.Internal, fmt.Sprintf("building tool %q", e.name), err)
	}
	if err := g.replaceTools(t); err != nil {
		return retry.Wrap(retry.Internal, fmt.Sprintf("building tool %q", e.name), err)
	}
	var stubs []registry.Tool
	c.mu.Lock()
	c.builds++
	e.size = len(t.InputSchema)
	e.built = c.recent.PushFront(e)
	c.bytes += e.size
	for c.bytes > c.maxBytes && c.recent.Len() > 1 {
		old := c.recent.Remove(c.recent.Back()).(*catalogEntry)
		old.built = nil
		c.bytes -= old.size
		stubs = append(stubs, old.stub)
	}
	c.mu.Unlock()
	if len(stubs) > 0 {
		if err := g.replaceTools(stubs...); err != nil {
			g.logger.Error("catalog: putting back the stubs of tools built least recently", "source", c.name, "error", err.Error())
		}
	}
	return nil
}

// builtTool returns e's tool as registered with its real input schema,
// building it first when needed.
func (c *catalog) builtTool(g *Gateway, e *catalogEntry) (*registry.Tool, error) {
	// Another build may put e's stub back between build and Get; a few
	// tries outlast any but a flood of builds.
	for range 3 {
		if err := c.build(g, e); err != nil {
			return nil, err
		}
		t, ok := g.reg.Get(e.name)
		if !ok {
			return nil, retry.Errorf(retry.NotFound, "tool %q was just removed", e.name)
		}
		if !bytes.Equal(t.InputSchema, c.stub) {
			return t, nil
		}
	}
	return nil, retry.Errorf(retry.Unavailable, "tool %q: too many other tools of %s are being built; try again", e.name, c.name)
}

// catalogToolExec runs a hidden tool: the REST executor of its outline,
// after building the tool when the call was resolved to its stub (whose
// schema accepts any object), and checking the arguments against the
// real schema.
type catalogToolExec struct {
	g    *Gateway
	c    *catalog
	e    *catalogEntry
	rest executors.Executor
}

var _ executors.SelfRetrying = catalogToolExec{}

func (x catalogToolExec) Execute(ctx context.Context, ec executors.Call) (executors.Result, error) {
	if ec.Tool == nil || bytes.Equal(ec.Tool.InputSchema, x.c.stub) {
		t, err := x.c.builtTool(x.g, x.e)
		if err != nil {
			return executors.Result{}, err
		}
		if err := checkArgs(t, ec.Args); err != nil {
			return executors.Result{}, err
		}
	}
	return x.rest.Execute(ctx, ec)
}

// RetriesItself reports whether the REST executor runs its own retry
// loop, as it does.
func (x catalogToolExec) RetriesItself() bool {
	sr, ok := x.rest.(executors.SelfRetrying)
	return ok && sr.RetriesItself()
}

// metaName is the name of the catalog's meta-tool suffix.
func (c *catalog) metaName(suffix string) string { return registry.Prefixed(c.name, suffix) }

// isMeta reports whether name is one of the catalog's meta-tools.
func (c *catalog) isMeta(name string) bool {
	return name == c.metaName(catalogSearch) || name == c.metaName(catalogDescribe) || name == c.metaName(catalogCall)
}

// splitWords returns s with a space at each lower-to-upper case change
// and each run of non-alphanumerics: "listPetsByID_v2" → "list Pets By
// ID v2", so that a query word finds a camelCase name.
func splitWords(s string) string {
	var b strings.Builder
	rs := []rune(s)
	for i, r := range rs {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			b.WriteByte(' ')
			continue
		}
		if i > 0 && unicode.IsUpper(r) && (unicode.IsLower(rs[i-1]) ||
			(i+1 < len(rs) && unicode.IsUpper(rs[i-1]) && unicode.IsLower(rs[i+1]))) {
			b.WriteByte(' ')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// queryTerms splits a search query into distinct lower-case words,
// leaving out one-letter words and a few English function words ("a",
// "the", "for", ...), which as substrings would match nearly every tool,
// unless nothing else is left.
func queryTerms(q string) []string {
	var terms, weak []string
	for _, w := range strings.FieldsFunc(strings.ToLower(q), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		switch {
		case slices.Contains(terms, w) || slices.Contains(weak, w):
		case len([]rune(w)) < 2 || slices.Contains(stopWords, w):
			weak = append(weak, w)
		default:
			terms = append(terms, w)
		}
	}
	if len(terms) == 0 {
		return weak
	}
	return terms
}

// stopWords are left out of a query that has other words.
var stopWords = []string{"an", "and", "as", "at", "by", "for", "from", "in", "into", "is", "it", "of", "on", "or", "the", "to", "with"}

// catalogHit is one search result.
type catalogHit struct {
	Name      string `json:"name"`
	Summary   string `json:"summary"`
	Operation string `json:"operation"`
	matched   int
	score     int
}

// search returns the entries id may call that match terms, best first:
// by how many terms they match, then by weighted score, then by name, so
// the same query always gives the same order; at most limit of them, and
// how many matched in all.
func (c *catalog) search(terms []string, limit int, id *principal.Identity) (hits []catalogHit, total int) {
	for _, e := range c.entries {
		h := catalogHit{Name: e.name, Summary: e.summary, Operation: e.operation}
		for _, term := range terms {
			best := 0
			for i, f := range e.fields {
				if catalogWeights[i] > best && strings.Contains(f, term) {
					best = catalogWeights[i]
				}
			}
			if best > 0 {
				h.matched++
				h.score += best
			}
		}
		if h.matched == 0 || !id.Permits(e.name) {
			continue
		}
		hits = append(hits, h)
	}
	slices.SortFunc(hits, func(a, b catalogHit) int {
		return cmp.Or(cmp.Compare(b.matched, a.matched), cmp.Compare(b.score, a.score), cmp.Compare(a.Name, b.Name))
	})
	return hits[:min(len(hits), limit)], len(hits)
}

// find returns the entry name names, for id: the registered name, or the
// name without the catalog's prefix. An unknown name, or one id may not
// call when mayCall, is a not_found error suggesting close names id may
// call.
func (c *catalog) find(name string, id *principal.Identity, mayCall bool) (*catalogEntry, error) {
	e, ok := c.byName[name]
	if !ok {
		e, ok = c.byName[registry.Prefixed(c.name, name)]
	}
	if ok && (!mayCall || id.Permits(e.name)) {
		return e, nil
	}
	var names []string
	for _, e := range c.entries {
		if id.Permits(e.name) {
			names = append(names, e.name)
		}
	}
	msg := fmt.Sprintf("%s has no tool %q", c.name, name)
	if sug := registry.Suggest(name, names, 3); len(sug) > 0 {
		msg += fmt.Sprintf("; did you mean %s?", strings.Join(quoteAll(sug), ", "))
	}
	return nil, retry.Errorf(retry.NotFound, "%s; find tools with %s", msg, c.metaName(catalogSearch))
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// catalogTools returns the three meta-tools of c, bound to their
// executors.
func (g *Gateway) catalogTools(c *catalog) []executors.Bound {
	search, describe, call := c.metaName(catalogSearch), c.metaName(catalogDescribe), c.metaName(catalogCall)
	readOnly := true
	src := "catalog:" + c.name
	return []executors.Bound{
		{Tool: registry.Tool{
			Name:  search,
			Title: fmt.Sprintf("Search the %s tools", c.name),
			Description: fmt.Sprintf("Finds %s's tools (%d of them, one per API operation) by keywords matched against their names, paths, tags and descriptions. "+
				"Returns the best matches first, each with its name and a one-line summary. "+
				"Then read a tool's arguments with %s and call it with %s.", c.name, len(c.entries), describe, call),
			Kind:        registry.Stateless,
			Source:      src,
			InputSchema: json.RawMessage(fmt.Sprintf(catalogSearchSchema, defaultCatalogResults, maxCatalogResults)),
			Idempotent:  true,
			Annotations: registry.Annotations{ReadOnlyHint: &readOnly},
		}, Exec: catalogExec{g: g, c: c, op: catalogSearch}},
		{Tool: registry.Tool{
			Name:        describe,
			Title:       fmt.Sprintf("Describe a %s tool", c.name),
			Description: fmt.Sprintf("Returns one of %s's tools: its description and the JSON Schema of its arguments, to call it with %s. Find names with %s.", c.name, call, search),
			Kind:        registry.Stateless,
			Source:      src,
			InputSchema: json.RawMessage(catalogDescribeSchema),
			Idempotent:  true,
			Annotations: registry.Annotations{ReadOnlyHint: &readOnly},
		}, Exec: catalogExec{g: g, c: c, op: catalogDescribe}},
		{Tool: registry.Tool{
			Name:  call,
			Title: fmt.Sprintf("Call a %s tool", c.name),
			Description: fmt.Sprintf("Calls one of %s's tools by name with its arguments, exactly as if it were called directly: "+
				"the arguments must match the schema %s returns, and the result is the tool's own. Find names with %s.", c.name, describe, search),
			Kind:        registry.Stateless,
			Source:      src,
			InputSchema: json.RawMessage(catalogCallSchema),
			Timeout:     catalogCallTimeout,
		}, Exec: catalogCallExec{catalogExec{g: g, c: c, op: catalogCall}}},
	}
}

const catalogSearchSchema = `{
  "type": "object",
  "properties": {
    "query": {"type": "string", "minLength": 1, "description": "Keywords, like \"list customers\" or \"invoice pdf\"; a tool matching more of them ranks higher."},
    "limit": {"type": "integer", "minimum": 1, "maximum": %[2]d, "description": "How many results to return. Default %[1]d."}
  },
  "required": ["query"],
  "additionalProperties": false
}`

const catalogDescribeSchema = `{
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1, "description": "The tool's name, as search returned it."}
  },
  "required": ["name"],
  "additionalProperties": false
}`

const catalogCallSchema = `{
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1, "description": "The tool's name, as search returned it."},
    "arguments": {"type": "object", "description": "The tool's arguments, matching the input schema describe returns. Default {}."}
  },
  "required": ["name"],
  "additionalProperties": false
}`

// catalogExec runs a catalog's search and describe meta-tools.
type catalogExec struct {
	g  *Gateway
	c  *catalog
	op string // catalogSearch, catalogDescribe or catalogCall
}

var _ executors.Executor = catalogExec{}

// catalogCallExec runs <source>__call. It is re-entrant, like
// toolgate_batch: the pipeline gives it its Call in its context, takes no
// slot for it (the inner call takes its own) and the inner call goes
// through the whole pipeline.
type catalogCallExec struct{ catalogExec }

func (catalogCallExec) reentrant() {}

var _ reentrantExecutor = catalogCallExec{}

// Execute runs search or describe. The caller's identity, when it has
// one, is in ctx (the permit step put it there): only the tools it may
// call are shown.
func (x catalogExec) Execute(ctx context.Context, ec executors.Call) (executors.Result, error) {
	id := principal.From(ctx)
	switch x.op {
	case catalogSearch:
		q, _ := ec.Args["query"].(string)
		terms := queryTerms(q)
		if len(terms) == 0 {
			return executors.Result{}, retry.Errorf(retry.Validation, "query %q has no words to search for; write keywords, like \"list customers\"", q)
		}
		limit := defaultCatalogResults
		if n, ok := ec.Args["limit"].(float64); ok {
			limit = int(n)
		}
		hits, total := x.c.search(terms, limit, id)
		out := struct {
			Tools []catalogHit `json:"tools"`
			Total int          `json:"total"`
		}{Tools: hits, Total: total}
		if out.Tools == nil {
			out.Tools = []catalogHit{}
		}
		return jsonResult(out)
	case catalogDescribe:
		name, _ := ec.Args["name"].(string)
		e, err := x.c.find(name, id, true)
		if err != nil {
			return executors.Result{}, err
		}
		t, err := x.c.builtTool(x.g, e)
		if err != nil {
			return executors.Result{}, err
		}
		out := struct {
			Name        string          `json:"name"`
			Operation   string          `json:"operation"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"inputSchema"`
		}{e.name, e.operation, t.Description, t.InputSchema}
		return jsonResult(out)
	}
	return executors.Result{}, retry.Errorf(retry.Internal, "unknown catalog operation %q", x.op)
}

// Execute runs the named tool through the pipeline as the outer call's
// principal, in its session and thread, and returns that call's result.
func (x catalogCallExec) Execute(ctx context.Context, ec executors.Call) (executors.Result, error) {
	g := x.g
	outer, ok := callFrom(ctx)
	if !ok {
		return executors.Result{}, retry.Errorf(retry.Internal, "%s ran outside the pipeline", x.c.metaName(catalogCall))
	}
	name, _ := ec.Args["name"].(string)
	// A tool id may not call is found all the same: the pipeline's permit
	// step answers as for a direct call, naming only that tool.
	e, err := x.c.find(name, outer.ident, false)
	if err != nil {
		return executors.Result{}, err
	}
	// Built first, so that the pipeline checks the arguments against the
	// tool's real schema (a stub's executor checks them otherwise).
	if outer.ident.Permits(e.name) {
		if _, err := x.c.builtTool(g, e); err != nil {
			return executors.Result{}, err
		}
	}
	r, err := g.lookup(e.name)
	if err != nil {
		return executors.Result{}, retry.Wrap(retry.NotFound, "", err)
	}
	var raw json.RawMessage
	if a, ok := ec.Args["arguments"]; ok && a != nil {
		if raw, err = json.Marshal(a); err != nil {
			return executors.Result{}, retry.Wrap(retry.Internal, "reading the arguments", err)
		}
	}
	c := &Call{Name: e.name, route: r, Raw: raw, Meta: outer.Meta, Principal: outer.Principal, ident: outer.ident,
		Session: outer.Session, Thread: outer.Thread, Progress: ec.Progress}
	res, err := g.handle(ctx, c)
	if err != nil {
		res = errorResult(err)
	}
	return executors.Result(*res), nil
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

// hiddenSource reports whether tools of source are served through a
// catalog (and so hidden from tools/list).
func (g *Gateway) hiddenSource(source string) bool {
	_, ok := g.catalogs[source]
	return ok
}

// hiddenError is the answer to an MCP client that calls a tool served
// through a catalog by its name: unknown to tools/list, with the catalog's
// call tool suggested.
func (g *Gateway) hiddenError(name string, t *registry.Tool) error {
	c := g.catalogs[t.Source]
	call := c.metaName(catalogCall)
	nf := &registry.NotFoundError{Name: name, Suggestions: []string{call}, Available: -1}
	return &hiddenToolError{msg: fmt.Sprintf("tool %q is served through %s: call %s with {\"name\": %q, \"arguments\": {...}} (see %s for its arguments)",
		name, call, call, t.Name, c.metaName(catalogDescribe)), nf: nf}
}

// hiddenToolError is [Gateway.hiddenError]'s error: its own message, and
// the NotFoundError whose suggestions the MCP front sends.
type hiddenToolError struct {
	msg string
	nf  *registry.NotFoundError
}

func (e *hiddenToolError) Error() string { return e.msg }
func (e *hiddenToolError) Unwrap() error { return e.nf }

// visibleNotFound returns err, a name resolution's error for an MCP
// client, without the hidden tools it would suggest: each becomes its
// catalog's search tool.
func (g *Gateway) visibleNotFound(err error) error {
	nf, ok := errors.AsType[*registry.NotFoundError](err)
	if !ok || len(g.catalogs) == 0 {
		return err
	}
	v := &registry.NotFoundError{Name: nf.Name, Available: -1, Ambiguous: nf.Ambiguous}
	for _, s := range nf.Suggestions {
		if t, ok := g.reg.Get(s); ok && g.hiddenSource(t.Source) {
			s = g.catalogs[t.Source].metaName(catalogSearch)
		}
		if !slices.Contains(v.Suggestions, s) {
			v.Suggestions = append(v.Suggestions, s)
		}
	}
	v.Ambiguous = v.Ambiguous && len(v.Suggestions) > 1
	return v
}

// replaceTools swaps registered tools for new definitions of the same
// names and sources, keeping their executors (a catalog's tools, built or
// put back to their stubs).
func (g *Gateway) replaceTools(ts ...registry.Tool) error {
	g.regMu.Lock()
	defer g.regMu.Unlock()
	return g.reg.Replace(ts...)
}
