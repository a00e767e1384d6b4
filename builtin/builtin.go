package builtin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

// source is the registry.Tool Source of every builtin tool.
const source = "builtin"

// Registrar is what builtin needs from the gateway: a way to add stateless
// and stateful tools. Implementations report a rejected tool (an invalid
// definition, a duplicate name) as an error.
type Registrar interface {
	RegisterStateless(tool registry.Tool, fn executors.StatelessFunc) error
	RegisterStateful(tool registry.Tool, f executors.Factory) error
}

// Options configures the builtin tools. A nil *Options is the same as the
// zero value.
type Options struct {
	// Now returns the current time; clock_now reports it. Nil means
	// time.Now.
	Now func() time.Time
}

// Names returns the names of the builtin tools, sorted. Each call returns a
// new slice that the caller may modify.
func Names() []string {
	return []string{"calc", "clock_now", "scratchpad", "sleep"}
}

// def is one builtin tool: its definition and exactly one of fn (stateless)
// or factory (stateful).
type def struct {
	tool    registry.Tool
	fn      executors.StatelessFunc
	factory executors.Factory
}

// defs returns the definition of the builtin tool called name, or false when
// there is no such tool.
func defs(name string, now func() time.Time) (def, bool) {
	switch name {
	case "calc":
		return def{tool: calcTool(), fn: calc}, true
	case "clock_now":
		return def{tool: clockTool(), fn: clockNow(now)}, true
	case "scratchpad":
		return def{tool: scratchpadTool(), factory: scratchpadFactory()}, true
	case "sleep":
		return def{tool: sleepTool(), fn: sleep}, true
	}
	return def{}, false
}

// Register registers the builtin tools called names with r, in the order
// given. opts may be nil.
//
// Names are checked before anything is registered: an unknown name, or a
// name given twice, is an error that lists the valid names, and nothing is
// registered. An error from r stops registration and is returned wrapped;
// the tools registered before it stay registered.
func Register(r Registrar, names []string, opts *Options) error {
	if r == nil {
		return errors.New("registering builtin tools: nil registrar")
	}
	now := time.Now
	if opts != nil && opts.Now != nil {
		now = opts.Now
	}
	valid := strings.Join(Names(), ", ")
	ds := make([]def, 0, len(names))
	seen := make(map[string]bool, len(names))
	for _, name := range names {
		d, ok := defs(name, now)
		if !ok {
			return fmt.Errorf("registering builtin tools: unknown tool %q; valid names are %s", name, valid)
		}
		if seen[name] {
			return fmt.Errorf("registering builtin tools: tool %q is listed twice", name)
		}
		seen[name] = true
		ds = append(ds, d)
	}
	for _, d := range ds {
		var err error
		if d.fn != nil {
			err = r.RegisterStateless(d.tool, d.fn)
		} else {
			err = r.RegisterStateful(d.tool, d.factory)
		}
		if err != nil {
			return fmt.Errorf("registering builtin tool %q: %w", d.tool.Name, err)
		}
	}
	return nil
}

// ptr returns a pointer to v, for the optional hints of
// [registry.Annotations].
func ptr[T any](v T) *T { return &v }

// fail returns a *retry.Error of class c for the tool called op.
func fail(c retry.Class, op, format string, args ...any) *retry.Error {
	e := retry.Errorf(c, format, args...)
	e.Op = op
	return e
}

// decode converts args, which have passed the tool called op's input
// schema, into the tool's argument struct T, whose fields carry json tags.
// It replaces per-argument checks: the schema has already enforced presence,
// ranges and lengths.
//
// Decoding is strict, as the schemas' "additionalProperties": false is, so
// that an embedder who calls a tool without validating gets a refusal
// instead of a silently ignored argument. Errors are *retry.Error of class
// validation: an argument of the wrong JSON type is named, with the type it
// must have. A null argument leaves its field at the zero value.
func decode[T any](op string, args map[string]any) (T, error) {
	var v T
	b, err := json.Marshal(args)
	if err != nil {
		return v, fail(retry.Validation, op, "arguments are not JSON: %v", err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&v); err != nil {
		if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok && te.Field != "" {
			return v, fail(retry.Validation, op, "argument %q must be %s", te.Field, jsonType(te.Type))
		}
		return v, fail(retry.Validation, op, "arguments do not match the input schema: %v", err)
	}
	return v, nil
}

// jsonType names the JSON type that decodes into a Go value of type t, with
// its article, for error messages.
func jsonType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}
