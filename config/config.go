package config

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/goccy/go-yaml"
)

// Config is a whole toolgate configuration file.
type Config struct {
	Server   Server   `yaml:"server"`
	Defaults Defaults `yaml:"defaults"`
	Threads  Threads  `yaml:"threads"`
	Guards   Guards   `yaml:"guards"`
	Log      Log      `yaml:"log"`
	// Builtin names the demonstration tools to switch on.
	Builtin []string `yaml:"builtin"`
	// Rest lists REST tools written out in the file. Default none.
	Rest []RESTTool `yaml:"rest"`
	// OpenAPI lists OpenAPI 3 documents whose operations become REST
	// tools. Default none.
	OpenAPI []OpenAPISource `yaml:"openapi"`
	// Upstreams lists other MCP servers whose tools toolgate serves as
	// <name>__<tool>. Default none.
	Upstreams []Upstream `yaml:"upstreams"`
	// BatchTool adds the meta-tool toolgate_batch, which runs several
	// calls in parallel through the whole pipeline and returns every
	// outcome in order. Default false.
	BatchTool bool `yaml:"batch_tool"`
	// Hooks run, in order, around the calls they match: redact, truncate,
	// deny_args and webhook. Default none.
	Hooks []Hook `yaml:"hooks"`
	// Auth configures inbound authentication, per-principal tool
	// permissions and limits. Default none: no authentication.
	Auth Auth `yaml:"auth"`
	// Cluster makes toolgate one replica of several behind a load
	// balancer. Default none: one replica.
	Cluster *Cluster `yaml:"cluster"`
	// TokenStore is where the OAuth tokens of upstreams are kept,
	// encrypted. Used only when an upstream has oauth.
	TokenStore TokenStore `yaml:"token_store"`
	// Audit writes every tool call as one JSON line to a file or stdout.
	// Default none.
	Audit *Audit `yaml:"audit"`
	// Telemetry sends OpenTelemetry traces to an OTLP collector. Default
	// none: no tracing unless OTEL_EXPORTER_OTLP_ENDPOINT is set.
	Telemetry *Telemetry `yaml:"telemetry"`
	// Endpoints are virtual MCP servers, each a bundle of the tools
	// (docs/endpoints.md). Default none: one endpoint serving every tool.
	Endpoints []Endpoint `yaml:"endpoints"`
	// Catalog is how the endpoint lists the gateway's tools as a whole:
	// with mode search, tools/list shows toolgate_search,
	// toolgate_describe and toolgate_call, and the tools Always names
	// (docs/catalog.md). Default: every tool is listed.
	Catalog GatewayCatalog `yaml:"catalog"`

	// Source is where the configuration came from: a file path, or
	// "(embedded default)". Set by the loader.
	Source string `yaml:"-"`

	// secrets holds the values the environment supplied to ${...}, in the
	// order first used, without duplicates. Set by [Parse]; see
	// [Config.Secrets].
	secrets []string
	// where holds the positions of every value; set by [Parse], for
	// [Config.Locate].
	where positions
}

// Secrets returns every non-empty value the environment supplied to a
// ${NAME} or ${NAME:-default} reference anywhere in the file, without
// duplicates, in the order first used. Executors scrub them from results,
// errors and logs. A default written after :- is not included: it is in the
// file for anyone to read. A [Config] built in Go has none.
//
// The values are returned whatever key they went to, so a short or common
// value (an environment-supplied log level, say) will be scrubbed wherever
// it appears. The slice is a copy; the caller may keep or change it.
func (c *Config) Secrets() []string { return slices.Clone(c.secrets) }

// Server configures the MCP endpoint and its HTTP server.
type Server struct {
	// Listen is the address `toolgate serve` listens on. Default 127.0.0.1:8080.
	Listen string `yaml:"listen"`
	// MCPPath is the path of the streamable HTTP endpoint. Default /mcp.
	MCPPath string `yaml:"mcp_path"`
	// SSE serves the legacy SSE transport at /sse and /message. Default true.
	SSE bool `yaml:"sse"`
	// MaxBodyBytes caps an HTTP request body. Default 4 MiB.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// ReadTimeout bounds reading one HTTP request body; a body not received
	// in time gets 408. GET and SSE streams are not affected. Default 30s.
	ReadTimeout Duration `yaml:"read_timeout"`
	// ShutdownGrace is how long in-flight calls may run after SIGTERM. Default 20s.
	ShutdownGrace Duration `yaml:"shutdown_grace"`
	// SessionIdleTTL ends an HTTP session after this long without a request.
	// Default 30m.
	SessionIdleTTL Duration `yaml:"session_idle_ttl"`
	// MaxSessions caps the MCP sessions open at once, over streamable HTTP,
	// SSE and stdio; past it a new session gets 503 with Retry-After, and
	// open ones keep working. Default 10000.
	MaxSessions int `yaml:"max_sessions"`
	// Watch reloads the configuration when its file, or an OpenAPI
	// document it names by path, changes (SIGHUP reloads it in any case).
	// Taken at start; changing it needs a restart. Default true.
	Watch bool `yaml:"watch"`
	// AllowedOrigins lists the browser origins (scheme://host[:port]) allowed
	// to call the MCP endpoints cross-origin: their CORS preflights are
	// answered and the responses to them are readable. Other origins'
	// cross-origin requests get 403. Default none.
	AllowedOrigins []string `yaml:"allowed_origins"`
}

