package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/internal/principal"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

// A client's requests about an upstream's catalog that reach the upstream
// (resources/read, prompts/get, completion/complete) run under the
// principal's rules as tool calls do (issue 31, item 2): the MCP front
// decides who may see what (by gateway/internal/surface/scope.go); here
// each such request is recorded (metrics, log line, lifecycle events),
// tracked for shutdown, counted against the principal's rate and passed
// through the hooks, as a call of the tool named
// "<upstream>__<subject>" (ev__resources.read, ev__prompts.get,
// ev__completion.complete), whose arguments are the request's params. The
// after hooks (redact, truncate, webhook) see the result's texts (a
// resource's text, a prompt message's, the completion values) as the
// text parts of a tool result, and what they return goes back in their
// place.

// surfaceSubjects name the requests that run as calls, by method.
var surfaceSubjects = map[string]string{
	"resources/read":      "resources.read",
	"prompts/get":         "prompts.get",
	"completion/complete": "completion.complete",
}

// upstreamForward sends a request to upstream's connection, which a
// reload may have removed.
func (g *Gateway) upstreamForward(ctx context.Context, upstream, method string, params any) (json.RawMessage, error) {
	m := g.ups.Get(upstream)
	if m == nil {
		return nil, retry.Errorf(retry.NotFound, "no upstream is named %q", upstream)
	}
	return m.Forward(ctx, upstream, method, params)
}

// forwardSurface sends a client's request about upstream's catalog to it:
// through the surface chain when it is one of surfaceSubjects, straight
// otherwise (the front's own subscribe and unsubscribe). ctx names the
// principal ([principal.With]) when there is one.
func (g *Gateway) forwardSurface(ctx context.Context, upstream, method string, params any) (json.RawMessage, error) {
	subject, ok := surfaceSubjects[method]
	args, isMap := params.(map[string]any)
	if !ok || !isMap {
		return g.upstreamForward(ctx, upstream, method, params)
	}
	id := principal.From(ctx)
	c := &Call{Name: upstream + registry.Separator + subject, Tool: g.surfaceTool(upstream, subject), Args: args, Principal: principal.NameOf(id), ident: id, decoded: true}
	var texts []textSlot
	var tree any
	var raw json.RawMessage
	var got *Result // the result as the upstream's, before the after hooks
	forward := func(ctx context.Context, c *Call) (*Result, error) {
		var err error
		if raw, err = g.upstreamForward(ctx, upstream, method, c.Args); err != nil {
			return nil, err
		}
		if tree, err = decodeTree(raw); err != nil {
			return nil, err
		}
		texts = textSlots(tree, "", texts[:0])
		res := &executors.Result{Content: make([]executors.Content, len(texts))}
		for i, s := range texts {
			res.Content[i] = executors.Content{Type: executors.TextContent, Text: *s}
		}
		got = (*Result)(res)
		return got, nil
	}
	res, err := g.record(g.track(g.surfaceRate(hooksWith(g.servedHooks(), forward))))(ctx, c)
	if err != nil {
		return nil, err
	}
	switch {
	case res.IsError:
		return nil, errors.New(res.Text())
	case res == got:
		return raw, nil // no hook changed it: as the upstream sent it
	}
	var parts []string
	for _, p := range res.Content {
		if p.Type == executors.TextContent || p.Type == executors.ResourceContent {
			parts = append(parts, p.Text)
		}
	}
	for i, s := range texts {
		switch {
		case i >= len(parts):
			*s = ""
		case i == len(texts)-1:
			*s = strings.Join(parts[i:], "\n") // what a hook added (truncate's notice) goes with the last text
		default:
			*s = parts[i]
		}
	}
	return json.Marshal(tree)
}

// surfaceTool is the tool a request of subject about upstream's catalog is
// recorded and matched by hooks as: one value per name, so that its
// metrics are counted under one child.
func (g *Gateway) surfaceTool(upstream, subject string) *registry.Tool {
	name := upstream + registry.Separator + subject
	if t, ok := g.surfaceTools.Load(name); ok {
		return t.(*registry.Tool)
	}
	t, _ := g.surfaceTools.LoadOrStore(name, &registry.Tool{Name: name, Kind: registry.MCP, Source: "upstream:" + upstream,
		Description: "the " + subject + " requests of upstream " + upstream})
	return t.(*registry.Tool)
}

// surfaceRate is the permit step of a catalog request: the principal's
// rate limit. Who may see the catalog the MCP front decided.
func (g *Gateway) surfaceRate(next Handler) Handler {
	return func(ctx context.Context, c *Call) (*Result, error) {
		if res := overRate(c.ident); res != nil {
			return res, nil
		}
		return next(ctx, c)
	}
}

// textSlot is one string of a decoded result the hooks may edit.
type textSlot = *string

// decodeTree decodes raw, numbers kept as they were written.
func decodeTree(raw json.RawMessage) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, errors.New("the upstream's result is not JSON")
	}
	return v, nil
}

// textSlots appends to slots the texts of v, a decoded result, in a fixed
// order: every string under a "text" key (a resource's contents, a prompt
// message's content) and in a "values" array (completion values). key is
// the key v is under.
func textSlots(v any, key string, slots []textSlot) []textSlot {
	switch x := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if s, ok := x[k].(string); ok && k == "text" {
				p := &s
				x[k] = p
				slots = append(slots, p)
				continue
			}
			slots = textSlots(x[k], k, slots)
		}
	case []any:
		for i, e := range x {
			if s, ok := e.(string); ok && key == "values" {
				p := &s
				x[i] = p
				slots = append(slots, p)
				continue
			}
			slots = textSlots(e, "", slots)
		}
	}
	return slots
}
