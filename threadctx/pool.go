package threadctx

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/principal"
)

// ErrCapacity reports that the pool is at [Options.MaxInstances] and no idle
// instance can be evicted to make room. Errors from [Pool.Acquire] wrap it;
// test with errors.Is.
var ErrCapacity = errors.New("thread instance capacity reached")

// ErrClosed reports that the pool has been closed. Errors from
// [Pool.Acquire] wrap it; test with errors.Is.
var ErrClosed = errors.New("thread pool closed")

const (
	defaultIdleTTL      = 30 * time.Minute
	defaultMaxInstances = 1000
	// maxDefaultProvisionalTTL bounds the default [Options.ProvisionalTTL].
	maxDefaultProvisionalTTL = 2 * time.Minute
	// provisionalShare is the default [Options.MaxProvisional]: this
	// fraction of MaxInstances.
	provisionalShare  = 10
	minJanitorPeriod  = 10 * time.Millisecond
	maxJanitorPeriod  = time.Minute
	minEvictionMemory = 1000
)

// EvictReason says why the pool closed an instance that its thread had not
// given up.
type EvictReason int

const (
	// EvictedForRoom: the instance was the least recently used idle one
	// when a new instance needed room under [Options.MaxInstances].
	EvictedForRoom EvictReason = iota + 1
	// EvictedIdle: the instance had no lease for [Options.IdleTTL].
	EvictedIdle
)

// String returns "max_instances" or "idle_ttl", after the limit that
// caused the eviction.
func (r EvictReason) String() string {
	switch r {
	case EvictedForRoom:
		return "max_instances"
	case EvictedIdle:
		return "idle_ttl"
	}
	return fmt.Sprintf("EvictReason(%d)", int(r))
}

// Eviction describes an evicted instance that a later [Pool.Acquire] in its
// thread replaced with a new one. See [Lease.Evicted].
type Eviction struct {
	Reason EvictReason
	// MaxInstances is the pool's cap (for EvictedForRoom); IdleTTL is its
	// idle TTL (for EvictedIdle). The other is zero.
	MaxInstances int
	// OwnerCap, for EvictedForRoom, is the cap of the instance's owner
	// when the owner was at it (the owner made room for its own new
	// instance); 0 when the pool as a whole was full.
	OwnerCap int
	// MaxBytes, for EvictedForRoom, is [Options.MaxBytesPerOwner] when
	// the instance's owner was at it and evicted its own instance to make
	// room for a new one; 0 otherwise.
	MaxBytes int64
	// MaxProvisional, for EvictedForRoom, is [Options.MaxProvisional]
	// when the instance was a provisional one that its owner, at that
	// cap, evicted to make room for a new provisional one; 0 otherwise.
	MaxProvisional int
	// IdleTTL, for EvictedIdle, is the TTL that applied: IdleTTL, or
	// ProvisionalTTL for a provisional instance.
	IdleTTL time.Duration
	// Provisional, for EvictedIdle, says the instance was provisional
	// (its IdleTTL is ProvisionalTTL).
	Provisional bool
	// At is when the instance was evicted.
	At time.Time
}

// Options configures a [Pool]. The zero value is ready to use, and
// [NewPool] accepts a nil *Options.
type Options struct {
	// IdleTTL is how long an instance may stay unused (no lease held) before
	// the pool closes it. Zero or negative means 30 minutes.
	IdleTTL time.Duration
	// MaxInstances caps the live instances across all threads and tools,
	// counting those being created. Zero or negative means 1000.
	MaxInstances int
	// PerOwner caps the instances of one owner: the principal
	// ([principal.From]) of the Acquire that created them. Zero or
	// negative gives each owner an equal share of MaxInstances among the
	// owners holding instances. An owner at its cap makes room by
	// evicting its own least recently used idle instance; room under
	// MaxInstances is made from the requester's own instances or those
	// of owners over their cap, never from an owner at or under its cap.
	PerOwner int
	// MaxBytesPerOwner caps the bytes one owner's instances may hold, as
	// their tools bound them ([Spec.Bytes]: each instance is charged its
	// tool's bound when created, whatever it holds yet). An owner at it
	// makes room by evicting its own least recently used idle instances
	// that are charged bytes; with none idle, Acquire fails with
	// [ErrCapacity]. Instances of tools that declare no bound are not
	// counted. Zero or negative means no bound.
	MaxBytesPerOwner int64
	// ProvisionalTTL replaces IdleTTL for provisional instances (see
	// [WithProvisional]). Zero or negative means the lesser of IdleTTL
	// and 2 minutes; a longer value is cut to IdleTTL.
	ProvisionalTTL time.Duration
	// MaxProvisional caps the provisional instances of one owner, which
	// also count against PerOwner and MaxInstances. An owner at it makes
	// room for a new provisional instance by evicting its own least
	// recently used idle provisional instance and nothing else; with
	// none idle, Acquire fails with [ErrCapacity]. Zero or negative means
	// a tenth of MaxInstances, at least 1.
	MaxProvisional int
	// Logger receives Warn records for instances whose Close fails (keys
	// "thread", a hash of the thread ID, and "tool"), Info records when an
	// evicted instance is replaced (key "reason" added) and Debug records
	// when instances are discarded. Nil means discard.
	Logger *slog.Logger
}

