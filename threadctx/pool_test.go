package threadctx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

const testTTL = time.Minute

var (
	errFakeNew   = errors.New("fake new failed")
	errFakeClose = errors.New("fake close failed")
)

// fakeInstance is a stateful tool instance that counts its Close calls.
type fakeInstance struct {
	pool     *Pool // if set, Close calls pool.Len, which deadlocks if the pool lock is held
	closeErr error
	closes   atomic.Int32
}

func (fi *fakeInstance) Close() error {
	fi.closes.Add(1)
	if fi.pool != nil {
		fi.pool.Len()
	}
	return fi.closeErr
}

// fakeFactory is a Spec.New that records what it made. With gate set, each
// call blocks until it receives from gate: nil means succeed, an error fails.
type fakeFactory struct {
	pool     *Pool // if set, New calls pool.Len, which deadlocks if the pool lock is held
	gate     chan error
	err      error // New fails with err (after the gate)
	closeErr error // Close of the instances made fails with closeErr
	calls    atomic.Int32

	mu   sync.Mutex
	made []*fakeInstance // guarded by mu
}

func (ff *fakeFactory) New(ctx context.Context) (any, error) {
	ff.calls.Add(1)
	if ff.pool != nil {
		ff.pool.Len()
	}
	if ff.gate != nil {
		select {
		case err := <-ff.gate:
			if err != nil {
				return nil, err
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if ff.err != nil {
		return nil, ff.err
	}
	fi := &fakeInstance{pool: ff.pool, closeErr: ff.closeErr}
	ff.mu.Lock()
	ff.made = append(ff.made, fi)
	ff.mu.Unlock()
	return fi, nil
}

func (ff *fakeFactory) spec(concurrent bool) Spec {
	return Spec{New: ff.New, Concurrent: concurrent}
}

func (ff *fakeFactory) instances() []*fakeInstance {
	ff.mu.Lock()
	defer ff.mu.Unlock()
	return slices.Clone(ff.made)
}

// newFixture returns a pool closed at the end of the test and a factory
// whose New and Close prove they run without the pool lock.
func newFixture(t *testing.T, opts *Options) (*Pool, *fakeFactory) {
	t.Helper()
	p := NewPool(opts)
	t.Cleanup(func() { p.Close() })
	return p, &fakeFactory{pool: p}
}

// patience bounds the tests' waits for things that should happen at once.
// Inside a synctest bubble the pool's janitor keeps fake time moving, so a
// stuck test would otherwise spin until the test binary times out; with
// patience it fails after an hour of fake time, in milliseconds.
const patience = time.Hour

func mustAcquire(t *testing.T, p *Pool, thread, key string, spec Spec) *Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	l, err := p.Acquire(ctx, thread, key, spec)
	if err != nil {
		t.Fatalf("Acquire(%q, %q) = %v, want a lease", thread, key, err)
	}
	return l
}

func send[T any](t *testing.T, ch chan<- T, v T) {
	t.Helper()
	select {
	case ch <- v:
	case <-time.After(patience):
		t.Fatal("send blocked: nobody is receiving")
	}
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(patience):
		t.Fatal("receive blocked: nothing was sent")
	}
	var zero T
	return zero
}

func waitGroup(t *testing.T, wg *sync.WaitGroup) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	recv(t, done)
}

// use acquires and releases at once, returning the instance.
func use(t *testing.T, p *Pool, thread, key string, spec Spec) *fakeInstance {
	t.Helper()
	l := mustAcquire(t, p, thread, key, spec)
	defer l.Release()
	return l.Value().(*fakeInstance)
}

func wantCloses(t *testing.T, fi *fakeInstance, want int32) {
	t.Helper()
	if got := fi.closes.Load(); got != want {
		t.Errorf("instance closed %d times, want %d", got, want)
	}
}

func TestJanitorPeriod(t *testing.T) {
	tests := []struct {
		ttl, want time.Duration
	}{
		{ttl: time.Millisecond, want: 10 * time.Millisecond},
		{ttl: 40 * time.Millisecond, want: 10 * time.Millisecond},
		{ttl: time.Second, want: 250 * time.Millisecond},
		{ttl: 4 * time.Minute, want: time.Minute},
		{ttl: 30 * time.Minute, want: time.Minute},
	}
	for _, tc := range tests {
		t.Run(tc.ttl.String(), func(t *testing.T) {
			if got := janitorPeriod(tc.ttl); got != tc.want {
				t.Errorf("janitorPeriod(%v) = %v, want %v", tc.ttl, got, tc.want)
			}
		})
	}
}

