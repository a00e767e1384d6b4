package resultcache

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t
}

func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.t = f.t.Add(d)
}

func newCache(t *testing.T, ttl time.Duration, maxBytes int64) (*Cache[string], *fakeClock) {
	t.Helper()
	clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	return New[string](Options{TTL: ttl, MaxBytes: maxBytes, Now: clk.Now}), clk
}

// counted returns a fill that counts its calls and keeps its value.
func counted(n *atomic.Int32, v string) Fill[string] {
	return func() (string, int64, bool) {
		n.Add(1)
		return v, int64(len(v)), true
	}
}

func TestHitWithinTTLMissAfter(t *testing.T) {
	c, clk := newCache(t, 30*time.Second, 1<<20)
	var n atomic.Int32
	for i := range 10 {
		v, hit, err := c.Do(t.Context(), "k", counted(&n, "v"))
		if err != nil || v != "v" || hit != (i > 0) {
			t.Fatalf("call %d: Do = %q, hit %v, %v; want \"v\", hit %v", i, v, hit, err, i > 0)
		}
		clk.Advance(time.Second)
	}
	if n.Load() != 1 {
		t.Fatalf("fill ran %d times within the TTL, want 1", n.Load())
	}
	clk.Advance(20 * time.Second) // 30s after the value was stored
	if _, ok := c.Get("k"); ok {
		t.Fatal("Get found the entry at its TTL")
	}
	if _, hit, _ := c.Do(t.Context(), "k", counted(&n, "v")); hit || n.Load() != 2 {
		t.Fatalf("after the TTL: hit %v, fills %d; want a miss and 2 fills", hit, n.Load())
	}
	if c.Len() != 1 {
		t.Fatalf("Len = %d, want 1 (the expired entry replaced)", c.Len())
	}
}

func TestFailuresAreNotKept(t *testing.T) {
	c, _ := newCache(t, time.Minute, 1<<20)
	calls := 0
	fail := func() (string, int64, bool) { calls++; return "boom", 4, false }
	for range 3 {
		if v, hit, _ := c.Do(t.Context(), "k", fail); hit || v != "boom" {
			t.Fatalf("Do = %q, hit %v; want the failure, never a hit", v, hit)
		}
	}
	if calls != 3 || c.Len() != 0 || c.Bytes() != 0 {
		t.Fatalf("fills %d, Len %d, Bytes %d; want 3, 0, 0", calls, c.Len(), c.Bytes())
	}
}

func TestBoundedByBytes(t *testing.T) {
	per := int64(1 + 10 + EntryOverhead) // key "a", value of 10 bytes
	c, _ := newCache(t, time.Minute, 3*per)
	fill := func() (string, int64, bool) { return "0123456789", 10, true }
	for _, k := range []string{"a", "b", "c"} {
		c.Do(t.Context(), k, fill)
	}
	c.Get("a") // a is now the most recently used; b the least
	c.Do(t.Context(), "d", fill)
	if _, ok := c.Get("b"); ok {
		t.Error("b, the least recently used, is still held past the bound")
	}
	for _, k := range []string{"a", "c", "d"} {
		if _, ok := c.Get(k); !ok {
			t.Errorf("%s was dropped; only b should have been", k)
		}
	}
	if c.Bytes() != 3*per {
		t.Errorf("Bytes = %d, want %d", c.Bytes(), 3*per)
	}
	big := func() (string, int64, bool) { return "big", 3 * per, true }
	if v, _, _ := c.Do(t.Context(), "e", big); v != "big" {
		t.Fatalf("Do returned %q for a value over the bound, want it all the same", v)
	}
	if _, ok := c.Get("e"); ok || c.Len() != 3 {
		t.Errorf("a value over the bound was stored (Len %d)", c.Len())
	}
}

func TestSingleFlight(t *testing.T) { synctest.Test(t, testSingleFlight) }

