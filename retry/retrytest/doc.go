// Package retrytest holds test helpers for code built on package retry:
// a [Clock] that breakers and budgets read and that only the test moves.
//
// retrytest imports only the standard library, so that package retry's own
// tests can use it without an import cycle.
package retrytest
