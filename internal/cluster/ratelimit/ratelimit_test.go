package ratelimit

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/toolgate/toolgate/internal/cluster/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock is a fake time that the test moves, together with miniredis's.
type clock struct {
	mu sync.Mutex
	t  time.Time
	m  *miniredis.Miniredis
}

func newClock(m *miniredis.Miniredis) *clock {
	c := &clock{t: time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC), m: m}
	m.SetTime(c.t)
	return c
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	c.m.SetTime(c.t)
}

// trips counts the operations that reach Redis.
type trips struct {
	*store.Store
	n atomic.Int64
}

func (r *trips) Do(ctx context.Context, op func(context.Context, redis.Scripter) error) error {
	r.n.Add(1)
	return r.Store.Do(ctx, op)
}

// fakeLocal is a fallback bucket that passes its first burst calls.
type fakeLocal struct {
	perSecond float64
	burst     int
	taken     int
}

func (f *fakeLocal) Take() time.Duration {
	if f.taken >= f.burst {
		return time.Second
	}
	f.taken++
	return 0
}

// replica is one replica's limits against the shared Redis.
type replica struct {
	limits *Limits
	redis  *trips
	locals []*fakeLocal
}

func newReplica(t *testing.T, m *miniredis.Miniredis, c *clock, n int) *replica {
	t.Helper()
	s, err := store.Open(t.Context(), "redis://"+m.Addr(), &store.Options{Probe: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	r := &replica{redis: &trips{Store: s}}
	r.limits = New(r.redis, &Options{
		Replicas: func() int { return n },
		Now:      c.Now,
		Local: func(perSecond float64, burst int) Local {
			f := &fakeLocal{perSecond: perSecond, burst: burst}
			r.locals = append(r.locals, f)
			return f
		},
	})
	t.Cleanup(r.limits.Close)
	return r
}

// Three replicas calling in turn pass exactly what one bucket would:
// the burst, then one call per emission interval.
func TestClusterCountsAsOneBucket(t *testing.T) {
	m := miniredis.RunT(t)
	c := newClock(m)
	var buckets []*Bucket
	for range 3 {
		buckets = append(buckets, newReplica(t, m, c, 3).limits.Bucket("alice", 5, 5))
	}
	passed := 0
	for i := 0; c.Now().Before(time.Date(2026, 7, 28, 12, 0, 4, 1, time.UTC)); i++ {
		if buckets[i%3].Take() == 0 {
			passed++
		}
		c.advance(10 * time.Millisecond)
	}
	if passed != 25 {
		t.Errorf("5/s burst 5 through 3 replicas for 4 s passed %d calls, want 25 (5 + 4 s × 5/s)", passed)
	}
}

// A refused call says how long until a token is there, and that wait is
// given again locally, with no round trip, until it is over.
func TestRefusalWaitsLocally(t *testing.T) {
	m := miniredis.RunT(t)
	c := newClock(m)
	r := newReplica(t, m, c, 1)
	b := r.limits.Bucket("alice", 5, 1)
	if d := b.Take(); d != 0 {
		t.Fatalf("first Take() = %v, want 0", d)
	}
	if d := b.Take(); d != 200*time.Millisecond {
		t.Fatalf("Take() over the rate = %v, want 200ms", d)
	}
	before := r.redis.n.Load()
	c.advance(150 * time.Millisecond)
	if d := b.Take(); d != 50*time.Millisecond {
		t.Errorf("Take() 150ms later = %v, want 50ms", d)
	}
	if got := r.redis.n.Load() - before; got != 0 {
		t.Errorf("a refusal within the known wait made %d Redis round trips, want 0", got)
	}
	c.advance(50 * time.Millisecond)
	if d := b.Take(); d != 0 {
		t.Errorf("Take() once the wait is over = %v, want 0", d)
	}
}

// A lease is a tenth of a second of the rate: 100 calls at 100/s cost 10
// round trips; a lease left unspent for a second is dropped.
func TestLeases(t *testing.T) {
	m := miniredis.RunT(t)
	c := newClock(m)
	r := newReplica(t, m, c, 1)
	b := r.limits.Bucket("alice", 100, 100)
	for i := range 100 {
		if d := b.Take(); d != 0 {
			t.Fatalf("Take() #%d within the burst = %v, want 0", i+1, d)
		}
	}
	if got := r.redis.n.Load(); got != 10 {
		t.Errorf("100 calls made %d Redis round trips, want 10 (leases of 10)", got)
	}
	if d := b.Take(); d != 10*time.Millisecond {
		t.Errorf("Take() past the burst = %v, want 10ms", d)
	}
	c.advance(time.Second) // 100 tokens back in Redis
	b.Take()               // a lease of 10: 9 left here
	c.advance(leaseTTL)    // …which are dropped; the bucket is full again
	n := r.redis.n.Load()
	for range 100 {
		b.Take()
	}
	if got := r.redis.n.Load() - n; got != 10 {
		t.Errorf("after an expired lease, 100 calls made %d round trips, want 10: the old lease is not spent", got)
	}
}

// A lease is at most this replica's share of the burst, so the other
// replicas find tokens left.
func TestLeaseShareOfBurst(t *testing.T) {
	m := miniredis.RunT(t)
	c := newClock(m)
	b := newReplica(t, m, c, 4).limits.Bucket("alice", 1000, 8)
	for _, tc := range []struct {
		name string
		b    *Bucket
		want int
	}{
		{"1000/s burst 8 over 4 replicas", b, 2},
		{"5/s burst 5 over 4 replicas", b.l.Bucket("bob", 5, 5), 1},
		{"1000/s burst 1000 over 4", b.l.Bucket("carol", 1000, 1000), 100},
	} {
		if got := tc.b.leaseSize(); got != tc.want {
			t.Errorf("%s: leaseSize() = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// Many calls at once on one replica pass exactly the burst, with the
// lease asked for once at a time (run with -race).
func TestConcurrentTakes(t *testing.T) {
	m := miniredis.RunT(t)
	c := newClock(m)
	r := newReplica(t, m, c, 1)
	b := r.limits.Bucket("alice", 100, 30)
	var passed atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			if b.Take() == 0 {
				passed.Add(1)
			}
		})
	}
	wg.Wait()
	if passed.Load() != 30 {
		t.Errorf("64 concurrent calls passed %d, want the burst, 30", passed.Load())
	}
	if got := r.redis.n.Load(); got > 4 {
		t.Errorf("64 concurrent calls made %d round trips, want at most 4 (3 leases of 10, one refusal)", got)
	}
}

// When Redis fails, each replica counts locally at rate/N, and counts in
// Redis again once Redis answers.
func TestFallbackAtRateOverN(t *testing.T) {
	m := miniredis.RunT(t)
	c := newClock(m)
	r := newReplica(t, m, c, 3)
	b := r.limits.Bucket("alice", 6, 6)
	if d := b.Take(); d != 0 {
		t.Fatalf("Take() = %v, want 0", d)
	}
	addr := m.Addr()
	m.Close()
	for range 5 {
		b.Take()
	}
	if len(r.locals) != 1 {
		t.Fatalf("%d local buckets made in one outage, want 1", len(r.locals))
	}
	if l := r.locals[0]; l.perSecond != 2 || l.burst != 2 || l.taken != 2 {
		t.Errorf("local bucket: %v/s burst %d, %d taken; want 2/s burst 2 (rate/3, burst/3), 2 taken", l.perSecond, l.burst, l.taken)
	}
	trips := r.redis.n.Load()
	b.Take()
	if got := r.redis.n.Load() - trips; got != 0 {
		t.Errorf("a call during the outage made %d Redis round trips, want 0: the probe looks for Redis", got)
	}
	m2 := miniredis.NewMiniRedis()
	if err := m2.StartAddr(addr); err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	m2.SetTime(c.Now())
	if err := r.redis.Store.Do(t.Context(), func(ctx context.Context, s redis.Scripter) error { return s.Eval(ctx, "return 1", nil).Err() }); err != nil {
		t.Fatal(err) // what the probe does
	}
	trips = r.redis.n.Load()
	if d := b.Take(); d != 0 {
		t.Errorf("Take() with Redis back = %v, want 0", d)
	}
	if got := r.redis.n.Load() - trips; got != 1 {
		t.Errorf("Take() with Redis back made %d round trips, want 1", got)
	}
}

// A bucket is idle once its principal has not called for as long as it
// takes to refill.
func TestIdle(t *testing.T) {
	m := miniredis.RunT(t)
	c := newClock(m)
	b := newReplica(t, m, c, 1).limits.Bucket("alice", 2, 4)
	b.Take()
	c.advance(1999 * time.Millisecond)
	if b.Idle() {
		t.Error("Idle() 1.999s after a call at 2/s burst 4 = true, want false")
	}
	c.advance(time.Millisecond)
	if !b.Idle() {
		t.Error("Idle() 2s after a call at 2/s burst 4 = false, want true")
	}
}

// BenchmarkTake is a call's cost on the pass path (10,000/s: leases of
// 1,000, time moving at the rate) and on the refused path (kept locally),
// with the Redis round trips per call.
func BenchmarkTake(b *testing.B) {
	for _, bc := range []struct {
		name string
		rate float64
		step time.Duration
	}{
		{"pass", 10000, 100 * time.Microsecond},
		{"refused", 1, 0},
	} {
		b.Run(bc.name, func(b *testing.B) {
			m := miniredis.RunT(b)
			c := newClock(m)
			s, err := store.Open(b.Context(), "redis://"+m.Addr(), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			r := &trips{Store: s}
			l := New(r, &Options{Now: c.Now})
			defer l.Close()
			bk := l.Bucket("alice", bc.rate, int(bc.rate))
			bk.Take()
			n := r.n.Load()
			for b.Loop() {
				if bc.step > 0 {
					c.advance(bc.step)
				}
				bk.Take()
			}
			b.ReportMetric(float64(r.n.Load()-n)/float64(b.N), "trips/op")
		})
	}
}