// Spec says how to create a tool's instance and how the instance may be
// shared between calls of one thread.
type Spec struct {
	// New creates the instance. It is required. It runs without any pool
	// lock held and at most once at a time per (thread, tool). ctx is the
	// context of the Acquire that triggered creation: use it to bound
	// creation, not the instance's lifetime, which the pool decides. If the
	// value implements io.Closer, the pool calls Close exactly once when it
	// discards the instance.
	New func(ctx context.Context) (any, error)
	// Bytes is the most the instance may hold, as its tool bounds it (a
	// scratchpad's notes, say): it is charged against its owner's
	// [Options.MaxBytesPerOwner] for the instance's life. Zero: not
	// counted.
	Bytes int64
	// Concurrent reports whether the instance may serve several calls at
	// once. False makes leases exclusive: calls on one instance are
	// serialised. True allows any number of leases at a time.
	Concurrent bool
}

// Pool holds the per-thread instances of stateful tools: at most one per
// (thread, tool key), created lazily, closed when idle longer than the TTL,
// when evicted to make room under the cap, when its thread ends
// ([Pool.CloseThread]) and when the pool closes ([Pool.Close]).
//
// An instance created for a thread that its Acquire's context marks
// provisional ([WithProvisional]) stays provisional until an Acquire
// without the mark leases it: it idles out after
// [Options.ProvisionalTTL], counts against its owner's
// [Options.MaxProvisional], and is evicted before other instances when
// room is needed. A thread nobody comes back to costs little, and many
// such threads cannot push out the instances of threads in use.
//
// The pool remembers the latest evictions, by TTL or cap, of instances
// whose thread has not ended (at most max(2 × MaxInstances, 1000), the
// oldest forgotten first), so that the lease that creates an evicted
// instance's replacement can say so ([Lease.Evicted]).
//
// A Pool is safe for concurrent use. It owns a janitor goroutine, so its
// creator must call [Pool.Close].
type Pool struct {
	// Fixed at creation.
	logger      *slog.Logger
	stopJanitor context.CancelFunc
	janitor     sync.WaitGroup
	closeOnce   sync.Once
	retune      chan struct{} // SetLimits tells the janitor of a new TTL

	// mu guards the limits below, closed, entries, owners, provisional,
	// the eviction records and the fields of every entry marked as
	// guarded by Pool.mu. It is never held across Spec.New, an instance's
	// Close or logging.
	mu sync.Mutex
	// The limits, set by NewPool and SetLimits.
	idleTTL     time.Duration
	provTTL     time.Duration // for provisional instances; at most idleTTL
	max         int
	perOwner    int
	maxBytes    int64 // bytes per owner, as Spec.Bytes charges them; 0: no bound
	maxProv     int   // provisional instances per owner
	closed      bool
	entries     map[slot]*entry  // live instances, including ones being created
	owners      map[string]int   // live instances (entries) per owner
	ownerBytes  map[string]int64 // Spec.Bytes of the live instances per owner; owners with none absent
	provisional map[string]int   // live provisional instances per owner
	// evicted maps the slots of evicted instances not yet replaced to their
	// element in evictions, a list of *evictionRecord, oldest first, of at
	// most maxEvicted.
	evicted    map[slot]*list.Element
	evictions  list.List
	maxEvicted int
}

