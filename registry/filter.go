package registry

import (
	"errors"
	"fmt"
	"path"
	"slices"
)

// Filter selects a source's tools by their own names (before prefixing):
// the operationIds of an OpenAPI document, the tools of an upstream MCP
// server. A name is kept when Include is empty or one of its globs matches
// it, and none of Exclude's globs matches it. Globs are [path.Match]
// patterns. The zero Filter keeps every name.
type Filter struct {
	Include []string
	Exclude []string
}

// Validate reports every glob of f that is empty or malformed, each as a
// *[FieldError] for "include[i]" or "exclude[i]", joined with
// [errors.Join]; a malformed glob's error matches [path.ErrBadPattern].
// It returns nil when every glob is valid.
func (f Filter) Validate() error {
	var errs []error
	for _, list := range []struct {
		key   string
		globs []string
	}{{"include", f.Include}, {"exclude", f.Exclude}} {
		for i, g := range list.globs {
			field := fmt.Sprintf("%s[%d]", list.key, i)
			if g == "" {
				errs = append(errs, &FieldError{Field: field, Msg: "is empty; write a name or a glob, like list*"})
				continue
			}
			// path.Match checks the whole pattern even when the name does
			// not match, so any name will do.
			if _, err := path.Match(g, "x"); err != nil {
				errs = append(errs, &FieldError{Field: field, Value: g, Err: err,
					Msg: `is not a valid glob (* ? [a-z] and \ to escape, as in Go's path.Match); write \[ for a literal [`})
			}
		}
	}
	return errors.Join(errs...)
}

// Match reports whether f keeps name. A malformed glob matches nothing;
// [Filter.Validate] reports it.
func (f Filter) Match(name string) bool {
	if len(f.Include) > 0 && !slices.ContainsFunc(f.Include, func(g string) bool { return globMatch(g, name) }) {
		return false
	}
	return !slices.ContainsFunc(f.Exclude, func(g string) bool { return globMatch(g, name) })
}

func globMatch(glob, name string) bool {
	ok, err := path.Match(glob, name)
	return err == nil && ok
}
