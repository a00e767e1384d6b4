package registry

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/toolgate/toolgate/schemas"
)

// ErrNotFound is matched (with errors.Is) by every [*NotFoundError].
var ErrNotFound = errors.New("unknown tool")

// NotFoundError reports a name that [Registry.Resolve] could not resolve.
type NotFoundError struct {
	// Name is the name that was asked for, as given.
	Name string
	// Suggestions are up to three registered names close to Name, closest
	// first.
	Suggestions []string
	// Available is how many tools were registered at the time.
	Available int
}

// Error returns `unknown tool "X"; did you mean "A", "B"?`, or without
// suggestions `unknown tool "X"; call tools/list to see the N available
// tools`. It shows at most 80 bytes of Name.
func (e *NotFoundError) Error() string {
	var b strings.Builder
	b.WriteString("unknown tool ")
	b.WriteString(quoteName(e.Name))
	switch {
	case len(e.Suggestions) > 0:
		b.WriteString("; did you mean ")
		for i, s := range e.Suggestions {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(quoteName(s))
		}
		b.WriteString("?")
	case e.Available == 0:
		b.WriteString("; no tools are available")
	case e.Available == 1:
		b.WriteString("; call tools/list to see the 1 available tool")
	default:
		b.WriteString("; call tools/list to see the ")
		b.WriteString(strconv.Itoa(e.Available))
		b.WriteString(" available tools")
	}
	return b.String()
}

// Is reports whether target is [ErrNotFound].
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// ConflictError reports a tool whose name is already taken, by a tool
// already registered or by an earlier tool of the same batch.
type ConflictError struct {
	// Name is the contested name.
	Name string
	// Source is the source of the tool that was refused.
	Source string
	// ExistingSource is the source of the tool that holds the name.
	ExistingSource string
}

// Error returns `tool "calc" from source "rest:calc" conflicts with the
// tool of that name from source "builtin"`.
func (e *ConflictError) Error() string {
	return fmt.Sprintf("tool %s from source %q conflicts with the tool of that name from source %q",
		quoteName(e.Name), e.Source, e.ExistingSource)
}

// outputSchemaError is a tool's invalid output schema; it reads "invalid
// output schema at …".
type outputSchemaError struct{ err *schemas.CompileError }

func (e outputSchemaError) Error() string { return e.err.Describe("output") }
func (e outputSchemaError) Unwrap() error { return e.err }

// Registry is a set of tools with unique names. Its zero value is an empty
// registry ready to use. It is safe for concurrent use.
type Registry struct {
	// mu guards every field below.
	mu sync.RWMutex
	// tools maps each name to its tool.
	tools map[string]*Tool
	// byKey maps each normalized name to the names that have it, sorted.
	byKey map[string][]string
	// sorted is every tool ordered by name. It is replaced on change,
	// never modified in place.
	sorted []*Tool
	// subs are the live subscriptions, in subscription order. The slice
	// is replaced on change, never modified in place.
	subs []*subscription
	// pending are changes not yet delivered, oldest first.
	pending []pendingChange
	// delivering is true while some goroutine is delivering pending.
	delivering bool
}

// New returns an empty registry.
func New() *Registry {
	return &Registry{
		tools: make(map[string]*Tool),
		byKey: make(map[string][]string),
	}
}

// Add registers tools, all or none. Every tool needs a valid name
// ([ValidateName]), one of the four kinds, a non-empty Source, and input
// and output schemas that compile (see [schemas.Compile]); its name must
// not be taken by a registered tool or by an earlier tool of the batch
// ([*ConflictError]). Add reports every problem it finds, joined with
// [errors.Join]. On success it emits one [Change] listing the tools added.
//
// The registry keeps its own copy of each tool (schemas included), so the
// caller may reuse the values it passed.
func (r *Registry) Add(tools ...Tool) error {
	if len(tools) == 0 {
		return nil
	}
	prepared, named, errs := prepare(tools, "")
	r.mu.Lock()
	errs = append(errs, r.conflicts(named, func(*Tool) bool { return false })...)
	if len(errs) > 0 {
		r.mu.Unlock()
		return errors.Join(errs...)
	}
	for _, t := range prepared {
		r.insert(t)
	}
	r.changed(Change{Added: sortedTools(prepared)})
	r.mu.Unlock()
	r.deliver()
	return nil
}