// evictionRecord is a remembered eviction.
type evictionRecord struct {
	slot slot
	ev   Eviction
}

// slot identifies an instance: one per tool key per thread.
type slot struct {
	thread, key string
}

// entry is one instance, from the start of its creation until it is closed.
type entry struct {
	slot  slot
	owner string        // the principal whose Acquire created it
	bytes int64         // Spec.Bytes charged to owner
	ready chan struct{} // closed by the creator when creation has ended

	// Written under Pool.mu by the creator before ready is closed;
	// read-only afterwards.
	val   any
	err   error         // creation failed; val is nil
	retry bool          // err came from the creator's ctx ending: waiters try again
	sem   chan struct{} // 1-buffered lease semaphore; nil when Spec.Concurrent

	// replaces is the eviction of the slot's previous instance, if any;
	// set under Pool.mu before the entry is published, read-only after.
	replaces *Eviction

	// Guarded by Pool.mu.
	provisional bool      // created under WithProvisional, not yet leased without it
	creating    bool      // Spec.New is running
	refs        int       // leases held plus acquirers waiting for creation or the semaphore
	lastUsed    time.Time // last lease release (or creation)
	discarded   bool      // removed from Pool.entries
	finished    bool      // handed to closeValue (or failed); never closed twice
}

// NewPool returns an empty pool configured by opts (nil means defaults) and
// starts its janitor, which closes idle instances every ProvisionalTTL/4
// (at least 10ms, at most 1m). The caller must call [Pool.Close].
func NewPool(opts *Options) *Pool {
	o := normalize(opts)
	// The pool's Close ends the janitor, so the janitor's context is a root
	// owned by the pool rather than any request's.
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool{
		logger:      o.Logger,
		stopJanitor: cancel,
		retune:      make(chan struct{}, 1),
		entries:     make(map[slot]*entry),
		owners:      make(map[string]int),
		ownerBytes:  make(map[string]int64),
		provisional: make(map[string]int),
		evicted:     make(map[slot]*list.Element),
	}
	p.setLocked(o) // nobody else has p yet
	p.janitor.Go(func() { p.runJanitor(ctx) })
	return p
}

