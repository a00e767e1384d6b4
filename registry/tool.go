package registry

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/toolgate/toolgate/schemas"
)

// Kind says who provides a tool's behaviour. The set is closed.
type Kind string

// The four kinds of tool.
const (
	Stateless Kind = "stateless" // a Go function of the embedding program
	Stateful  Kind = "stateful"  // a factory of per-thread instances
	REST      Kind = "rest"      // an HTTP API described in config
	MCP       Kind = "mcp"       // a tool of an upstream MCP server
)

// Annotations are MCP's behaviour hints about a tool. A nil hint is unset.
type Annotations struct {
	Title           string
	ReadOnlyHint    *bool
	DestructiveHint *bool
	IdempotentHint  *bool
	OpenWorldHint   *bool
}

// UpstreamNameMetaKey is the key of a listed tool's _meta that holds its
// [Tool.UpstreamName].
const UpstreamNameMetaKey = "toolgate/upstream_name"

// Tool is the definition of one tool. Tools are values while being built;
// once added to a [Registry] they are shared as *Tool and must not be
// modified.
type Tool struct {
	// Name is the tool's unique MCP name: [A-Za-z0-9_.-], 1 to 64 characters.
	Name string
	// Title is an optional human-readable name.
	Title string
	// Description tells a model what the tool does.
	Description string
	// Kind is the kind of tool; required.
	Kind Kind
	// Source names who registered the tool ("builtin", "embedder",
	// "rest:<name>", "upstream:<name>"); shown in errors about duplicates
	// and by `toolgate tools`.
	Source string
	// InputSchema is the JSON Schema of the arguments object. Nil means
	// {"type":"object"}.
	InputSchema json.RawMessage
	// OutputSchema, when not nil, is the JSON Schema of structuredContent.
	OutputSchema json.RawMessage
	// Annotations are passed to clients unchanged.
	Annotations Annotations
	// Timeout bounds one call; zero means the dispatcher's default.
	Timeout time.Duration
	// Idempotent reports that repeating a call has no further effect.
	Idempotent bool
	// UpstreamName is the name the tool's source gives it, when Name had
	// to differ (too long, or characters MCP does not allow): calls use
	// it upstream, and clients see it in _meta ([UpstreamNameMetaKey]).
	UpstreamName string

	schema *lazySchema // InputSchema, compiled on first use; set by Registry.Add
}

// lazySchema is a registered tool's input schema, compiled when the tool
// is first called. Registry.Add compiles it once to refuse a schema that
// does not compile, but keeps only the bytes: a compiled schema is some
// 14 KB, and of an upstream's thousands of tools few are ever called
// (docs/benchmarks.md, "Big lists").
type lazySchema struct {
	once sync.Once
	raw  json.RawMessage
	s    *schemas.Schema
	err  error
}

// compiled returns the schema compiled, compiling it on the first call.
func (l *lazySchema) compiled() (*schemas.Schema, error) {
	l.once.Do(func() { l.s, l.err = schemas.Compile(l.raw) })
	return l.s, l.err
}

// Validate validates args, a value decoded by encoding/json, against the
// tool's input schema, and returns every violation (nil when valid; see
// [schemas.Schema.Validate]). A tool obtained from a [Registry] compiles
// its schema on its first call and keeps it. Any other Tool value compiles
// its InputSchema on every call, which is slow but correct; if that schema
// does not compile, the result is a single violation saying so.
func (t *Tool) Validate(args any) []schemas.Violation {
	var (
		s   *schemas.Schema
		err error
	)
	if t.schema != nil {
		s, err = t.schema.compiled()
	} else {
		s, err = schemas.Compile(t.InputSchema)
	}
	if err != nil {
		return []schemas.Violation{{Message: "the tool cannot be called: " + err.Error()}}
	}
	return s.Validate(args)
}
