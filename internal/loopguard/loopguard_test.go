package loopguard

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/toolgate/toolgate/internal/canonjson"
	"github.com/toolgate/toolgate/internal/loopguard/loopguardtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// event is one step of a guard test: a Check of call (want: its count and
// whether the guard acts), a Done of call with result, or an Allow.
type event struct {
	op        string // "check", "done" or "allow"
	call      Call
	result    string // for done
	wantCount int    // for check
	wantAct   bool   // for check
}

var (
	a    = Call{Tool: "t", Args: canonjson.RawSum([]byte(`{"n":1}`))}
	a2   = Call{Tool: "t", Args: canonjson.RawSum([]byte(` { "n" : 1.0 } `))} // a, spelt otherwise
	b    = Call{Tool: "t", Args: canonjson.RawSum([]byte(`{"n":2}`))}
	aAlt = Call{Tool: "u", Args: a.Args} // a's arguments, another tool
)

func check(c Call, count int, act bool) event {
	return event{op: "check", call: c, wantCount: count, wantAct: act}
}
func done(c Call, result string) event { return event{op: "done", call: c, result: result} }
func allow(c Call) event               { return event{op: "allow", call: c} }

// ran is a call that runs and returns result, at place count.
func ran(c Call, count int, result string) []event {
	return []event{check(c, count, false), done(c, result)}
}

func seq(parts ...[]event) []event {
	var out []event
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestGuard(t *testing.T) {
	tests := []struct {
		name      string
		threshold int
		events    []event
	}{
		{"the call after three alike results", 3, seq(
			ran(a, 1, "x"), ran(a2, 2, "x"), ran(a, 3, "x"),
			[]event{check(a, 4, true), check(a2, 5, true)},
		)},
		{"zero threshold is the default", 0, seq(
			ran(a, 1, "x"), ran(a, 2, "x"), ran(a, 3, "x"), []event{check(a, 4, true)},
		)},
		{"a clock: every result new", 3, seq(
			ran(a, 1, "1"), ran(a, 2, "2"), ran(a, 3, "3"), ran(a, 4, "4"), ran(a, 5, "5"), ran(a, 6, "6"),
		)},
		{"a status that settles", 3, seq(
			ran(a, 1, "pending"), ran(a, 2, "running"), ran(a, 3, "running"),
			ran(a, 4, "done"), ran(a, 5, "done"), ran(a, 6, "done"),
			[]event{check(a, 7, true), check(a, 8, true)},
		)},
		{"another call starts a new streak", 2, seq(
			ran(a, 1, "x"), ran(a, 2, "x"), ran(b, 1, "x"), ran(aAlt, 1, "x"), ran(a, 1, "x"), ran(a, 2, "x"),
			[]event{check(a, 3, true)},
		)},
		{"a refused call counts, and keeps the streak", 1, seq(
			ran(a, 1, "x"), []event{check(a, 2, true), check(a, 3, true)}, ran(b, 1, "x"),
		)},
		{"threshold 1: the second call, whatever the first returned", 1, seq(
			ran(a, 1, "x"), []event{check(a, 2, true)},
		)},
		{"a run allowed once that returns something new starts again", 2, seq(
			ran(a, 1, "x"), ran(a, 2, "x"), []event{check(a, 3, true), done(a, "y")}, ran(a, 4, "y"),
			[]event{check(a, 5, true)},
		)},
		{"concurrent calls count as alike until they return", 2, []event{
			check(a, 1, false), check(a, 2, false), check(a, 3, true), check(a, 4, true),
			done(a, "x"), done(a, "x"), check(a, 5, true),
		}},
		{"concurrent calls that return unlike results", 2, []event{
			check(a, 1, false), check(a, 2, false), done(a, "x"), done(a, "y"), check(a, 3, false),
		}},
		{"a stale Done changes nothing", 2, []event{
			check(a, 1, false), check(b, 1, false), done(a, "x"), done(b, "x"), check(b, 2, false), done(b, "y"),
			check(b, 3, false), done(a, "z"), check(b, 4, true),
		}},
		{"allowed always", 1, seq(
			ran(a, 1, "x"), []event{check(a, 2, true), allow(a)}, ran(a, 3, "x"), ran(a, 4, "x"),
			ran(b, 1, "x"), []event{check(b, 2, true)}, ran(a, 1, "x"), ran(a, 2, "x"),
		)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := New(&Options{Threshold: tc.threshold})
			for i, e := range tc.events {
				switch e.op {
				case "check":
					count, act := g.Check("th", e.call)
					if count != e.wantCount || act != e.wantAct {
						t.Fatalf("event %d: Check(%v) = %d, %v; want %d, %v", i, e.call.Tool, count, act, e.wantCount, e.wantAct)
					}
				case "done":
					g.Done("th", e.call, sha256.Sum256([]byte(e.result)))
				case "allow":
					g.Allow("th", e.call)
				}
			}
		})
	}
}

