package openapi

import (
	"fmt"
	"slices"
)

// selector applies Include and Exclude globs, and remembers which matched.
type selector struct {
	include, exclude []glob
	hit              map[*glob]bool
}

func newSelector(include, exclude []string) *selector {
	s := &selector{hit: make(map[*glob]bool)}
	for _, g := range include {
		if c, err := parseGlob(g); err == nil { // Validate has checked them
			s.include = append(s.include, c)
		}
	}
	for _, g := range exclude {
		if c, err := parseGlob(g); err == nil {
			s.exclude = append(s.exclude, c)
		}
	}
	return s
}

// keep reports whether o is selected: some include glob (or none given)
// and no exclude glob matches one of its keys.
func (s *selector) keep(o *oapiOp) bool {
	keys := []string{o.op.OperationID, o.method + " " + o.key}
	if o.name != "" {
		keys = append(keys, o.name)
	}
	if o.path != o.key {
		keys = append(keys, o.method+" "+o.path)
	}
	for _, t := range o.op.Tags {
		keys = append(keys, "tag:"+t)
	}
	match := func(gs []glob) bool {
		matched := false
		for i := range gs {
			g := &gs[i]
			if slices.ContainsFunc(keys, func(k string) bool { return k != "" && g.match(k) }) {
				s.hit[g] = true
				matched = true
			}
		}
		return matched
	}
	in := len(s.include) == 0 || match(s.include)
	out := match(s.exclude)
	return in && !out
}

// unmatched describes each glob that matched no operation.
func (s *selector) unmatched() []string {
	var out []string
	for _, l := range []struct {
		key   string
		globs []glob
	}{{"include", s.include}, {"exclude", s.exclude}} {
		for i := range l.globs {
			if !s.hit[&l.globs[i]] {
				out = append(out, fmt.Sprintf("%s glob %q", l.key, l.globs[i].src))
			}
		}
	}
	return out
}
