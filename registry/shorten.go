package registry

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// shortHashLen is how many hex digits of a name's SHA-256 end its
// shortened form: 32 bits, so two long names of one source that share
// their readable start clash once in about 4 billion pairs, and then
// [UniqueName] numbers them.
const shortHashLen = 8

// ShortName returns full, or when it is longer than [MaxNameLen] full cut
// to end in "_" and 8 hex digits of its SHA-256 (shortened is true): the
// same full name gives the same short one on every run and replica. The
// part before the first [Separator] (the source's prefix) is always kept
// whole; ok is false when it leaves no room for the rest.
func ShortName(full string) (name string, shortened, ok bool) {
	if len(full) <= MaxNameLen {
		return full, false, true
	}
	prefix, _, found := strings.Cut(full, Separator)
	if found {
		prefix += Separator
	} else {
		prefix = ""
	}
	sum := sha256.Sum256([]byte(full))
	hash := hex.EncodeToString(sum[:shortHashLen/2])
	keep := MaxNameLen - len(prefix) - 1 - len(hash)
	if keep < 1 {
		return "", false, false
	}
	return full[:len(prefix)+keep] + "_" + hash, true, true
}

// UniqueName returns a name for full that is not a key of used (which maps
// names taken to what took them): [ShortName] of full, else of full with
// "_2", "_3", ... added. note says what changed ("" when nothing did);
// name is "" when the prefix leaves no room. Callers that want the same
// names on every run present the names in a fixed order.
func UniqueName(full string, used map[string]string) (name, note string) {
	for n := 1; ; n++ {
		want := full
		if n > 1 {
			want = fmt.Sprintf("%s_%d", full, n)
		}
		cand, shortened, ok := ShortName(want)
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
			note = fmt.Sprintf("tool name %s is longer than %d characters; shortened to %s", full, MaxNameLen, cand)
		}
		return cand, note
	}
}

// SanitizeName drops characters MCP does not allow in a tool name (outside
// A-Z a-z 0-9 _ . -) from both ends of s and replaces each run of them
// inside with one "_": "search pets!" → "search_pets". The result may be
// empty.
func SanitizeName(s string) string {
	s = strings.TrimFunc(s, func(r rune) bool { return r >= 0x80 || !nameChar(byte(r)) })
	var b strings.Builder
	bad := false
	for i := 0; i < len(s); i++ {
		if !nameChar(s[i]) {
			bad = true
			continue
		}
		if bad {
			b.WriteByte('_')
			bad = false
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