func TestNewPoolDefaults(t *testing.T) {
	tests := []struct {
		name    string
		opts    *Options
		wantTTL time.Duration
		wantMax int
	}{
		{name: "nil", opts: nil, wantTTL: 30 * time.Minute, wantMax: 1000},
		{name: "zero", opts: &Options{}, wantTTL: 30 * time.Minute, wantMax: 1000},
		{name: "negative", opts: &Options{IdleTTL: -1, MaxInstances: -1}, wantTTL: 30 * time.Minute, wantMax: 1000},
		{name: "set", opts: &Options{IdleTTL: time.Second, MaxInstances: 7}, wantTTL: time.Second, wantMax: 7},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPool(tc.opts)
			defer p.Close()
			if p.idleTTL != tc.wantTTL || p.max != tc.wantMax || p.logger == nil {
				t.Errorf("NewPool(%+v) = ttl %v, max %d, logger %v; want %v, %d, non-nil",
					tc.opts, p.idleTTL, p.max, p.logger, tc.wantTTL, tc.wantMax)
			}
		})
	}
}

func TestAcquireLazy(t *testing.T) {
	p, ff := newFixture(t, nil)
	if n := ff.calls.Load(); n != 0 || p.Len() != 0 {
		t.Fatalf("before Acquire: New called %d times, Len %d; want 0, 0", n, p.Len())
	}
	l := mustAcquire(t, p, "t1", "k", ff.spec(false))
	defer l.Release()
	if n := ff.calls.Load(); n != 1 {
		t.Errorf("after Acquire: New called %d times, want 1", n)
	}
	if got, want := l.Value(), any(ff.instances()[0]); got != want {
		t.Errorf("Value() = %p, want the instance New made %p", got, want)
	}
}

func TestAcquireReuseAndIsolation(t *testing.T) {
	tests := []struct {
		name         string
		thread, key  string
		wantSame     bool
		wantNewCalls int32
	}{
		{name: "same thread and key reuses", thread: "t1", key: "k1", wantSame: true, wantNewCalls: 1},
		{name: "other thread is isolated", thread: "t2", key: "k1", wantSame: false, wantNewCalls: 2},
		{name: "other key is separate", thread: "t1", key: "k2", wantSame: false, wantNewCalls: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, ff := newFixture(t, nil)
			first := use(t, p, "t1", "k1", ff.spec(false))
			second := use(t, p, tc.thread, tc.key, ff.spec(false))
			if got := first == second; got != tc.wantSame {
				t.Errorf("Acquire(t1, k1) and Acquire(%s, %s) share the instance = %v, want %v", tc.thread, tc.key, got, tc.wantSame)
			}
			if n := ff.calls.Load(); n != tc.wantNewCalls {
				t.Errorf("New called %d times, want %d", n, tc.wantNewCalls)
			}
		})
	}
}

func TestAcquireConcurrentCreatesOnce(t *testing.T) {
	for _, concurrent := range []bool{false, true} {
		t.Run(fmt.Sprintf("concurrent=%v", concurrent), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, ff := newFixture(t, nil)
				ff.gate = make(chan error)
				const n = 10
				vals := make([]any, n)
				errs := make([]error, n)
				var wg sync.WaitGroup
				for i := range n {
					wg.Go(func() {
						l, err := p.Acquire(t.Context(), "t1", "k", ff.spec(concurrent))
						errs[i] = err
						if err == nil {
							vals[i] = l.Value()
							l.Release()
						}
					})
				}
				synctest.Wait() // all n are in Acquire: one in New, the others waiting for it
				if c := ff.calls.Load(); c != 1 {
					t.Errorf("while creating: New called %d times, want 1", c)
				}
				if got := p.Len(); got != 1 {
					t.Errorf("while creating: Len() = %d, want 1", got)
				}
				close(ff.gate)
				waitGroup(t, &wg)
				if c := ff.calls.Load(); c != 1 {
					t.Errorf("New called %d times, want 1", c)
				}
				want := any(ff.instances()[0])
				for i := range n {
					if errs[i] != nil || vals[i] != want {
						t.Errorf("Acquire #%d = %p, %v; want %p, nil", i, vals[i], errs[i], want)
					}
				}
			})
		})
	}
}

func TestAcquireNewErrorNotCached(t *testing.T) {
	p, ff := newFixture(t, nil)
	ff.err = errFakeNew
	if _, err := p.Acquire(t.Context(), "t1", "k", ff.spec(false)); !errors.Is(err, errFakeNew) {
		t.Fatalf("Acquire with failing New = %v, want %v", err, errFakeNew)
	}
	if got := p.Len(); got != 0 {
		t.Errorf("after failed New: Len() = %d, want 0", got)
	}
	ff.err = nil
	fi := use(t, p, "t1", "k", ff.spec(false))
	if fi == nil || ff.calls.Load() != 2 {
		t.Errorf("Acquire after failed New: instance %v, New called %d times; want an instance, 2", fi, ff.calls.Load())
	}
}

func TestAcquireNewErrorSharedWithWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, ff := newFixture(t, nil)
		ff.gate = make(chan error)
		errs := make([]error, 3)
		var wg sync.WaitGroup
		for i := range errs {
			wg.Go(func() {
				_, errs[i] = p.Acquire(t.Context(), "t1", "k", ff.spec(false))
			})
			synctest.Wait()
		}
		send(t, ff.gate, errFakeNew)
		waitGroup(t, &wg)
		for i, err := range errs {
			if !errors.Is(err, errFakeNew) {
				t.Errorf("Acquire #%d = %v, want %v", i, err, errFakeNew)
			}
		}
		if c := ff.calls.Load(); c != 1 {
			t.Errorf("New called %d times, want 1", c)
		}
		if got := p.Len(); got != 0 {
			t.Errorf("Len() = %d, want 0", got)
		}
	})
}

func TestAcquireWaiterRetriesWhenCreatorCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, ff := newFixture(t, nil)
		ff.gate = make(chan error)
		ctx, cancel := context.WithCancel(t.Context())
		var creatorErr, waiterErr error
		var wg sync.WaitGroup
		wg.Go(func() { _, creatorErr = p.Acquire(ctx, "t1", "k", ff.spec(false)) })
		synctest.Wait()
		wg.Go(func() {
			l, err := p.Acquire(t.Context(), "t1", "k", ff.spec(false))
			waiterErr = err
			if err == nil {
				l.Release()
			}
		})
		synctest.Wait()
		cancel()
		synctest.Wait() // the waiter is now creating in its turn
		if c := ff.calls.Load(); c != 2 {
			t.Errorf("after the creator was cancelled: New called %d times, want 2", c)
		}
		send(t, ff.gate, nil)
		waitGroup(t, &wg)
		if !errors.Is(creatorErr, context.Canceled) {
			t.Errorf("cancelled creator's Acquire = %v, want %v", creatorErr, context.Canceled)
		}
		if waiterErr != nil {
			t.Errorf("waiter's Acquire = %v, want nil", waiterErr)
		}
	})
}

func TestAcquireCancelWhileWaitingForCreation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, ff := newFixture(t, nil)
		ff.gate = make(chan error)
		var wg sync.WaitGroup
		wg.Go(func() {
			l, err := p.Acquire(t.Context(), "t1", "k", ff.spec(true))
			if err != nil {
				t.Errorf("creator's Acquire = %v, want nil", err)
				return
			}
			l.Release()
		})
		synctest.Wait()
		ctx, cancel := context.WithCancel(t.Context())
		var waiterErr error
		wg.Go(func() { _, waiterErr = p.Acquire(ctx, "t1", "k", ff.spec(true)) })
		synctest.Wait()
		cancel()
		synctest.Wait()
		if !errors.Is(waiterErr, context.Canceled) {
			t.Errorf("cancelled waiter's Acquire = %v, want %v", waiterErr, context.Canceled)
		}
		send(t, ff.gate, nil)
		waitGroup(t, &wg)
		wantIdle(t, p, "t1", "k")
	})
}

// wantIdle checks that the instance of (thread, key) has no lease or waiter
// left, so refs were balanced.
func wantIdle(t *testing.T, p *Pool, thread, key string) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.entries[slot{thread, key}]
	if !ok || e.refs != 0 || e.creating {
		t.Errorf("instance (%s, %s): present %v, entry %+v; want present, idle", thread, key, ok, e)
	}
}

func TestAcquireCancelledContext(t *testing.T) {
	p, ff := newFixture(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := p.Acquire(ctx, "t1", "k", ff.spec(false)); !errors.Is(err, context.Canceled) {
		t.Errorf("Acquire(cancelled ctx) = %v, want %v", err, context.Canceled)
	}
	if c := ff.calls.Load(); c != 0 {
		t.Errorf("New called %d times, want 0", c)
	}
}

func TestAcquireWithoutNew(t *testing.T) {
	p := NewPool(nil)
	defer p.Close()
	if l, err := p.Acquire(t.Context(), "t1", "k", Spec{}); err == nil || l != nil {
		t.Errorf("Acquire(Spec{}) = %v, %v; want an error", l, err)
	}
}

func TestExclusiveLeaseSerialises(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, ff := newFixture(t, nil)
		first := mustAcquire(t, p, "t1", "k", ff.spec(false))
		got := make(chan *Lease)
		go func() {
			l, err := p.Acquire(t.Context(), "t1", "k", ff.spec(false))
			if err != nil {
				t.Errorf("second Acquire = %v, want nil", err)
			}
			got <- l
		}()
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("second Acquire returned while the first lease was held")
		default:
		}
		first.Release()
		second := recv(t, got)
		if second == nil {
			t.FailNow()
		}
		if second.Value() != first.Value() {
			t.Errorf("second lease has instance %p, want %p", second.Value(), first.Value())
		}
		second.Release()
	})
}

func TestConcurrentLeasesShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, ff := newFixture(t, nil)
		// With exclusive leases the second Acquire would block until
		// mustAcquire runs out of patience.
		a := mustAcquire(t, p, "t1", "k", ff.spec(true))
		b := mustAcquire(t, p, "t1", "k", ff.spec(true))
		if a.Value() != b.Value() {
			t.Errorf("concurrent leases have instances %p and %p, want the same", a.Value(), b.Value())
		}
		a.Release()
		b.Release()
		wantIdle(t, p, "t1", "k")
	})
}

func TestExclusiveCancelWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, ff := newFixture(t, nil)
		first := mustAcquire(t, p, "t1", "k", ff.spec(false))
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() {
			_, err := p.Acquire(ctx, "t1", "k", ff.spec(false))
			done <- err
		}()
		synctest.Wait()
		cancel()
		if err := recv(t, done); !errors.Is(err, context.Canceled) {
			t.Errorf("Acquire cancelled while waiting = %v, want %v", err, context.Canceled)
		}
		first.Release()
		// The cancelled waiter left the semaphore free, or this would block.
		use(t, p, "t1", "k", ff.spec(false))
		wantIdle(t, p, "t1", "k")
	})
}

func TestReleaseIdempotent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, ff := newFixture(t, nil)
		l := mustAcquire(t, p, "t1", "k", ff.spec(false))
		l.Release()
		l.Release()
		wantIdle(t, p, "t1", "k")
		// A second Release freeing someone else's lease would let this
		// pair overlap; a wrong count would make the next Acquire block.
		a := mustAcquire(t, p, "t1", "k", ff.spec(false))
		l.Release()
		got := make(chan struct{})
		go func() {
			defer close(got)
			l, err := p.Acquire(t.Context(), "t1", "k", ff.spec(false))
			if err != nil {
				t.Errorf("Acquire = %v, want a lease", err)
				return
			}
			l.Release()
		}()
		synctest.Wait()
		select {
		case <-got:
			t.Error("stale Release freed another lease")
		default:
		}
		a.Release()
		recv(t, got)
	})
}

func TestIdleTTLClosesIdleInstance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, ff := newFixture(t, &Options{IdleTTL: testTTL})
		fi := use(t, p, "t1", "k", ff.spec(false))
		time.Sleep(testTTL / 2)
		synctest.Wait()
		wantCloses(t, fi, 0)
		time.Sleep(testTTL) // past the TTL and the janitor's next tick
		synctest.Wait()
		wantCloses(t, fi, 1)
		if got := p.Len(); got != 0 {
			t.Errorf("after TTL: Len() = %d, want 0", got)
		}
		if again := use(t, p, "t1", "k", ff.spec(false)); again == fi {
			t.Error("Acquire after TTL returned the closed instance")
		}
	})
}

func TestIdleTTLRefreshedByUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, ff := newFixture(t, &Options{IdleTTL: testTTL})
		fi := use(t, p, "t1", "k", ff.spec(false))
		for range 4 {
			time.Sleep(testTTL * 3 / 4)
			if got := use(t, p, "t1", "k", ff.spec(false)); got != fi {
				t.Fatal("instance replaced although it was used within the TTL")
			}
		}
		synctest.Wait()
		wantCloses(t, fi, 0)
		time.Sleep(testTTL + testTTL/2)
		synctest.Wait()
		wantCloses(t, fi, 1)
	})
}

func TestIdleTTLSparesLeasedInstance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, ff := newFixture(t, &Options{IdleTTL: testTTL})
		l := mustAcquire(t, p, "t1", "k", ff.spec(false))
		fi := l.Value().(*fakeInstance)
		time.Sleep(10 * testTTL)
		synctest.Wait()
		wantCloses(t, fi, 0)
		if got := p.Len(); got != 1 {
			t.Errorf("leased past TTL: Len() = %d, want 1", got)
		}
		l.Release() // the TTL counts from here
		time.Sleep(testTTL / 2)
		synctest.Wait()
		wantCloses(t, fi, 0)
		time.Sleep(testTTL)
		synctest.Wait()
		wantCloses(t, fi, 1)
	})
}

