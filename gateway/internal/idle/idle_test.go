package idle

import (
	"testing"
	"time"
)

// Claim hands an idle session to the sweeper only while no request is
// in flight and none ended since it looked; then Begin refuses.
func TestClaim(t *testing.T) {
	const ttl = time.Minute
	now := time.Now()
	idle := func() *Activity {
		c := &Activity{}
		c.last.Store(now.Add(-2 * ttl).UnixNano())
		return c
	}
	if c := idle(); c.Claim(now.Add(-ttl-ttl/2), ttl) {
		t.Error("claimed a session idle for less than the TTL")
	}
	c := idle()
	if !c.Begin() {
		t.Fatal("begin refused on a live session")
	}
	if c.Claim(now, ttl) {
		t.Error("claimed a session with a request in flight")
	}
	c.Finish()
	if c.Claim(now, ttl) {
		t.Error("claimed a session whose request just ended")
	}
	c = idle()
	if !c.Claim(now, ttl) {
		t.Fatal("did not claim an idle session")
	}
	if c.Begin() {
		t.Error("begin accepted a request in a session being ended")
	}
}