// normalize returns opts with its defaults filled in.
func normalize(opts *Options) Options {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.IdleTTL <= 0 {
		o.IdleTTL = defaultIdleTTL
	}
	if o.MaxInstances <= 0 {
		o.MaxInstances = defaultMaxInstances
	}
	if o.ProvisionalTTL <= 0 {
		o.ProvisionalTTL = maxDefaultProvisionalTTL
	}
	o.ProvisionalTTL = min(o.ProvisionalTTL, o.IdleTTL)
	if o.MaxProvisional <= 0 {
		o.MaxProvisional = max(o.MaxInstances/provisionalShare, 1)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// setLocked takes o's limits, normalized. p.mu is held.
func (p *Pool) setLocked(o Options) {
	p.idleTTL, p.provTTL = o.IdleTTL, o.ProvisionalTTL
	p.max, p.perOwner = o.MaxInstances, o.PerOwner
	p.maxBytes, p.maxProv = max(o.MaxBytesPerOwner, 0), o.MaxProvisional
	p.maxEvicted = max(2*o.MaxInstances, minEvictionMemory)
}

// SetLimits replaces the pool's limits with opts' (a configuration
// reload; nil means the defaults): IdleTTL, ProvisionalTTL,
// MaxInstances, PerOwner, MaxBytesPerOwner and MaxProvisional. Its Logger
// is ignored. Instances and leases are kept: an instance idle for longer
// than a shortened TTL is closed at the janitor's next sweep, which comes
// within the new period; a lowered cap is met as instances idle out,
// their threads end or Acquires evict them to make room, never by
// closing an instance in use. It is safe to call while the pool serves.
func (p *Pool) SetLimits(opts *Options) {
	o := normalize(opts)
	p.mu.Lock()
	p.setLocked(o)
	p.mu.Unlock()
	select {
	case p.retune <- struct{}{}:
	default: // the janitor will read the new TTL anyway
	}
}

// janitorPeriod is how often the janitor looks for idle instances: a quarter
// of the TTL, clamped to [10ms, 1m].
func janitorPeriod(ttl time.Duration) time.Duration {
	return min(max(ttl/4, minJanitorPeriod), maxJanitorPeriod)
}

// Acquire leases the instance of the tool key in thread, creating it with
// spec.New if the thread has none. Concurrent Acquires of a missing
// instance create it once: the others wait for that creation and share its
// result (they try again themselves only if the creation failed because its
// own caller's ctx ended). Without spec.Concurrent, Acquire waits until no
// other lease of the instance is held.
//
// Every wait honours ctx; a wait cut short returns ctx's error, wrapped. A
// failed creation returns the error of spec.New wrapped as "creating
// instance of %q: ..." and leaves nothing behind, so a later Acquire tries
// again. When a new instance is needed and the pool is at its cap, Acquire
// closes the least recently used idle instance to make room, or returns an
// error wrapping [ErrCapacity] if none is idle. After [Pool.Close] it
// returns an error wrapping [ErrClosed]. When the instance Acquire creates
// replaces one the pool evicted, its lease says so ([Lease.Evicted]).
//
// When ctx marks thread provisional ([WithProvisional]), an instance
// Acquire creates is provisional, and an owner at
// [Options.MaxProvisional] makes room only from its own idle provisional
// instances, or gets [ErrCapacity]. Without the mark, Acquire of a
// provisional instance makes it an ordinary one.
//
// On success the caller must call [Lease.Release] exactly once.
func (p *Pool) Acquire(ctx context.Context, thread, key string, spec Spec) (*Lease, error) {
	if spec.New == nil {
		return nil, fmt.Errorf("acquiring instance of %q: spec has no New function", key)
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("acquiring instance of %q: %w", key, err)
		}
		l, retry, err := p.acquire(ctx, slot{thread: thread, key: key}, spec)
		if !retry {
			return l, err
		}
	}
}

// acquire makes one attempt; retry reports that the instance it waited for
// failed to be created for reasons of its creator's, so Acquire tries again.
func (p *Pool) acquire(ctx context.Context, s slot, spec Spec) (l *Lease, retry bool, err error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, false, fmt.Errorf("acquiring instance of %q: %w", s.key, ErrClosed)
	}
	prov := isProvisional(ctx, s.thread)
	if e, ok := p.entries[s]; ok {
		if e.provisional && !prov {
			p.confirmLocked(e) // the thread's caller came back
		}
		e.refs++ // a waiter counts as a user, so the instance is not evicted under it
		p.mu.Unlock()
		return p.join(ctx, e)
	}
	replaces := p.takeEvictionLocked(s) // before remembering another, which may push it out
	owner := principal.NameOf(principal.From(ctx))
	sized, err := p.makeBytesLocked(owner, spec.Bytes)
	if err != nil {
		p.keepEvictionLocked(s, replaces)
		p.mu.Unlock()
		p.closeAll(sized)
		return nil, false, fmt.Errorf("acquiring instance of %q: %w", s.key, err)
	}
	var evicted *entry
	if prov && p.provisional[owner] >= p.maxProv {
		// Its own provisional instances make room, whatever the other
		// caps say: the counts stay as they are.
		evicted = p.lruIdleLocked(owner, true, true)
		if evicted == nil {
			p.keepEvictionLocked(s, replaces)
			p.mu.Unlock()
			return nil, false, fmt.Errorf("acquiring instance of %q: all %d instances of new threads not yet continued are in use; wait for calls to finish: %w",
				s.key, p.maxProv, ErrCapacity)
		}
		p.discardLocked(evicted) // idle, so it is ours to close
		p.rememberLocked(evicted.slot, Eviction{Reason: EvictedForRoom, MaxInstances: p.max, MaxProvisional: p.maxProv, At: time.Now()})
	} else if atCap := p.owners[owner] >= p.ownerCapLocked(owner); atCap || len(p.entries) >= p.max {
		evicted = p.lruIdleLocked(owner, atCap, false)
		if evicted == nil {
			p.keepEvictionLocked(s, replaces)
			p.mu.Unlock()
			if atCap && owner != "" {
				return nil, false, fmt.Errorf("acquiring instance of %q: all %d thread instances of principal %q are in use (auth.max_instances); wait for calls to finish: %w",
					s.key, p.ownerCapLocked(owner), owner, ErrCapacity)
			}
			return nil, false, fmt.Errorf("acquiring instance of %q: all %d thread instances are in use; raise threads.max_instances or wait for calls to finish: %w",
				s.key, p.max, ErrCapacity)
		}
		p.discardLocked(evicted) // idle, so it is ours to close
		ev := Eviction{Reason: EvictedForRoom, MaxInstances: p.max, At: time.Now()}
		if atCap && len(p.entries)+1 < p.max {
			ev.OwnerCap = p.ownerCapLocked(owner)
		}
		p.rememberLocked(evicted.slot, ev)
	}
	e := &entry{slot: s, owner: owner, bytes: spec.Bytes, ready: make(chan struct{}), creating: true, refs: 1, replaces: replaces, provisional: prov}
	p.entries[s] = e
	p.owners[owner]++
	if e.bytes > 0 {
		p.ownerBytes[owner] += e.bytes
	}
	if prov {
		p.provisional[owner]++
	}
	p.mu.Unlock()

	p.closeAll(sized)
	if evicted != nil {
		p.closeValue(evicted, "evicting least recently used instance")
	}
	l, err = p.create(ctx, e, spec)
	return l, false, err
}

