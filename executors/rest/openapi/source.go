package openapi

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/executors/rest"
	"github.com/toolgate/toolgate/registry"
)

// Validate reports every problem with src's own settings, without reading
// the document: its Name ([registry.ValidatePrefix]), Filter's globs,
// BaseURL, Headers (as [rest.ValidateHeaders] checks a REST tool's) and
// Auth. Each is a *[registry.FieldError] for the configuration key
// ("name", "include[0]", "base_url", "headers.X-Key", "auth.key"), joined
// with [errors.Join]; none shows a header value or a credential. Nil
// means src is valid. [Specs] runs it first.
func (src Source) Validate() error {
	var errs []error
	switch {
	case src.Name == "":
		errs = append(errs, &registry.FieldError{Field: "name", Err: registry.ErrInvalidPrefix,
			Msg: "is required; name the source, like petstore (its tools are named petstore" + registry.Separator + "<operationId>)"})
	case registry.ValidatePrefix(src.Name) != nil:
		errs = append(errs, &registry.FieldError{Field: "name", Value: src.shown(src.Name), Err: registry.ErrInvalidPrefix,
			Msg: fmt.Sprintf("must be 1 to %d characters from A-Z a-z 0-9 _ . - with no %s, like petstore", registry.MaxPrefixLen, registry.Separator)})
	}
	for _, list := range []struct {
		key   string
		globs []string
	}{{"include", src.Include}, {"exclude", src.Exclude}} {
		for i, g := range list.globs {
			if _, err := parseGlob(g); err != nil {
				errs = append(errs, &registry.FieldError{Field: fmt.Sprintf("%s[%d]", list.key, i), Value: src.shown(g), Err: err, Msg: err.Error()})
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(src.Auth)) {
		switch {
		case k == "":
			errs = append(errs, &registry.FieldError{Field: "auth", Msg: "has an empty scheme name; use the name of one of the document's securitySchemes"})
		case src.Auth[k] == "":
			errs = append(errs, &registry.FieldError{Field: registry.FieldPath("auth", k),
				Msg: "is empty; write the credential, like ${API_TOKEN}, or remove the entry"})
		case strings.ContainsFunc(src.Auth[k], func(r rune) bool { return r < 0x20 || r == 0x7f }):
			errs = append(errs, &registry.FieldError{Field: registry.FieldPath("auth", k),
				Msg: "contains a control character (CR, LF, NUL or another); write the credential on one line"})
		}
	}
	if src.BaseURL != "" {
		if msg := baseURLProblem(src.BaseURL); msg != "" {
			errs = append(errs, &registry.FieldError{Field: "base_url", Value: src.shown(src.BaseURL), Msg: msg})
		}
	}
	errs = append(errs, rest.ValidateHeaders(src.Headers))
	return errors.Join(errs...)
}

// shown returns v, or "" when it holds one of src.Secrets and must not be
// shown.
func (src Source) shown(v string) string {
	for _, s := range src.Secrets {
		if s != "" && strings.Contains(v, s) {
			return ""
		}
	}
	return v
}
