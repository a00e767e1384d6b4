// Package config holds the shape of toolgate's YAML configuration: typed
// structs, `${ENV}` expansion, defaults, and validation whose errors carry
// file:line:col and say what to write instead.
//
// Loading ([Parse], [Load], [Default], [Resolve]) parses the YAML with
// goccy/go-yaml, expands ${NAME} and ${NAME:-default} in scalar values,
// decodes strictly over the defaults and runs [Config.Validate]. Every
// problem comes back at once, each a [*PosError] naming file:line:col and the
// key path; values that came from the environment are never shown, and
// [Config.Secrets] lists them so that executors can scrub them from what
// they return. See config.example.yaml at the repository root for every key.
//
// The rest and openapi sections ([RESTTool], [OpenAPISource]) describe REST
// tools; the gateway turns them into the REST executor's specs. Their body
// and input_schema values are written in YAML and stored as JSON. The
// upstreams section ([Upstream]) lists other MCP servers whose tools toolgate
// serves under a prefix; the gateway turns each into the upstream executor's
// configuration. config only checks the fields: loading starts no process
// and opens no connection.
//
// config imports no toolgate package but internal/keypath, the one
// key-path syntax it shares with the owners of the rules it positions.
package config
