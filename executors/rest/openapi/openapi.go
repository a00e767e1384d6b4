package openapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/toolgate/toolgate/executors/rest"
	"github.com/toolgate/toolgate/internal/textcut"
)

// Source describes one OpenAPI document (3.0, 3.1 or Swagger 2.0, JSON
// or YAML) whose operations become REST tools. [Specs] reads it; the
// caller fetches the document.
type Source struct {
	// Name prefixes every tool name: <Name>__<operationId>. It must be a
	// valid prefix ([registry.ValidatePrefix]: 1 to [registry.MaxPrefixLen]
	// characters from A-Z a-z 0-9 _ . -, without "__").
	Name string
	// Spec is the document.
	Spec []byte
	// Location is the file path or URL the document came from. It appears
	// in errors; when it is a file path, $refs to other files in its
	// directory (or below) are read. References to URLs are never
	// followed.
	Location string
	// BaseURL replaces the document's servers: every operation's URL is
	// BaseURL + path. Empty means the first usable server URL of the
	// operation, its path item or the document, with server variables at
	// their defaults (relative ones resolved against Location when it is
	// a URL); it is required when the document has no such URL.
	BaseURL string
	// Include and Exclude select operations with globs (see [Specs]); no
	// Include keeps every operation, and Exclude drops after Include.
	Include, Exclude []string
	// Headers are sent with every request. Values are literal (braces are
	// escaped, not taken as placeholders); an operation's own header
	// parameter of the same name wins.
	Headers map[string]string
	// Auth maps the names of the document's securitySchemes to
	// credentials: the key of an apiKey scheme, the token of an http
	// bearer scheme, "user:password" for an http basic scheme. An
	// operation sends the credentials of the first of its security
	// requirements (or the document's) that Auth can satisfy, and no
	// others.
	Auth map[string]string
	// MaxSpecBytes caps the document together with the files its $refs
	// read; zero means [DefaultMaxSpecBytes].
	MaxSpecBytes int64
	// Timeout, MaxResponseBytes and Secrets are copied into every Spec;
	// see [rest.Spec] for their meaning. (A source's retry policy is not
	// the Spec's: it reaches each call in its retry.Plan.)
	Timeout          time.Duration
	MaxResponseBytes int64
	Secrets          []string
}

// Warning reports an operation that [Specs] skipped, something lost in
// converting an operation that it kept, or a problem of the document
// that affects no kept operation.
type Warning struct {
	// Operation names the operation: "METHOD /path", followed by
	// " (operationId)" when it has one; empty for the document.
	Operation string
	// Tool is the name the operation's tool has (or would have had), or
	// empty.
	Tool string
	// Msg says what happened. A kept operation's warning never says it
	// was skipped.
	Msg string
	// Skipped is true when the operation made no tool: Msg is the reason.
	Skipped bool
}

// String returns "<Operation>: <Msg>", "<Operation>: skipped: <Msg>" for
// an operation skipped, or Msg for the document.
func (w Warning) String() string {
	switch {
	case w.Operation == "":
		return w.Msg
	case w.Skipped:
		return w.Operation + ": skipped: " + w.Msg
	}
	return w.Operation + ": " + w.Msg
}

// Error reports an OpenAPI source that produced no tools at all: a
// bad source name or glob, a document that does not load, or no usable
// base URL.
type Error struct {
	// Source is [Source.Name].
	Source string
	// Location is [Source.Location].
	Location string
	// Err is the cause.
	Err error
}

