package config

import (
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"reflect"
	"time"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// EmbeddedSource is the [Config.Source] and [PosError.File] of the embedded
// default configuration.
const EmbeddedSource = "(embedded default)"

// DefaultFile is the file [Resolve] looks for in the working directory when
// no path is given.
const DefaultFile = "toolgate.yaml"

//go:embed default.yaml
var defaultYAML []byte

// Options tunes loading. A nil *Options is the same as the zero value.
type Options struct {
	// LookupEnv resolves ${NAME}. Nil means [os.LookupEnv].
	LookupEnv func(string) (string, bool)
	// Builtins lists the valid names for the builtin key. Nil means names
	// are not checked (only for duplicates).
	Builtins []string
}

func (o *Options) lookup() func(string) (string, bool) {
	if o == nil || o.LookupEnv == nil {
		return os.LookupEnv
	}
	return o.LookupEnv
}

// defaults returns the configuration an empty file gives. Loading decodes
// over it, so a key written in the file, even `sse: false`, wins.
func defaults() Config {
	return Config{
		Server: Server{
			Listen:         "127.0.0.1:8080",
			MCPPath:        "/mcp",
			SSE:            true,
			Watch:          true,
			MaxBodyBytes:   4 << 20,
			ReadTimeout:    Duration(30 * time.Second),
			ShutdownGrace:  Duration(20 * time.Second),
			SessionIdleTTL: Duration(30 * time.Minute),
			MaxSessions:    10000,
		},
		Defaults: Defaults{
			Timeout:               Duration(30 * time.Second),
			Retry:                 defaultRetry(),
			RetryBudget:           0.2,
			CircuitBreaker:        defaultBreaker(),
			MaxParallel:           64,
			MaxParallelPerSession: 16,
			MaxQueue:              256,
		},
		Threads: Threads{IdleTTL: Duration(30 * time.Minute), MaxInstances: 1000},
		Guards:  Guards{NameRepair: true, Loop: LoopGuard{Threshold: 3, Action: LoopBlock}},
		Log:     Log{Level: "info", Format: "text"},
		Auth:    Auth{MaxSessions: defaultPrincipalSessions},
	}
}

// Parse loads a configuration from data: it parses the YAML, expands
// ${NAME} and ${NAME:-default} in scalar values ($$ is a literal $), decodes
// strictly over the defaults, completes the rest, openapi and upstreams
// sections (see [RESTTool], [OpenAPISource] and [Upstream]) and validates the
// result. name is used in error positions and as [Config.Source], and its
// directory is where a relative openapi spec path or upstream cwd is
// resolved from. The values the environment
// supplied are kept for [Config.Secrets].
//
// On failure the error is an [errors.Join] of *[PosError], one per problem,
// sorted by position; the *Config is nil. No error text contains a value
// that came from the environment.
func Parse(name string, data []byte, opts *Options) (*Config, error) {
	d := newDecoder(name, opts.lookup())
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, d.syntaxError(err)
	}
	cfg := defaults()
	var body ast.Node
	for _, doc := range f.Docs {
		if doc == nil || doc.Body == nil {
			continue
		}
		if body == nil {
			body = doc.Body
			continue
		}
		p := nodePos(doc.Body)
		if doc.Start != nil {
			p = pos{doc.Start.Position.Line, doc.Start.Position.Column}
		}
		d.errorf(p, "", "a config file holds one YAML document; remove this one and everything after it")
		break
	}
	if body != nil {
		d.decode("", body, nodePos(body), reflect.ValueOf(&cfg).Elem(), 0)
	}
	cfg.Source = name
	complete(&cfg, name, d.written)
	completeUpstreams(&cfg, name, d.written)
	completeOAuth(&cfg, name)
	completeHooks(&cfg, d.written)
	completeAuth(&cfg)
	completeAudit(&cfg, name, d.written)
	errs := append(d.errs, validate(&cfg, opts, name, d)...)
	if err := joinSorted(errs); err != nil {
		return nil, err
	}
	cfg.secrets = d.secrets
	cfg.where = positions{at: d.locate, keyAt: d.keyAt, fromEnv: d.fromEnv}
	return &cfg, nil
}

// Load reads and parses the file at path (see [Parse]). A read error names
// the path.
func Load(path string, opts *Options) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("loading config: %w", err)
	}
	return Parse(path, data, opts)
}

// Default parses the embedded default configuration (config/default.yaml),
// whose Source is [EmbeddedSource]. ${...} in it is expanded like any file's.
func Default(opts *Options) (*Config, error) {
	return Parse(EmbeddedSource, defaultYAML, opts)
}

// Resolve picks the configuration to run with: the file at path if path is
// not empty; otherwise ./toolgate.yaml ([DefaultFile]) if it exists;
// otherwise the embedded default.
func Resolve(path string, opts *Options) (*Config, error) {
	if path != "" {
		return Load(path, opts)
	}
	switch _, err := os.Stat(DefaultFile); {
	case err == nil:
		return Load(DefaultFile, opts)
	case errors.Is(err, fs.ErrNotExist):
		return Default(opts)
	default:
		return nil, fmt.Errorf("looking for %s: %w", DefaultFile, err)
	}
}
