// Package catalogtool serves an OpenAPI source with catalog: search (issue
// 15): its operations' tools are registered, so that they dispatch,
// validate, count in metrics and show in toolgate tools, but they are
// hidden from tools/list, which lists three meta-tools instead (and each
// tool's input schema is built on first use; see [Catalog]):
//
//	<source>__search    keyword search over the tools' names, operationIds,
//	                    paths, tags and descriptions; names and one-line
//	                    summaries, best first, at most maxResults
//	<source>__describe  one tool's description and input schema
//	<source>__call      one tool called by name, through the whole pipeline
//
// This package owns the catalog: search, describe and the hidden tools'
// building on first use. <source>__call is the gateway's
// (gateway/catalogtool.go): it re-enters the pipeline as toolgate_batch
// does, its executor finding the outer call in its context and running
// the inner call ([Catalog.Resolve] names its tool) with the outer call's
// principal, session and thread, so validation, permissions, guards,
// hooks, limits, metrics and events apply to it as to a direct call, and
// its result is the direct call's. search and describe show only the
// tools the caller's principal may call.
//
// A hidden tool is not in the MCP front: a client that calls it by name is
// told it is unknown and pointed at <source>__call ([Catalog.HiddenError]).
// toolgate_batch and gateway.Gateway.Call reach hidden tools by name,
// through the pipeline.
//
// The package does not import gateway: what it needs of it comes in an
// [Env].
package catalogtool

