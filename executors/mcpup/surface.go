package mcpup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sort"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/internal/mcppeer"
	"github.com/toolgate/toolgate/internal/telemetry"
	"github.com/toolgate/toolgate/retry"
)

// Catalog is what a shared upstream offers besides tools, as it last
// listed it: its resources, resource templates and prompts, raw as the
// upstream sent them, and which of the optional requests it serves.
// Thread-isolated upstreams have none: their catalog would differ per
// thread.
type Catalog struct {
	// Resources and Templates are the entries of resources/list and
	// resources/templates/list (all pages), unchanged: URIs are never
	// prefixed.
	Resources, Templates []json.RawMessage
	// Prompts are the entries of prompts/list, each under its served name.
	Prompts []Prompt
	// Subscribe says the upstream serves resources/subscribe; Completions,
	// completion/complete; Logging, logging/setLevel.
	Subscribe, Completions, Logging bool
	// Namespace is the prefix of the upstream's tool and prompt names
	// ([Upstream.NamePrefix]).
	Namespace string
}

// Prompt is one prompt of an upstream: Name is its served name (the
// upstream's prefix and Orig), Orig the upstream's own, Raw its prompts/
// list entry as the upstream sent it (naming it Orig).
type Prompt struct {
	Name, Orig string
	Raw        json.RawMessage
}

// listCatalog lists c's resources, templates and prompts, as far as the
// upstream declared them, and hands them to OnCatalog. A listing that
// fails leaves that part empty and is logged: the rest is still served.
func (u *upstream) listCatalog(ctx context.Context, c *conn) error {
	if u.m.onCatalog == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, u.startupTimeout)
	defer cancel()
	caps := c.client.GetServerCapabilities()
	cat := Catalog{Namespace: u.cfg.NamePrefix()}
	var errs []error
	if caps.Resources != nil {
		var err error
		cat.Resources, err = c.listAll(ctx, string(mcp.MethodResourcesList), "resources")
		errs = append(errs, err)
		cat.Templates, err = c.listAll(ctx, string(mcp.MethodResourcesTemplatesList), "resourceTemplates")
		errs = append(errs, err)
		cat.Subscribe = caps.Resources.Subscribe
	}
	if caps.Prompts != nil {
		raw, err := c.listAll(ctx, string(mcp.MethodPromptsList), "prompts")
		errs = append(errs, err)
		cat.Prompts = u.prompts(raw)
	}
	cat.Completions = caps.Completions != nil
	cat.Logging = caps.Logging != nil
	if err := errors.Join(errs...); err != nil {
		if c.isDead() || ctx.Err() != nil {
			return err
		}
		u.m.logger.Warn("listing upstream resources or prompts failed", "upstream", u.cfg.Name, "error", err)
	}
	u.m.logger.Info("upstream catalog listed", "upstream", u.cfg.Name, "resources", len(cat.Resources), "templates", len(cat.Templates), "prompts", len(cat.Prompts))
	u.m.onCatalog(u.cfg.Name, &cat)
	return nil
}

