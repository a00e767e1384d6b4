package registry

import (
	"slices"
	"testing"
)

// TestNameIndex: a key's names stay sorted as they come and go, a key
// with none left is dropped, and groups yields every key's names.
func TestNameIndex(t *testing.T) {
	ix := nameIndex{}
	ix.add("a_b", "a_B")
	ix.add("a_b", "A_b")
	ix.add("a_b", "a-b")
	ix.add("c", "c")
	if got, want := ix.names("a_b"), []string{"A_b", "a-b", "a_B"}; !slices.Equal(got, want) {
		t.Errorf("names(a_b) = %q, want %q", got, want)
	}
	if got := ix.names("none"); got != nil {
		t.Errorf("names(none) = %q, want nil", got)
	}
	got := map[string][]string{}
	for key, names := range ix.groups {
		got[key] = slices.Clone(names)
	}
	if len(got) != 2 || !slices.Equal(got["a_b"], []string{"A_b", "a-b", "a_B"}) || !slices.Equal(got["c"], []string{"c"}) {
		t.Errorf("groups = %q", got)
	}
	ix.delete("a_b", "a-b")
	ix.delete("c", "c")
	ix.delete("c", "c") // not there: nothing happens
	if got, want := ix.names("a_b"), []string{"A_b", "a_B"}; !slices.Equal(got, want) {
		t.Errorf("after a delete, names(a_b) = %q, want %q", got, want)
	}
	ix.delete("a_b", "A_b")
	ix.delete("a_b", "a_B")
	if len(ix) != 0 {
		t.Errorf("every name deleted, the index holds %q", ix)
	}
}
