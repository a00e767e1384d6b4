// Package agent drives a language model through tools: the other half of
// what toolgate is for. A host program hands it a model ([Provider]), a set
// of tools ([Toolset]) and a task, and agent runs the tool-calling loop
// correctly, in parallel and under control.
//
// It has four layers, each usable on its own:
//
//   - Messages ([Message], [Part], [ToolCall], [ToolResult]): the
//     provider-neutral conversation, converted losslessly to and from each
//     provider's wire format for what both sides support.
//   - [Generate]: one streamed model call. Fragments are merged into parts
//     as they arrive; [GenerateOptions.OnToolCall] fires the moment a tool
//     call's arguments are whole, before the stream ends; an [Events]
//     emitter gives UIs fine-grained stream events.
//   - [Step]: one Generate whose tool calls start executing as soon as they
//     are complete, in parallel and bounded, while the model still streams.
//     Tool failures become isError results; they never abort the step.
//   - [Runner]: loops steps until the model stops calling tools, with an
//     iteration cap, a consecutive-failure stop, a loop guard, tool-name
//     repair, a one-time auto-enhance follow-up, a PrepareStep hook,
//     compaction, and params that may change between steps.
//
// Providers: [Anthropic] (the Messages API through the official
// anthropic-sdk-go), [OpenAI] (OpenAI-compatible Chat Completions through
// the official openai-go), [OpenAIResponses] (OpenAI's Responses API, the
// same SDK) and [Gemini] (the Gemini API through Google's official genai). Toolsets: [GatewayToolset] (an in-process
// gateway, every kind of tool through the whole pipeline) and [MCPToolset]
// (any MCP endpoint, by URL or stdio command, through mcp-go's client).
//
// agent imports gateway (its public API), executors (result types),
// registry (name repair) and retry (error classes and the retry loop), and
// is the only package that imports the model SDKs; nothing in toolgate
// imports agent except cmd/toolgate-agent (its own binary, so that
// toolgate itself links no SDK).
package agent