import (
	"bytes"
	"cmp"
	"container/list"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/executors/rest"
	"github.com/toolgate/toolgate/executors/rest/openapi"
	"github.com/toolgate/toolgate/internal/principal"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

// Meta-tool suffixes: <source>__search, <source>__describe, <source>__call
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

// callTimeout bounds a whole <source>__call, as a backstop only: the
// inner call runs under its own tool's deadline.
const callTimeout = 24 * time.Hour

// Env is what a catalog needs of the gateway that serves it. Every
// function must be set; each may be called from any goroutine.
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

// Catalog is one source served as meta-tools. The gateway builds it with
// [New] and adds the source's operations with [Catalog.Add] before it
// serves them; after that only which of its tools are built changes. Its
// methods are then safe for concurrent use.
//
// Its hidden tools are registered at start with a stub input schema that
// accepts any object, from the document's outline ([openapi.Document.
// Outline]): building every tool's real schema (every $ref inlined) and
// compiling it is what a large document cannot afford (Microsoft Graph:
// 11,422 tools, 1 GB of JSON Schema, hours of compiling). A tool is built
// on first use, by describe, call or a call by name, and replaces its stub
// in the registry; at most maxBuiltSchemaBytes of built schemas stay, the
// least recently used going back to their stubs.
type Catalog struct {
	name    string // the openapi source's name: the meta-tools' prefix
	source  string // the hidden tools' registry source, "openapi:<name>"
	doc     *openapi.Document
	entries []*entry
	byName  map[string]*entry
	stub    json.RawMessage // the hidden tools' input schema until built
	env     Env

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

// entry is one hidden tool as search sees it.
type entry struct {
	name      string // the tool's registered name
	summary   string
	operation string // "METHOD /path"
	// Lower-case search fields, by weight (weights).
	fields [5]string
	index  int           // the operation's index in the document
	stub   registry.Tool // the tool as registered before it is built
	// built is its element in recent while its real schema is
	// registered; nil while the stub is. Guarded by Catalog.mu.
	built *list.Element
	size  int // the built schema's bytes
}

// Weights of a query term found in each of entry.fields: the tool
// name (its words split at case changes too), operationId and tags count
// most, then the path, the summary, the description.
var weights = [5]int{8, 4, 4, 2, 1}

// New starts the catalog of openapi source name, whose document is d,
// served with env.
func New(name string, d *openapi.Document, env Env) *Catalog {
	if env.Logger == nil {
		env.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Catalog{name: name, source: "openapi:" + name, doc: d, byName: map[string]*entry{}, maxBytes: maxBuiltSchemaBytes, env: env}
	c.stub = json.RawMessage(fmt.Sprintf(`{"type":"object","description":"This tool's arguments are built on first use: read them with %s."}`,
		c.MetaName(Describe)))
	return c
}

// Source is the hidden tools' registry source, "openapi:<name>".
func (c *Catalog) Source() string { return c.source }

// StubSchema is the input schema a hidden tool is registered with until
// it is built.
func (c *Catalog) StubSchema() json.RawMessage { return c.stub }

// Add records t, the outline of the i-th operation of the document, made
// from op, and returns the executor to register it with: exec, once t is
// built. Add is called before the catalog is served, never after.
func (c *Catalog) Add(t registry.Tool, op openapi.Operation, i int, exec executors.Executor) executors.Executor {
	part := strings.TrimPrefix(t.Name, registry.Prefixed(c.name, ""))
	e := &entry{name: t.Name, summary: op.Summary, operation: op.Method + " " + op.Path, index: i, stub: t}
	e.fields = [5]string{
		strings.ToLower(part + " " + splitWords(part)),
		strings.ToLower(op.OperationID + " " + splitWords(op.OperationID) + " " + strings.Join(op.Tags, " ")),
		strings.ToLower(op.Path),
		strings.ToLower(op.Summary),
		strings.ToLower(t.Description),
	}
	c.entries = append(c.entries, e)
	c.byName[t.Name] = e
	return hiddenExec{c: c, e: e, rest: exec}
}

// touch reports whether e is built, marking it the most recently used.
func (c *Catalog) touch(e *entry) bool {
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
func (c *Catalog) build(e *entry) error {
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
		c.env.Logger.Debug("openapi operation", "source", c.name, "operation", w.Operation, "tool", w.Tool, "note", w.Msg)
	}
	t, _, err := c.env.Compile(spec)
	if err != nil {
		return retry.Wrap(retry.Internal, fmt.Sprintf("building tool %q", e.name), err)
	}
	if err := c.env.Replace(t); err != nil {
		return retry.Wrap(retry.Internal, fmt.Sprintf("building tool %q", e.name), err)
	}
	var stubs []registry.Tool
	c.mu.Lock()
	c.builds++
	e.size = len(t.InputSchema)
	e.built = c.recent.PushFront(e)
	c.bytes += e.size
	for c.bytes > c.maxBytes && c.recent.Len() > 1 {
		old := c.recent.Remove(c.recent.Back()).(*entry)
		old.built = nil
		c.bytes -= old.size
		stubs = append(stubs, old.stub)
	}
	c.mu.Unlock()
	if len(stubs) > 0 {
		if err := c.env.Replace(stubs...); err != nil {
			c.env.Logger.Error("catalog: putting back the stubs of tools built least recently", "source", c.name, "error", err.Error())
		}
	}
	return nil
}

// builtTool returns e's tool as registered with its real input schema,
// building it first when needed.
func (c *Catalog) builtTool(e *entry) (*registry.Tool, error) {
	// Another build may put e's stub back between build and Get; a few
	// tries outlast any but a flood of builds.
	for range 3 {
		if err := c.build(e); err != nil {
			return nil, err
		}
		t, ok := c.env.Tool(e.name)
		if !ok {
			return nil, retry.Errorf(retry.NotFound, "tool %q was just removed", e.name)
		}
		if !bytes.Equal(t.InputSchema, c.stub) {
			return t, nil
		}
	}
	return nil, retry.Errorf(retry.Unavailable, "tool %q: too many other tools of %s are being built; try again", e.name, c.name)
}

// hiddenExec runs a hidden tool: the REST executor of its outline, after
// building the tool when the call was resolved to its stub (whose schema
// accepts any object), and checking the arguments against the real
// schema.
type hiddenExec struct {
	c    *Catalog
	e    *entry
	rest executors.Executor
}

var _ executors.SelfRetrying = hiddenExec{}

func (x hiddenExec) Execute(ctx context.Context, ec executors.Call) (executors.Result, error) {
	if ec.Tool == nil || bytes.Equal(ec.Tool.InputSchema, x.c.stub) {
		t, err := x.c.builtTool(x.e)
		if err != nil {
			return executors.Result{}, err
		}
		if err := x.c.env.CheckArgs(t, ec.Args); err != nil {
			return executors.Result{}, err
		}
	}
	return x.rest.Execute(ctx, ec)
}

// RetriesItself reports whether the REST executor runs its own retry
// loop, as it does.
func (x hiddenExec) RetriesItself() bool {
	sr, ok := x.rest.(executors.SelfRetrying)
	return ok && sr.RetriesItself()
}

// MetaName is the name of the catalog's meta-tool suffix: [Search],
// [Describe] or [Call].
func (c *Catalog) MetaName(suffix string) string { return registry.Prefixed(c.name, suffix) }

// IsMeta reports whether name is one of the catalog's meta-tools.
func (c *Catalog) IsMeta(name string) bool {
	return name == c.MetaName(Search) || name == c.MetaName(Describe) || name == c.MetaName(Call)
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

// hit is one search result.
type hit struct {
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
func (c *Catalog) search(terms []string, limit int, id *principal.Identity) (hits []hit, total int) {
	for _, e := range c.entries {
		h := hit{Name: e.name, Summary: e.summary, Operation: e.operation}
		for _, term := range terms {
			best := 0
			for i, f := range e.fields {
				if weights[i] > best && strings.Contains(f, term) {
					best = weights[i]
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
	slices.SortFunc(hits, func(a, b hit) int {
		return cmp.Or(cmp.Compare(b.matched, a.matched), cmp.Compare(b.score, a.score), cmp.Compare(a.Name, b.Name))
	})
	return hits[:min(len(hits), limit)], len(hits)
}

// find returns the entry name names, for id: the registered name, or the
// name without the catalog's prefix. An unknown name, or one id may not
// call when mayCall, is a not_found error suggesting close names id may
// call.
func (c *Catalog) find(name string, id *principal.Identity, mayCall bool) (*entry, error) {
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
	return nil, retry.Errorf(retry.NotFound, "%s; find tools with %s", msg, c.MetaName(Search))
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
// <source>__call, which runs the inner call through the pipeline
// ([Catalog.Resolve] finds its tool).
func (c *Catalog) Tools(callExec executors.Executor) []executors.Bound {
	search, describe, call := c.MetaName(Search), c.MetaName(Describe), c.MetaName(Call)
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
			InputSchema: json.RawMessage(fmt.Sprintf(searchSchema, defaultResults, maxResults)),
			Idempotent:  true,
			Annotations: registry.Annotations{ReadOnlyHint: &readOnly},
		}, Exec: metaExec{c: c, op: Search}},
		{Tool: registry.Tool{
			Name:        describe,
			Title:       fmt.Sprintf("Describe a %s tool", c.name),
			Description: fmt.Sprintf("Returns one of %s's tools: its description and the JSON Schema of its arguments, to call it with %s. Find names with %s.", c.name, call, search),
			Kind:        registry.Stateless,
			Source:      src,
			InputSchema: json.RawMessage(describeSchema),
			Idempotent:  true,
			Annotations: registry.Annotations{ReadOnlyHint: &readOnly},
		}, Exec: metaExec{c: c, op: Describe}},
		{Tool: registry.Tool{
			Name:  call,
			Title: fmt.Sprintf("Call a %s tool", c.name),
			Description: fmt.Sprintf("Calls one of %s's tools by name with its arguments, exactly as if it were called directly: "+
				"the arguments must match the schema %s returns, and the result is the tool's own. Find names with %s.", c.name, describe, search),
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
    "query": {"type": "string", "minLength": 1, "description": "Keywords, like \"list customers\" or \"invoice pdf\"; a tool matching more of them ranks higher."},
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
		terms := queryTerms(q)
		if len(terms) == 0 {
			return executors.Result{}, retry.Errorf(retry.Validation, "query %q has no words to search for; write keywords, like \"list customers\"", q)
		}
		limit := defaultResults
		if n, ok := ec.Args["limit"].(float64); ok {
			limit = int(n)
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
		e, err := x.c.find(name, id, true)
		if err != nil {
			return executors.Result{}, err
		}
		t, err := x.c.builtTool(e)
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

// Resolve returns the registered name of the tool <source>__call names
// (name, with or without the catalog's prefix) for the outer call's
// identity id, built first when id may call it, so that the pipeline
// checks the arguments against the tool's real schema (a stub's executor
// checks them otherwise). A tool id may not call is found all the same:
// the pipeline's permit step answers as for a direct call, naming only
// that tool. An unknown name is a not_found error suggesting close names
// id may call.
func (c *Catalog) Resolve(name string, id *principal.Identity) (string, error) {
	e, err := c.find(name, id, false)
	if err != nil {
		return "", err
	}
	if id.Permits(e.name) {
		if _, err := c.builtTool(e); err != nil {
			return "", err
		}
	}
	return e.name, nil
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
