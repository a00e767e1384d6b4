package openapi

import (
	"regexp"
	"strings"

	"github.com/toolgate/toolgate/registry"
)

// oapiMaxName is MCP's limit on a tool name's length.
const oapiMaxName = registry.MaxNameLen

var (
	// oapiNameRE is MCP's rule for tool names, used for the source name
	// and for property names (which become {placeholders}).
	oapiNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
	// oapiNonAlnumRun matches what a derived name replaces with one "_".
	oapiNonAlnumRun = regexp.MustCompile(`[^A-Za-z0-9]+`)
)

// oapiUniqueName returns <source>__<sanitized id>, shortened to 64
// characters when longer, with "_2", "_3", ... added when the name is in
// used ([registry.UniqueName]). note says what changed; name is "" when
// source leaves no room.
func oapiUniqueName(source, id string, used map[string]string) (name, note string) {
	return registry.UniqueName(source+registry.Separator+oapiSanitize(id), used)
}

// oapiSanitize is [registry.SanitizeName]: "search pets!" →
// "search_pets". The result may be empty.
func oapiSanitize(s string) string { return registry.SanitizeName(s) }

// oapiDerivedName names an operation without an operationId: GET
// /pets/{petId} → "get_pets_petid".
func oapiDerivedName(method, p string) string {
	rest := strings.Trim(oapiNonAlnumRun.ReplaceAllString(p, "_"), "_")
	if rest == "" {
		return strings.ToLower(method)
	}
	return strings.ToLower(method + "_" + rest)
}
