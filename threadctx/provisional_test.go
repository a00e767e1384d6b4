package threadctx

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolgate/toolgate/internal/principal"
)

// provCtx is t's context with thread marked provisional, as the principal
// who ("" for none).
func provCtx(t *testing.T, who, thread string) context.Context {
	ctx := t.Context()
	if who != "" {
		ctx = principal.With(ctx, &principal.Identity{Name: who})
	}
	return WithProvisional(ctx, thread)
}

// useIn acquires thread's instance of k under ctx and releases it at once.
func useIn(t *testing.T, ctx context.Context, p *Pool, ff *fakeFactory, thread string) *fakeInstance {
	t.Helper()
	l, err := p.Acquire(ctx, thread, "k", ff.spec(false))
	if err != nil {
		t.Fatalf("Acquire(%q) = %v, want a lease", thread, err)
	}
	defer l.Release()
	return l.Value().(*fakeInstance)
}

func TestNewPoolProvisionalDefaults(t *testing.T) {
	tests := []struct {
		name     string
		opts     *Options
		wantTTL  time.Duration
		wantProv int
	}{
		{name: "nil", wantTTL: 2 * time.Minute, wantProv: 100},
		{name: "short idle TTL", opts: &Options{IdleTTL: time.Minute, MaxInstances: 5}, wantTTL: time.Minute, wantProv: 1},
		{name: "set", opts: &Options{ProvisionalTTL: 5 * time.Minute, MaxProvisional: 3}, wantTTL: 5 * time.Minute, wantProv: 3},
		{name: "longer than the idle TTL", opts: &Options{IdleTTL: time.Minute, ProvisionalTTL: time.Hour}, wantTTL: time.Minute, wantProv: 100},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPool(tc.opts)
			defer p.Close()
			if p.provTTL != tc.wantTTL || p.maxProv != tc.wantProv {
				t.Errorf("NewPool(%+v) = provisional TTL %v, cap %d; want %v, %d", tc.opts, p.provTTL, p.maxProv, tc.wantTTL, tc.wantProv)
			}
		})
	}
}

// A provisional instance idles out after ProvisionalTTL, and its
// eviction says so; one leased again without the mark is an ordinary
// instance, which lasts IdleTTL.
func TestProvisionalTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const short = 2 * time.Minute
		p, ff := newFixture(t, &Options{IdleTTL: 30 * time.Minute})
		dropped := useIn(t, provCtx(t, "", "once"), p, ff, "once")
		kept := useIn(t, provCtx(t, "", "again"), p, ff, "again")
		if again := use(t, p, "again", "k", ff.spec(false)); again != kept {
			t.Fatal("the provisional instance was replaced when its thread came back")
		}
		time.Sleep(short + time.Minute) // past the TTL and the janitor's next tick
		synctest.Wait()
		wantCloses(t, dropped, 1)
		wantCloses(t, kept, 0)
		ev, ok := evictedOn(t, p, "once", "k", ff.spec(false))
		if !ok || ev.Reason != EvictedIdle || ev.IdleTTL != short || !ev.Provisional {
			t.Errorf("Acquire in the provisional thread after its TTL: Evicted() = %+v, %t; want idle_ttl after %v, provisional", ev, ok, short)
		}
		time.Sleep(30 * time.Minute)
		synctest.Wait()
		wantCloses(t, kept, 1)
	})
}

// The mark names one thread: another thread's instance created under
// the same context is an ordinary one.
func TestProvisionalMarkNamesItsThread(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, ff := newFixture(t, &Options{IdleTTL: 30 * time.Minute})
		ctx := provCtx(t, "", "minted")
		other := useIn(t, ctx, p, ff, "other")
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		wantCloses(t, other, 0)
	})
}

