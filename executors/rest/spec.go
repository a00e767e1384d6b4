package rest

import (
	"encoding/json"
	"time"
)

// Spec describes one REST tool.
type Spec struct {
	// Name is the MCP tool name. Required.
	Name string
	// Title and Description are shown to clients.
	Title       string
	Description string
	// Source names where the tool came from: "rest:<name>" or
	// "openapi:<source name>". Required.
	Source string
	// Method is the HTTP method; empty means GET.
	Method string
	// URL is the request URL template: scheme://host[:port]/path, where
	// path segments and the query may hold {arg} placeholders (path values
	// are path-escaped; they can never change scheme, host or port).
	URL string
	// Query maps query keys to value templates ("{units}", "en", "x-{id}").
	// A key whose placeholders name absent arguments is dropped (an
	// argument that is null counts as absent in every template but a
	// body's "{arg}"). An argument that is a number or bool is written as
	// its JSON scalar, an object or array as compact JSON. "{{" and "}}"
	// are literal braces in every template.
	Query map[string]string
	// Headers maps header names to value templates. A value with CR, LF,
	// NUL or another control character after expansion is refused (the
	// call is not made); a header whose placeholders name absent arguments
	// is not sent. Header values are never logged.
	Headers map[string]string
	// Body is a JSON template, or nil for no body. A JSON string that is
	// exactly "{arg}" takes the argument's JSON value (not a string); other
	// strings interpolate; object members whose placeholders name absent
	// arguments are dropped.
	Body json.RawMessage
	// Params are parameters written by OpenAPI's style and explode rules
	// (tools made from OpenAPI documents); each takes its value from one
	// argument. They are sent after Query and Headers: a header Param
	// replaces a Headers entry of the same name.
	Params []Param
	// Payload, when not nil, sends one argument as a form, multipart,
	// text or binary body; Body must then be nil.
	Payload *Payload
	// InputSchema is the arguments' JSON Schema. Nil means derived: every
	// placeholder is a required string property.
	InputSchema json.RawMessage
	// Idempotent overrides the method's idempotency (GET HEAD PUT DELETE
	// OPTIONS are idempotent, POST PATCH are not). Only idempotent calls are
	// retried.
	Idempotent *bool
	// Timeout bounds one call, all attempts included; zero means the
	// dispatcher's default.
	Timeout time.Duration
	// MaxResponseBytes caps the response body kept; zero means 1 MiB.
	MaxResponseBytes int64
	// AllowedHosts are the hosts (host or host:port) the call and its
	// redirects may reach; empty means the host of URL only.
	AllowedHosts []string
	// Secrets are values (from the environment) that must never appear in
	// results, errors or logs; the executor replaces them with "[redacted]".
	Secrets []string
}
