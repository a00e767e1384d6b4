// Package registry holds the gateway's tool definitions: the four kinds of
// tool, their names and who registered them, lookup by exact name or by a
// repaired one, listing, and subscription to changes (which drive MCP's
// notifications/tools/list_changed).
//
// It knows nothing about how a tool runs and does no I/O. It imports only
// the standard library, toolgate's schemas package and internal/keypath
// (the configuration key-path syntax); it must not import
// executors, gateway, config or any third-party package.
//
// # Names
//
// A tool name follows MCP: 1 to 64 characters from A-Z a-z 0-9 _ . -
// ([ValidateName]). Models often get a name's case or separators wrong, so
// [Registry.Resolve] can repair a name: it compares names lower-cased, with
// '-' and '.' read as '_' and runs of '_' read as one. Failing that, it
// compares the tool part alone, so that a name with a missing or wrong
// namespace (read_file or git__read_file for fs__read_file) resolves
// ([Registry.ResolveRepair] says which repair found a tool). A repair is
// applied only when exactly one registered tool matches; when several do,
// the error lists them all, and when none does it suggests the closest
// names ([Suggest]).
//
// A source that serves many tools (an upstream MCP server, an OpenAPI
// document) names them <prefix>__<tool>; a prefix is at most
// [MaxPrefixLen] characters ([ValidatePrefix]), so that the tool part keeps
// room within the 64. [Filter] selects such a source's tools by their own
// names, and [FieldError] reports a problem with one field of a source's
// definition so that the gateway can show it at its place in the
// configuration file.
//
// # Changes
//
// Every successful mutation ([Registry.Add], [Registry.Remove],
// [Registry.ReplaceSource]) produces at most one [Change]. Subscribers
// ([Registry.Subscribe]) see changes one at a time, in the order the
// mutations happened, on the goroutine of a mutating call, never while the
// registry's lock is held. A subscriber may call any method of the
// registry, mutations included: a change it causes is delivered after it
// returns. When a mutation happens while another goroutine is delivering,
// that goroutine delivers it too, so the mutating call may return before
// its change has been delivered.
package registry
