// Package retry owns toolgate's error taxonomy and its resilience
// primitives. The taxonomy: the [Class] of every failure, the [Error] type
// that carries it, and [Classify], which maps any error to a class. The
// primitives, built on the classes:
//
//   - [Policy], with its full-jitter [Policy.Backoff] and [ParseRetryAfter];
//   - [Breaker], a circuit breaker per backend, and [Budget], a retry
//     budget per backend, grouped as a [Backend] and kept in [Backends];
//   - [Plan.Decide], the one retry decision, and [Run], the retry loop of
//     every tool kind but REST (whose HTTP client runs its own loop and
//     asks Plan.Decide from its CheckRetry); [Annotate] says in a failure
//     why it was not retried.
//
// retry imports only the standard library: it must not import
// go-retryablehttp or any toolgate package.
package retry
