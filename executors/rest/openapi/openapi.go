package openapi

import (
	"context"
	"errors"
	"fmt"
	"maps"
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