// prompts names the listed prompts as they are served, dropping those
// whose served name is not a valid name or is listed twice.
func (u *upstream) prompts(raw []json.RawMessage) []Prompt {
	out := make([]Prompt, 0, len(raw))
	seen := map[string]bool{}
	for _, r := range raw {
		var head struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(r, &head) != nil || head.Name == "" {
			u.m.logger.Warn("skipping upstream prompt without a name", "upstream", u.cfg.Name)
			continue
		}
		name := u.cfg.NamePrefix() + head.Name
		if seen[name] {
			u.m.logger.Warn("skipping repeated upstream prompt", "upstream", u.cfg.Name, "prompt", logLine([]byte(head.Name)))
			continue
		}
		seen[name] = true
		out = append(out, Prompt{Name: name, Orig: head.Name, Raw: r})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// listAll returns the entries under key of every page of method.
func (c *conn) listAll(ctx context.Context, method, key string) ([]json.RawMessage, error) {
	var all []json.RawMessage
	seen := map[string]bool{}
	cursor := ""
	for range maxListPages {
		resp, err := c.request(ctx, method, listParams{Cursor: cursor})
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, err
		case err != nil:
			return nil, c.transportError(fmt.Sprintf("%s of upstream %q", method, c.u.cfg.Name), err)
		case resp.Error != nil:
			return nil, c.u.errorf(retry.Execution, nil, "%s of upstream %q: %s (JSON-RPC error %d)", method, c.u.cfg.Name, resp.Error.Message, resp.Error.Code)
		}
		var page map[string]json.RawMessage
		if err := json.Unmarshal(resp.Result, &page); err != nil {
			return nil, c.u.errorf(retry.Execution, err, "%s of upstream %q: decoding the result: %v", method, c.u.cfg.Name, err)
		}
		var items []json.RawMessage
		if raw := page[key]; len(raw) > 0 {
			if err := json.Unmarshal(raw, &items); err != nil {
				return nil, c.u.errorf(retry.Execution, err, "%s of upstream %q: %s is not a list: %v", method, c.u.cfg.Name, key, err)
			}
		}
		all = append(all, items...)
		var next string
		if raw := page["nextCursor"]; len(raw) > 0 {
			_ = json.Unmarshal(raw, &next)
		}
		if next == "" {
			return all, nil
		}
		if seen[next] {
			return nil, retry.Errorf(retry.Execution, "%s of upstream %q: the upstream repeated a cursor", method, c.u.cfg.Name)
		}
		seen[next] = true
		cursor = next
	}
	return nil, retry.Errorf(retry.Execution, "%s of upstream %q: more than %d pages", method, c.u.cfg.Name, maxListPages)
}

// Forward sends one request (resources/read, prompts/get with the prompt's
// own name, completion/complete, resources/subscribe and unsubscribe,
// logging/setLevel) to the shared connection of upstream and returns its
// result, raw. A JSON-RPC error the upstream answers wraps an *mcppeer.RPCError;
// other failures are *retry.Error, as for tool calls. During the request,
// the upstream's sampling, elicitation and roots requests go to the
// [mcppeer.Peer] in ctx, if any.
func (m *Manager) Forward(ctx context.Context, upstream, method string, params any) (json.RawMessage, error) {
	u := m.upstream(upstream)
	if u == nil {
		return nil, retry.Errorf(retry.NotFound, "no upstream is named %q", upstream)
	}
	if m.isClosed() {
		return nil, retry.Errorf(retry.Unavailable, "upstream %q is shut down", upstream)
	}
	c := u.runner.current()
	if c == nil || u.thread {
		return nil, u.downError(u.runner)
	}
	if telemetry.Traced(ctx) {
		var span telemetry.Span
		ctx, span = telemetry.Child(ctx, method, telemetry.Client)
		defer span.End()
		if span.Recording() {
			span.Str("mcp.method.name", method)
			span.Str("toolgate.upstream", upstream)
		}
		params = withTraceMeta(ctx, params)
		res, err := forwardOn(ctx, u, c, upstream, method, params)
		if err != nil {
			span.Fail(string(retry.Classify(err)), "the upstream request failed")
		}
		return res, err
	}
	return forwardOn(ctx, u, c, upstream, method, params)
}

// withTraceMeta returns params, a request's params, with the trace context
// of ctx's span in its _meta (the MCP trace-context proposal's place for
// it; over HTTP the headers carry it too), as tools/call sends it. params
// that are not an object are returned as they are; the caller's map is
// never changed.
func withTraceMeta(ctx context.Context, params any) any {
	p, ok := params.(map[string]any)
	parent, state := telemetry.Meta(ctx)
	if !ok || parent == "" {
		return params
	}
	out := maps.Clone(p)
	meta := map[string]any{}
	switch old := p["_meta"].(type) {
	case map[string]any:
		meta = maps.Clone(old)
	case nil:
	default: // the client's _meta as the MCP front decoded it (*mcp.Meta)
		if b, err := json.Marshal(old); err == nil {
			_ = json.Unmarshal(b, &meta)
		}
	}
	meta["traceparent"] = parent
	if state != "" {
		meta["tracestate"] = state
	} else {
		delete(meta, "tracestate")
	}
	out["_meta"] = meta
	return out
}

// forwardOn sends method to c, the connection of u, and reads its answer.
func forwardOn(ctx context.Context, u *upstream, c *conn, upstream, method string, params any) (json.RawMessage, error) {
	resp, err := c.request(ctx, method, params)
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, ctxError(upstream, method, ctx.Err())
	case err != nil:
		return nil, c.transportError(fmt.Sprintf("%s on upstream %q", method, upstream), err)
	case resp.Error != nil:
		// The upstream's error as it is (errors.As finds it), its code in
		// the text too.
		return nil, fmt.Errorf("%w (JSON-RPC error %d)", &mcppeer.RPCError{Code: resp.Error.Code, Message: u.redact(resp.Error.Message), Data: resp.Error.Data}, resp.Error.Code)
	}
	return resp.Result, nil
}

// SetLogLevel asks every shared upstream that declared logging to send
// log messages from level up (logging/setLevel), each within ctx; failures
// are logged.
func (m *Manager) SetLogLevel(ctx context.Context, level string) {
	for _, u := range m.ups {
		c := u.runner.current()
		if c == nil || u.thread || c.client.GetServerCapabilities().Logging == nil {
			continue
		}
		if _, err := m.Forward(ctx, u.cfg.Name, string(mcp.MethodSetLogLevel), map[string]any{"level": level}); err != nil {
			m.logger.Warn("setting an upstream's log level", "upstream", u.cfg.Name, "error", err)
		}
	}
}

// upstream returns the upstream called name, or nil.
func (m *Manager) upstream(name string) *upstream {
	for _, u := range m.ups {
		if u.cfg.Name == name {
			return u
		}
	}
	return nil
}
