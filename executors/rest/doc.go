// Package rest is the executor of REST tools: toolgate makes the HTTP call
// described by a [Spec] (written in YAML, or derived from an OpenAPI 3
// document by package openapi) through go-retryablehttp, with toolgate's
// own retry decision ([retry.Plan.Decide], from the call's
// [executors.Call.Retry]), classification of failures, safe templating
// and result mapping. [Executor.Add] compiles a Spec once and returns the
// executor of that one tool.
//
// rest is the only toolgate package that imports go-retryablehttp; of
// toolgate's packages it imports only executors, registry and retry. It
// must not import gateway, config, mcp-go or prometheus: gateway turns
// config into Specs and counts what the [Options] hooks report.
package rest