// create runs spec.New for e, which the caller has put in the pool with
// creating set and one ref (its own).
func (p *Pool) create(ctx context.Context, e *entry, spec Spec) (*Lease, error) {
	v, err := spec.New(ctx)

	p.mu.Lock()
	e.creating = false
	if err != nil {
		e.err = fmt.Errorf("creating instance of %q: %w", e.slot.key, err)
		e.retry = ctx.Err() != nil
		if !e.discarded {
			p.removeLocked(e)
		}
		e.refs--
		e.finished = true // nothing to close
		if e.replaces != nil && !p.closed {
			// No replacement was made: the next one still replaces the
			// evicted instance.
			p.rememberLocked(e.slot, *e.replaces)
		}
		close(e.ready)
		p.mu.Unlock()
		return nil, e.err
	}
	e.val = v
	e.lastUsed = time.Now()
	if !spec.Concurrent {
		e.sem = make(chan struct{}, 1)
		e.sem <- struct{}{} // the creator takes the first lease
	}
	close(e.ready)
	if p.closed {
		// Close discarded e while it was being created. Give up the first
		// lease (and the semaphore it holds), which closes the instance
		// unless someone else still waits for it.
		p.mu.Unlock()
		p.drop(e, true)
		return nil, fmt.Errorf("acquiring instance of %q: %w", e.slot.key, ErrClosed)
	}
	p.mu.Unlock()
	if ev := e.replaces; ev != nil {
		p.logger.Info("replacing evicted thread instance", "thread", Label(e.slot.thread), "tool", e.slot.key,
			"reason", ev.Reason.String())
	}
	return &Lease{p: p, e: e, evicted: e.replaces}, nil
}

// rememberLocked records the eviction of s's instance, forgetting the
// oldest record past maxEvicted. p.mu must be held.
func (p *Pool) rememberLocked(s slot, ev Eviction) {
	if el, ok := p.evicted[s]; ok {
		p.evictions.Remove(el)
	}
	p.evicted[s] = p.evictions.PushBack(&evictionRecord{slot: s, ev: ev})
	for p.evictions.Len() > p.maxEvicted {
		p.forgetLocked(p.evictions.Front())
	}
}

// keepEvictionLocked remembers again the eviction of s's previous
// instance that an Acquire took but made no replacement for. p.mu must
// be held.
func (p *Pool) keepEvictionLocked(s slot, replaces *Eviction) {
	if replaces != nil {
		p.rememberLocked(s, *replaces)
	}
}

// takeEvictionLocked returns and forgets the eviction of s's previous
// instance, or nil if none is remembered. p.mu must be held.
func (p *Pool) takeEvictionLocked(s slot) *Eviction {
	el, ok := p.evicted[s]
	if !ok {
		return nil
	}
	ev := el.Value.(*evictionRecord).ev
	p.forgetLocked(el)
	return &ev
}

// forgetLocked drops the eviction record el. p.mu must be held.
func (p *Pool) forgetLocked(el *list.Element) {
	delete(p.evicted, el.Value.(*evictionRecord).slot)
	p.evictions.Remove(el)
}

