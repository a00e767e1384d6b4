// Package builtin owns toolgate's opt-in demonstration tools: calc,
// clock_now, scratchpad and sleep. They are registered only when the
// config's builtin list names them, through a [Registrar] (in practice the
// gateway's public embedding API).
//
// builtin imports only the standard library and toolgate's registry,
// executors and retry packages. Only internal/cli (the commands'
// shared helpers) and bench import it.
package builtin
