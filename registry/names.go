package registry

import (
	"cmp"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/textcut"
)

const (
	// MaxNameLen is the longest tool name MCP allows, in characters.
	MaxNameLen = 64
	// Separator joins a source's prefix and a tool's own name:
	// fs__read_file. A prefix never contains it.
	Separator = "__"
	// MaxPrefixLen is the longest prefix a source (an upstream MCP server,
	// an OpenAPI document) may give its tools' names, in characters: it
	// leaves at least 30 characters for the tool's own name within
	// MaxNameLen after <prefix>__.
	MaxPrefixLen = 32
	// maxShown is how many bytes of a name an error message shows.
	maxShown = 80
	// maxCompared is how many bytes of a name repair and suggestions look
	// at, so a hostile name cannot cost quadratic time.
	maxCompared = 128
	// maxSuggestions is how many names a NotFoundError suggests.
	maxSuggestions = 3
)

// ErrInvalidName is wrapped by every error [ValidateName] returns.
var ErrInvalidName = errors.New("invalid tool name")

// ValidateName reports whether name is a valid MCP tool name: 1 to 64
// characters, each one of A-Z a-z 0-9 _ . -. The error wraps
// [ErrInvalidName], names the rule broken and shows the offending
// character or length; it shows at most 80 bytes of the name.
func ValidateName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: the name is empty; use 1 to %d characters from A-Z a-z 0-9 _ . -", ErrInvalidName, MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		if nameChar(name[i]) {
			continue
		}
		r, size := utf8.DecodeRuneInString(name[i:])
		what := fmt.Sprintf("character %q (U+%04X)", r, r)
		if r == utf8.RuneError && size <= 1 {
			what = fmt.Sprintf("byte %#02x (not UTF-8)", name[i])
		}
		return fmt.Errorf("%w %s: %s at byte %d is not allowed; use only A-Z a-z 0-9 _ . -", ErrInvalidName, quoteName(name), what, i)
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("%w %s: the name is %d characters long; at most %d are allowed", ErrInvalidName, quoteName(name), len(name), MaxNameLen)
	}
	return nil
}

// ErrInvalidPrefix is wrapped by every error [ValidatePrefix] returns.
var ErrInvalidPrefix = errors.New("invalid tool name prefix")

// ValidatePrefix reports whether prefix may prefix tool names as
// <prefix>__<tool>: 1 to [MaxPrefixLen] characters from A-Z a-z 0-9 _ . -,
// without [Separator]. The error is a *[FieldError] for field "name" whose
// Msg does not show the prefix, wrapping [ErrInvalidPrefix].
func ValidatePrefix(prefix string) error {
	bad := func(msg string) error {
		return &FieldError{Field: "name", Value: prefix, Msg: msg, Err: ErrInvalidPrefix}
	}
	switch {
	case prefix == "":
		return bad(fmt.Sprintf("is empty; write 1 to %d characters from A-Z a-z 0-9 _ . -, like fs (its tools are named fs%s<tool>)", MaxPrefixLen, Separator))
	case strings.Contains(prefix, Separator):
		return bad(fmt.Sprintf("must not contain %s, which separates it from the tool names; use a single _ instead", Separator))
	case len(prefix) > MaxPrefixLen || strings.IndexFunc(prefix, func(r rune) bool { return r >= utf8.RuneSelf || !nameChar(byte(r)) }) >= 0:
		return bad(fmt.Sprintf("must be 1 to %d characters from A-Z a-z 0-9 _ . -, leaving room for the tool names (at most %d characters in all), like fs", MaxPrefixLen, MaxNameLen))
	}
	return nil
}

// Prefixed returns the name of tool under prefix: <prefix>__<tool>.
func Prefixed(prefix, tool string) string { return prefix + Separator + tool }

// UnderPrefix reports whether name is prefix itself or a tool name under
// it (<prefix>__...), that is whether a tool of that name would clash with
// a source that prefixes its tools with prefix.
func UnderPrefix(name, prefix string) bool {
	return prefix != "" && (name == prefix || strings.HasPrefix(name, prefix+Separator))
}

func nameChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-'
}

// quoteName quotes a possibly hostile name for an error message, cut to
// maxShown bytes.
func quoteName(name string) string {
	return fmt.Sprintf("%q", truncate(name, maxShown))
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut
// with "…".
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return textcut.Prefix(s, n) + "…"
}

// normalize returns the key names are repaired by: ASCII lower case, '-'
// and '.' read as '_', runs of '_' collapsed to one.
func normalize(name string) string {
	var b strings.Builder
	b.Grow(len(name))
	prevSep := false
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '-' || c == '.' || c == '_':
			if prevSep {
				continue
			}
			prevSep = true
			b.WriteByte('_')
			continue
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		prevSep = false
		b.WriteByte(c)
	}
	return b.String()
}

// Suggest returns up to n of candidates closest to name, closest first
// (ties alphabetically). Names are compared normalized, as repair compares
// them. A candidate qualifies when its Levenshtein distance from name is at
// most max(2, len/3) of name's normalized length, or when one normalized
// name contains the other ("now" and "clock_now"). Only the first 128 bytes
// of name and of each candidate are compared.
func Suggest(name string, candidates []string, n int) []string {
	keys := make(map[string][]string, len(candidates))
	for _, c := range candidates {
		k := normalize(truncateBytes(c, maxCompared))
		keys[k] = append(keys[k], c)
	}
	return suggest(name, maps.All(keys), n)
}

// suggest is Suggest over candidates grouped by normalized key.
func suggest(name string, keys iter.Seq2[string, []string], n int) []string {
	if n <= 0 {
		return nil
	}
	q := normalize(truncateBytes(name, maxCompared))
	limit := max(2, len(q)/3)
	type scored struct {
		name string
		dist int
	}
	var found []scored
	var lev levenshtein
	for key, names := range keys {
		key = truncateBytes(key, maxCompared)
		d, ok := lev.within(q, key, limit)
		if !ok && !contains(q, key) {
			continue
		}
		if !ok {
			d, _ = lev.within(q, key, maxCompared)
		}
		for _, nm := range names {
			found = append(found, scored{nm, d})
		}
	}
	slices.SortFunc(found, func(a, b scored) int {
		return cmp.Or(cmp.Compare(a.dist, b.dist), strings.Compare(a.name, b.name))
	})
	found = slices.CompactFunc(found, func(a, b scored) bool { return a.name == b.name })
	if len(found) == 0 {
		return nil
	}
	out := make([]string, 0, min(n, len(found)))
	for _, s := range found[:min(n, len(found))] {
		out = append(out, s.name)
	}
	return out
}

// contains reports whether one of two normalized names contains the other,
// ignoring containments of fewer than 2 bytes, which say nothing.
func contains(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	return len(a) >= 2 && strings.Contains(b, a)
}

func truncateBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// levenshtein computes edit distances, reusing its rows between calls.
type levenshtein struct {
	prev, cur []int
}

// within returns the edit distance between a and b and whether it is at
// most limit; it gives up as soon as the distance must exceed limit.
func (l *levenshtein) within(a, b string, limit int) (int, bool) {
	if d := len(a) - len(b); d > limit || -d > limit {
		return 0, false
	}
	if cap(l.prev) < len(b)+1 {
		l.prev = make([]int, len(b)+1)
		l.cur = make([]int, len(b)+1)
	}
	prev, cur := l.prev[:len(b)+1], l.cur[:len(b)+1]
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			rowMin = min(rowMin, cur[j])
		}
		if rowMin > limit {
			return 0, false
		}
		prev, cur = cur, prev
	}
	d := prev[len(b)]
	return d, d <= limit
}
