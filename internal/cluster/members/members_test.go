package members

import (
	"slices"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/toolgate/toolgate/internal/cluster/store"
	"github.com/toolgate/toolgate/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func openStore(t *testing.T, m *miniredis.Miniredis) *store.Store {
	t.Helper()
	s, err := store.Open(t.Context(), "redis://"+m.Addr(), &store.Options{Probe: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func want(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s: Members() = %v, want %v", what, got, want)
	}
}

// Replicas that refresh see each other; one that stops refreshing is
// gone once its TTL is over; one that closes is gone at once.
func TestLiveSet(t *testing.T) {
	m := miniredis.RunT(t)
	now := time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)
	m.SetTime(now)
	ttl := 3 * time.Second
	r1 := New(openStore(t, m), Options{ID: "r1", Addr: "10.0.0.1:8080", TTL: ttl})
	r2 := New(openStore(t, m), Options{ID: "r2", Addr: "10.0.0.2:8080", TTL: ttl})
	r3 := New(openStore(t, m), Options{ID: "r3", Addr: "10.0.0.3:8080", TTL: ttl})
	for _, r := range []*Members{r1, r2, r3} {
		r.Refresh(t.Context())
	}
	r1.Refresh(t.Context())
	want(t, "all three refreshed", r1.Members(), []string{"r1", "r2", "r3"})
	if got, err := m.Get("toolgate:member:r2"); err != nil || got != "10.0.0.2:8080" || m.TTL("toolgate:member:r2") != ttl {
		t.Errorf("r2's key = %q (%v), TTL %v; want its address with a TTL of %v", got, err, m.TTL("toolgate:member:r2"), ttl)
	}

	// r3 stops refreshing; r1 and r2 go on until just before its TTL ends.
	m.SetTime(now.Add(ttl - time.Millisecond))
	r1.Refresh(t.Context())
	want(t, "r3 silent for just under its TTL", r1.Members(), []string{"r1", "r2", "r3"})
	r2.Refresh(t.Context())
	m.SetTime(now.Add(ttl))
	r1.Refresh(t.Context())
	want(t, "r3 silent for its TTL", r1.Members(), []string{"r1", "r2"})

	r2.Close(t.Context())
	r1.Refresh(t.Context())
	want(t, "r2 closed", r1.Members(), []string{"r1"})
	if m.Exists("toolgate:member:r2") {
		t.Error("r2's key is still there after Close")
	}
}

// Before Redis is read the configured replicas are the members; while
// Redis is down the last set read stands.
func TestWithoutRedis(t *testing.T) {
	m := miniredis.RunT(t)
	s := openStore(t, m)
	r1 := New(s, Options{ID: "r1", Configured: []string{"r3", "r2"}})
	want(t, "not yet read", r1.Members(), []string{"r1", "r2", "r3"})
	r1.Refresh(t.Context())
	want(t, "read: only r1 refreshed", r1.Members(), []string{"r1"})
	r2 := New(openStore(t, m), Options{ID: "r2"})
	r2.Refresh(t.Context())
	r1.Refresh(t.Context())
	m.Close()
	r1.Refresh(t.Context()) // fails: Redis is down now
	r1.Refresh(t.Context()) // not tried: the probe looks for Redis
	if s.Up() {
		t.Fatal("the store is up with Redis closed")
	}
	want(t, "redis down", r1.Members(), []string{"r1", "r2"})
	r1.Close(t.Context()) // does not wait for Redis
}

// Start reads the live set before it returns, and Close stops the
// refresh loop (goleak) and removes the replica.
func TestStartClose(t *testing.T) {
	m := miniredis.RunT(t)
	r1 := New(openStore(t, m), Options{ID: "r1"})
	r1.Start(t.Context())
	r2 := New(openStore(t, m), Options{ID: "r2"})
	r2.Start(t.Context())
	want(t, "r2 started after r1", r2.Members(), []string{"r1", "r2"})
	r1.Close(t.Context())
	r2.Close(t.Context())
	if m.Exists("toolgate:member:r1") || m.Exists("toolgate:member:r2") {
		t.Errorf("keys left after Close: %v", m.Keys())
	}
}

// The scripts run on the real redis-server as on miniredis: replicas see
// each other, each key expires after the TTL, and Close removes it.
func TestRealRedis(t *testing.T) {
	rs := redistest.Start(t)
	open := func() *store.Store {
		s, err := store.Open(t.Context(), rs.URL(), &store.Options{Probe: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	r1 := New(open(), Options{ID: "r1", Addr: "10.0.0.1:8080"})
	r1.Start(t.Context())
	r2 := New(open(), Options{ID: "r2", Addr: "10.0.0.2:8080"})
	r2.Start(t.Context())
	want(t, "two started", r2.Members(), []string{"r1", "r2"})
	c := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer c.Close()
	if got, err := c.Get(t.Context(), "toolgate:member:r1").Result(); err != nil || got != "10.0.0.1:8080" {
		t.Errorf("GET toolgate:member:r1 = %q, %v; want 10.0.0.1:8080", got, err)
	}
	if ttl, err := c.PTTL(t.Context(), "toolgate:member:r1").Result(); err != nil || ttl <= 0 || ttl > DefaultTTL {
		t.Errorf("PTTL toolgate:member:r1 = %v, %v; want within (0, %v]", ttl, err, DefaultTTL)
	}
	r2.Close(t.Context())
	r1.Refresh(t.Context())
	want(t, "r2 closed", r1.Members(), []string{"r1"})
	r1.Close(t.Context())
	if n, err := c.Exists(t.Context(), "toolgate:member:r1", "toolgate:member:r2", "toolgate:members").Result(); err != nil || n != 0 {
		t.Errorf("%d membership keys left after both closed (%v), want 0", n, err)
	}
}