// A principal's flood of provisional threads evicts only its own
// provisional instances: never another principal's instance, nor its own
// ordinary ones, whatever the caps.
func TestProvisionalFloodEvictsOnlyItsOwn(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{name: "defaults", opts: Options{}},
		{name: "small pool", opts: Options{MaxInstances: 4}},
		{name: "provisional cap 3", opts: Options{MaxInstances: 8, MaxProvisional: 3}},
		{name: "per-owner cap", opts: Options{MaxInstances: 8, PerOwner: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, ff := newFixture(t, &tc.opts)
				bobCtx := principal.With(t.Context(), &principal.Identity{Name: "bob"})
				aliceCtx := principal.With(t.Context(), &principal.Identity{Name: "alice"})
				bob := useIn(t, bobCtx, p, ff, "bob-notes")
				alice := useIn(t, aliceCtx, p, ff, "alice-notes")
				var flood []*fakeInstance
				for i := range 150 {
					time.Sleep(100 * time.Millisecond)
					th := fmt.Sprint("minted-", i)
					flood = append(flood, useIn(t, provCtx(t, "alice", th), p, ff, th))
				}
				wantCloses(t, bob, 0)
				wantCloses(t, alice, 0)
				if again := useIn(t, bobCtx, p, ff, "bob-notes"); again != bob {
					t.Error("bob's instance was replaced during alice's flood")
				}
				if again := useIn(t, aliceCtx, p, ff, "alice-notes"); again != alice {
					t.Error("alice's own ordinary instance was replaced during her flood")
				}
				// The newest of the flood lives, the oldest was evicted,
				// and its thread's next call says so.
				wantCloses(t, flood[len(flood)-1], 0)
				wantCloses(t, flood[0], 1)
				ev, ok := evictedOn(t, p, "minted-0", "k", ff.spec(false))
				if !ok || ev.Reason != EvictedForRoom {
					t.Errorf("Acquire in the flood's first thread: Evicted() = %+v, %t; want max_instances", ev, ok)
				}
			})
		})
	}
}

// An owner at MaxProvisional whose provisional instances are all in use
// gets ErrCapacity for another, and evicts nothing.
func TestProvisionalCapNoneIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, ff := newFixture(t, &Options{MaxProvisional: 2})
		ordinary := use(t, p, "ordinary", "k", ff.spec(false))
		var leases []*Lease
		for i := range 2 {
			th := fmt.Sprint("minted-", i)
			l, err := p.Acquire(provCtx(t, "", th), th, "k", ff.spec(false))
			if err != nil {
				t.Fatal(err)
			}
			leases = append(leases, l)
		}
		if l, err := p.Acquire(provCtx(t, "", "minted-2"), "minted-2", "k", ff.spec(false)); !errors.Is(err, ErrCapacity) {
			if err == nil {
				l.Release()
			}
			t.Errorf("Acquire past MaxProvisional, none idle = %v, want %v", err, ErrCapacity)
		}
		wantCloses(t, ordinary, 0)
		// Confirming one frees its place.
		leases[0].Release()
		use(t, p, "minted-0", "k", ff.spec(false))
		useIn(t, provCtx(t, "", "minted-2"), p, ff, "minted-2")
		leases[1].Release()
		if got := p.Len(); got != 4 {
			t.Errorf("Len() = %d, want 4", got)
		}
	})
}

// When room is needed, an idle provisional instance goes before an
// ordinary one used less recently.
func TestCapEvictsProvisionalFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, ff := newFixture(t, &Options{MaxInstances: 2})
		old := use(t, p, "old", "k", ff.spec(false))
		time.Sleep(time.Second)
		prov := useIn(t, provCtx(t, "", "minted"), p, ff, "minted")
		time.Sleep(time.Second)
		use(t, p, "new", "k", ff.spec(false))
		wantCloses(t, old, 0)
		wantCloses(t, prov, 1)
	})
}

// Without principals, a flood of provisional threads leaves the ordinary
// instances alone, even in a small pool.
func TestProvisionalFloodWithoutPrincipals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, ff := newFixture(t, &Options{MaxInstances: 4})
		var kept []*fakeInstance
		for i := range 3 {
			kept = append(kept, use(t, p, fmt.Sprint("session-", i), "k", ff.spec(false)))
		}
		for i := range 20 {
			time.Sleep(100 * time.Millisecond)
			th := fmt.Sprint("minted-", i)
			useIn(t, provCtx(t, "", th), p, ff, th)
		}
		for _, fi := range kept {
			wantCloses(t, fi, 0)
		}
		if got := p.Len(); got != 4 {
			t.Errorf("Len() = %d, want 4", got)
		}
	})
}
