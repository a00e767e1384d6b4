// Package loopguard is toolgate's loop guard, the one check behind both
// the gateway's guards.loop step and the agent Runner's LoopGuard: it
// notices a thread (a gateway thread, an agent run) that repeats itself
// and says when its caller should act. What acting means (block, warn,
// ask the user, stop the run) is the caller's.
//
// # The rule
//
// A thread's streak is its calls in a row of one tool with one argument
// hash ([canonjson.ArgsSum]: key order, spacing and number spelling do
// not count) that returned one result (a hash of what the model saw,
// built with a [Digest]). The threshold is how many calls a streak may
// hold: the guard acts on every further identical call, from call
// threshold+1 on. With the default, 3, a thread may make a call and read
// the same answer three times; the fourth identical call is the loop.
//
// Why results count (issue 25): a call repeated with the same arguments
// is not a loop while its answer changes. A clock, a job's status or a
// queue's length is polled with the same arguments on purpose, and each
// answer is news; the earlier rule (arguments only) refused the fourth
// clock_now {} of a session with "repeating it will not give a different
// result", which was false. So a call that returns a result unlike the
// streak's starts a new streak, of one call, with that result: a status
// answering pending, running, running, done, done, done is polled freely
// until it has given one answer three times. An answer that never
// changes is still stopped: a model polling an unchanged answer without
// end is what a loop looks like, and a tool meant to be waited on that
// way is given the action warn or off for itself (guards.loop.tools).
//
// Why the call after the threshold: guards.loop.threshold has always been
// documented as how many identical calls a thread may make (docs/configuration.md,
// config.LoopGuard, config.example.yaml), and its minimum, 1, means
// something only so: acting on the threshold-th call would refuse every
// first call at threshold 1. The agent used to act on the threshold-th
// call; it now counts as the gateway does, so one threshold means one
// thing in both. The seed's check (three identical calls) is the streak
// the guard detects; it acts on the next attempt, the first one it can
// refuse having seen the results repeat.
//
// # Order of events
//
// [Guard.Check] runs before a call and [Guard.Done] after it, with the
// result's hash. A call in flight counts as returning the streak's result
// until its Done says otherwise, so of concurrent identical calls in one
// thread at most the threshold run. A call the guard refuses counts too
// (and has no Done): the next identical call is refused as well. A call
// of another tool, or with other arguments, starts a new streak; a Done
// for a call that is no longer the thread's streak changes nothing.
//
// loopguard imports only internal/canonjson and the standard library;
// the gateway and the agent import it.
package loopguard
