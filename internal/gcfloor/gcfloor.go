// Package gcfloor keeps the Go collector's heap goal at or above a floor
// while the live heap is small, and leaves it at the default (twice the
// live heap, GOGC=100) once the live heap is large enough to reach the
// floor by itself.
//
// Why: a gateway's live heap is a couple of megabytes, and the runtime's
// smallest heap goal is 4 MiB. Every call allocates some 14 KB (net/http
// on both sides, JSON), so at 10,000 calls a second the collector ran
// about 70 times a second; with a 16 MiB floor, about 10, and toolgate's
// CPU per proxied REST call fell by about a fifth (docs/benchmarks.md,
// §10). A bigger GOGC would do it for a small heap but multiply a large
// one; the floor costs at most its own size in memory, and nothing once
// the live heap passes half of it.
//
// How: after each collection (a finalizer on a sentinel that each
// collection frees and the finalizer allocates again) the collector's
// percentage is set from the live heap the cycle found:
//
//	goal = max(4 MiB × p/100, live + (live + stacks + globals) × p/100)
//
// is the runtime's own goal (heapMinimum is 4 MiB, or 512 KiB under
// GOEXPERIMENT=heapminimum512kib); p is the largest value, at least 100
// and at least the percentage in force at Start, that keeps both terms at
// or under the floor.
//
// The bound holds in a steady state. The runtime sets a cycle's goal when
// the previous cycle ends, with the percentage in force then, and the
// floor adjusts it only after that (when the finalizer runs): for one
// cycle after the live heap grows, the goal is the raised percentage of
// the grown heap, and a sentinel allocated while a cycle marks survives
// it, so an adjustment may wait a cycle more. GOMEMLIMIT caps the goal
// throughout.
package gcfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// Floor runs until Stop; at most one runs per process.
type Floor struct {
	floor   uint64
	orig    int
	mu      sync.Mutex
	stopped bool
	samples []metrics.Sample
	// adjusted, when set (tests), gets each percentage set.
	adjusted func(percent int)
}

// sentinel carries a pointer so the tiny allocator never shares its
// block with another object (which could hold back its finalizer).
type sentinel struct{ f *Floor }

// Start keeps the heap goal at or above floor bytes. The caller decides
// whether to (toolgate's CLI does not when GOGC is set in the
// environment: the operator's setting wins).
func Start(floor uint64) *Floor {
	return start(floor, nil)
}

func start(floor uint64, adjusted func(int)) *Floor {
	f := &Floor{
		floor:    floor,
		adjusted: adjusted,
		samples: []metrics.Sample{
			{Name: "/gc/heap/live:bytes"},
			{Name: "/gc/scan/stack:bytes"},
			{Name: "/gc/scan/globals:bytes"},
		},
	}
	f.orig = debug.SetGCPercent(100) // reads the percentage in force,
	debug.SetGCPercent(f.orig)       // which Stop puts back
	f.adjust()
	f.arm()
	return f
}

// Stop ends the adjustments and puts the percentage back as Start found it.
func (f *Floor) Stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.stopped {
		f.stopped = true
		debug.SetGCPercent(f.orig)
	}
}

func (f *Floor) arm() {
	runtime.SetFinalizer(&sentinel{f}, func(s *sentinel) {
		if s.f.adjust() {
			s.f.arm()
		}
	})
}

// adjust sets the percentage from the last cycle's live heap; it reports
// false once stopped.
func (f *Floor) adjust() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return false
	}
	if f.orig < 0 {
		return true // GOGC=off: nothing to raise
	}
	metrics.Read(f.samples)
	// Never under the percentage Start found: the floor only raises.
	p := max(f.orig, percent(f.floor, f.samples[0].Value.Uint64(), f.samples[1].Value.Uint64()+f.samples[2].Value.Uint64()))
	if p != debug.SetGCPercent(p) && f.adjusted != nil {
		f.adjusted(p)
	}
	return true
}

// percent is the largest GOGC, at least 100, whose heap goal stays at or
// under floor for a heap of live bytes with roots bytes of stacks and
// globals. A live heap of zero (no cycle yet) is taken as half the
// runtime's minimum goal, what a heap collected at that goal holds live.
func percent(floor, live, roots uint64) int {
	if live == 0 {
		live = heapMinimum / 2
	}
	base := live + roots
	if floor <= live+base {
		return 100
	}
	p := min(floor*100/heapMinimum, (floor-live)*100/base)
	return int(max(p, 100))
}