func testSingleFlight(t *testing.T) {
	c, _ := newCache(t, time.Minute, 1<<20)
	release := make(chan struct{})
	entered := make(chan struct{})
	var fills atomic.Int32
	fill := func() (string, int64, bool) {
		fills.Add(1)
		close(entered)
		<-release
		return "v", 1, true
	}
	type out struct {
		v   string
		hit bool
	}
	results := make(chan out, 8)
	var wg sync.WaitGroup
	wg.Go(func() {
		v, hit, _ := c.Do(t.Context(), "k", fill)
		results <- out{v, hit}
	})
	<-entered
	for range 7 {
		wg.Go(func() {
			v, hit, _ := c.Do(t.Context(), "k", func() (string, int64, bool) { fills.Add(1); return "other", 1, true })
			results <- out{v, hit}
		})
	}
	synctest.Wait() // every caller waits for the one fill
	close(release)
	wg.Wait()
	close(results)
	hits := 0
	for r := range results {
		if r.v != "v" {
			t.Errorf("a caller got %q, want the one fill's value", r.v)
		}
		if r.hit {
			hits++
		}
	}
	if fills.Load() != 1 || hits != 7 {
		t.Fatalf("fills %d, hits %d; want 1 fill and 7 hits", fills.Load(), hits)
	}
}

func TestWaitersFillAgainAfterAFailure(t *testing.T) { synctest.Test(t, testWaitersFillAgain) }

func testWaitersFillAgain(t *testing.T) {
	c, _ := newCache(t, time.Minute, 1<<20)
	release := make(chan struct{})
	entered := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		c.Do(t.Context(), "k", func() (string, int64, bool) { close(entered); <-release; return "fail", 1, false })
	})
	<-entered
	var got string
	var hit bool
	wg.Go(func() {
		got, hit, _ = c.Do(t.Context(), "k", func() (string, int64, bool) { return "ok", 1, true })
	})
	synctest.Wait() // the second caller waits for the first's fill
	close(release)
	wg.Wait()
	if got != "ok" || hit {
		t.Fatalf("the waiter got %q, hit %v; want its own fill's \"ok\", a miss", got, hit)
	}
}

func TestWaiterGivesUpWithItsContext(t *testing.T) {
	c, _ := newCache(t, time.Minute, 1<<20)
	release := make(chan struct{})
	entered := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		c.Do(t.Context(), "k", func() (string, int64, bool) { close(entered); <-release; return "v", 1, true })
	})
	<-entered
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, err := c.Do(ctx, "k", func() (string, int64, bool) { t.Error("filled while another fill ran"); return "", 0, false }); !errors.Is(err, context.Canceled) {
		t.Errorf("Do with a cancelled context = %v, want context.Canceled", err)
	}
	close(release)
	wg.Wait()
}

func TestPanickingFillEndsItsFlight(t *testing.T) {
	c, _ := newCache(t, time.Minute, 1<<20)
	func() {
		defer func() { _ = recover() }()
		c.Do(t.Context(), "k", func() (string, int64, bool) { panic("fill") })
	}()
	if v, hit, err := c.Do(t.Context(), "k", func() (string, int64, bool) { return "v", 1, true }); v != "v" || hit || err != nil {
		t.Fatalf("after a panicking fill: %q, hit %v, %v; want a fresh fill", v, hit, err)
	}
}

func TestDropIf(t *testing.T) {
	c, _ := newCache(t, time.Minute, 1<<20)
	fill := func() (string, int64, bool) { return "v", 1, true }
	for _, k := range []string{"a\x00x", "a\x00y", "b\x00x"} {
		c.Do(t.Context(), k, fill)
	}
	c.DropIf(func(k string) bool { return k[0] == 'a' })
	if c.Len() != 1 || c.Bytes() != int64(3+1+EntryOverhead) {
		t.Fatalf("after DropIf: Len %d, Bytes %d; want 1 entry", c.Len(), c.Bytes())
	}
	if _, ok := c.Get("b\x00x"); !ok {
		t.Fatal("DropIf dropped an entry it was not asked to")
	}
}

func TestNewRefusesNoBound(t *testing.T) {
	for _, o := range []Options{{TTL: time.Second}, {MaxBytes: 1}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New(%+v) did not panic", o)
				}
			}()
			New[string](o)
		}()
	}
}
