package openapi

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// errBadGlob is wrapped by every error [parseGlob] returns.
var errBadGlob = errors.New("is not a valid glob")

// A glob selects operations: * matches any run of characters, / included
// ("GET /repos/*" matches every GET under /repos), ? matches one
// character, [abc], [a-z] and [!a-z] match one character of (or not of) a
// set, and \ makes the next character literal. Matching is
// case-sensitive and covers the whole text.
type glob struct {
	src   string
	parts []globPart
}

// globPart is one element of a glob.
type globPart struct {
	kind   globKind
	lit    string      // globLit
	ranges []runeRange // globClass
	neg    bool        // globClass: [!...]
}

type globKind uint8

const (
	globLit globKind = iota
	globStar
	globAny
	globClass
)

// runeRange is lo-hi inclusive.
type runeRange struct{ lo, hi rune }

// parseGlob compiles s. Its errors wrap errBadGlob and say what to write.
func parseGlob(s string) (glob, error) {
	g := glob{src: s}
	if s == "" {
		return g, fmt.Errorf("%w: it is empty; write a name or a glob, like list* or tag:issues", errBadGlob)
	}
	if !utf8.ValidString(s) {
		return g, fmt.Errorf("%w: not valid UTF-8", errBadGlob)
	}
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			g.parts = append(g.parts, globPart{kind: globLit, lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch r {
		case '*':
			flush()
			if len(g.parts) == 0 || g.parts[len(g.parts)-1].kind != globStar {
				g.parts = append(g.parts, globPart{kind: globStar})
			}
			i += n
		case '?':
			flush()
			g.parts = append(g.parts, globPart{kind: globAny})
			i += n
		case '\\':
			if i+n >= len(s) {
				return g, fmt.Errorf("%w: ends in a lone \\; write \\\\ for a backslash", errBadGlob)
			}
			r2, n2 := utf8.DecodeRuneInString(s[i+n:])
			lit.WriteRune(r2)
			i += n + n2
		case '[':
			flush()
			p, used, err := parseClass(s[i+n:])
			if err != nil {
				return g, err
			}
			g.parts = append(g.parts, p)
			i += n + used
		default:
			lit.WriteRune(r)
			i += n
		}
	}
	flush()
	return g, nil
}

// parseClass reads a character class after its [; used counts the bytes
// up to and including its ].
func parseClass(s string) (p globPart, used int, err error) {
	p.kind = globClass
	i := 0
	if strings.HasPrefix(s, "!") || strings.HasPrefix(s, "^") {
		p.neg = true
		i++
	}
	first := true
	for {
		if i >= len(s) {
			return p, 0, fmt.Errorf("%w: a [ is never closed; close the set, like [a-z], or write \\[ for a bracket", errBadGlob)
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == ']' && !first {
			return p, i + n, nil
		}
		first = false
		if r == '\\' {
			if i+n >= len(s) {
				return p, 0, fmt.Errorf("%w: ends in a lone \\; write \\\\ for a backslash", errBadGlob)
			}
			i += n
			r, n = utf8.DecodeRuneInString(s[i:])
		}
		i += n
		lo, hi := r, r
		if i+1 < len(s) && s[i] == '-' && s[i+1] != ']' {
			i++
			r2, n2 := utf8.DecodeRuneInString(s[i:])
			if r2 == '\\' {
				if i+n2 >= len(s) {
					return p, 0, fmt.Errorf("%w: ends in a lone \\; write \\\\ for a backslash", errBadGlob)
				}
				i += n2
				r2, n2 = utf8.DecodeRuneInString(s[i:])
			}
			i += n2
			hi = r2
			if hi < lo {
				return p, 0, fmt.Errorf("%w: range %c-%c runs backwards; write it low to high, like a-z", errBadGlob, lo, hi)
			}
		}
		p.ranges = append(p.ranges, runeRange{lo, hi})
	}
}

// match reports whether g matches all of s.
func (g glob) match(s string) bool {
	return matchParts(g.parts, s)
}

// matchParts matches parts against s. A star is tried at the shortest
// length first; after a later star fails, only the last star backtracks,
// which is enough because a star matches anything (linear in practice,
// O(len(parts)·len(s)) at worst).
func matchParts(parts []globPart, s string) bool {
	starIdx, starS := -1, 0
	pi, si := 0, 0
	for {
		if pi < len(parts) {
			p := parts[pi]
			switch p.kind {
			case globStar:
				starIdx, starS = pi, si
				pi++
				continue
			case globLit:
				if strings.HasPrefix(s[si:], p.lit) {
					pi++
					si += len(p.lit)
					continue
				}
			case globAny, globClass:
				if si < len(s) {
					r, n := utf8.DecodeRuneInString(s[si:])
					if p.kind == globAny || p.inClass(r) {
						pi++
						si += n
						continue
					}
				}
			}
		} else if si == len(s) {
			return true
		}
		// Mismatch: let the last star take one more character.
		if starIdx < 0 || starS >= len(s) {
			return false
		}
		_, n := utf8.DecodeRuneInString(s[starS:])
		starS += n
		pi, si = starIdx+1, starS
	}
}

func (p globPart) inClass(r rune) bool {
	in := false
	for _, rg := range p.ranges {
		if rg.lo <= r && r <= rg.hi {
			in = true
			break
		}
	}
	return in != p.neg
}
