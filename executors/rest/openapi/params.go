package openapi

import (
	"fmt"
	"maps"
	"mime"
	"regexp"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/toolgate/toolgate/executors/rest"
)

// oapiPlaceholder matches a {param} in an OpenAPI path.
var oapiPlaceholder = regexp.MustCompile(`\{([^{}]*)\}`)

// oapiParameters returns the operation's parameters: the path item's,
// unless the operation redefines them (same name and location), then the
// operation's own.
func oapiParameters(itemParams, opParams openapi3.Parameters) []*openapi3.Parameter {
	var out []*openapi3.Parameter
	for _, r := range itemParams {
		if r == nil || r.Value == nil {
			continue
		}
		if opParams.GetByInAndName(r.Value.In, r.Value.Name) != nil {
			continue
		}
		out = append(out, r.Value)
	}
	for _, r := range opParams {
		if r != nil && r.Value != nil {
			out = append(out, r.Value)
		}
	}
	return out
}

// oapiIgnoredHeader reports the header parameters OpenAPI says to ignore.
func oapiIgnoredHeader(name string) bool {
	return strings.EqualFold(name, "Accept") || strings.EqualFold(name, "Content-Type") ||
		strings.EqualFold(name, "Authorization")
}

// oapiClientHeader reports the headers the HTTP client sets from the
// request itself, which the REST executor never takes from a tool.
func oapiClientHeader(name string) bool {
	for _, h := range []string{"Content-Length", "Transfer-Encoding", "Host", "Connection", "Te", "Trailer", "Upgrade", "Keep-Alive", "Proxy-Connection"} {
		if strings.EqualFold(name, h) {
			return true
		}
	}
	return false
}

// oapiDefaultStyle is each parameter location's default style.
func oapiDefaultStyle(in string) string {
	if in == openapi3.ParameterInQuery || in == openapi3.ParameterInCookie {
		return openapi3.SerializationForm
	}
	return openapi3.SerializationSimple
}

// oapiPropName returns the input-schema property for a parameter: its
// name, sanitized to [A-Za-z0-9_.-]{1,64}, or "<in>_<name>" when that is
// taken. ok is false when both are.
func oapiPropName(props map[string]any, in, name string) (prop string, ok bool) {
	for _, c := range []string{oapiSanitize(name), in + "_" + oapiSanitize(name)} {
		if c == "" {
			continue
		}
		if len(c) > oapiMaxName {
			c = c[:oapiMaxName]
		}
		if _, taken := props[c]; !taken {
			return c, true
		}
	}
	return "", false
}

