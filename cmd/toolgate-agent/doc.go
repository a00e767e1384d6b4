// Command toolgate-agent is toolgate's agent loop: a model works on a task
// through the tools of an in-process gateway, an MCP endpoint or a stdio
// MCP server (docs/agent.md).
//
//	toolgate-agent --provider anthropic|openai|openai-responses|gemini --model NAME [--mcp URL|--config FILE] TASK [-- STDIO-SERVER-COMMAND...]
//
// `toolgate agent ARGS...` runs it: toolgate looks for toolgate-agent next
// to its own executable, then in PATH, and replaces itself with it. It is
// a binary of its own because it links package agent and, with it, the
// Anthropic, OpenAI and Google Gen AI SDKs: Go runs every linked package's init whatever
// the subcommand, so in the toolgate binary they cost every `toolgate
// serve` about 9 MiB of RSS. Its flags, messages and exit codes are those
// of `toolgate agent`.
//
// Of toolgate's packages it imports agent and internal/cli; nothing
// imports it.
package main
