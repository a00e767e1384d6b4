// Package gatewaymetrics holds the gateway's Prometheus collectors
// (docs/metrics.md): the tool call counters and histograms, sessions,
// name repairs, REST responses, retries, circuits, upstreams, reloads,
// endpoints, the result cache, the queue, and the build, Go and process
// collectors, in a registry of its own (never the default registerer),
// so that many gateways can live in one process.
//
// It records what the gateway tells it and reads, at scrape time, what
// [Sources] hands it; it does not know the gateway, its pipeline, its
// limiter or its thread pool. Labels come from small fixed sets: tool
// names are registered names only, never what a client typed, and never
// threads or sessions.
package gatewaymetrics
