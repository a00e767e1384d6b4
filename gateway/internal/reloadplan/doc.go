// Package reloadplan compares a reloaded configuration with the one the
// gateway serves: which sources of a section a reload adds, changes or
// removes ([Diff]), which settings only a restart applies ([Restart]),
// when the auth section's tokens and caps are live ([AuthLive]), and the
// outcome of a reload as /readyz reports it ([Status]).
//
// It builds nothing and changes nothing: it does not know the registry,
// the upstreams' processes, the fronts or how a source is built and
// served. The gateway builds what the comparison names and applies it
// (gateway/apply.go).
package reloadplan