// oapiIsJSON reports whether a media type (maybe with parameters) is
// JSON: application/json or application/*+json.
func oapiIsJSON(k string) bool {
	mt, _, err := mime.ParseMediaType(k)
	return err == nil && (mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}

// oapiStyleOK reports whether OpenAPI defines style for parameters in in.
func oapiStyleOK(in, style string) bool {
	switch in {
	case openapi3.ParameterInPath:
		return style == rest.StyleSimple || style == rest.StyleLabel || style == rest.StyleMatrix
	case openapi3.ParameterInQuery:
		return style == rest.StyleForm || style == rest.StyleSpaceDelimited || style == rest.StylePipeDelimited || style == rest.StyleDeepObject
	case openapi3.ParameterInHeader:
		return style == rest.StyleSimple
	case openapi3.ParameterInCookie:
		return style == rest.StyleForm
	}
	return false
}

// param adds prm to d: a property of the input schema, and the template
// or [rest.Param] that sends it. A parameter the executor cannot send, or
// one in invalid (which the document's check found wrong), is left out
// with a note when it is optional, and skips the operation when it is
// required.
func (d *oapiDraft) param(prm *openapi3.Parameter, invalid map[*openapi3.Parameter]string) *oapiSkip {
	if prm.In == openapi3.ParameterInHeader && oapiIgnoredHeader(prm.Name) {
		return nil // OpenAPI says these header parameters SHALL be ignored
	}
	if prm.In == openapi3.ParameterInHeader && oapiClientHeader(prm.Name) {
		d.sc.note(fmt.Sprintf("header parameter %q is left out of the tool: the HTTP client sets it from the request itself", prm.Name))
		return nil
	}
	required := prm.In == openapi3.ParameterInPath || prm.Required
	// drop leaves out an optional parameter the executor cannot
	// send, and skips the operation when it is required.
	drop := func(msg string) *oapiSkip {
		if required {
			return &oapiSkip{msg}
		}
		d.sc.note(msg + "; the parameter is left out of the tool")
		return nil
	}
	if msg, bad := invalid[prm]; bad {
		d.sc.note(msg + "; the parameter is left out of the tool")
		return nil
	}
	style, problem := oapiParamStyle(prm)
	if problem != "" {
		return drop(problem)
	}
	schemaRef, asJSON := oapiParamSchema(prm)
	prop, ok := oapiPropName(d.props, prm.In, prm.Name)
	if !ok {
		return drop(fmt.Sprintf("%s parameter %q: its property name collides with another parameter's", prm.In, prm.Name))
	}
	d.paramProp(prm, prop, schemaRef, required)
	if oapiPlainParam(prm, schemaRef, asJSON, style) {
		switch prm.In {
		case openapi3.ParameterInQuery:
			d.query[prm.Name] = "{" + prop + "}"
		case openapi3.ParameterInHeader:
			d.setHeader(prm.Name, "{"+prop+"}")
		}
		return nil
	}
	if prm.In == openapi3.ParameterInHeader {
		d.dropHeader(prm.Name)
	}
	d.params = append(d.params, rest.Param{
		Name: prm.Name, In: prm.In, Arg: prop, Style: style, Explode: prm.Explode,
		AllowReserved: prm.AllowReserved, JSON: asJSON,
	})
	return nil
}

// paramProp adds the input schema's property prop for prm, of schema
// schemaRef.
func (d *oapiDraft) paramProp(prm *openapi3.Parameter, prop string, schemaRef *openapi3.SchemaRef, required bool) {
	schema := d.sc.ref(schemaRef, 0, false)
	if m, ok := schema.(map[string]any); ok {
		if prm.Description != "" {
			m["description"] = prm.Description
		}
		if prm.Deprecated {
			m["deprecated"] = true
		}
	}
	d.props[prop] = schema
	if required {
		d.required = append(d.required, prop)
	}
	if prm.In == openapi3.ParameterInPath {
		d.pathProps[prm.Name] = prop
	}
}

// oapiParamStyle returns prm's style, its location's default when it has
// none, or what is wrong with its location or style.
func oapiParamStyle(prm *openapi3.Parameter) (style, problem string) {
	switch prm.In {
	case openapi3.ParameterInPath, openapi3.ParameterInQuery, openapi3.ParameterInHeader, openapi3.ParameterInCookie:
	default:
		return "", fmt.Sprintf("parameter %q is in %q, which is not a parameter location", prm.Name, prm.In)
	}
	style = prm.Style
	if style == "" {
		style = oapiDefaultStyle(prm.In)
	}
	if !oapiStyleOK(prm.In, style) {
		return "", fmt.Sprintf("%s parameter %q has style %q, which OpenAPI does not define for %s parameters", prm.In, prm.Name, style, prm.In)
	}
	return style, ""
}

// oapiParamSchema returns prm's schema: its schema, or else the schema of
// the first of its content's media types (asJSON when that is JSON).
func oapiParamSchema(prm *openapi3.Parameter) (schemaRef *openapi3.SchemaRef, asJSON bool) {
	if prm.Schema != nil {
		return prm.Schema, false
	}
	for _, k := range slices.Sorted(maps.Keys(prm.Content)) {
		if mt := prm.Content[k]; mt != nil {
			return mt.Schema, oapiIsJSON(k)
		}
	}
	return nil, false
}

// oapiPlainParam reports whether prm is sent as a plain template: a
// scalar in its location's default style. Everything else is a
// [rest.Param], serialized by the executor.
func oapiPlainParam(prm *openapi3.Parameter, schemaRef *openapi3.SchemaRef, asJSON bool, style string) bool {
	scalar := schemaRef != nil && schemaRef.Value != nil && !asJSON &&
		!schemaRef.Value.Type.Includes(openapi3.TypeArray) && !schemaRef.Value.Type.Includes(openapi3.TypeObject) &&
		len(schemaRef.Value.Type.Slice()) > 0
	return scalar && style == oapiDefaultStyle(prm.In) && prm.In != openapi3.ParameterInCookie && !prm.AllowReserved
}
