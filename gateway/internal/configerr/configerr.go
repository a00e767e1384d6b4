// Package configerr places the problems of a value built from the
// configuration (a REST tool, an OpenAPI source, an upstream, a hook) in
// the configuration file, as file:line:col: path: message. The builders
// name the field at fault with a [*registry.FieldError]; this package
// turns that field into a position through [config.Config.Locate].
//
// It knows the file only through config's positions: it does not know
// what builds the values, nor how the problems are joined and printed.
package configerr

import (
	"cmp"
	"errors"
	"strings"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/internal/httpheader"
	"github.com/toolgate/toolgate/registry"
)

// Place places each problem in err (a tree of errors joined with
// errors.Join and wrapped) in cfg's file: a *registry.FieldError at
// path.<its field>, anything else at path itself.
func Place(cfg *config.Config, path string, err error) []error {
	var out []error
	// top is the outermost error of the branch being walked: a leaf that is
	// not a FieldError is reported with the context its wrappers added.
	var walk func(e, top error)
	walk = func(e, top error) {
		switch x := e.(type) {
		case *registry.FieldError:
			x = inFileOrder(cfg, path, x)
			out = append(out, cfg.Locate(config.Problem{Path: joinPath(path, x.Field), Key: x.Key, Got: x.Value, Msg: x.Msg}))
		case interface{ Unwrap() []error }:
			for _, c := range x.Unwrap() {
				walk(c, c)
			}
		case interface{ Unwrap() error }:
			if inner := x.Unwrap(); inner != nil {
				walk(inner, top)
				return
			}
			out = append(out, cfg.Locate(config.Problem{Path: path, Msg: top.Error()}))
		default:
			out = append(out, cfg.Locate(config.Problem{Path: path, Msg: top.Error()}))
		}
	}
	walk(err, err)
	return out
}

func joinPath(path, field string) string {
	if field == "" {
		return path
	}
	return path + "." + field
}

// inFileOrder returns fe, or for a header written twice in different
// cases (a REST tool's, an OpenAPI source's or an upstream's headers) the
// same problem reported at the spelling written last: the owner sees only
// a map, the file knows the order.
func inFileOrder(cfg *config.Config, path string, fe *registry.FieldError) *registry.FieldError {
	d, ok := errors.AsType[*httpheader.DuplicateError](fe.Err)
	if !ok {
		return fe
	}
	// The field's parent ("headers") is the same for both spellings.
	parent := strings.TrimSuffix(fe.Field, registry.FieldPath("", d.Name))
	sw := d.Swapped()
	other := &registry.FieldError{Field: parent + registry.FieldPath("", sw.Name), Key: sw.Key, Value: sw.Value, Msg: sw.Msg, Err: sw.Err}
	at := cfg.Locate(config.Problem{Path: joinPath(path, fe.Field), Key: true})
	otherAt := cfg.Locate(config.Problem{Path: joinPath(path, other.Field), Key: true})
	if cmp.Or(cmp.Compare(otherAt.Line, at.Line), cmp.Compare(otherAt.Col, at.Col)) > 0 {
		return other
	}
	return fe
}

// Shown returns name for a message about another value, or instead when
// name holds a value that came from the environment: those are never
// shown, and [config.Config.Locate] hides only the value it places.
func Shown(cfg *config.Config, name, instead string) string {
	for _, s := range cfg.Secrets() {
		if s != "" && strings.Contains(name, s) {
			return instead
		}
	}
	return name
}