func TestCapEvictsLeastRecentlyUsed(t *testing.T) {
	tests := []struct {
		name        string
		touch       []string // threads used again, in order, after a, b, c
		wantEvicted string
	}{
		{name: "oldest", wantEvicted: "a"},
		{name: "oldest after a reuse", touch: []string{"a"}, wantEvicted: "b"},
		{name: "oldest after two reuses", touch: []string{"b", "a"}, wantEvicted: "c"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, ff := newFixture(t, &Options{MaxInstances: 3})
				inst := map[string]*fakeInstance{}
				for _, th := range append([]string{"a", "b", "c"}, tc.touch...) {
					inst[th] = use(t, p, th, "k", ff.spec(false))
					time.Sleep(time.Second)
				}
				use(t, p, "d", "k", ff.spec(false))
				for th, fi := range inst {
					want := int32(0)
					if th == tc.wantEvicted {
						want = 1
					}
					if got := fi.closes.Load(); got != want {
						t.Errorf("instance of thread %s closed %d times, want %d", th, got, want)
					}
				}
				if diff := cmp.Diff(map[string]int{"k": 3}, p.Counts()); diff != "" {
					t.Errorf("Counts() mismatch (-want +got):\n%s", diff)
				}
			})
		})
	}
}

func TestCapNoneIdle(t *testing.T) {
	tests := []struct {
		name     string
		creating int // instances stuck in New
		leased   int
	}{
		{name: "all leased", leased: 2},
		{name: "one being created", creating: 1, leased: 1},
		{name: "all being created", creating: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, ff := newFixture(t, &Options{MaxInstances: 2})
				creating := &fakeFactory{pool: p, gate: make(chan error)}
				var wg sync.WaitGroup
				for i := range tc.creating {
					wg.Go(func() {
						if l, err := p.Acquire(t.Context(), fmt.Sprint("c", i), "k", creating.spec(false)); err == nil {
							l.Release()
						}
					})
				}
				var leases []*Lease
				for i := range tc.leased {
					leases = append(leases, mustAcquire(t, p, fmt.Sprint("l", i), "k", ff.spec(false)))
				}
				synctest.Wait()
				calls := ff.calls.Load()
				_, err := p.Acquire(t.Context(), "new", "k", ff.spec(false))
				if !errors.Is(err, ErrCapacity) {
					t.Errorf("Acquire at cap = %v, want %v", err, ErrCapacity)
				}
				if c := ff.calls.Load(); c != calls {
					t.Errorf("New called %d times at cap, want %d", c, calls)
				}
				if got := p.Len(); got != 2 {
					t.Errorf("Len() = %d, want 2", got)
				}
				for _, fi := range ff.instances() {
					wantCloses(t, fi, 0)
				}
				for _, l := range leases {
					l.Release()
				}
				close(creating.gate)
				waitGroup(t, &wg)
			})
		})
	}
}

func TestDiscardClosesOnce(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		leased  bool // the lease is held while discard runs
		discard func(t *testing.T, p *Pool, ff *fakeFactory)
	}{
		{
			name:    "idle TTL",
			opts:    Options{IdleTTL: testTTL},
			discard: func(*testing.T, *Pool, *fakeFactory) { time.Sleep(2 * testTTL) },
		},
		{
			name: "eviction",
			opts: Options{MaxInstances: 1},
			discard: func(t *testing.T, p *Pool, ff *fakeFactory) {
				use(t, p, "t2", "k", ff.spec(false))
			},
		},
		{
			name:    "CloseThread idle",
			discard: func(_ *testing.T, p *Pool, _ *fakeFactory) { p.CloseThread("t1") },
		},
		{
			name:    "CloseThread leased",
			leased:  true,
			discard: func(_ *testing.T, p *Pool, _ *fakeFactory) { p.CloseThread("t1") },
		},
		{
			name:    "pool Close idle",
			discard: func(_ *testing.T, p *Pool, _ *fakeFactory) { p.Close() },
		},
		{
			name:    "pool Close leased",
			leased:  true,
			discard: func(_ *testing.T, p *Pool, _ *fakeFactory) { p.Close() },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, ff := newFixture(t, &tc.opts)
				l := mustAcquire(t, p, "t1", "k", ff.spec(false))
				fi := l.Value().(*fakeInstance)
				if !tc.leased {
					l.Release()
				}
				tc.discard(t, p, ff)
				synctest.Wait()
				if got := p.Counts()["k"]; got != len(ff.instances())-1 {
					t.Errorf("after discard: %d instances counted, want %d", got, len(ff.instances())-1)
				}
				if tc.leased {
					wantCloses(t, fi, 0) // deferred until release
					l.Release()
				}
				wantCloses(t, fi, 1)
				p.Close()
				synctest.Wait()
				for i, fi := range ff.instances() {
					if got := fi.closes.Load(); got != 1 {
						t.Errorf("instance #%d closed %d times, want 1", i, got)
					}
				}
			})
		})
	}
}