// join waits for e, which the caller found in the pool and took a ref on,
// to be created and, for exclusive instances, for its semaphore.
func (p *Pool) join(ctx context.Context, e *entry) (*Lease, bool, error) {
	select {
	case <-e.ready:
	case <-ctx.Done():
		p.drop(e, false)
		return nil, false, fmt.Errorf("waiting for instance of %q to be created: %w", e.slot.key, ctx.Err())
	}
	if e.err != nil {
		p.drop(e, false)
		if e.retry {
			return nil, true, nil
		}
		return nil, false, e.err
	}
	if e.sem != nil {
		select {
		case e.sem <- struct{}{}:
		case <-ctx.Done():
			p.drop(e, false)
			return nil, false, fmt.Errorf("waiting for instance of %q to be free: %w", e.slot.key, ctx.Err())
		}
	}
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		p.drop(e, true)
		return nil, false, fmt.Errorf("acquiring instance of %q: %w", e.slot.key, ErrClosed)
	}
	return &Lease{p: p, e: e}, false, nil
}

// drop gives up one ref on e, first freeing its semaphore if the ref held
// it (leased), and closes e if it was discarded and this was the last ref.
func (p *Pool) drop(e *entry, leased bool) {
	if leased && e.sem != nil {
		<-e.sem
	}
	p.mu.Lock()
	e.refs--
	if leased {
		e.lastUsed = time.Now()
	}
	closeNow := p.finishLocked(e)
	p.mu.Unlock()
	if closeNow {
		p.closeValue(e, "closing discarded instance after its last lease")
	}
}

// makeBytesLocked makes room for an instance of owner charged bytes under
// maxBytes, evicting owner's least recently used idle instances that are
// charged bytes; it returns those evicted, for the caller to close once
// p.mu is released (also when it fails: they are discarded). It fails,
// wrapping [ErrCapacity], when owner's instances charged bytes are all in
// use and still leave no room. p.mu must be held.
func (p *Pool) makeBytesLocked(owner string, bytes int64) (evicted []*entry, err error) {
	if bytes <= 0 || p.maxBytes == 0 {
		return nil, nil
	}
	if bytes > p.maxBytes {
		return nil, fmt.Errorf("one instance may hold %d bytes, more than the %d one principal's instances may hold in all (threads.max_bytes_per_principal); raise it: %w", bytes, p.maxBytes, ErrCapacity)
	}
	for p.ownerBytes[owner]+bytes > p.maxBytes {
		var lru *entry
		for _, e := range p.entries {
			if e.owner == owner && e.bytes > 0 && e.refs == 0 && !e.creating && (lru == nil || evictsBefore(e, lru)) {
				lru = e
			}
		}
		if lru == nil {
			return evicted, fmt.Errorf("the thread instances of this principal may hold %d bytes in all (threads.max_bytes_per_principal), and those holding them are all in use; wait for calls to finish: %w", p.maxBytes, ErrCapacity)
		}
		if p.discardLocked(lru) {
			evicted = append(evicted, lru)
		}
		p.rememberLocked(lru.slot, Eviction{Reason: EvictedForRoom, MaxInstances: p.max, MaxBytes: p.maxBytes, At: time.Now()})
	}
	return evicted, nil
}

// closeAll closes the instances of es, evicted to make room. p.mu must
// not be held.
func (p *Pool) closeAll(es []*entry) {
	for _, e := range es {
		p.closeValue(e, "evicting least recently used instance")
	}
}

// lruIdleLocked returns the idle entry (no ref, not being created) that
// may make room for a new instance of owner, provisional ones first, then
// the least recently used; nil if there is none. With own, one of owner's;
// otherwise one of owner's or of an owner over its cap. With onlyProv, a
// provisional one. p.mu must be held.
func (p *Pool) lruIdleLocked(owner string, own, onlyProv bool) *entry {
	var lru *entry
	for _, e := range p.entries {
		if e.refs != 0 || e.creating || onlyProv && !e.provisional || lru != nil && !evictsBefore(e, lru) {
			continue
		}
		if e.owner == owner || !own && p.owners[e.owner] > p.ownerCapLocked(e.owner) {
			lru = e
		}
	}
	return lru
}

