package reloadplan

import (
	"reflect"
	"slices"
)

// Change is a source of the new configuration's section that is not
// served as it is configured: new, or configured otherwise.
type Change[T any] struct {
	Index   int // its index in the new configuration's section
	New     T
	Old     T    // the one served, when Existed
	Existed bool // a source of its name is served: it is changed, not added
}

// Diff compares next, a section of the new configuration, with cur, the
// sources of that section served, by name: the sources of next that are
// new or that same says are not alike (in next's order), and the names of
// cur that next no longer has (sorted).
func Diff[T any](cur map[string]T, next []T, name func(T) string, same func(old, new T) bool) (changes []Change[T], removed []string) {
	seen := map[string]bool{}
	for i, n := range next {
		k := name(n)
		seen[k] = true
		old, ok := cur[k]
		if ok && same(old, n) {
			continue
		}
		changes = append(changes, Change[T]{Index: i, New: n, Old: old, Existed: ok})
	}
	for _, k := range sortedKeys(cur) {
		if !seen[k] {
			removed = append(removed, k)
		}
	}
	return changes, removed
}

// Same reports whether a and b configure a source alike.
func Same[T any](a, b T) bool { return reflect.DeepEqual(a, b) }

// sortedKeys returns m's keys, sorted.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