// Defaults apply to every tool unless the tool overrides them.
type Defaults struct {
	// Timeout bounds one tool call. Default 30s.
	Timeout Duration `yaml:"timeout"`
	// Retry is the retry policy of tools that set none (REST tools, upstreams),
	// and fills the fields a tool's own retry leaves out. Default 3
	// attempts, 100ms initial backoff, 5s maximum backoff, on network,
	// timeout, unavailable and rate_limited failures.
	Retry Retry `yaml:"retry"`
	// RetryBudget caps the retries sent to one backend (a REST host or an
	// upstream) at this fraction of its first attempts over the last 10s,
	// plus 10 retries per 10s so that a quiet backend can still retry.
	// From 0 to 10. Default 0.2 (retries add at most 20%).
	RetryBudget float64 `yaml:"retry_budget"`
	// CircuitBreaker stops calls to a failing backend for a while.
	CircuitBreaker CircuitBreaker `yaml:"circuit_breaker"`
	// MaxParallel caps the tool calls running at once, over all sessions.
	// From 1 to 100000. Default 64.
	MaxParallel int `yaml:"max_parallel"`
	// MaxParallelPerSession caps the calls of one session (or stdio, or
	// one explicit thread) running at once. From 1 to max_parallel.
	// Default 16.
	MaxParallelPerSession int `yaml:"max_parallel_per_session"`
	// MaxParallelPerPrincipal is one principal's share of max_parallel:
	// the most calls of one authenticated principal running at once, so
	// that one principal flooding toolgate leaves the other slots to the
	// others (issue 31). From 1 to max_parallel; 0 (the default) means
	// half of max_parallel, rounded up. Without authentication every
	// call is the same client's, and only max_parallel and
	// max_parallel_per_session apply.
	MaxParallelPerPrincipal int `yaml:"max_parallel_per_principal"`
	// MaxQueue caps the calls waiting for a free slot of max_parallel, and
	// separately the calls waiting for a slot of their principal's share
	// and those waiting for a slot of their session's
	// max_parallel_per_session (at most half of MaxQueue for one
	// principal or session, so one that floods toolgate waits on its own
	// and leaves room for others); past it a call fails with class
	// rate_limited. From 0 to 1000000. Default 256.
	MaxQueue int `yaml:"max_queue"`
	// Catalog is how openapi sources and upstreams that set no catalog
	// of their own, and the rest tools as a group, list their tools:
	// tools (each tool) or search (three meta-tools per source, and
	// rest__search, rest__describe and rest__call for the rest tools;
	// see [OpenAPISource.Catalog], docs/catalog.md). Default (empty)
	// tools.
	Catalog Catalog `yaml:"catalog"`
}

// CircuitBreaker configures the circuit breaker of every backend (a REST
// host or an upstream). It opens after Failures consecutive failures of
// class network, timeout or unavailable, or when at least MinCalls calls
// were made over Window and a FailureRatio of them failed so; while open
// calls fail at once with class unavailable; after OpenFor one probe call
// is let through, and its outcome closes or reopens the breaker.
type CircuitBreaker struct {
	// Enabled switches breakers on. Default true.
	Enabled bool `yaml:"enabled"`
	// Failures is how many consecutive failures open the breaker. From 1
	// to 1000. Default 5.
	Failures int `yaml:"failures"`
	// FailureRatio opens the breaker when this fraction of the calls over
	// Window failed. From 0 (off) to 1. Default 0.5.
	FailureRatio float64 `yaml:"failure_ratio"`
	// MinCalls is the fewest calls over Window for FailureRatio to apply.
	// Positive. Default 20.
	MinCalls int `yaml:"min_calls"`
	// Window is the period FailureRatio looks at. Positive. Default 30s.
	Window Duration `yaml:"window"`
	// OpenFor is how long the breaker stays open before a probe. Positive.
	// Default 30s.
	OpenFor Duration `yaml:"open_for"`
}