// evictsBefore reports whether a is evicted before b: a provisional
// instance before an ordinary one, then the least recently used.
func evictsBefore(a, b *entry) bool {
	if a.provisional != b.provisional {
		return a.provisional
	}
	return a.lastUsed.Before(b.lastUsed)
}

// confirmLocked makes the provisional instance e an ordinary one. p.mu
// must be held.
func (p *Pool) confirmLocked(e *entry) {
	e.provisional = false
	if !e.discarded {
		p.dropProvisionalLocked(e.owner)
	}
}

// dropProvisionalLocked counts one provisional instance of owner less.
// p.mu must be held.
func (p *Pool) dropProvisionalLocked(owner string) {
	if p.provisional[owner]--; p.provisional[owner] <= 0 {
		delete(p.provisional, owner)
	}
}

// ownerCapLocked is how many instances owner may hold: Options.PerOwner,
// or an equal share of MaxInstances among the owners holding instances,
// owner counted. p.mu must be held.
func (p *Pool) ownerCapLocked(owner string) int {
	if p.perOwner > 0 {
		return min(p.perOwner, p.max)
	}
	n := len(p.owners)
	if p.owners[owner] == 0 {
		n++
	}
	return max(p.max/n, 1)
}

// discardLocked removes e from the pool and reports whether the caller must
// now close it (nobody uses it); otherwise its last [Pool.drop] will. p.mu
// must be held.
func (p *Pool) discardLocked(e *entry) bool {
	if !e.discarded {
		p.removeLocked(e)
	}
	return p.finishLocked(e)
}

// removeLocked takes e out of the pool's entries and its owner's count.
// p.mu must be held.
func (p *Pool) removeLocked(e *entry) {
	delete(p.entries, e.slot)
	e.discarded = true
	if p.owners[e.owner]--; p.owners[e.owner] <= 0 {
		delete(p.owners, e.owner)
	}
	if e.bytes > 0 {
		if p.ownerBytes[e.owner] -= e.bytes; p.ownerBytes[e.owner] <= 0 {
			delete(p.ownerBytes, e.owner)
		}
	}
	if e.provisional {
		p.dropProvisionalLocked(e.owner)
	}
}

// finishLocked reports, once per entry, that e is discarded and unused, so
// it is time to close it. p.mu must be held.
func (p *Pool) finishLocked(e *entry) bool {
	if !e.discarded || e.refs > 0 || e.creating || e.finished {
		return false
	}
	e.finished = true
	return true
}

// closeValue closes e's instance if it is an io.Closer. It must be called
// without p.mu held, and once per entry (see finishLocked).
func (p *Pool) closeValue(e *entry, msg string) {
	c, ok := e.val.(io.Closer)
	if !ok {
		return
	}
	thread := Label(e.slot.thread)
	p.logger.Debug(msg, "thread", thread, "tool", e.slot.key)
	if err := c.Close(); err != nil {
		p.logger.Warn("closing thread instance", "thread", thread, "tool", e.slot.key, "error", err)
	}
}

// CloseThread discards every instance of thread, for when the thread ends.
// Idle instances are closed before it returns; leased ones are removed at
// once (a later Acquire in thread creates a fresh instance) and closed when
// their last lease is released. The thread's remembered evictions are
// forgotten. Unknown threads are ignored.
func (p *Pool) CloseThread(thread string) {
	p.mu.Lock()
	var idle []*entry
	for s, e := range p.entries {
		if s.thread == thread && p.discardLocked(e) {
			idle = append(idle, e)
		}
	}
	for el := p.evictions.Front(); el != nil; {
		next := el.Next()
		if el.Value.(*evictionRecord).slot.thread == thread {
			p.forgetLocked(el)
		}
		el = next
	}
	p.mu.Unlock()
	for _, e := range idle {
		p.closeValue(e, "closing instance of ended thread")
	}
}

// Close stops the janitor and waits for it, then discards every instance:
// idle ones are closed before Close returns, leased ones when their last
// lease is released. Afterwards [Pool.Acquire] returns [ErrClosed]. Close is
// safe to call more than once and concurrently with other methods; later
// calls wait for the first to finish. It returns nil: failures of instances'
// Close are logged, and the error result lets Pool serve as an io.Closer.
func (p *Pool) Close() error {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		var idle []*entry
		for _, e := range p.entries {
			if p.discardLocked(e) {
				idle = append(idle, e)
			}
		}
		p.mu.Unlock()
		p.stopJanitor()
		p.janitor.Wait()
		for _, e := range idle {
			p.closeValue(e, "closing instance of closed pool")
		}
	})
	return nil
}

