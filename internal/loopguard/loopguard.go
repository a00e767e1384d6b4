package loopguard

import (
	"container/list"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"slices"
	"sync"
)

// DefaultThreshold is [Options.Threshold] when zero: a thread may make a
// call three times in a row and get the same result; the fourth is acted
// on.
const DefaultThreshold = 3

// DefaultMaxThreads is [Options.MaxThreads] when zero.
const DefaultMaxThreads = 1000

// maxAllowed caps the calls one thread's user allowed always ([Guard.Allow]);
// past it the oldest is forgotten and will be acted on again.
const maxAllowed = 64

// Call identifies a call for the guard: its tool and the hash of its
// arguments.
type Call struct {
	// Tool is the tool's name, as resolved (after name repair).
	Tool string
	// Args is the arguments' hash, from [ArgsSum] (or
	// [canonjson.ArgsSum]).
	Args [32]byte
}

// Options configure a [Guard]. A nil *Options is the zero value.
type Options struct {
	// Threshold is how many identical calls in a row returning one
	// result a thread may make; the guard acts on each further identical
	// call. Zero or less means [DefaultThreshold].
	Threshold int
	// MaxThreads bounds how many threads the guard remembers; past it the
	// least recently used is forgotten. A thread's state is its last call,
	// the hash of that call's result and a count, about 150 bytes, plus
	// the calls its user allowed always. Zero or less means
	// [DefaultMaxThreads].
	MaxThreads int
}

// Guard is the loop guard's state: per thread, its current streak (see
// the package doc) and the calls its user allowed always. It is safe for
// concurrent use; it owns no goroutine and needs no Close.
type Guard struct {
	mu         sync.Mutex // guards threshold, maxThreads, threads and lru
	threshold  int
	maxThreads int
	threads    map[string]*list.Element // thread → its element in lru (*streak)
	lru        list.List                // most recently used first
}

// streak is one thread's state.
type streak struct {
	thread string
	call   Call
	count  int // calls of call in a row, whatever they returned: run, running or refused
	// same counts the last of them that returned one result, result:
	// the streak proper, which the threshold bounds. Calls running or
	// refused count as returning it.
	same    int
	result  [32]byte
	known   bool   // result holds a result of call
	allowed []Call // calls the user allowed always, oldest first
}

// New returns a Guard; opts may be nil.
func New(opts *Options) *Guard {
	g := &Guard{threads: map[string]*list.Element{}}
	g.SetOptions(opts)
	return g
}

// SetOptions replaces the guard's options (a configuration reload),
// keeping what it remembers of each thread: a streak longer than a
// lowered threshold is acted on at its next identical call. A lowered
// MaxThreads forgets the least recently used threads beyond it at the next
// call of a new thread. opts may be nil, meaning the defaults.
func (g *Guard) SetOptions(opts *Options) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Threshold <= 0 {
		o.Threshold = DefaultThreshold
	}
	if o.MaxThreads <= 0 {
		o.MaxThreads = DefaultMaxThreads
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.threshold, g.maxThreads = o.Threshold, o.MaxThreads
}

// Check records that thread is about to make call c and returns how many
// times in a row the thread has now made it (1 for a call unlike the one
// before it), whatever those calls returned, and whether the guard acts
// on it: the streak (the calls in a row that returned one result, this
// one included) is longer than the threshold, and the user has not
// allowed c always ([Guard.Allow]). A call that runs is followed by
// [Guard.Done] with its result; a call the caller refuses is not.
func (g *Guard) Check(thread string, c Call) (count int, act bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.touch(thread)
	if s.count > 0 && s.call == c {
		s.count++
		s.same++
	} else {
		s.call, s.count, s.same, s.known = c, 1, 1, false
	}
	return s.count, s.same > g.threshold && !slices.Contains(s.allowed, c)
}

// Done records that c, which thread made after a [Guard.Check], returned
// a result hashing to result (a [Digest]'s Sum). A result unlike the
// streak's starts a new streak with c as its first call; a call that is no
// longer the thread's streak changes nothing.
func (g *Guard) Done(thread string, c Call, result [32]byte) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.known(thread)
	if s == nil {
		return
	}
	switch {
	case s.count == 0 || s.call != c:
	case !s.known:
		s.result, s.known = result, true
	case s.result != result:
		s.result, s.same = result, 1
	}
}

