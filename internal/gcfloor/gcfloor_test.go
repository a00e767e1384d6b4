package gcfloor

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const mib = 1 << 20

// goal is the runtime's heap goal for GOGC=p, as percent assumes it.
func goal(p int, live, roots uint64) uint64 {
	return max(heapMinimum*uint64(p)/100, live+(live+roots)*uint64(p)/100)
}

func TestPercent(t *testing.T) {
	if heapMinimum != 4<<20 {
		t.Skip("the table is worked out for the runtime's default 4 MiB heap minimum; TestPercentKeepsGoalInBounds and TestFloorFollowsTheLiveHeap cover this build")
	}
	for _, c := range []struct {
		floor, live, roots uint64
		want               int
	}{
		{16 * mib, 2 * mib, mib / 4, 400},      // small heap: the 4 MiB minimum times p is the floor
		{16 * mib, 5 * mib, mib / 2, 200},      // live + (live+roots)×p/100 is the floor
		{16 * mib, 8 * mib, 0, 100},            // twice the live heap reaches the floor: the default
		{16 * mib, 40 * mib, mib, 100},         // a large heap is left as Go runs it
		{16 * mib, 0, 0, 400},                  // before any cycle: live taken as 2 MiB
		{4 * mib, mib, 0, 100},                 // a floor at the runtime's minimum changes nothing
		{64 * mib, mib / 2, 3 * mib / 2, 1600}, // roots count, as the runtime counts them
	} {
		got := percent(c.floor, c.live, c.roots)
		if got != c.want {
			t.Errorf("percent(floor %d, live %d, roots %d) = %d, want %d", c.floor, c.live, c.roots, got, c.want)
		}
	}
}

// TestPercentKeepsGoalInBounds: whatever the heap, the goal at the chosen
// percentage is never under the default's (GOGC=100) and, where raised,
// never over the floor.
func TestPercentKeepsGoalInBounds(t *testing.T) {
	floor := uint64(16 * mib)
	for live := uint64(64 << 10); live < 64*mib; live = live*9/8 + 1 {
		for _, roots := range []uint64{0, 100 << 10, mib, 8 * mib} {
			p := percent(floor, live, roots)
			g, def := goal(p, live, roots), goal(100, live, roots)
			if p < 100 || g < def {
				t.Fatalf("live %d roots %d: percent %d, goal %d under the default's %d", live, roots, p, g, def)
			}
			if p > 100 && g > floor {
				t.Fatalf("live %d roots %d: percent %d raises the goal to %d, over the floor %d", live, roots, p, g, floor)
			}
			if p > 100 && g < floor*9/10 {
				t.Fatalf("live %d roots %d: percent %d gives goal %d, well under the floor %d", live, roots, p, g, floor)
			}
		}
	}
}

func heapGoal() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// waitPercent collects until the floor has set a percentage that ok
// accepts (each collection runs the floor's finalizer once).
func waitPercent(t *testing.T, set <-chan int, what string, ok func(int) bool) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		runtime.GC()
		select {
		case p := <-set:
			if ok(p) {
				return
			}
		case <-deadline:
			t.Fatalf("the floor never set GOGC %s", what)
		default:
		}
		runtime.Gosched()
	}
}

// TestFloorFollowsTheLiveHeap runs the floor in this process: with the
// test's small heap the runtime's own goal reaches the floor; with a
// large heap the percentage goes back to 100; Stop restores it.
func TestFloorFollowsTheLiveHeap(t *testing.T) {
	// The floor runs at GOGC=100 without a memory limit, whatever this
	// process's environment says.
	orig := debug.SetGCPercent(100)
	limit := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() {
		debug.SetGCPercent(orig)
		debug.SetMemoryLimit(limit)
	})
	floor := uint64(32 * mib)
	set := make(chan int, 64)
	f := start(floor, func(p int) {
		select {
		case set <- p:
		default:
		}
	})
	defer f.Stop()
	if p := debug.SetGCPercent(-1); p <= 100 {
		debug.SetGCPercent(p)
		t.Fatalf("after Start GOGC is %d, want it raised for a small heap", p)
	} else {
		debug.SetGCPercent(p)
	}
	runtime.GC()
	if g := heapGoal(); g < floor*9/10 || g > floor*11/10 {
		t.Fatalf("heap goal %d with a small live heap, want about the floor %d", g, floor)
	}

	big := make([]byte, 64*mib)
	for i := range big {
		big[i] = byte(i)
	}
	waitPercent(t, set, "back to 100", func(p int) bool { return p == 100 })
	if g := heapGoal(); g < 2*uint64(len(big)) {
		t.Fatalf("heap goal %d with %d live, want the default's twice the live heap", g, len(big))
	}
	runtime.KeepAlive(big)
	big = nil

	waitPercent(t, set, "raised again", func(p int) bool { return p > 100 })
	f.Stop()
	if p := debug.SetGCPercent(100); p != 100 {
		t.Fatalf("after Stop GOGC is %d, want 100 as before Start", p)
	}
	runtime.GC() // the finalizer sees the stop and does not arm again
}

// TestFloorOnlyRaises: a percentage already over what the floor would set
// is kept.
func TestFloorOnlyRaises(t *testing.T) {
	orig := debug.SetGCPercent(5000)
	t.Cleanup(func() { debug.SetGCPercent(orig) })
	f := start(16*mib, nil)
	runtime.GC()
	runtime.GC()
	got := debug.SetGCPercent(5000)
	f.Stop()
	if got != 5000 {
		t.Fatalf("with GOGC=5000 before Start, the floor set %d", got)
	}
}
