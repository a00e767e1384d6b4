package openapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/toolgate/toolgate/executors/rest"
)

// oapiBraces escapes literal braces for the executor's templates.
var oapiBraces = strings.NewReplacer("{", "{{", "}", "}}")

// oapiMethods are the HTTP methods that become tools; TRACE, CONNECT,
// QUERY and custom methods are skipped.
var oapiMethods = []string{
	http.MethodDelete, http.MethodGet, http.MethodHead, http.MethodOptions,
	http.MethodPatch, http.MethodPost, http.MethodPut,
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
	if !slices.Contains(oapiMethods, o.method) {
		return rest.Spec{}, nil, &oapiSkip{o.method + " operations are not supported"}
	}
	base, skip := b.opBase(o.item, o.op)
	if skip != nil {
		return rest.Spec{}, nil, skip
	}
	d, skip := b.newDraft(o, maxDepth)
	if skip != nil {
		return rest.Spec{}, nil, skip
	}
	for _, prm := range oapiParameters(o.item.Parameters, o.op.Parameters) {
		if skip := d.param(prm, o.invalid); skip != nil {
			return rest.Spec{}, nil, skip
		}
	}
	secrets := b.applyAuth(o.op, d)
	urlPath, skip := d.urlPath(o.path)
	if skip != nil {
		return rest.Spec{}, nil, skip
	}
	if skip := d.requestBody(o.op.RequestBody); skip != nil {
		return rest.Spec{}, nil, skip
	}
	raw, skip := d.inputSchema()
	if skip != nil {
		return rest.Spec{}, nil, skip
	}
	spec := rest.Spec{
		Description:      oapiDescription(o.op, o.method, o.path),
		Source:           "openapi:" + b.src.Name,
		Method:           o.method,
		URL:              base + urlPath,
		Body:             d.body,
		Params:           d.params,
		Payload:          d.payload,
		InputSchema:      raw,
		Timeout:          b.src.Timeout,
		MaxResponseBytes: b.src.MaxResponseBytes,
		Secrets:          secrets,
	}
	if len(d.query) > 0 {
		spec.Query = d.query
	}
	if len(d.headers) > 0 {
		spec.Headers = d.headers
	}
	return spec, d.sc.notes, nil
}

// oapiDraft is one operation's Spec while convert builds it: the input
// schema's properties, and how each of them reaches the request.
type oapiDraft struct {
	sc        *oapiSchemaConv
	props     map[string]any // the input schema's properties
	required  []string       // the input schema's required properties
	headers   map[string]string
	query     map[string]string
	pathProps map[string]string // path parameter name → property
	params    []rest.Param
	body      json.RawMessage
	payload   *rest.Payload
}

// newDraft starts the Spec of o with the source's headers and the fixed
// query of o's path, if any.
func (b *oapiBuilder) newDraft(o *oapiOp, maxDepth int) (*oapiDraft, *oapiSkip) {
	d := &oapiDraft{
		sc:        &oapiSchemaConv{cache: &b.cache, maxDepth: maxDepth},
		props:     make(map[string]any),
		headers:   make(map[string]string, len(b.src.Headers)),
		query:     make(map[string]string),
		pathProps: make(map[string]string),
	}
	for k, v := range b.src.Headers {
		d.setHeader(k, oapiBraces.Replace(v))
	}
	if o.query != "" {
		fixed, err := url.ParseQuery(o.query)
		if err != nil {
			return nil, &oapiSkip{fmt.Sprintf("the query part of path %q does not parse: %v", o.key, err)}
		}
		for k, vs := range fixed {
			if k != "" && len(vs) > 0 {
				d.query[k] = oapiBraces.Replace(vs[0])
			}
		}
	}
	return d, nil
}

// setHeader sets header name to value, replacing it in any case.
func (d *oapiDraft) setHeader(name, value string) {
	d.dropHeader(name)
	d.headers[name] = value
}

// dropHeader deletes header name, in any case.
func (d *oapiDraft) dropHeader(name string) {
	for k := range d.headers {
		if strings.EqualFold(k, name) {
			delete(d.headers, k)
		}
	}
}

// urlPath returns path p with each placeholder renamed to its path
// parameter's property.
func (d *oapiDraft) urlPath(p string) (string, *oapiSkip) {
	var missing string
	urlPath := oapiPlaceholder.ReplaceAllStringFunc(p, func(m string) string {
		prop, ok := d.pathProps[m[1:len(m)-1]]
		if !ok {
			missing = m
			return m
		}
		return "{" + prop + "}"
	})
	if missing != "" {
		return "", &oapiSkip{fmt.Sprintf("path placeholder %s has no path parameter", missing)}
	}
	return urlPath, nil
}

// inputSchema returns the input schema, encoded: an object of d's
// properties, nothing else allowed.
func (d *oapiDraft) inputSchema() (json.RawMessage, *oapiSkip) {
	input := map[string]any{
		"type":                 "object",
		"properties":           d.props,
		"additionalProperties": false,
	}
	if len(d.required) > 0 {
		input["required"] = d.required
	}
	if d.sc.over {
		return nil, oapiTooLarge
	}
	raw, err := json.Marshal(input)
	if err != nil {
		return nil, &oapiSkip{fmt.Sprintf("encoding input schema: %v", err)}
	}
	if len(raw) > oapiMaxSchemaBytes {
		return nil, oapiTooLarge
	}
	return raw, nil
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
