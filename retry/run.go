package retry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Plan is how one call is retried: its policy, whether repeating it is
// safe, and the backend whose breaker and budget it goes through. It is a
// value; the zero Plan retries nothing (the call is not idempotent).
type Plan struct {
	// Policy bounds the attempts and the waits, and lists the classes
	// that may be retried.
	Policy Policy
	// Idempotent says repeating the call is safe. Only idempotent calls
	// are retried.
	Idempotent bool
	// Backend is what the call goes to. Nil means no breaker and no
	// budget.
	Backend *Backend
	// Subject names the call in messages, e.g. "the model call". Empty
	// means the tool named Tool, or else "the call".
	Subject string
	// Tool is the name of the tool the call runs, named in messages as
	// `tool "weather__get"` when Subject is empty. Plans shared by the
	// tools of a source leave it empty; each call sets it.
	Tool string
	// Rand returns values in [0, 1) for the backoff's jitter. Nil means
	// math/rand/v2's Float64.
	Rand func() float64
}

// subject returns p.Subject, or the tool p.Tool, or "the call".
func (p Plan) subject() string {
	switch {
	case p.Subject != "":
		return p.Subject
	case p.Tool != "":
		return fmt.Sprintf("tool %q", p.Tool)
	}
	return "the call"
}

// Decide says whether to retry after attempt number attempt (from 1)
// failed with err, and how long to wait first. It is the one retry
// decision: [Run] asks it, and so does the REST executor from its HTTP
// client's CheckRetry.
//
// A failure is retried only if, in this order: it is not marked
// [Permanent] and its [Classify] class is one the policy retries
// ([Policy.Retries]); ctx is not done; attempts remain;
// the call is idempotent; the wait ([Policy.Backoff], honouring
// [RetryAfterOf] up to MaxBackoff) ends before ctx's deadline; the
// backend's breaker would admit the retry when the wait ends; and the
// backend's budget grants a retry ([Backend.TryRetry], asked last so that
// no retry is spent on one that will not happen). A granted retry must be
// made.
//
// When Decide says no to a failure whose class the policy retries, reason
// says why, for [Annotate]: "not retried: tool "x" is not idempotent (…)",
// "gave up after 3 attempts". For any other failure (a permanent one, or
// nil) reason is empty: the error stands as it is.
func (p Plan) Decide(ctx context.Context, attempt int, err error) (wait time.Duration, ok bool, reason string) {
	if err == nil || errors.Is(err, ErrPermanent) || !p.Policy.Retries(Classify(err)) {
		return 0, false, ""
	}
	switch ctxErr := ctx.Err(); {
	case errors.Is(ctxErr, context.DeadlineExceeded):
		return 0, false, "not retried: the call's deadline has passed"
	case ctxErr != nil:
		return 0, false, "not retried: the call was cancelled"
	}
	if n := p.Policy.attempts(); attempt >= n {
		if n == 1 {
			return 0, false, "not retried: the retry policy of " + p.subject() + " allows only 1 attempt"
		}
		return 0, false, gaveUp + pluralize(attempt, "attempt", "attempts")
	}
	if !p.Idempotent {
		return 0, false, "not retried: " + p.subject() + " is not idempotent (mark it idempotent: true if repeating it is safe)"
	}
	wait = p.Policy.Backoff(attempt, RetryAfterOf(err), p.Rand)
	if deadline, has := ctx.Deadline(); has {
		if left := time.Until(deadline); wait >= left {
			return 0, false, fmt.Sprintf("not retried: waiting %s would pass the call's deadline (%s left)", fmtDuration(wait), fmtDuration(left))
		}
	}
	if why := p.Backend.Breaker().refuses(wait); why != "" {
		return 0, false, "not retried: " + why
	}
	if !p.Backend.TryRetry() {
		return 0, false, fmt.Sprintf("not retried: the retry budget of backend %q is spent (%s)", p.Backend.Name(), p.Backend.Budget().explain())
	}
	return wait, true, ""
}

// gaveUp begins [Plan.Decide]'s reason when the attempts ran out.
const gaveUp = "gave up after "

// GaveUp reports whether reason, one from [Plan.Decide], says only that
// the attempts ran out: a caller whose message already gives the count
// (the REST executor's "after 3 attempts") leaves it out rather than say
// it twice.
func GaveUp(reason string) bool { return strings.HasPrefix(reason, gaveUp) }

// Annotate returns err with "; " and reason appended to its message,
// keeping its class, RetryAfter and Status, and err in its chain
// (errors.Is and errors.As still find what they found). reason is one from
// [Plan.Decide]. An empty reason or a nil err returns err unchanged.
func Annotate(err error, reason string) error {
	if err == nil || reason == "" {
		return err
	}
	return &Error{Class: Classify(err), Msg: err.Error() + "; " + reason, RetryAfter: RetryAfterOf(err), Status: statusOf(err), Err: err}
}

// Run calls fn until it succeeds or [Plan.Decide] says stop, and returns
// how many attempts it made and the final error. It is the retry loop of
// every tool kind but REST.
//
// fn receives ctx and the attempt number, from 1. Every attempt is first
// admitted by p.Backend ([Backend.Admit]) and its outcome recorded. When
// the breaker refuses the first attempt, Run returns 0 and the refusal;
// when it refuses a retry, Run returns the last failure annotated with the
// refusal. A failure Decide does not retry is returned annotated with
// Decide's reason ([Annotate]), or unchanged when its class is not one the
// policy retries. When ctx is done during a wait, Run returns at once with
// an error that wraps ctx's error (so it classifies as cancelled or
// timeout) and quotes the last failure.
func Run(ctx context.Context, p Plan, fn func(ctx context.Context, attempt int) error) (attempts int, err error) {
	var last error
	var permit Permit
	// A panic in fn skips Record: releasing the attempt's permit keeps a
	// probe from holding its breaker half-open for good. After Record,
	// Release does nothing.
	defer permit.Release()
	for attempt := 1; ; attempt++ {
		var refused error
		permit, refused = p.Backend.Admit(attempt)
		if refused != nil {
			if last == nil {
				return 0, refused
			}
			return attempt - 1, Annotate(last, "not retried: "+refused.Error())
		}
		err := fn(ctx, attempt)
		permit.Record(err)
		if err == nil {
			return attempt, nil
		}
		last = err
		wait, ok, reason := p.Decide(ctx, attempt, err)
		if !ok {
			return attempt, Annotate(err, reason)
		}
		if err := sleep(ctx, wait); err != nil {
			return attempt, fmt.Errorf("%w while waiting to retry (last failure: %v)", err, last)
		}
	}
}

// sleep waits for d, or until ctx is done and returns ctx's error.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}