func TestCloseThread(t *testing.T) {
	p, ff := newFixture(t, nil)
	other := use(t, p, "t2", "k", ff.spec(false))
	l := mustAcquire(t, p, "t1", "k", ff.spec(true))
	leased := l.Value().(*fakeInstance)
	idle := use(t, p, "t1", "k2", ff.spec(false))

	p.CloseThread("t1")
	wantCloses(t, idle, 1)
	if diff := cmp.Diff(map[string]int{"k": 1}, p.Counts()); diff != "" {
		t.Errorf("Counts() after CloseThread mismatch (-want +got):\n%s", diff)
	}
	fresh := mustAcquire(t, p, "t1", "k", ff.spec(true))
	if fresh.Value() == any(leased) {
		t.Error("Acquire after CloseThread returned the discarded instance")
	}
	fresh.Release()
	wantCloses(t, leased, 0) // deferred until its lease is released
	l.Release()
	wantCloses(t, leased, 1)
	wantCloses(t, other, 0)
	p.CloseThread("unknown") // no effect
	if got := p.Len(); got != 2 {
		t.Errorf("Len() = %d, want 2", got)
	}
}

func TestCloseThreadDuringCreation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, ff := newFixture(t, nil)
		ff.gate = make(chan error)
		got := make(chan *Lease)
		go func() {
			l, err := p.Acquire(t.Context(), "t1", "k", ff.spec(false))
			if err != nil {
				t.Errorf("Acquire = %v, want a lease on the discarded instance", err)
			}
			got <- l
		}()
		synctest.Wait()
		p.CloseThread("t1")
		if n := p.Len(); n != 0 {
			t.Errorf("Len() after CloseThread = %d, want 0", n)
		}
		send(t, ff.gate, nil)
		l := recv(t, got)
		if l == nil {
			t.FailNow()
		}
		fi := l.Value().(*fakeInstance)
		wantCloses(t, fi, 0)
		l.Release()
		wantCloses(t, fi, 1)
	})
}

func TestCloseDuringCreation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, ff := newFixture(t, nil)
		ff.gate = make(chan error)
		done := make(chan error)
		go func() {
			_, err := p.Acquire(t.Context(), "t1", "k", ff.spec(false))
			done <- err
		}()
		synctest.Wait()
		p.Close()
		send(t, ff.gate, nil)
		if err := recv(t, done); !errors.Is(err, ErrClosed) {
			t.Errorf("Acquire whose creation outlived Close = %v, want %v", err, ErrClosed)
		}
		wantCloses(t, ff.instances()[0], 1)
	})
}

func TestCloseWhileWaitingForLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, ff := newFixture(t, nil)
		l := mustAcquire(t, p, "t1", "k", ff.spec(false))
		done := make(chan error)
		go func() {
			_, err := p.Acquire(t.Context(), "t1", "k", ff.spec(false))
			done <- err
		}()
		synctest.Wait()
		p.Close()
		l.Release()
		if err := recv(t, done); !errors.Is(err, ErrClosed) {
			t.Errorf("Acquire waiting across Close = %v, want %v", err, ErrClosed)
		}
		wantCloses(t, ff.instances()[0], 1)
	})
}

func TestAcquireAfterClose(t *testing.T) {
	p, ff := newFixture(t, nil)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if err := p.Close(); err != nil {
				t.Errorf("Close() = %v, want nil", err)
			}
		})
	}
	wg.Wait()
	if _, err := p.Acquire(t.Context(), "t1", "k", ff.spec(false)); !errors.Is(err, ErrClosed) {
		t.Errorf("Acquire after Close = %v, want %v", err, ErrClosed)
	}
	if c := ff.calls.Load(); c != 0 {
		t.Errorf("New called %d times after Close, want 0", c)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close() = %v, want nil", err)
	}
}

func TestCloseConcurrentWithUse(t *testing.T) {
	p, ff := newFixture(t, &Options{MaxInstances: 4})
	start := make(chan struct{})
	progress := make(chan struct{}) // closed once goroutine 0 is well under way
	closeProgress := sync.OnceFunc(func() { close(progress) })
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			if g == 0 {
				defer closeProgress()
			}
			<-start
			for i := range 200 {
				if g == 0 && i == 50 {
					closeProgress()
				}
				thread := fmt.Sprint("t", (g+i)%3)
				l, err := p.Acquire(t.Context(), thread, fmt.Sprint("k", i%2), ff.spec(i%2 == 1))
				switch {
				case errors.Is(err, ErrClosed):
					return
				case errors.Is(err, ErrCapacity):
					continue
				case err != nil:
					t.Errorf("Acquire = %v", err)
					return
				}
				if i%50 == 0 {
					p.CloseThread(thread)
				}
				l.Release()
			}
		})
	}
	wg.Go(func() {
		<-progress
		p.Close()
	})
	close(start)
	wg.Wait()
	if n := p.Len(); n != 0 {
		t.Errorf("Len() after Close = %d, want 0", n)
	}
	for i, fi := range ff.instances() {
		if got := fi.closes.Load(); got != 1 {
			t.Errorf("instance #%d closed %d times, want 1", i, got)
		}
	}
}