// TestScenarios runs the scenarios the gateway and the agent run too.
func TestScenarios(t *testing.T) {
	for _, sc := range loopguardtest.Scenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			g := New(&Options{Threshold: sc.Threshold})
			runs := 0
			for i, want := range sc.Runs {
				if _, act := g.Check("th", a); act == want {
					t.Fatalf("call %d: Check() acts = %v, want %v", i+1, act, !want)
				}
				if !want {
					continue
				}
				text, failed := loopguardtest.Answer(sc.Answers[runs])
				runs++
				var d Digest
				d.Add(fmt.Sprint(failed))
				d.Add(text)
				g.Done("th", a, d.Sum())
			}
		})
	}
}

func TestGuardThreads(t *testing.T) {
	g := New(&Options{Threshold: 1})
	x := sha256.Sum256([]byte("x"))
	for _, th := range []string{"p", "q"} {
		g.Check(th, a)
		g.Done(th, a, x)
	}
	if _, act := g.Check("p", a); !act {
		t.Error("thread p's repeat: the guard does not act")
	}
	if n, act := g.Check("r", a); n != 1 || act {
		t.Errorf("thread r's first call = %d, %v; want 1, false (threads are apart)", n, act)
	}
	g.Forget("p")
	g.Forget("absent")
	g.Done("p", a, x) // a thread forgotten stays forgotten
	if got := g.Len(); got != 2 {
		t.Errorf("Len() after Forget = %d, want 2", got)
	}
	if n, act := g.Check("p", a); n != 1 || act {
		t.Errorf("a forgotten thread's call = %d, %v; want 1, false", n, act)
	}
}

func TestGuardBounded(t *testing.T) {
	g := New(&Options{MaxThreads: 4})
	for i := range 10 {
		g.Check(fmt.Sprint(i), a)
	}
	if got := g.Len(); got != 4 {
		t.Fatalf("threads remembered = %d, want the limit 4", got)
	}
	// The most recently used survive.
	if n, _ := g.Check("9", a); n != 2 {
		t.Errorf("thread 9's count = %d, want 2", n)
	}
	if n, _ := g.Check("0", a); n != 1 {
		t.Errorf("thread 0's count = %d, want 1 (forgotten)", n)
	}
	if got := g.Len(); got != 4 {
		t.Errorf("threads remembered = %d, want 4", got)
	}
	g = New(&Options{Threshold: 1})
	calls := make([]Call, maxAllowed+1)
	for i := range calls {
		calls[i] = Call{Tool: "t", Args: [32]byte{byte(i)}}
		g.Check("9", calls[i])
		g.Allow("9", calls[i])
		g.Allow("9", calls[i]) // twice is once
	}
	g.Allow("absent", a) // no thread, nothing to allow
	if g.Len() != 1 {
		t.Errorf("Allow of an unknown thread made it known")
	}
	for i, c := range []Call{calls[0], calls[maxAllowed]} {
		g.Check("9", c)
		_, act := g.Check("9", c)
		if want := i == 0; act != want {
			t.Errorf("the repeat of allowed call %d: act = %v, want %v (at most %d allowed, the oldest forgotten)", i, act, want, maxAllowed)
		}
	}
}

