package replica

import "testing"

// TestKeys checks what sealing across replicas rests on: two replicas of
// one secret derive the same keys, a rotation keeps the previous secret's
// key as the second, purposes and lone toolgates get keys of their own.
func TestKeys(t *testing.T) {
	const secret, old = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	r1, r2 := Member("r1", secret, ""), Member("r2", secret, old)
	k1, k2 := r1.Keys("requestState"), r2.Keys("requestState")
	if len(k1) != 1 || len(k2) != 2 || k1[0] != k2[0] {
		t.Fatalf("replicas of one secret: %d and %d keys, first equal %v", len(k1), len(k2), k1[0] == k2[0])
	}
	if Member("r3", old, "").Keys("requestState")[0] != k2[1] {
		t.Error("the previous secret's key is not the one its replicas sealed with")
	}
	if r1.Keys("handle")[0] == k1[0] {
		t.Error("two purposes share a key")
	}
	a, b := Alone(), Alone()
	if a.Keys("handle")[0] == b.Keys("handle")[0] || a.Keys("handle")[0] != a.Keys("handle")[0] {
		t.Error("lone toolgates share keys, or one's keys change")
	}
	if !r1.Owns("r1") || r1.Owns("r2") || a.Owns("r1") || !a.Owns("") {
		t.Error("Owns")
	}
}
