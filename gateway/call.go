package gateway

import (
	"context"
	"encoding/json"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/gateway/internal/mcpwire"
	"github.com/toolgate/toolgate/internal/principal"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

// Call is one tool call on its way through the pipeline. The pipeline
// fills it in step by step; a [Middleware] sees it complete (resolved,
// validated, in its thread) and may read every field. Steps and
// middleware must not keep it beyond the call.
type Call struct {
	// Name is the tool name as the caller wrote it (for a call from an MCP
	// client, as the front resolved it, repair included).
	Name string
	// Tool is the resolved tool; set before the chain runs.
	Tool *registry.Tool
	// Args are the arguments object; set by the validate step once it has
	// passed the tool's input schema (an empty, non-nil map for a call
	// without arguments).
	Args map[string]any
	// Raw are the arguments' JSON bytes as the caller sent them, or nil.
	// Proxying executors forward them unchanged.
	Raw json.RawMessage
	// Meta is the request's _meta (it may name a thread with
	// [ThreadMetaKey]), or nil.
	Meta map[string]any
	// Principal is who makes the call as authentication established it;
	// empty while no authentication is configured.
	Principal string
	// Session is the ID of the MCP session the call arrived in; empty for
	// calls from [Gateway.Call] and from clients without sessions.
	Session string
	// Thread is the thread the call runs in; set by the thread step (or
	// before the chain, by toolgate_batch for its calls), never changed
	// after.
	Thread string
	// Progress, when not nil, reports progress to the calling client.
	Progress func(progress, total float64, message string)
	// ID identifies the call in lifecycle events (/events) and log lines,
	// as "c-<n>"; set by the record step, once, unless already set. Every
	// call of toolgate_batch has its own.
	ID string

	input   any    // the arguments as decoded, before validation
	decoded bool   // input holds Raw decoded (or Raw was empty)
	route   *route // the resolved tool with its executor and retry plan
	oneShot bool   // Thread is a one-call thread, closed when the call ends
	// sessionThread is the thread of the call's session ("" for none),
	// derived once by the thread step.
	sessionThread string
	// sessionless: an MCP call without a session (a 2026-07-28 client),
	// which gets a thread handle rather than a one-call thread (handles.go).
	sessionless bool
	// elicit asks the calling client's user a question (MCP elicitation),
	// for the loop guard's ask action; nil when the client cannot be asked.
	elicit func(ctx context.Context, message string, requestedSchema map[string]any) (action string, content map[string]any, err error)

	attempts int // attempts made so far, counted by executors.Call.OnAttempt
	// cache is the result cache's answer: "hit", "miss", or "" for a
	// tool that is not cached (cache.go).
	cache string

	// ident is who makes the call and what it may do (auth.go); nil for
	// the embedding program's own calls. Principal is its name.
	ident *principal.Identity
}

// Result is what a call returns: content parts, structured content, and,
// for a failure, IsError with its [retry.Class] in Class. Meta holds the
// result's _meta ([ErrorClassMetaKey], [executors.AttemptsMetaKey], ...).
// Passthrough, when not nil, is an upstream MCP server's result as it
// sent it, forwarded unchanged (Content and Structured are then empty).
// Its MarshalJSON gives the MCP CallToolResult a client would receive.
type Result executors.Result

// Content is one content part of a [Result].
type Content = executors.Content

// MarshalJSON encodes r as the JSON of an MCP CallToolResult.
func (r Result) MarshalJSON() ([]byte, error) {
	e := executors.Result(r)
	return mcpwire.Encode(&e)
}

// decoded returns r with an upstream's raw result (Passthrough) read into
// Content, Structured and IsError, Passthrough kept and the error class
// the upstream's _meta names in Class; r itself when it has no raw result,
// has its parts already, or the raw result cannot be read.
func (r *Result) decoded() *Result {
	if r.Passthrough == nil || len(r.Content) > 0 {
		return r
	}
	d, err := mcpwire.Decode(r.Passthrough)
	if err != nil {
		return r
	}
	d.Class, d.Meta = r.Class, r.Meta
	if d.IsError && d.Class == "" {
		d.Class = resultClass(r)
	}
	return (*Result)(&d)
}

// resultClass is the class of an isError result: its own, else the one
// its _meta names (an upstream MCP server may say it, under
// [ErrorClassMetaKey]), else execution.
func resultClass(res *Result) retry.Class {
	if res.Class != "" {
		return res.Class
	}
	if s, ok := res.Meta[ErrorClassMetaKey].(string); ok && retry.Class(s).Valid() {
		return retry.Class(s)
	}
	if res.Passthrough != nil {
		var head struct {
			Meta map[string]any `json:"_meta"`
		}
		if json.Unmarshal(res.Passthrough, &head) == nil {
			if s, ok := head.Meta[ErrorClassMetaKey].(string); ok && retry.Class(s).Valid() {
				return retry.Class(s)
			}
		}
	}
	return retry.Execution
}

// Text returns the text of r's text parts, one per line.
func (r *Result) Text() string {
	var s string
	for _, c := range r.Content {
		if c.Type == executors.TextContent {
			if s != "" {
				s += "\n"
			}
			s += c.Text
		}
	}
	return s
}

// Handler runs a call and returns its result. A tool failure is a result
// with IsError set; the error is non-nil only when the call could not be
// made at all: its tool does not exist (an error wrapping
// registry.ErrNotFound).
type Handler func(ctx context.Context, c *Call) (*Result, error)

// Middleware wraps the dispatch of calls ([Gateway.Use]): it may inspect
// or change the call's Args, answer the call without calling next, or
// inspect and change the result next returns. Once middleware is in use,
// executors receive Args re-encoded rather than the client's raw bytes, so
// a change to Args reaches every kind of tool. The thread is decided
// before middleware runs: changing Meta does not move the call to another
// thread. A middleware error or nil result becomes an isError result.
type Middleware func(next Handler) Handler