// Threads configures per-thread instances of stateful tools.
type Threads struct {
	// IdleTTL closes an instance unused for this long. Default 30m.
	IdleTTL Duration `yaml:"idle_ttl"`
	// MaxInstances caps live instances across all threads. Default 1000.
	MaxInstances int `yaml:"max_instances"`
	// MaxBytesPerPrincipal caps the bytes one principal's instances may
	// hold, as their tools bound them (executors.Factory.MaxBytes: the
	// scratchpad declares its 1 MiB of notes): past it the principal's
	// least recently used idle instance of such a tool is evicted, and
	// with none idle the call fails with class rate_limited (issue 31).
	// Without authentication every client is one principal, so this
	// bounds them all together. At least 1048576 (1 MiB); 0 (the
	// default) means 67108864 (64 MiB).
	MaxBytesPerPrincipal int64 `yaml:"max_bytes_per_principal"`
}

// Guards configures the call pipeline's protections.
type Guards struct {
	// NameRepair resolves a tool name that differs only in case (or
	// separator) to the real tool. Default true.
	NameRepair bool `yaml:"name_repair"`
	// Loop stops a thread that repeats one call (a "doom loop").
	Loop LoopGuard `yaml:"loop"`
}

// LoopGuard configures the loop guard (internal/loopguard has the rule):
// when a thread has called the same tool with the same arguments
// (compared as canonical JSON) Threshold times in a row and each call
// returned the same result, the next identical call gets Action. A call
// that returns another result, and any other call in the thread, starts
// the count again: a clock or a status polled with the same arguments is
// not a loop while its answer changes.
type LoopGuard struct {
	// Threshold is how many identical calls in a row, each returning the
	// same result, a thread may make before the guard acts on the next
	// one (with 3, the fourth). At least 1. Default 3.
	Threshold int `yaml:"threshold"`
	// Action is what happens to the call past Threshold. Default block.
	Action LoopAction `yaml:"action"`
	// Tools overrides Action for single tools, keyed by the tool's exact
	// registered name (no globs, no repair: <prefix>__<tool> for an
	// upstream's tool). Default none.
	Tools map[string]LoopAction `yaml:"tools"`
}

// ActionFor returns the action of the tool named tool: its entry in
// Tools, else Action.
func (l LoopGuard) ActionFor(tool string) LoopAction {
	if a, ok := l.Tools[tool]; ok {
		return a
	}
	return l.Action
}

// LoopAction is what the loop guard does with a repeated call.
type LoopAction string

// The loop guard's actions.
const (
	// LoopBlock answers the call, without running it, with an error of
	// class validation that tells the model to change its approach.
	LoopBlock LoopAction = "block"
	// LoopWarn runs the call and appends a warning to its result.
	LoopWarn LoopAction = "warn"
	// LoopAsk asks the user, through MCP elicitation, whether to run the
	// call; it blocks when the client cannot be asked.
	LoopAsk LoopAction = "ask"
	// LoopOff switches the guard off.
	LoopOff LoopAction = "off"
)

// loopActions lists the valid [LoopAction] values, for error messages.
var loopActions = []LoopAction{LoopBlock, LoopWarn, LoopAsk, LoopOff}

// Valid reports whether a is one of the loop guard's actions.
func (a LoopAction) Valid() bool { return slices.Contains(loopActions, a) }

// Log configures logging; command-line flags override it.
type Log struct {
	// Level is debug, info, warn or error. Default info.
	Level string `yaml:"level"`
	// Format is text or json. Default text.
	Format string `yaml:"format"`
}

// Duration is a time.Duration written in YAML as a string like "30s" or "1m30s"
// (anything [time.ParseDuration] accepts). A bare number is rejected: "30"
// could mean seconds or nanoseconds, so the file has to say.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats d like [time.Duration.String], e.g. "1m30s".
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalYAML writes d as a duration string, so a marshalled [Config] loads
// back unchanged.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// UnmarshalYAML reads a duration string such as "30s". It exists for callers
// that decode a [Duration] with goccy/go-yaml directly; [Parse] has its own
// decoder, which reports positions and hides values that came from the
// environment.
func (d *Duration) UnmarshalYAML(b []byte) error {
	var v any
	if err := yaml.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("decoding duration: %w", err)
	}
	s, ok := v.(string)
	if !ok {
		return errDurationUnit
	}
	p, err := parseDuration(s)
	if err != nil {
		return err
	}
	*d = p
	return nil
}

// errDurationUnit is the advice for a duration written without a unit.
var errDurationUnit = errors.New("write a duration with a unit, like 30s")

// parseDuration parses s with [time.ParseDuration]. Its error never contains
// s, which may have come from the environment.
func parseDuration(s string) (Duration, error) {
	p, err := time.ParseDuration(s)
	if err != nil {
		return 0, errDurationUnit
	}
	return Duration(p), nil
}