// Remove unregisters the named tools, ignoring names that are not
// registered, and returns the names it removed, sorted. It emits one
// [Change] if it removed any.
func (r *Registry) Remove(names ...string) []string {
	r.mu.Lock()
	var removed []string
	for _, name := range names {
		if _, ok := r.tools[name]; ok {
			r.delete(name)
			removed = append(removed, name)
		}
	}
	if len(removed) == 0 {
		r.mu.Unlock()
		return nil
	}
	slices.Sort(removed)
	r.changed(Change{Removed: removed})
	r.mu.Unlock()
	r.deliver()
	return slices.Clone(removed)
}

// ReplaceSource atomically replaces every registered tool whose Source is
// source with tools, as when an upstream server lists its tools again.
// Tools with an empty Source get source; a tool with another Source is an
// error. The new tools are checked as by [Registry.Add], conflicts only
// against tools of other sources; on any error nothing changes. It emits
// one [Change] (a tool that is replaced appears in both lists), or none
// when source had no tools and tools is empty.
func (r *Registry) ReplaceSource(source string, tools []Tool) error {
	if source == "" {
		return errors.New("replacing tools: source is empty")
	}
	prepared, named, errs := prepare(tools, source)
	r.mu.Lock()
	errs = append(errs, r.conflicts(named, func(t *Tool) bool { return t.Source == source })...)
	if len(errs) > 0 {
		r.mu.Unlock()
		return errors.Join(errs...)
	}
	var removed []string
	for _, t := range r.sorted {
		if t.Source == source {
			removed = append(removed, t.Name)
		}
	}
	for _, name := range removed {
		r.delete(name)
	}
	for _, t := range prepared {
		r.insert(t)
	}
	if len(removed) == 0 && len(prepared) == 0 {
		r.mu.Unlock()
		return nil
	}
	r.changed(Change{Added: sortedTools(prepared), Removed: removed})
	r.mu.Unlock()
	r.deliver()
	return nil
}

// prepare checks each tool on its own and returns copies ready to insert,
// with compiled schemas, and copies of every tool with a valid name (valid
// or not otherwise) for conflict checks. A non-empty source fills in empty
// Sources and must match the others.
func prepare(tools []Tool, source string) (ok, named []*Tool, errs []error) {
	out := make([]*Tool, 0, len(tools))
	for i := range tools {
		t := tools[i] // a copy
		var terrs []error
		if err := ValidateName(t.Name); err != nil {
			terrs = append(terrs, err)
		} else {
			named = append(named, &t)
		}
		switch t.Kind {
		case Stateless, Stateful, REST, MCP:
		case "":
			terrs = append(terrs, fmt.Errorf("tool %s: kind is missing; use one of stateless, stateful, rest, mcp", quoteName(t.Name)))
		default:
			terrs = append(terrs, fmt.Errorf("tool %s: unknown kind %q; use one of stateless, stateful, rest, mcp", quoteName(t.Name), truncate(string(t.Kind), maxShown)))
		}
		switch {
		case source != "" && t.Source == "":
			t.Source = source
		case source != "" && t.Source != source:
			terrs = append(terrs, fmt.Errorf("tool %s: source %q does not match the source being replaced, %q", quoteName(t.Name), t.Source, source))
		case t.Source == "":
			terrs = append(terrs, fmt.Errorf("tool %s: source is missing", quoteName(t.Name)))
		}
		t.InputSchema = bytes.Clone(t.InputSchema)
		s, err := schemas.Compile(t.InputSchema)
		if err != nil {
			terrs = append(terrs, fmt.Errorf("tool %s: %w", quoteName(t.Name), err))
		}
		t.schema = s
		if t.OutputSchema != nil {
			t.OutputSchema = bytes.Clone(t.OutputSchema)
			if _, err := schemas.Compile(t.OutputSchema); err != nil {
				if ce, ok := errors.AsType[*schemas.CompileError](err); ok {
					err = outputSchemaError{ce}
				}
				terrs = append(terrs, fmt.Errorf("tool %s: %w", quoteName(t.Name), err))
			}
		}
		if len(terrs) > 0 {
			errs = append(errs, terrs...)
			continue
		}
		out = append(out, &t)
	}
	return out, named, errs
}

