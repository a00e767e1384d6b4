package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
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
	// first; or, when Ambiguous, every name Name could be repaired to,
	// sorted.
	Suggestions []string
	// Ambiguous reports that Name was refused because it could be repaired
	// to more than one registered name (the Suggestions).
	Ambiguous bool
	// Available is how many tools were registered at the time; negative
	// when the caller may see only some of them (the message then gives
	// no count).
	Available int
}

// Visible returns e as told to a caller who may see only the tools for
// which visible reports true: suggesting only those, an ambiguity only
// among them, and no count of the tools registered (issue 31, item 7).
func (e *NotFoundError) Visible(visible func(name string) bool) *NotFoundError {
	v := &NotFoundError{Name: e.Name, Available: -1}
	for _, s := range e.Suggestions {
		if visible(s) {
			v.Suggestions = append(v.Suggestions, s)
		}
	}
	v.Ambiguous = e.Ambiguous && len(v.Suggestions) > 1
	return v
}

// maxListed is how many candidates an ambiguous NotFoundError's message
// lists; its Suggestions hold them all.
const maxListed = 10

// Error returns `unknown tool "X"; did you mean "A", "B"?`, or without
// suggestions `unknown tool "X"; call tools/list to see the N available
// tools`, or when Ambiguous `tool name "X" is ambiguous: it could be "A",
// "B"; call it by its full name` (listing at most 10 names). It shows at
// most 80 bytes of Name.
func (e *NotFoundError) Error() string {
	var b strings.Builder
	list := func(names []string) {
		for i, s := range names {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(quoteName(s))
		}
	}
	if e.Ambiguous {
		b.WriteString("tool name ")
		b.WriteString(quoteName(e.Name))
		b.WriteString(" is ambiguous: it could be ")
		list(e.Suggestions[:min(len(e.Suggestions), maxListed)])
		if n := len(e.Suggestions) - maxListed; n > 0 {
			b.WriteString(" or ")
			b.WriteString(strconv.Itoa(n))
			b.WriteString(" more")
		}
		b.WriteString("; call it by its full name")
		return b.String()
	}
	b.WriteString("unknown tool ")
	b.WriteString(quoteName(e.Name))
	switch {
	case len(e.Suggestions) > 0:
		b.WriteString("; did you mean ")
		list(e.Suggestions)
		b.WriteString("?")
	case e.Available < 0:
		b.WriteString("; call tools/list to see the tools available to you")
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
	// byKey maps each normalized name to the names that have it.
	byKey nameIndex
	// byPart maps each normalized tool part ([toolPart]) to the names
	// that have it, sorted: the index of namespace repair. Names whose
	// tool part is empty (fs__) are not in it.
	byPart nameIndex
	// prefixes counts the registered names under each normalized prefix
	// (what precedes the first [Separator]): a name whose prefix is one of
	// them names a real namespace, which repair never swaps for another.
	prefixes map[string]int
	// reserved are normalized prefixes declared namespaces before any tool
	// is under them ([Registry.ReserveNamespaces]).
	reserved map[string]bool
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
		tools:    make(map[string]*Tool),
		byKey:    nameIndex{},
		byPart:   nameIndex{},
		prefixes: make(map[string]int),
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
	r.insert(prepared...)
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

// Replace atomically replaces registered tools with tools of the same
// names and sources, as when a tool registered with a stand-in schema is
// built in full. The new tools are checked as by [Registry.Add]; a name
// that is not registered, or is registered by another source, is an
// error; on any error nothing changes. It emits one [Change] listing each
// tool in Added and in Removed.
func (r *Registry) Replace(tools ...Tool) error {
	if len(tools) == 0 {
		return nil
	}
	prepared, _, errs := prepare(tools, "")
	r.mu.Lock()
	seen := make(map[string]bool, len(prepared))
	for _, t := range prepared {
		old, ok := r.tools[t.Name]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("replacing tool %s: it is not registered", quoteName(t.Name)))
		case old.Source != t.Source:
			errs = append(errs, fmt.Errorf("replacing tool %s: it is registered by %s, not %s", quoteName(t.Name), old.Source, t.Source))
		case seen[t.Name]:
			errs = append(errs, &ConflictError{Name: t.Name, Source: t.Source, ExistingSource: t.Source})
		}
		seen[t.Name] = true
	}
	if len(errs) > 0 {
		r.mu.Unlock()
		return errors.Join(errs...)
	}
	removed := make([]string, 0, len(prepared))
	for _, t := range prepared {
		r.delete(t.Name)
		removed = append(removed, t.Name)
	}
	r.insert(prepared...)
	slices.Sort(removed)
	r.changed(Change{Added: sortedTools(prepared), Removed: removed})
	r.mu.Unlock()
	r.deliver()
	return nil
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
	r.insert(prepared...)
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
// with schemas that compile, and copies of every tool with a valid name (valid
// or not otherwise) for conflict checks. A non-empty source fills in empty
// Sources and must match the others.
func prepare(tools []Tool, source string) (ok, named []*Tool, errs []error) {
	out := make([]*Tool, 0, len(tools))
	shared := newBatchSchemas()
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
		in := shared.of(t.InputSchema)
		t.InputSchema, t.schema = in.raw, in.lazy
		if in.err != nil {
			terrs = append(terrs, fmt.Errorf("tool %s: %w", quoteName(t.Name), in.err))
		}
		if t.OutputSchema != nil {
			o := shared.of(t.OutputSchema)
			t.OutputSchema = o.raw
			if err := o.err; err != nil {
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

// batchSchemas holds one copy of each distinct schema of a batch, with
// what compiling it gave. Tools of one source often declare the same
// schema (no parameters; the same page and filter), and the registry then
// holds it once for all of them, compiles it once at Add, and once more on
// the first call of any of them (lazySchema), not once per tool. Schemas
// are never modified once registered, so sharing is safe. It is keyed by
// a hash of the bytes, so a batch of distinct schemas costs an entry each
// and no second copy; it lives only while the batch is prepared.
type batchSchemas struct {
	seed   maphash.Seed
	byHash map[uint64][]*batchSchema
}

type batchSchema struct {
	raw  json.RawMessage
	err  error // from compiling it at Add: a schema that does not compile is refused
	lazy *lazySchema
}

func newBatchSchemas() batchSchemas {
	return batchSchemas{seed: maphash.MakeSeed(), byHash: map[uint64][]*batchSchema{}}
}

// of returns raw's entry, copying and compiling raw the first time.
func (b batchSchemas) of(raw json.RawMessage) *batchSchema {
	h := maphash.Bytes(b.seed, raw)
	for _, e := range b.byHash[h] {
		if bytes.Equal(e.raw, raw) {
			return e
		}
	}
	c := bytes.Clone(raw)
	_, err := schemas.Compile(c)
	e := &batchSchema{raw: c, err: err, lazy: &lazySchema{raw: c}}
	b.byHash[h] = append(b.byHash[h], e)
	return e
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

// insert adds ts; r.mu must be held and their names free and distinct.
// A batch is sorted in once, not tool by tool: adding a source of 11,000
// tools one at a time copied the sorted list 11,000 times.
func (r *Registry) insert(ts ...*Tool) {
	if r.tools == nil {
		r.tools = make(map[string]*Tool)
		r.byKey = nameIndex{}
		r.byPart = nameIndex{}
		r.prefixes = make(map[string]int)
	}
	for _, t := range ts {
		r.tools[t.Name] = t
		r.byKey.add(normalize(t.Name), t.Name)
		if part := normalize(toolPart(t.Name)); part != "" {
			r.byPart.add(part, t.Name)
		}
		if prefix, _, ok := strings.Cut(t.Name, Separator); ok {
			r.prefixes[normalize(prefix)]++
		}
	}
	byName := func(a, b *Tool) int { return strings.Compare(a.Name, b.Name) }
	if len(ts) == 1 {
		t := ts[0]
		i, _ := slices.BinarySearchFunc(r.sorted, t.Name, func(a *Tool, name string) int { return strings.Compare(a.Name, name) })
		r.sorted = slices.Insert(slices.Clip(r.sorted), i, t)
		return
	}
	// A new slice: callers may hold the old one.
	sorted := make([]*Tool, 0, len(r.sorted)+len(ts))
	sorted = append(append(sorted, r.sorted...), ts...)
	slices.SortFunc(sorted, byName)
	r.sorted = sorted
}

// delete removes the named tool; r.mu must be held and the tool present.
func (r *Registry) delete(name string) {
	delete(r.tools, name)
	r.byKey.delete(normalize(name), name)
	if part := normalize(toolPart(name)); part != "" {
		r.byPart.delete(part, name)
	}
	if prefix, _, ok := strings.Cut(name, Separator); ok {
		if k := normalize(prefix); r.prefixes[k] <= 1 {
			delete(r.prefixes, k)
		} else {
			r.prefixes[k]--
		}
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

// RepairKind says how [Registry.ResolveRepair] repaired a name.
type RepairKind string

const (
	// RepairNone means the name was registered as given.
	RepairNone RepairKind = ""
	// RepairCase means the name differed from a registered one only in
	// case or separators (Clock-Now for clock_now).
	RepairCase RepairKind = "case"
	// RepairNamespace means the name's tool part matched a registered
	// name's, with a missing or wrong namespace (read_file or
	// git__read_file for fs__read_file).
	RepairNamespace RepairKind = "namespace"
)

// Resolve is [Registry.ResolveRepair] for callers that do not care how a
// name was repaired.
func (r *Registry) Resolve(name string, repair bool) (*Tool, error) {
	t, _, err := r.ResolveRepair(name, repair)
	return t, err
}

// ResolveRepair returns the tool registered under name and how name was
// repaired to find it. If there is none and repair is true, it tries in
// order, stopping at the first step that finds any candidate:
//
//  1. [RepairCase]: the names that match name normalized (see the package
//     doc);
//  2. [RepairNamespace]: the names whose tool part (what follows the first
//     [Separator], or the whole name when it has none) matches, normalized,
//     name's tool part or name as a whole: read_file and git__read_file
//     both find fs__read_file — unless name's own prefix is a registered
//     namespace (some tool is named under it): a real namespace that lacks
//     the tool, say an upstream that excludes it, is never swapped for
//     another.
//
// One candidate is the tool returned. More than one is refused with a
// [*NotFoundError] that is Ambiguous and lists every candidate, sorted, in
// its Suggestions. Names longer than 128 bytes are not repaired. When
// nothing is found, or repair is false, the error is a [*NotFoundError]
// (matching [ErrNotFound]) with up to three suggestions: the names a repair
// would have considered, else the closest names ([Suggest]).
//
// An exact match costs one map lookup and does not allocate; a repair
// costs a few map lookups, whatever the number of tools.
func (r *Registry) ResolveRepair(name string, repair bool) (*Tool, RepairKind, error) {
	r.mu.RLock()
	t, ok := r.tools[name]
	r.mu.RUnlock()
	if ok {
		return t, RepairNone, nil
	}
	return r.resolveSlow(name, repair)
}

func (r *Registry) resolveSlow(name string, repair bool) (*Tool, RepairKind, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if t, ok := r.tools[name]; ok { // added since the fast path looked
		return t, RepairNone, nil
	}
	var matches []string
	kind := RepairCase
	if len(name) <= maxCompared {
		key := normalize(name)
		if matches = r.byKey.names(key); len(matches) == 0 {
			// A wrong namespace is repaired only when it is no namespace at
			// all: a real one (an upstream that excludes the tool, or one
			// not connected yet) is never swapped for another source's.
			prefix, part, prefixed := strings.Cut(name, Separator)
			if !prefixed || !r.isNamespace(prefix) {
				kind = RepairNamespace
				matches = r.byPart.names(key)
				if prefixed {
					matches = union(matches, r.byPart.names(normalize(part)))
				}
			}
		}
	}
	e := &NotFoundError{Name: name, Available: len(r.tools)}
	switch {
	case repair && len(matches) == 1:
		return r.tools[matches[0]], kind, nil
	case repair && len(matches) > 1:
		e.Ambiguous = true
		e.Suggestions = slices.Clone(matches)
	case len(matches) > 0:
		e.Suggestions = slices.Clone(matches[:min(len(matches), maxSuggestions)])
	default:
		e.Suggestions = suggest(name, r.byKey.groups, maxSuggestions)
	}
	return nil, RepairNone, e
}

// ReserveNamespaces declares prefixes as namespaces whether or not any tool
// is registered under them yet (an upstream that has not listed its tools,
// say): name repair never moves a call from a namespace to another.
func (r *Registry) ReserveNamespaces(prefixes ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reserved == nil {
		r.reserved = make(map[string]bool)
	}
	for _, p := range prefixes {
		r.reserved[normalize(p)] = true
	}
}

// isNamespace reports whether prefix names a namespace: some tool is
// registered under it, or it is reserved; r.mu must be held.
func (r *Registry) isNamespace(prefix string) bool {
	k := normalize(prefix)
	return r.prefixes[k] > 0 || r.reserved[k]
}

// toolPart returns what follows the first [Separator] in name, or name
// when it has none: the tool's own name under its source's prefix.
func toolPart(name string) string {
	if _, part, ok := strings.Cut(name, Separator); ok {
		return part
	}
	return name
}

// union returns the sorted union of two sorted lists, a or b itself when
// the other is empty.
func union(a, b []string) []string {
	switch {
	case len(a) == 0:
		return b
	case len(b) == 0:
		return a
	}
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
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
