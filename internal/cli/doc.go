// Package cli holds what the toolgate and toolgate-agent commands share:
// the exit error and how main reports it, the signal context, the common
// flags (--config, --log-level, --log-format), and loading a
// configuration into a gateway with its builtin tools.
//
// It exists so that the agent loop can ship as its own binary
// (cmd/toolgate-agent): Go runs the init of every linked package whatever
// the subcommand, and the model providers' SDKs that package agent links
// would cost every `toolgate serve` about 9 MiB of RSS. Only the two mains
// import it.
package cli
