package retry

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// windowBuckets is how many buckets a sliding window has: it forgets its
// oldest tenth at a time, so it covers between 90% and 100% of its span.
const windowBuckets = 10

// window counts two kinds of event over a sliding span of time, in
// windowBuckets buckets. It is not safe for concurrent use; its owner
// locks it.
type window struct {
	width  time.Duration // of one bucket; positive
	origin time.Time     // bucket 0 starts here
	slots  [windowBuckets]windowSlot
}

// windowSlot is one bucket: which period it counts (its epoch) and its
// counts of the two kinds.
type windowSlot struct {
	epoch int64
	n     [2]int
}

// newWindow returns an empty window spanning span, starting at origin.
func newWindow(span time.Duration, origin time.Time) window {
	return window{width: max(span/windowBuckets, 1), origin: origin}
}

// epoch returns the number of the bucket period t falls in.
func (w *window) epoch(t time.Time) int64 {
	d := t.Sub(w.origin)
	e := int64(d / w.width)
	if d < 0 && d%w.width != 0 {
		e-- // floor, for a clock that went back before origin
	}
	return e
}

// add counts one event of kind k (0 or 1) at t.
func (w *window) add(t time.Time, k int) {
	e := w.epoch(t)
	s := &w.slots[(e%windowBuckets+windowBuckets)%windowBuckets]
	if s.epoch != e {
		*s = windowSlot{epoch: e}
	}
	s.n[k]++
}

// sums returns the counts of both kinds over the span ending at t.
func (w *window) sums(t time.Time) (n0, n1 int) {
	e := w.epoch(t)
	for _, s := range w.slots {
		if s.epoch <= e && s.epoch > e-windowBuckets {
			n0 += s.n[0]
			n1 += s.n[1]
		}
	}
	return n0, n1
}

// reset forgets every event.
func (w *window) reset() { w.slots = [windowBuckets]windowSlot{} }

// fmtDuration formats d for a message: rounded to the millisecond below a
// second, to the hundredth above, and without Go's trailing "0s" on whole
// minutes ("1m", not "1m0s").
func fmtDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Millisecond:
		return d.String()
	case d < time.Second:
		d = d.Round(time.Millisecond)
	default:
		d = d.Round(10 * time.Millisecond)
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
		if strings.HasSuffix(s, "h0m") {
			s = s[:len(s)-2]
		}
	}
	return s
}

// fmtSecondsUp formats d rounded up to a whole second, at least 1s: a
// "next probe in 12s" must not promise a probe sooner than it comes.
func fmtSecondsUp(d time.Duration) string {
	return fmtDuration(max(time.Duration(math.Ceil(d.Seconds()))*time.Second, time.Second))
}

// fmtPercent formats a ratio as a percentage: 0.2 is "20%".
func fmtPercent(r float64) string {
	return fmt.Sprintf("%.4g%%", r*100)
}

// pluralize returns "1 retry" or "3 retries".
func pluralize(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