func TestLenAndCounts(t *testing.T) {
	tests := []struct {
		name        string
		use         []slot
		closeThread string
		wantLen     int
		wantCounts  map[string]int
	}{
		{name: "empty", wantLen: 0, wantCounts: map[string]int{}},
		{
			name:       "per key",
			use:        []slot{{"t1", "a"}, {"t1", "b"}, {"t2", "a"}, {"t1", "a"}},
			wantLen:    3,
			wantCounts: map[string]int{"a": 2, "b": 1},
		},
		{
			name:        "after CloseThread",
			use:         []slot{{"t1", "a"}, {"t1", "b"}, {"t2", "a"}},
			closeThread: "t1",
			wantLen:     1,
			wantCounts:  map[string]int{"a": 1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, ff := newFixture(t, nil)
			for _, s := range tc.use {
				use(t, p, s.thread, s.key, ff.spec(false))
			}
			if tc.closeThread != "" {
				p.CloseThread(tc.closeThread)
			}
			if got := p.Len(); got != tc.wantLen {
				t.Errorf("Len() = %d, want %d", got, tc.wantLen)
			}
			if diff := cmp.Diff(tc.wantCounts, p.Counts()); diff != "" {
				t.Errorf("Counts() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLenCountsInstancesBeingCreated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, ff := newFixture(t, nil)
		ff.gate = make(chan error)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if l, err := p.Acquire(t.Context(), "t1", "k", ff.spec(false)); err == nil {
				l.Release()
			}
		}()
		synctest.Wait()
		if got, counts := p.Len(), p.Counts(); got != 1 || counts["k"] != 1 {
			t.Errorf("while creating: Len() = %d, Counts() = %v; want 1, map[k:1]", got, counts)
		}
		send(t, ff.gate, nil)
		recv(t, done)
	})
}

// fakeHandler is a slog.Handler that keeps the records it handles.
type fakeHandler struct {
	mu      sync.Mutex
	records []slog.Record // guarded by mu
}

func (*fakeHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *fakeHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}
func (h *fakeHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *fakeHandler) WithGroup(string) slog.Handler      { return h }

func TestCloseErrorLogged(t *testing.T) {
	h := &fakeHandler{}
	p, ff := newFixture(t, &Options{Logger: slog.New(h)})
	ff.closeErr = errFakeClose
	use(t, p, "secret-session", "k", ff.spec(false))
	p.CloseThread("secret-session")

	h.mu.Lock()
	defer h.mu.Unlock()
	var warns []map[string]string
	for _, r := range h.records {
		if r.Level != slog.LevelWarn {
			continue
		}
		attrs := map[string]string{}
		r.Attrs(func(a slog.Attr) bool {
			attrs[a.Key] = a.Value.String()
			return true
		})
		warns = append(warns, attrs)
	}
	want := []map[string]string{{
		"thread": Label("secret-session"),
		"tool":   "k",
		"error":  errFakeClose.Error(),
	}}
	if diff := cmp.Diff(want, warns); diff != "" {
		t.Errorf("Warn records mismatch (-want +got):\n%s", diff)
	}
}

// evictedOn acquires thread's instance of key and returns what its lease
// says about an evicted predecessor.
func evictedOn(t *testing.T, p *Pool, thread, key string, spec Spec) (Eviction, bool) {
	t.Helper()
	l := mustAcquire(t, p, thread, key, spec)
	defer l.Release()
	return l.Evicted()
}

func TestEvictionReportedAfterCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, ff := newFixture(t, &Options{MaxInstances: 2})
		start := time.Now()
		for _, th := range []string{"a", "b"} {
			if ev, ok := evictedOn(t, p, th, "k", ff.spec(false)); ok {
				t.Errorf("first Acquire in %s: Evicted() = %+v, want none", th, ev)
			}
			time.Sleep(time.Second)
		}
		use(t, p, "c", "k", ff.spec(false)) // evicts a
		if ev, ok := evictedOn(t, p, "b", "k", ff.spec(false)); ok {
			t.Errorf("Acquire of b's live instance: Evicted() = %+v, want none", ev)
		}
		if ev, ok := evictedOn(t, p, "a", "k2", ff.spec(false)); ok { // evicts c
			t.Errorf("Acquire of another tool in a: Evicted() = %+v, want none", ev)
		}
		ev, ok := evictedOn(t, p, "a", "k", ff.spec(false)) // evicts b
		want := Eviction{Reason: EvictedForRoom, MaxInstances: 2, At: start.Add(2 * time.Second)}
		if !ok || ev != want {
			t.Errorf("Acquire in a after its eviction: Evicted() = %+v, %t; want %+v", ev, ok, want)
		}
		if ev, ok := evictedOn(t, p, "a", "k", ff.spec(false)); ok {
			t.Errorf("second Acquire in a: Evicted() = %+v, want none: only the replacing lease reports it", ev)
		}
		if got := EvictedForRoom.String(); got != "max_instances" {
			t.Errorf("EvictedForRoom.String() = %q, want max_instances", got)
		}
	})
}

func TestEvictionReportedAfterIdleTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, ff := newFixture(t, &Options{IdleTTL: testTTL})
		use(t, p, "a", "k", ff.spec(false))
		time.Sleep(2 * testTTL)
		synctest.Wait()
		ev, ok := evictedOn(t, p, "a", "k", ff.spec(false))
		if !ok || ev.Reason != EvictedIdle || ev.IdleTTL != testTTL || ev.MaxInstances != 0 || ev.Provisional {
			t.Errorf("Acquire after the TTL: Evicted() = %+v, %t; want reason %v and IdleTTL %v", ev, ok, EvictedIdle, testTTL)
		}
		if got := EvictedIdle.String(); got != "idle_ttl" {
			t.Errorf("EvictedIdle.String() = %q, want idle_ttl", got)
		}
	})
}

func TestEvictionForgottenWhenThreadEnds(t *testing.T) {
	p, ff := newFixture(t, &Options{MaxInstances: 1})
	use(t, p, "a", "k", ff.spec(false))
	use(t, p, "b", "k", ff.spec(false)) // evicts a
	p.CloseThread("a")
	if ev, ok := evictedOn(t, p, "a", "k", ff.spec(false)); ok {
		t.Errorf("Acquire in a after CloseThread(a): Evicted() = %+v, want none", ev)
	}
}

func TestEvictionKeptWhenReplacementFails(t *testing.T) {
	p, ff := newFixture(t, &Options{MaxInstances: 1})
	use(t, p, "a", "k", ff.spec(false))
	use(t, p, "b", "k", ff.spec(false)) // evicts a
	failing := &fakeFactory{err: errFakeNew}
	if _, err := p.Acquire(t.Context(), "a", "k", failing.spec(false)); !errors.Is(err, errFakeNew) {
		t.Fatalf("Acquire with a failing New = %v, want %v", err, errFakeNew)
	}
	if ev, ok := evictedOn(t, p, "a", "k", ff.spec(false)); !ok || ev.Reason != EvictedForRoom {
		t.Errorf("Acquire after a failed replacement: Evicted() = %+v, %t; want reason %v", ev, ok, EvictedForRoom)
	}
}

func TestEvictionMemoryBounded(t *testing.T) {
	p, ff := newFixture(t, &Options{MaxInstances: 1})
	n := minEvictionMemory + 2
	for i := range n {
		use(t, p, fmt.Sprint(i), "k", ff.spec(false)) // evicts thread i-1
	}
	p.mu.Lock()
	records, indexed := p.evictions.Len(), len(p.evicted)
	p.mu.Unlock()
	if records != minEvictionMemory || indexed != minEvictionMemory {
		t.Errorf("after %d evictions: %d records, %d indexed; want %d", n-1, records, indexed, minEvictionMemory)
	}
	if ev, ok := evictedOn(t, p, "0", "k", ff.spec(false)); ok {
		t.Errorf("oldest eviction: Evicted() = %+v, want it forgotten", ev)
	}
	if _, ok := evictedOn(t, p, "2", "k", ff.spec(false)); !ok {
		t.Error("a recent eviction was forgotten")
	}
}

// TestSetLimits: a reload's new limits apply to the instances the pool
// holds: a shortened TTL closes an idle instance within the new janitor
// period (not the old one's minute), a lowered cap makes the next new
// instance evict, and the instances themselves survive the change.
func TestSetLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, ff := newFixture(t, &Options{IdleTTL: time.Hour, MaxInstances: 10})
		kept := use(t, p, "t1", "k", ff.spec(false))
		held := mustAcquire(t, p, "t2", "k", ff.spec(false))
		p.SetLimits(&Options{IdleTTL: time.Second, MaxInstances: 1})
		if got := use(t, p, "t1", "k", ff.spec(false)); got != kept {
			t.Fatal("SetLimits replaced an instance")
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		wantCloses(t, kept, 1) // idle past the new TTL
		if got := p.Len(); got != 1 {
			t.Errorf("Len = %d, want 1: the leased instance stays", got)
		}
		held.Release()
		third := use(t, p, "t3", "k", ff.spec(false)) // at the new cap of 1: t2's idle instance goes
		if got := p.Len(); got != 1 {
			t.Errorf("Len after a new thread at cap 1 = %d, want 1", got)
		}
		wantCloses(t, held.Value().(*fakeInstance), 1)
		wantCloses(t, third, 0)
	})
}
