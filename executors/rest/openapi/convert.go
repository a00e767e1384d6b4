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
