package openapi

import (
	"mime"
	"regexp"
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
