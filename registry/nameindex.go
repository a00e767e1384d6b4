package registry

import (
	"slices"
	"strings"
)

// nameIndex maps a key (a normalized name, or a normalized tool part) to
// the names that have it, sorted and joined by nameSep, which no valid
// name contains. Almost every key has one name, and the map then holds
// that name's own string: half the memory of a map of one-element slices
// (5,000 tools: 246 KB a map instead of 473).
type nameIndex map[string]string

// nameSep separates the names of one key: not one of a name's characters
// ([ValidateName]).
const nameSep = " "

// names returns key's names, sorted, in a new slice (nil for none).
func (ix nameIndex) names(key string) []string {
	v, ok := ix[key]
	if !ok {
		return nil
	}
	return strings.Split(v, nameSep)
}

// add adds name to key's names.
func (ix nameIndex) add(key, name string) {
	v, ok := ix[key]
	if !ok {
		ix[key] = name
		return
	}
	names := append(strings.Split(v, nameSep), name)
	slices.Sort(names)
	ix[key] = strings.Join(names, nameSep)
}

// delete removes name from key's names, and key when no name is left.
func (ix nameIndex) delete(key, name string) {
	names := slices.DeleteFunc(ix.names(key), func(n string) bool { return n == name })
	if len(names) == 0 {
		delete(ix, key)
		return
	}
	ix[key] = strings.Join(names, nameSep)
}

// groups yields each key with its names. The slice is reused from one key
// to the next: a caller keeps the names, not the slice.
func (ix nameIndex) groups(yield func(string, []string) bool) {
	one := make([]string, 1)
	for key, v := range ix {
		names := one
		if strings.Contains(v, nameSep) {
			names = strings.Split(v, nameSep)
		} else {
			one[0] = v
		}
		if !yield(key, names) {
			return
		}
	}
}