// conflicts checks names against the registered tools, except those
// replaced says will go, and against earlier tools of the batch. r.mu must
// be held.
func (r *Registry) conflicts(batch []*Tool, replaced func(*Tool) bool) []error {
	var errs []error
	seen := make(map[string]*Tool, len(batch))
	for _, t := range batch {
		if old, ok := r.tools[t.Name]; ok && !replaced(old) {
			errs = append(errs, &ConflictError{Name: t.Name, Source: t.Source, ExistingSource: old.Source})
			continue
		}
		if prev, ok := seen[t.Name]; ok {
			errs = append(errs, &ConflictError{Name: t.Name, Source: t.Source, ExistingSource: prev.Source})
			continue
		}
		seen[t.Name] = t
	}
	return errs
}

// insert adds t; r.mu must be held and the name free.
func (r *Registry) insert(t *Tool) {
	if r.tools == nil {
		r.tools = make(map[string]*Tool)
		r.byKey = make(map[string][]string)
	}
	r.tools[t.Name] = t
	key := normalize(t.Name)
	names := append(slices.Clone(r.byKey[key]), t.Name)
	slices.Sort(names)
	r.byKey[key] = names
	i, _ := slices.BinarySearchFunc(r.sorted, t.Name, func(a *Tool, name string) int { return strings.Compare(a.Name, name) })
	r.sorted = slices.Insert(slices.Clip(r.sorted), i, t)
}

// delete removes the named tool; r.mu must be held and the tool present.
func (r *Registry) delete(name string) {
	delete(r.tools, name)
	key := normalize(name)
	names := slices.DeleteFunc(slices.Clone(r.byKey[key]), func(n string) bool { return n == name })
	if len(names) == 0 {
		delete(r.byKey, key)
	} else {
		r.byKey[key] = names
	}
	r.sorted = slices.DeleteFunc(slices.Clone(r.sorted), func(t *Tool) bool { return t.Name == name })
}

func sortedTools(ts []*Tool) []*Tool {
	out := slices.Clone(ts)
	slices.SortFunc(out, func(a, b *Tool) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Get returns the tool registered under exactly name.
func (r *Registry) Get(name string) (*Tool, bool) {
	r.mu.RLock()
	t, ok := r.tools[name]
	r.mu.RUnlock()
	return t, ok
}

// Resolve returns the tool registered under name. If there is none and
// repair is true, it returns the one tool whose name matches name
// normalized (see the package doc); names longer than 128 bytes are not
// repaired. Otherwise the error is a [*NotFoundError] (matching
// [ErrNotFound]) with up to three suggestions: the tools that match
// normalized when more than one does, else the closest names ([Suggest]).
//
// An exact match costs one map lookup and does not allocate.
func (r *Registry) Resolve(name string, repair bool) (*Tool, error) {
	r.mu.RLock()
	t, ok := r.tools[name]
	r.mu.RUnlock()
	if ok {
		return t, nil
	}
	return r.resolveSlow(name, repair)
}

func (r *Registry) resolveSlow(name string, repair bool) (*Tool, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var matches []string
	if len(name) <= maxCompared {
		matches = r.byKey[normalize(name)]
	}
	if repair && len(matches) == 1 {
		return r.tools[matches[0]], nil
	}
	e := &NotFoundError{Name: name, Available: len(r.tools)}
	if len(matches) > 1 {
		e.Suggestions = slices.Clone(matches[:min(len(matches), maxSuggestions)])
	} else {
		e.Suggestions = suggest(name, r.byKey, maxSuggestions)
	}
	return nil, e
}

// List returns every tool, sorted by name, in a new slice the caller may
// keep. The tools themselves are shared and must not be modified.
func (r *Registry) List() []*Tool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Clone(r.sorted)
}

// Len returns the number of tools.
func (r *Registry) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.tools)
}
