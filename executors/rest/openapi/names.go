package openapi

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
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
	// oapiBadNameRun matches what sanitizing replaces with one "_".
	oapiBadNameRun = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)
	// oapiNonAlnumRun matches what a derived name replaces with one "_".
	oapiNonAlnumRun = regexp.MustCompile(`[^A-Za-z0-9]+`)
)

// oapiUniqueName returns <source>__<sanitized id>, shortened to 64
// characters when longer, with "_2", "_3", ... added when the name is in
// used. note says what changed; name is "" when source leaves no room.
func oapiUniqueName(source, id string, used map[string]string) (name, note string) {
	full := source + registry.Separator + oapiSanitize(id)
	for n := 1; ; n++ {
		want := full
		if n > 1 {
			want = fmt.Sprintf("%s_%d", full, n)
		}
		cand, shortened, ok := oapiToolName(want)
		if !ok {
			return "", ""
		}
		other, taken := used[cand]
		if taken {
			if n == 1 {
				note = fmt.Sprintf("tool name %s is taken by %s", cand, other)
			}
			continue
		}
		switch {
		case n > 1:
			note += "; named " + cand
		case shortened:
			note = fmt.Sprintf("tool name %s is longer than %d characters; shortened to %s", full, oapiMaxName, cand)
		}
		return cand, note
	}
}

// oapiSanitize drops characters outside [A-Za-z0-9_.-] from both ends of
// s and replaces each run of them inside with "_": "search pets!" →
// "search_pets". The result may be empty.
func oapiSanitize(s string) string {
	s = strings.TrimFunc(s, func(r rune) bool { return !oapiNameRE.MatchString(string(r)) })
	return oapiBadNameRun.ReplaceAllString(s, "_")
}

// oapiDerivedName names an operation without an operationId: GET
// /pets/{petId} → "get_pets_petid".
func oapiDerivedName(method, p string) string {
	rest := strings.Trim(oapiNonAlnumRun.ReplaceAllString(p, "_"), "_")
	if rest == "" {
		return strings.ToLower(method)
	}
	return strings.ToLower(method + "_" + rest)
}

// oapiToolName returns full, or when it is over 64 characters full cut
// to end in "_" and 8 hex digits of its hash (shortened is true); ok is
// false when the source name leaves no room for that.
func oapiToolName(full string) (name string, shortened, ok bool) {
	if len(full) <= oapiMaxName {
		return full, false, true
	}
	prefix, _, _ := strings.Cut(full, registry.Separator)
	prefix += registry.Separator
	sum := sha256.Sum256([]byte(full))
	hash := hex.EncodeToString(sum[:4])
	keep := oapiMaxName - len(prefix) - 1 - len(hash)
	if keep < 1 {
		return "", false, false
	}
	return full[:len(prefix)+keep] + "_" + hash, true, true
}
