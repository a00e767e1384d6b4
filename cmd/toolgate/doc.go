// Command toolgate is an MCP gateway: one MCP endpoint in front of
// stateless and per-thread stateful Go tools, REST APIs and other MCP
// servers.
//
//	toolgate serve    [--config FILE] [--listen ADDR] [--insecure-no-auth]   streamable HTTP + SSE
//	toolgate stdio    [--config FILE]                   for Claude Desktop
//	toolgate validate [--config FILE]
//	toolgate tools    [--config FILE] [--json] [--skipped]
//	toolgate call     [--config FILE] [--thread ID] NAME [JSON]
//	toolgate agent    --provider anthropic|openai|openai-responses|gemini --model NAME [--mcp URL|--config FILE] TASK [-- STDIO-SERVER-COMMAND...]
//	toolgate version
//
// Every command also takes --log-level and --log-format. Logs go to stderr.
//
// toolgate agent runs the separate toolgate-agent binary (cmd/toolgate-agent),
// found next to toolgate's executable or in PATH, with the same arguments:
// it links the model providers' SDKs, which would cost every toolgate serve
// about 9 MiB of RSS (Go runs every linked package's init whatever the
// subcommand).
//
// The command owns what belongs to a process: flags and subcommands, the
// slog handler, signal handling ([signal.NotifyContext]) and the
// [http.Server] with its timeouts and graceful Shutdown. It holds no logic
// worth testing on its own: main only calls run(ctx, args, stdin, stdout,
// stderr), which the tests drive directly, and the rest lives in the
// packages it wires together. Of toolgate's packages it imports config,
// gateway, internal/cli (what it shares with toolgate-agent),
// internal/gcfloor (the collector's heap floor for serve and stdio) and
// registry; nothing imports it.
package main