// Error returns `openapi source "<name>" (<location>): <cause>`.
func (e *Error) Error() string {
	loc := ""
	if e.Location != "" {
		loc = " (" + e.Location + ")"
	}
	return fmt.Sprintf("openapi source %q%s: %v", e.Source, loc, e.Err)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// ErrNoBaseURL is the cause of an [*Error] when the source has no
// BaseURL and the document has no usable absolute http(s) server URL.
var ErrNoBaseURL = errors.New("no absolute http(s) server URL in the document; set base_url")

// oapiBraces escapes literal braces for the executor's templates.
var oapiBraces = strings.NewReplacer("{", "{{", "}", "}}")

// oapiMethods are the HTTP methods that become tools; TRACE, CONNECT,
// QUERY and custom methods are skipped.
var oapiMethods = []string{
	http.MethodDelete, http.MethodGet, http.MethodHead, http.MethodOptions,
	http.MethodPatch, http.MethodPost, http.MethodPut,
}

// oapiValidation are the rules operations and the document are checked
// with: examples, defaults and patterns never refuse anything.
var oapiValidation = []openapi3.ValidationOption{
	openapi3.DisableExamplesValidation(),
	openapi3.DisableSchemaDefaultsValidation(),
	openapi3.DisableSchemaPatternValidation(),
	openapi3.DisableSchemaFormatValidation(),
	openapi3.AllowExtensionsWithRef(),
}

// Specs turns every selected operation of src's document into a
// [rest.Spec], sorted by path, then method. A problem in one operation
// (something the REST executor cannot send, a parameter that does not
// validate) skips that operation only, with a [Warning] whose Skipped is
// set; a problem elsewhere in the document is a Warning too. Only a
// document that cannot be read at all, src's own settings, or no usable
// base URL are errors, each an [*Error].
//
// Operations are selected with src's Include and Exclude globs. A glob
// matches an operation when it matches its tool name, its operationId,
// "METHOD /path" (as the document writes the path) or "tag:<tag>" for one
// of its tags; * matches any run of characters, / included. A glob that
// matches no operation is a Warning.
//
// Each tool is named <source>__<operationId> (an operation without one
// gets a name derived from its method and path). A name over 64
// characters is cut and ends in "_" and 8 hex digits of its hash; a name
// already taken gets "_2", "_3", ... in document order. Names do not
// depend on Include or Exclude, so they stay the same from one load to
// the next while the document does.
//
// Each Spec's InputSchema is a JSON Schema 2020-12 object whose
// properties are the operation's parameters plus "body" (or
// "request_body" when a parameter is already called "body") for a
// request body, with every $ref inlined and OpenAPI 3.0 keywords
// translated (nullable, example, boolean exclusiveMinimum and
// exclusiveMaximum) or dropped (discriminator, xml, externalDocs,
// extensions). Properties marked readOnly are left out of request bodies.
func Specs(src Source) (specs []rest.Spec, warnings []Warning, err error) {
	specs, _, warnings, err = SpecsWithOperations(src)
	return specs, warnings, err
}

// Operation is what one tool of a source was made from: the keys a
// catalog searches (gateway's catalog: search mode).
type Operation struct {
	// Method is the HTTP method, in upper case.
	Method string
	// Path is the path as the document writes it (with its #fragment or
	// ?query, if any).
	Path string
	// OperationID is the operationId as written, or empty.
	OperationID string
	// Tags are the operation's tags, in document order.
	Tags []string
	// Summary is one line about the operation: its summary, else the
	// first line of its description, else "METHOD path"; at most
	// [maxSummary] bytes.
	Summary string
	// Tool is the name of the operation's tool (or the name it would
	// have had), or empty when the source name leaves no room for one.
	Tool string
}

// maxSummary caps [Operation.Summary].
const maxSummary = 160

// SpecsWithOperations is [Specs] that also returns, for each spec, the
// [Operation] it was made from: ops[i] describes specs[i].
func SpecsWithOperations(src Source) (specs []rest.Spec, ops []Operation, warnings []Warning, err error) {
	d, err := Open(src)
	if err != nil {
		return nil, nil, nil, err
	}
	warnings = slices.Clone(d.head)
	for i := range d.ops {
		spec, ws, ok := d.Spec(i)
		warnings = append(warnings, ws...)
		if ok {
			specs = append(specs, spec)
			ops = append(ops, d.Operation(i))
		}
	}
	return specs, ops, append(warnings, d.tail...), nil
}

// Document is an OpenAPI source's document, loaded and checked, with its
// selected operations named but not yet converted: [Document.Spec]
// converts one. A gateway serving a large document behind a catalog
// converts only the operations it is asked about, since inlining every
// $ref of every operation is most of the cost of a large document
// (Microsoft Graph's 11,422 operations inline to 1 GB of JSON Schema).
// A Document is safe for concurrent use.
type Document struct {
	mu sync.Mutex // guards b (its cache)
	b  *oapiBuilder
	// ops are the selected operations, sorted by path, then method.
	ops []*oapiOp
	// head are the document's warnings (repairs, validation, auth);
	// tail the globs that matched no operation.
	head, tail []Warning
}

// Open loads src's document and selects and names its operations,
// converting none. Its errors are [Specs]': src's own settings, a
// document that cannot be read, no usable base URL, each an [*Error].
func Open(src Source) (d *Document, err error) {
	fail := func(err error) (*Document, error) {
		return nil, &Error{Source: src.Name, Location: src.Location, Err: err}
	}
	defer func() {
		// kin-openapi on a document it does not expect must not take the
		// gateway down.
		if r := recover(); r != nil {
			d, err = fail(fmt.Errorf("reading the document failed: %v", r))
		}
	}()
	// *registry.FieldErrors inside the *Error, so the gateway can place
	// them in the config file.
	if err := src.Validate(); err != nil {
		return fail(err)
	}
	doc, repairs, err := load(src)
	if err != nil {
		return fail(err)
	}
	base, err := oapiDocBase(src.BaseURL, doc.Servers, src.Location)
	if err != nil {
		return fail(err)
	}

	src.Spec = nil // loaded: a Document may be kept, the bytes need not be
	d = &Document{b: &oapiBuilder{src: src, doc: doc, base: base}}
	for _, r := range repairs {
		d.head = append(d.head, Warning{Msg: "the document was repaired to load: " + r})
	}
	if err := doc.Validate(context.Background(), oapiValidation...); err != nil {
		// Only then is each operation checked on its own: checking them
		// all again is slow on large documents.
		d.b.checkOps = true
		d.head = append(d.head, Warning{Msg: "the document does not validate (" + firstLine(err.Error()) +
			"); each operation is checked on its own instead, and only an operation with a problem of its own makes no tool"})
	}
	for _, k := range slices.Sorted(maps.Keys(src.Auth)) {
		if doc.Components == nil || doc.Components.SecuritySchemes[k] == nil {
			d.head = append(d.head, Warning{Msg: fmt.Sprintf("auth.%s names no securityScheme of the document; use one of its components.securitySchemes names", k)})
		}
	}
	sel := newSelector(src.Include, src.Exclude)
	for _, op := range d.b.operations() {
		if sel.keep(op) {
			d.ops = append(d.ops, op)
		}
	}
	for _, g := range sel.unmatched() {
		d.tail = append(d.tail, Warning{Msg: g + " matches no operation; check it against toolgate tools, or remove it"})
	}
	return d, nil
}

// Warnings returns the document's own warnings, about no one operation:
// repairs made to load it, its validation, auth entries and globs that
// name nothing.
func (d *Document) Warnings() []Warning { return slices.Concat(d.head, d.tail) }

// Len returns how many operations are selected.
func (d *Document) Len() int { return len(d.ops) }

// Operation describes the i-th selected operation, without converting
// it.
func (d *Document) Operation(i int) Operation {
	o := d.ops[i]
	return Operation{Method: o.method, Path: o.key, OperationID: o.op.OperationID,
		Tags: slices.Clone(o.op.Tags), Summary: oapiSummary(o.op, o.method, o.key), Tool: o.name}
}

// Spec converts the i-th selected operation. ok is false when it makes no
// tool: warnings then holds the reason, with Skipped set; otherwise they
// are what was lost in converting it.
func (d *Document) Spec(i int) (spec rest.Spec, warnings []Warning, ok bool) {
	return d.spec(i, true)
}

// Outline is [Document.Spec] without the input schema (InputSchema is
// nil), which is most of the cost: everything else, and whether the
// operation makes a tool at all, is as Spec says. Warnings about the
// schema (patterns dropped, references cut) come only from Spec.
func (d *Document) Outline(i int) (spec rest.Spec, warnings []Warning, ok bool) {
	return d.spec(i, false)
}

func (d *Document) spec(i int, schema bool) (rest.Spec, []Warning, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.b.operation(d.ops[i], schema)
}

// oapiTags matches an HTML tag, for [oapiSummary].
var oapiTags = regexp.MustCompile(`</?[a-zA-Z][^<>]*>`)

// oapiSummary is op's one-line summary ([Operation.Summary]).
func oapiSummary(op *openapi3.Operation, method, p string) string {
	s := strings.TrimSpace(op.Summary)
	if s == "" {
		s, _, _ = strings.Cut(strings.TrimSpace(op.Description), "\n")
		s = strings.TrimSpace(s)
	}
	if s == "" {
		return method + " " + p
	}
	// Vendor descriptions are often HTML (Stripe's "<p>Returns ...</p>"):
	// tags cost a model tokens and say nothing.
	s = strings.Join(strings.Fields(oapiTags.ReplaceAllString(s, "")), " ")
	if s == "" {
		return method + " " + p
	}
	if len(s) > maxSummary {
		s = textcut.Prefix(s, maxSummary-len("…")) + "…"
	}
	return s
}

// oapiBuilder accumulates the result of one Specs call.
type oapiBuilder struct {
	src  Source
	doc  *openapi3.T
	base string
	// checkOps is set when the document does not validate: each
	// operation's parameters and request body are then checked.
	checkOps bool
	cache    oapiCache
}

// oapiSkip is the reason an operation was skipped.
type oapiSkip struct{ msg string }

// oapiTooLarge is convert's answer when the input schema passes
// oapiMaxSchemaBytes: the operation is converted again, less deep.
var oapiTooLarge = &oapiSkip{"the input schema is too large"}

// oapiOp is one operation of the document, named.
type oapiOp struct {
	key    string // the path as the document writes it
	path   string // key without its #fragment and ?query
	query  string // key's query part, "" for none
	method string
	item   *openapi3.PathItem
	op     *openapi3.Operation
	label  string // "METHOD key (operationId)"
	name   string // the tool's name; "" when none fits
	// nameNote says how name came to differ from <source>__<id>.
	nameNote string
	// invalid holds the optional parameters that do not validate, to be
	// left out of the tool, with their problem; problem is the
	// operation's own problem, which makes no tool. Both are set once
	// checked (only when the document does not validate).
	invalid map[*openapi3.Parameter]string
	problem error
	checked bool
}

// operations lists every operation of the document, sorted by path key,
// then method, each with its tool name.
func (b *oapiBuilder) operations() []*oapiOp {
	var ops []*oapiOp
	used := make(map[string]string) // tool name → label
	if b.doc.Paths == nil {
		return nil
	}
	items := b.doc.Paths.Map()
	for _, key := range slices.Sorted(maps.Keys(items)) {
		item := items[key]
		if item == nil {
			continue
		}
		p, q := key, ""
		if i := strings.IndexByte(p, '#'); i >= 0 {
			p = p[:i]
		}
		if i := strings.IndexByte(p, '?'); i >= 0 {
			p, q = p[:i], p[i+1:]
		}
		byMethod := item.Operations()
		for _, method := range slices.Sorted(maps.Keys(byMethod)) {
			op := byMethod[method]
			if op == nil {
				continue
			}
			o := &oapiOp{key: key, path: p, query: q, method: method, item: item, op: op, label: method + " " + key}
			id := op.OperationID
			if id != "" {
				o.label += " (" + id + ")"
			}
			if oapiSanitize(id) == "" {
				id = oapiDerivedName(method, p)
			}
			o.name, o.nameNote = oapiUniqueName(b.src.Name, id, used)
			if o.name != "" {
				used[o.name] = o.label
			}
			ops = append(ops, o)
		}
	}
	return ops
}

// operation converts one operation, without its input schema unless
// schema is set. ok is false when it makes no tool: warnings then holds
// the reason, with Skipped set.
func (b *oapiBuilder) operation(o *oapiOp, schema bool) (spec rest.Spec, warnings []Warning, ok bool) {
	skip := func(msg string) (rest.Spec, []Warning, bool) {
		return rest.Spec{}, []Warning{{Operation: o.label, Tool: o.name, Msg: msg, Skipped: true}}, false
	}
	defer func() {
		if r := recover(); r != nil {
			spec, warnings, ok = skip(fmt.Sprintf("converting the operation failed: %v", r))
		}
	}()
	if o.name == "" {
		return skip(fmt.Sprintf("the source name leaves no room for a tool name within %d characters; shorten the source name", oapiMaxName))
	}
	if b.checkOps && !o.checked {
		o.invalid, o.problem = oapiCheck(o.item, o.op)
		o.checked = true
	}
	if o.problem != nil {
		return skip(o.problem.Error())
	}
	depth := oapiMaxRefDepth
	if !schema {
		depth = -1
	}
	spec, notes, sk := b.convert(o, depth)
	// An input schema over oapiMaxSchemaBytes is inlined again to fewer
	// levels of $ref until it fits: compiling a schema costs time and
	// memory that grow faster than its size (a 1.4 MB one, a minute and
	// 4 GB), and a model reads all of it.
	for _, cut := range oapiCutDepths {
		if sk != oapiTooLarge {
			break
		}
		depth = cut
		spec, notes, sk = b.convert(o, depth)
		if sk == nil {
			notes = append(notes, fmt.Sprintf(`the input schema with its references inlined is over %d KiB; references nested deeper than %d levels are replaced with {"type":"object"}`,
				oapiMaxSchemaBytes>>10, depth))
		}
	}
	if sk == oapiTooLarge {
		return skip(fmt.Sprintf(`its input schema is over %d KiB even with every reference replaced with {"type":"object"}`, oapiMaxSchemaBytes>>10))
	}
	if sk != nil {
		return skip(sk.msg)
	}
	if !schema {
		spec.InputSchema = nil
	}
	if o.nameNote != "" {
		notes = append([]string{o.nameNote}, notes...)
	}
	for _, n := range notes {
		warnings = append(warnings, Warning{Operation: o.label, Tool: o.name, Msg: n})
	}
	spec.Name = o.name
	return spec, warnings, true
}

// oapiCheck validates what of an operation its tool depends on: its
// parameters and request body (not its responses, examples or defaults).
// An optional parameter that does not validate is returned in invalid,
// with its problem, to be left out; any other problem is err.
func oapiCheck(item *openapi3.PathItem, op *openapi3.Operation) (invalid map[*openapi3.Parameter]string, err error) {
	defer func() {
		// A document kin-openapi loaded but cannot validate must not
		// take the source down.
		if r := recover(); r != nil {
			err = fmt.Errorf("checking the operation failed: %v", r)
		}
	}()
	ctx := context.Background()
	// Documents that say 3.0 often use 3.1 keywords (examples, const, type
	// arrays); the executor reads both, so either reading is accepted.
	valid := func(v func(...openapi3.ValidationOption) error) error {
		err := v(oapiValidation...)
		if err != nil && v(append(slices.Clone(oapiValidation), openapi3.IsOpenAPI31OrLater())...) == nil {
			return nil
		}
		return err
	}
	for _, prm := range oapiParameters(item.Parameters, op.Parameters) {
		if err := valid(func(o ...openapi3.ValidationOption) error { return prm.Validate(ctx, o...) }); err != nil {
			msg := fmt.Sprintf("invalid %s parameter %q: %s", prm.In, prm.Name, firstLine(err.Error()))
			if prm.In == openapi3.ParameterInPath || prm.Required {
				return nil, errors.New(msg)
			}
			if invalid == nil {
				invalid = make(map[*openapi3.Parameter]string)
			}
			invalid[prm] = msg
		}
	}
	if rb := op.RequestBody; rb != nil && rb.Value != nil {
		if err := valid(func(o ...openapi3.ValidationOption) error { return rb.Value.Validate(ctx, o...) }); err != nil {
			return nil, fmt.Errorf("invalid request body: %s", firstLine(err.Error()))
		}
	}
	return invalid, nil
}

// convert builds everything of the Spec but its name, inlining $refs in
// the input schema at most maxDepth levels deep; a negative maxDepth
// builds no schemas at all (the input schema is then meaningless). notes
// are warnings for a Spec that is kept.
func (b *oapiBuilder) convert(o *oapiOp, maxDepth int) (rest.Spec, []string, *oapiSkip) {
	p, item, method, op := o.path, o.item, o.method, o.op
	if !slices.Contains(oapiMethods, method) {
		return rest.Spec{}, nil, &oapiSkip{method + " operations are not supported"}
	}
	base, skip := b.opBase(item, op)
	if skip != nil {
		return rest.Spec{}, nil, skip
	}

	sc := &oapiSchemaConv{cache: &b.cache, maxDepth: maxDepth}
	props := make(map[string]any)
	var requiredProps []string
	headers := make(map[string]string, len(b.src.Headers))
	setHeader := func(name, value string) {
		for k := range headers {
			if strings.EqualFold(k, name) {
				delete(headers, k)
			}
		}
		headers[name] = value
	}
	for k, v := range b.src.Headers {
		setHeader(k, oapiBraces.Replace(v))
	}
	query := make(map[string]string)
	if o.query != "" {
		fixed, err := url.ParseQuery(o.query)
		if err != nil {
			return rest.Spec{}, nil, &oapiSkip{fmt.Sprintf("the query part of path %q does not parse: %v", o.key, err)}
		}
		for k, vs := range fixed {
			if k != "" && len(vs) > 0 {
				query[k] = oapiBraces.Replace(vs[0])
			}
		}
	}
	pathProps := make(map[string]string) // path parameter name → property

	var params []rest.Param
	for _, prm := range oapiParameters(item.Parameters, op.Parameters) {
		if prm.In == openapi3.ParameterInHeader && oapiIgnoredHeader(prm.Name) {
			continue // OpenAPI says these header parameters SHALL be ignored
		}
		if prm.In == openapi3.ParameterInHeader && oapiClientHeader(prm.Name) {
			sc.note(fmt.Sprintf("header parameter %q is left out of the tool: the HTTP client sets it from the request itself", prm.Name))
			continue
		}
		required := prm.In == openapi3.ParameterInPath || prm.Required
		// drop leaves out an optional parameter the executor cannot
		// send, and skips the operation when it is required.
		drop := func(msg string) *oapiSkip {
			if required {
				return &oapiSkip{msg}
			}
			sc.note(msg + "; the parameter is left out of the tool")
			return nil
		}
		if msg, bad := o.invalid[prm]; bad {
			sc.note(msg + "; the parameter is left out of the tool")
			continue
		}
		switch prm.In {
		case openapi3.ParameterInPath, openapi3.ParameterInQuery, openapi3.ParameterInHeader, openapi3.ParameterInCookie:
		default:
			if sk := drop(fmt.Sprintf("parameter %q is in %q, which is not a parameter location", prm.Name, prm.In)); sk != nil {
				return rest.Spec{}, nil, sk
			}
			continue
		}
		style := prm.Style
		if style == "" {
			style = oapiDefaultStyle(prm.In)
		}
		if !oapiStyleOK(prm.In, style) {
			if sk := drop(fmt.Sprintf("%s parameter %q has style %q, which OpenAPI does not define for %s parameters", prm.In, prm.Name, style, prm.In)); sk != nil {
				return rest.Spec{}, nil, sk
			}
			continue
		}
		schemaRef, asJSON := prm.Schema, false
		if schemaRef == nil {
			for _, k := range slices.Sorted(maps.Keys(prm.Content)) {
				if mt := prm.Content[k]; mt != nil {
					schemaRef, asJSON = mt.Schema, oapiIsJSON(k)
					break
				}
			}
		}
		prop, ok := oapiPropName(props, prm.In, prm.Name)
		if !ok {
			if sk := drop(fmt.Sprintf("%s parameter %q: its property name collides with another parameter's", prm.In, prm.Name)); sk != nil {
				return rest.Spec{}, nil, sk
			}
			continue
		}
		schema := sc.ref(schemaRef, 0, false)
		if m, ok := schema.(map[string]any); ok {
			if prm.Description != "" {
				m["description"] = prm.Description
			}
			if prm.Deprecated {
				m["deprecated"] = true
			}
		}
		props[prop] = schema
		if required {
			requiredProps = append(requiredProps, prop)
		}
		if prm.In == openapi3.ParameterInPath {
			pathProps[prm.Name] = prop
		}
		// A scalar in its location's default style is a plain template;
		// everything else is a Param, serialized by the executor.
		scalar := schemaRef != nil && schemaRef.Value != nil && !asJSON &&
			!schemaRef.Value.Type.Includes(openapi3.TypeArray) && !schemaRef.Value.Type.Includes(openapi3.TypeObject) &&
			len(schemaRef.Value.Type.Slice()) > 0
		if scalar && style == oapiDefaultStyle(prm.In) && prm.In != openapi3.ParameterInCookie && !prm.AllowReserved {
			switch prm.In {
			case openapi3.ParameterInQuery:
				query[prm.Name] = "{" + prop + "}"
			case openapi3.ParameterInHeader:
				setHeader(prm.Name, "{"+prop+"}")
			}
			continue
		}
		if prm.In == openapi3.ParameterInHeader {
			for k := range headers {
				if strings.EqualFold(k, prm.Name) {
					delete(headers, k)
				}
			}
		}
		params = append(params, rest.Param{
			Name: prm.Name, In: prm.In, Arg: prop, Style: style, Explode: prm.Explode,
			AllowReserved: prm.AllowReserved, JSON: asJSON,
		})
	}

	secrets := b.applyAuth(op, setHeader, headers, query, sc)

	// Path placeholders take their parameters' property names.
	var missing string
	urlPath := oapiPlaceholder.ReplaceAllStringFunc(p, func(m string) string {
		prop, ok := pathProps[m[1:len(m)-1]]
		if !ok {
			missing = m
			return m
		}
		return "{" + prop + "}"
	})
	if missing != "" {
		return rest.Spec{}, nil, &oapiSkip{fmt.Sprintf("path placeholder %s has no path parameter", missing)}
	}

	var body json.RawMessage
	var payload *rest.Payload
	if rb := op.RequestBody; rb != nil && rb.Value != nil && len(rb.Value.Content) > 0 {
		prop := "body"
		if _, taken := props[prop]; taken {
			prop = "request_body"
			if _, taken := props[prop]; taken {
				return rest.Spec{}, nil, &oapiSkip{`parameters named "body" and "request_body" leave no property name for the request body`}
			}
		}
		mediaType, mt, kind := oapiBodyMedia(rb.Value.Content)
		var schema any
		switch kind {
		case "json":
			schema = sc.ref(mt.Schema, 0, true)
			body = json.RawMessage(`"{` + prop + `}"`)
			if mediaType != "application/json" {
				setHeader("Content-Type", mediaType)
			}
		case rest.PayloadForm, rest.PayloadMultipart:
			schema = sc.ref(mt.Schema, 0, true)
			payload = &rest.Payload{Arg: prop, Kind: kind, Encoding: map[string]rest.PartEncoding{}}
			if kind == rest.PayloadForm {
				payload.ContentType = mediaType
			}
			for name, enc := range mt.Encoding {
				if enc != nil {
					payload.Encoding[name] = rest.PartEncoding{ContentType: enc.ContentType, Style: enc.Style, Explode: enc.Explode}
				}
			}
			if kind == rest.PayloadMultipart {
				oapiMarkFiles(mt.Schema, schema, payload.Encoding)
			}
		case rest.PayloadText:
			schema = map[string]any{"type": "string"}
			payload = &rest.Payload{Arg: prop, Kind: kind, ContentType: mediaType}
		default:
			schema = map[string]any{"type": "string", "contentEncoding": "base64",
				"description": "The body's bytes (" + mediaType + "), in base64."}
			if strings.Contains(mediaType, "*") {
				mediaType = "application/octet-stream"
			}
			payload = &rest.Payload{Arg: prop, Kind: rest.PayloadBinary, ContentType: mediaType}
		}
		if m, ok := schema.(map[string]any); ok && rb.Value.Description != "" {
			if d, had := m["description"].(string); had && kind == rest.PayloadBinary {
				m["description"] = rb.Value.Description + "\n\n" + d
			} else {
				m["description"] = rb.Value.Description
			}
		}
		props[prop] = schema
		if rb.Value.Required {
			requiredProps = append(requiredProps, prop)
		}
	}

	input := map[string]any{
		"type":                 "object",
		"properties":           props,
		"additionalProperties": false,
	}
	if len(requiredProps) > 0 {
		input["required"] = requiredProps
	}
	if sc.over {
		return rest.Spec{}, nil, oapiTooLarge
	}
	raw, err := json.Marshal(input)
	if err != nil {
		return rest.Spec{}, nil, &oapiSkip{fmt.Sprintf("encoding input schema: %v", err)}
	}
	if len(raw) > oapiMaxSchemaBytes {
		return rest.Spec{}, nil, oapiTooLarge
	}

	spec := rest.Spec{
		Description:      oapiDescription(op, method, p),
		Source:           "openapi:" + b.src.Name,
		Method:           method,
		URL:              base + urlPath,
		Body:             body,
		Params:           params,
		Payload:          payload,
		InputSchema:      raw,
		Timeout:          b.src.Timeout,
		MaxResponseBytes: b.src.MaxResponseBytes,
		Secrets:          secrets,
	}
	if len(query) > 0 {
		spec.Query = query
	}
	if len(headers) > 0 {
		spec.Headers = headers
	}
	return spec, sc.notes, nil
}

// oapiDescription is summary and description, or "METHOD PATH".
func oapiDescription(op *openapi3.Operation, method, p string) string {
	var parts []string
	for _, s := range []string{op.Summary, op.Description} {
		if s = strings.TrimSpace(s); s != "" {
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		return method + " " + p
	}
	return strings.Join(parts, "\n\n")
}