// Allow stops the guard acting on c in thread (the user's "allow
// always"), as long as the thread is remembered. A thread remembers at
// most 64 such calls, forgetting the oldest.
func (g *Guard) Allow(thread string, c Call) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.known(thread)
	if s == nil {
		return
	}
	if slices.Contains(s.allowed, c) {
		return
	}
	if len(s.allowed) >= maxAllowed {
		s.allowed = slices.Delete(s.allowed, 0, 1)
	}
	s.allowed = append(s.allowed, c)
}

// known returns thread's streak, or nil when the thread is not
// remembered; it does not count as a use. g.mu is held.
func (g *Guard) known(thread string) *streak {
	if e, ok := g.threads[thread]; ok {
		return e.Value.(*streak)
	}
	return nil
}

// Forget drops thread's state; called when the thread ends.
func (g *Guard) Forget(thread string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if e, ok := g.threads[thread]; ok {
		g.lru.Remove(e)
		delete(g.threads, thread)
	}
}

// Len returns how many threads the guard remembers.
func (g *Guard) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.threads)
}

// touch returns thread's state, made the most recently used, creating it
// (and forgetting the least recently used thread beyond MaxThreads) when
// absent. g.mu is held.
func (g *Guard) touch(thread string) *streak {
	if e, ok := g.threads[thread]; ok {
		g.lru.MoveToFront(e)
		return e.Value.(*streak)
	}
	s := &streak{thread: thread}
	g.threads[thread] = g.lru.PushFront(s)
	for g.lru.Len() > g.maxThreads {
		old := g.lru.Back()
		g.lru.Remove(old)
		delete(g.threads, old.Value.(*streak).thread)
	}
	return s
}

// Notice is the loop guard's words to the model about a call of tool the
// guard acts on, count the place [Guard.Check] returned. The gateway and
// the agent add what was done and what to do instead.
func (g *Guard) Notice(tool string, count int) string {
	g.mu.Lock()
	threshold := g.threshold
	g.mu.Unlock()
	return fmt.Sprintf("loop guard: this is call %d in a row of tool %q with the same arguments, and the last %d returned the same result",
		count, tool, threshold)
}

// Digest hashes a call's result, part by part, into the sum [Guard.Done]
// compares. Each part is written with its length before it, so no two
// different sequences of parts hash alike. Its zero value is ready to
// use; it is not safe for concurrent use. A result of up to about 500
// bytes is hashed without allocating (the guard hashes every result of a
// tracked call, on the hot path); a larger one streams through the hash
// in chunks.
type Digest struct {
	n     int       // bytes in small
	small [512]byte // the parts, while they fit
	h     hash.Hash // the hash once the parts outgrow small, else nil
	chunk []byte    // h's input waiting to be written
}

// digestChunk is how many bytes a Digest writes to its hash at a time.
const digestChunk = 4096

// Add adds the part s.
func (d *Digest) Add(s string) {
	d.length(len(s))
	write(d, s)
}

// AddBytes adds the part b.
func (d *Digest) AddBytes(b []byte) {
	d.length(len(b))
	write(d, b)
}

func (d *Digest) length(n int) {
	var l [binary.MaxVarintLen64]byte
	write(d, l[:binary.PutUvarint(l[:], uint64(n))])
}

func write[T string | []byte](d *Digest, p T) {
	if d.h == nil && d.n+len(p) <= len(d.small) {
		d.n += copy(d.small[d.n:], p)
		return
	}
	if d.h == nil {
		d.h = sha256.New()
		d.chunk = append(make([]byte, 0, digestChunk), d.small[:d.n]...)
	}
	for len(p) > 0 {
		k := min(len(p), cap(d.chunk)-len(d.chunk))
		d.chunk = append(d.chunk, p[:k]...)
		p = p[k:]
		if len(d.chunk) == cap(d.chunk) {
			_, _ = d.h.Write(d.chunk) // a hash never fails to write
			d.chunk = d.chunk[:0]
		}
	}
}

// Sum returns the hash of the parts added so far.
func (d *Digest) Sum() [32]byte {
	if d.h == nil {
		return sha256.Sum256(d.small[:d.n])
	}
	_, _ = d.h.Write(d.chunk)
	d.chunk = d.chunk[:0]
	var s [32]byte
	d.h.Sum(s[:0])
	return s
}