// Len returns the number of live instances in the pool, including those
// being created. Discarded instances waiting for their last lease to be
// released are not counted.
func (p *Pool) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.entries)
}

// Counts returns the number of live instances per tool key, counted as by
// [Pool.Len]; keys without instances are absent. The map is the caller's.
func (p *Pool) Counts() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	counts := make(map[string]int)
	for s := range p.entries {
		counts[s.key]++
	}
	return counts
}

// runJanitor closes idle instances every janitorPeriod of the shorter
// TTL, until ctx is done; a new TTL (SetLimits) sets a new period at once.
func (p *Pool) runJanitor(ctx context.Context) {
	t := time.NewTicker(p.period())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.retune:
			t.Reset(p.period())
		case <-t.C:
			p.sweep(time.Now())
		}
	}
}

// period is how often the janitor sweeps: janitorPeriod of the
// provisional TTL, the shorter.
func (p *Pool) period() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return janitorPeriod(p.provTTL)
}

// sweep closes the instances that have had no lease for IdleTTL
// (ProvisionalTTL for a provisional one) or longer.
func (p *Pool) sweep(now time.Time) {
	p.mu.Lock()
	var expired []*entry
	for _, e := range p.entries {
		ttl := p.idleTTL
		if e.provisional {
			ttl = p.provTTL
		}
		if e.refs == 0 && !e.creating && now.Sub(e.lastUsed) >= ttl && p.discardLocked(e) {
			expired = append(expired, e)
			p.rememberLocked(e.slot, Eviction{Reason: EvictedIdle, IdleTTL: ttl, Provisional: e.provisional, At: now})
		}
	}
	p.mu.Unlock()
	for _, e := range expired {
		p.closeValue(e, "closing idle instance")
	}
}

// Label is how a thread appears in logs, events and webhook payloads: a
// short hash, since session IDs grant access to a session and explicit
// thread names are the client's. Every package labels threads with it, so
// records can be correlated.
func Label(thread string) string {
	if thread == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(thread))
	return hex.EncodeToString(sum[:6])
}

// Lease is one use of an instance, from [Pool.Acquire] to [Lease.Release].
// While it is held the instance is neither closed nor evicted, and, for an
// exclusive [Spec], no other lease of it exists.
type Lease struct {
	p       *Pool
	e       *entry
	evicted *Eviction // set on the lease whose Acquire created a replacement
	once    sync.Once
}

// Evicted reports whether this lease's Acquire created the instance to
// replace one of the same thread and tool that the pool evicted (idle past
// [Options.IdleTTL], or to make room under [Options.MaxInstances]), and if
// so how. Only that one lease reports it. The evicted instance's state is
// gone.
func (l *Lease) Evicted() (Eviction, bool) {
	if l.evicted == nil {
		return Eviction{}, false
	}
	return *l.evicted, true
}

// Value returns the instance that [Spec.New] created. It must not be used
// after [Lease.Release].
func (l *Lease) Value() any { return l.e.val }

// Release ends the lease. If the instance was discarded while leased and
// this was its last lease, Release closes it. Calling Release again does
// nothing. It is safe for concurrent use.
func (l *Lease) Release() {
	l.once.Do(func() { l.p.drop(l.e, true) })
}

// provisionalKey is the context key of [WithProvisional].
type provisionalKey struct{}

// WithProvisional returns ctx marking thread provisional for the
// [Pool.Acquire] calls made under it: an instance of thread that such an
// Acquire creates is provisional (see [Pool]) until an Acquire of it under
// a context without the mark. It is for a thread made up for one request
// that a later one may or may not continue. The mark names its thread, so
// Acquires of other threads under ctx (a tool calling others) are not
// affected.
func WithProvisional(ctx context.Context, thread string) context.Context {
	return context.WithValue(ctx, provisionalKey{}, thread)
}

// isProvisional reports whether ctx marks thread provisional.
func isProvisional(ctx context.Context, thread string) bool {
	t, ok := ctx.Value(provisionalKey{}).(string)
	return ok && t == thread
}
