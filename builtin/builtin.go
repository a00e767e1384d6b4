// Package builtin owns toolgate's opt-in demonstration tools: calc,
// clock_now, scratchpad and sleep. They are registered only when the
// config's builtin list names them, through a [Registrar] (in practice the
// gateway's public embedding API).
//
// builtin imports only the standard library and toolgate's registry,
// executors and retry packages. Nothing but cmd/toolgate may import it.
package builtin

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

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

// stringArg returns args[key] as a string. ok is false when the key is
// absent; a present value that is not a string is a validation error.
func stringArg(op string, args map[string]any, key string) (s string, ok bool, err error) {
	v, present := args[key]
	if !present || v == nil {
		return "", false, nil
	}
	s, isString := v.(string)
	if !isString {
		return "", false, fail(retry.Validation, op, "argument %q must be a string", key)
	}
	return s, true, nil
}

// checkLen returns a validation error unless s has between lo and hi
// characters (Unicode code points, as JSON Schema counts them).
func checkLen(op, key, s string, lo, hi int) error {
	n := utf8.RuneCountInString(s)
	if n < lo || n > hi {
		return fail(retry.Validation, op, "argument %q must be %d to %d characters long, got %d", key, lo, hi, n)
	}
	return nil
}

// intArg returns args[key] as an integer in [lo, hi]. JSON numbers arrive as
// float64; whole-valued floats and Go integer types are accepted.
func intArg(op string, args map[string]any, key string, lo, hi int64) (int64, error) {
	v, present := args[key]
	if !present || v == nil {
		return 0, fail(retry.Validation, op, "missing required argument %q", key)
	}
	var n int64
	switch x := v.(type) {
	case float64:
		if x != math.Trunc(x) || x < float64(lo) || x > float64(hi) {
			return 0, fail(retry.Validation, op, "argument %q must be an integer from %d to %d, got %v", key, lo, hi, x)
		}
		n = int64(x)
	case int:
		n = int64(x)
	case int64:
		n = x
	case interface{ Int64() (int64, error) }: // json.Number
		var err error
		if n, err = x.Int64(); err != nil {
			return 0, fail(retry.Validation, op, "argument %q must be an integer from %d to %d, got %v", key, lo, hi, x)
		}
	default:
		return 0, fail(retry.Validation, op, "argument %q must be an integer from %d to %d", key, lo, hi)
	}
	if n < lo || n > hi {
		return 0, fail(retry.Validation, op, "argument %q must be an integer from %d to %d, got %d", key, lo, hi, n)
	}
	return n, nil
}

// checkKnown returns a validation error naming the first (in sorted order)
// argument that is not in known, mirroring "additionalProperties": false for
// callers that bypass the input schema.
func checkKnown(op string, args map[string]any, known ...string) error {
	var extra []string
	for k := range args {
		if !slices.Contains(known, k) {
			extra = append(extra, k)
		}
	}
	if len(extra) == 0 {
		return nil
	}
	slices.Sort(extra)
	return fail(retry.Validation, op, "unknown argument %q; valid arguments are %s", extra[0], strings.Join(known, ", "))
}
