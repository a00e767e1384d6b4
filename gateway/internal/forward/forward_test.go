package forward

import (
	"fmt"
	"testing"
)

// TestOwner checks rendezvous hashing: every replica owns some of many
// keys, and a replica joining takes keys only for itself, moving none
// between the others.
func TestOwner(t *testing.T) {
	three, four := []string{"r1", "r2", "r3"}, []string{"r1", "r2", "r3", "r4"}
	count := map[string]int{}
	for i := range 3000 {
		key := fmt.Sprintf("alice\x00thread-%d", i)
		before, after := Owner(key, three), Owner(key, four)
		count[before]++
		if after != before && after != "r4" {
			t.Fatalf("key %q moved from %s to %s when r4 joined", key, before, after)
		}
	}
	for _, id := range three {
		if count[id] < 800 {
			t.Errorf("replica %s owns %d of 3000 keys; want about 1000 each: %v", id, count[id], count)
		}
	}
	if Owner("k", nil) != "" {
		t.Error("a key has an owner among no replicas")
	}
}