// TestGuardConcurrent: of identical calls checked at once in one thread,
// exactly the threshold are let through.
func TestGuardConcurrent(t *testing.T) {
	const n, threshold = 40, 5
	g := New(&Options{Threshold: threshold})
	var mu sync.Mutex // guards through
	through := 0
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if _, act := g.Check("c", a); !act {
				mu.Lock()
				through++
				mu.Unlock()
				g.Done("c", a, sha256.Sum256([]byte("x")))
			}
		})
	}
	wg.Wait()
	if through != threshold {
		t.Errorf("%d concurrent identical calls: %d let through, want the threshold, %d", n, through, threshold)
	}
}

// TestSetOptions: a new threshold applies to a thread's streak as it
// stands, and the notice says it; a lowered MaxThreads is kept from the
// next new thread on.
func TestSetOptions(t *testing.T) {
	g := New(&Options{Threshold: 5})
	res := sha256.Sum256([]byte("same"))
	for i := 1; i <= 3; i++ {
		if n, act := g.Check("x", a); n != i || act {
			t.Fatalf("call %d under threshold 5: count %d, act %v", i, n, act)
		}
		g.Done("x", a, res)
	}
	g.SetOptions(&Options{Threshold: 2, MaxThreads: 2})
	if n, act := g.Check("x", a); n != 4 || !act {
		t.Errorf("call 4 after the threshold went to 2: count %d, act %v, want 4, true", n, act)
	}
	if got := g.Notice("t", 4); !strings.Contains(got, "the last 2 returned") {
		t.Errorf("Notice = %q, want it to name the new threshold 2", got)
	}
	g.Check("y", a)
	g.Check("z", a)
	if got := g.Len(); got != 2 {
		t.Errorf("threads remembered = %d, want the new MaxThreads 2", got)
	}
	g.SetOptions(nil)
	if got := g.Notice("t", 1); !strings.Contains(got, fmt.Sprintf("the last %d returned", DefaultThreshold)) {
		t.Errorf("Notice after SetOptions(nil) = %q, want the default threshold", got)
	}
}

func TestNotice(t *testing.T) {
	got := New(nil).Notice("status", 7)
	want := `loop guard: this is call 7 in a row of tool "status" with the same arguments, and the last 3 returned the same result`
	if got != want {
		t.Errorf("Notice(status, 7) = %q, want %q", got, want)
	}
}

func TestDigest(t *testing.T) {
	sum := func(parts ...string) [32]byte {
		var d Digest
		for _, p := range parts {
			d.Add(p)
		}
		return d.Sum()
	}
	if sum("ab", "c") == sum("a", "bc") || sum("ab") == sum("a", "b") || sum("") == sum() || sum("", "") == sum("") {
		t.Error("unlike sequences of parts hash alike")
	}
	if sum("a", "b") != sum("a", "b") {
		t.Error("one sequence hashes unlike twice")
	}
	var d Digest
	d.AddBytes([]byte("ab"))
	d.Add("c")
	if d.Sum() != sum("ab", "c") {
		t.Error("AddBytes and Add of the same part hash unlike")
	}
	var zero Digest
	if zero.Sum() != sha256.Sum256(nil) {
		t.Error("the zero Digest's Sum is not the hash of nothing")
	}
	// Parts past the inline buffer stream through the hash in chunks: the
	// same bytes, so the same sum, whatever the sizes.
	long := strings.Repeat("0123456789", 1000)
	for _, parts := range [][]string{{long}, {"x", long, "y"}, {long[:500], long[500:]}, {long[:10], long, long[:600], long}} {
		var d Digest
		var flat []byte
		for _, p := range parts {
			d.Add(p)
			flat = binary.AppendUvarint(flat, uint64(len(p)))
			flat = append(flat, p...)
		}
		if got, want := d.Sum(), sha256.Sum256(flat); got != want {
			t.Errorf("Digest of parts of lengths %v = %x, want the hash of them length-prefixed, %x", lens(parts), got, want)
		}
	}
}

func lens(parts []string) []int {
	out := make([]int, len(parts))
	for i, p := range parts {
		out[i] = len(p)
	}
	return out
}

// BenchmarkDigest is the hash of a small text result, which the gateway
// computes for every tracked call.
func BenchmarkDigest(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		var d Digest
		d.Add("result")
		d.Add("false")
		d.Add("")
		d.Add("text")
		d.Add("hello world, some result text")
		d.AddBytes(nil)
		_ = d.Sum()
	}
}
