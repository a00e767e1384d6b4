package mcpfront

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/gateway/internal/surface"
	"github.com/toolgate/toolgate/internal/mcppeer"
	"github.com/toolgate/toolgate/internal/principal"
)

// PageSize is how many entries one page of tools/list, resources/list,
// resources/templates/list or prompts/list holds; a longer list ends its
// page with nextCursor.
const PageSize = surface.PageSize

// setLevelTimeout bounds passing a session's logging/setLevel on to the
// sources: the client waits for it, so that log messages of its next call
// already pass.
const setLevelTimeout = 5 * time.Second

// The bounds of resources/subscribe: a URI's length, and the URIs one
// session and one principal may hold subscribed. Each held URI costs its
// length and a few map entries.
const (
	maxSubscribeURI              = 2048
	maxSubscriptionsPerSession   = 128
	maxSubscriptionsPerPrincipal = 1024
)

// unsubscribeTimeout bounds unsubscribing the source of a resource a
// session that ended was the last one subscribed to. It runs in the
// background (package subscriptions), one resource at a time: the session's
// end (a DELETE, or the idle sweeper) does not wait for it.
const unsubscribeTimeout = 5 * time.Second

// Catalog is what one source offers besides tools, and CatalogPrompt one
// of its prompts (package surface, which decides what is served of them
// and who may see it).
type (
	Catalog       = surface.Catalog
	CatalogPrompt = surface.CatalogPrompt
)

// SetCatalog replaces source's catalog with c (nil: removes it) and
// serves the union of every source's ([surface.Set.Put]: the source whose
// name sorts first wins a URI or name two list). Clients are told of what
// changed (notifications/resources/list_changed, prompts/list_changed).
func (f *Front) SetCatalog(source string, c *Catalog) {
	f.cats.Put(source, c, func(l *surface.Listing) {
		// Register a kind again only when it changed: each registration
		// tells every client that the list changed.
		if l.ResourcesChanged {
			rs := make([]server.ServerResource, len(l.Resources))
			for i, r := range l.Resources {
				rs[i] = server.ServerResource{Resource: r.Def, Handler: f.readHandler(r.Cat)}
			}
			f.mcp.SetResources(rs...)
		}
		if l.TemplatesChanged {
			ts := make([]server.ServerResourceTemplate, len(l.Templates))
			for i, t := range l.Templates {
				ts[i] = server.ServerResourceTemplate{Template: t.Def, Handler: server.ResourceTemplateHandlerFunc(f.readHandler(t.Cat))}
			}
			f.mcp.SetResourceTemplates(ts...)
		}
		if l.PromptsChanged {
			ps := make([]server.ServerPrompt, len(l.Prompts))
			for i, p := range l.Prompts {
				ps[i] = server.ServerPrompt{Prompt: p.Def, Handler: f.promptHandler(p.Orig, p.Cat)}
			}
			f.mcp.SetPrompts(ps...)
		}
	})
}

// readHandler reads a resource, or a URI of a template, from cat's source.
func (f *Front) readHandler(cat *Catalog) server.ResourceHandlerFunc {
	return func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		params := map[string]any{"uri": req.Params.URI}
		if req.Params.Meta != nil {
			params["_meta"] = req.Params.Meta
		}
		raw, err := f.forward(ctx, cat, f.peerOf(ctx), string(mcp.MethodResourcesRead), params)
		if err != nil {
			return nil, err
		}
		res, err := mcp.ParseReadResourceResult(&raw)
		if err != nil {
			return nil, fmt.Errorf("the upstream's resources/read result: %w", err)
		}
		return res.Contents, nil
	}
}

// promptHandler gets the prompt orig from cat's source.
func (f *Front) promptHandler(orig string, cat *Catalog) server.PromptHandlerFunc {
	return func(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		get := func(ctx context.Context, peer mcppeer.Peer) (*mcp.GetPromptResult, error) {
			params := map[string]any{"name": orig}
			if req.Params.Arguments != nil {
				params["arguments"] = req.Params.Arguments
			}
			raw, err := f.forward(ctx, cat, peer, string(mcp.MethodPromptsGet), params)
			if err != nil {
				return nil, err
			}
			res, err := mcp.ParseGetPromptResult(&raw)
			if err != nil {
				return nil, fmt.Errorf("the upstream's prompts/get result: %w", err)
			}
			return res, nil
		}
		if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.Modern {
			return f.modernPrompt(ctx, info, req, get) // asked through input_required results (modern.go)
		}
		return get(ctx, f.peerOf(ctx))
	}
}

// completions routes completion/complete to the source of the prompt or
// template it names; other references complete to nothing.
type completions struct{ f *Front }

func (c completions) CompletePromptArgument(ctx context.Context, name string, arg mcp.CompleteArgument, cc mcp.CompleteContext) (*mcp.Completion, error) {
	p, ok := c.f.cats.Current().Prompt(name)
	if !ok || !p.Cat.Completions || !c.f.cats.Visible(c.f.identity(ctx), p.Cat) {
		return &mcp.Completion{Values: []string{}}, nil
	}
	return c.f.complete(ctx, p.Cat, map[string]any{"type": "ref/prompt", "name": p.Orig}, arg, cc)
}

func (c completions) CompleteResourceArgument(ctx context.Context, uri string, arg mcp.CompleteArgument, cc mcp.CompleteContext) (*mcp.Completion, error) {
	cat := c.f.cats.Current().TemplateOwner(uri)
	if cat == nil || !cat.Completions || !c.f.cats.Visible(c.f.identity(ctx), cat) {
		return &mcp.Completion{Values: []string{}}, nil
	}
	return c.f.complete(ctx, cat, map[string]any{"type": "ref/resource", "uri": uri}, arg, cc)
}

func (f *Front) complete(ctx context.Context, cat *Catalog, ref map[string]any, arg mcp.CompleteArgument, cc mcp.CompleteContext) (*mcp.Completion, error) {
	params := map[string]any{"ref": ref, "argument": arg}
	if len(cc.Arguments) > 0 {
		params["context"] = cc
	}
	raw, err := f.forward(ctx, cat, f.peerOf(ctx), string(mcp.MethodCompletionComplete), params)
	if err != nil {
		return nil, err
	}
	var res struct {
		Completion mcp.Completion `json:"completion"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("the upstream's completion/complete result: %w", err)
	}
	if res.Completion.Values == nil {
		res.Completion.Values = []string{}
	}
	return &res.Completion, nil
}

// passSubscription subscribes the source serving uri to it (on), or
// unsubscribes it, if the source serves subscriptions; a failure is
// logged and reported as false.
func (f *Front) passSubscription(ctx context.Context, uri string, on bool) bool {
	cat := f.cats.Current().Owner(uri)
	if cat == nil || !cat.Subscribe {
		return true
	}
	method := mcp.MethodResourcesSubscribe
	if !on {
		method = mcp.MethodResourcesUnsubscribe
	}
	if _, err := cat.Forward(ctx, nil, string(method), map[string]any{"uri": uri}); err != nil {
		f.logger.Warn("passing a resource subscription on to its source", "method", method, "error", err)
		return false
	}
	return true
}

// forgetSession drops what the front keeps for a session that ended
// (DELETE, idle expiry, a closed SSE or stdio connection): its
// subscriptions and its log level.
func (f *Front) forgetSession(id string) {
	f.subs.Forget(id)
	f.levels.Forget(id)
}

// ResourceUpdated tells every session subscribed to uri that it changed
// (notifications/resources/updated).
func (f *Front) ResourceUpdated(uri string) {
	for _, id := range f.subs.Sessions(uri) {
		_ = f.mcp.SendNotificationToSpecificClient(id, string(mcp.MethodNotificationResourceUpdated), map[string]any{"uri": uri})
	}
}

// Log sends source's log message (the params of notifications/message),
// one that relates to no call, to every session whose level lets it
// through and whose principal may see source (issue 31, item 3: the
// rule of its catalog, surface/scope.go); namespace is the source's tool
// prefix.
func (f *Front) Log(source, namespace string, params map[string]any) {
	n := logNotification(params)
	f.clients.Range(func(_, v any) bool {
		if s := v.(*session); f.cats.VisibleSource(s.ident, source, namespace) {
			_ = f.mcp.SendLogMessageToSpecificClient(s.id, n)
		}
		return true
	})
}

// levelSet records the level a session set and, when the most verbose
// level any session wants changes, passes it to the sources
// (Backend.SetLogLevel), before the client gets its answer.
func (f *Front) levelSet(ctx context.Context, session string, level mcp.LoggingLevel) {
	f.levels.Set(session, level, func(want mcp.LoggingLevel) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), setLevelTimeout)
		defer cancel()
		f.b.SetLogLevel(ctx, string(want))
	})
}

// surfaceHooks adds to hooks what the catalogs need of mcp-go: the
// subscriptions and log levels sessions set.
func (f *Front) surfaceHooks(hooks *server.Hooks) {
	sessionOf := func(ctx context.Context) string {
		if s := server.ClientSessionFromContext(ctx); s != nil {
			return s.SessionID()
		}
		return ""
	}
	hooks.AddAfterSubscribe(func(ctx context.Context, _ any, req *mcp.SubscribeRequest, _ *mcp.EmptyResult) {
		f.subs.Subscribed(ctx, sessionOf(ctx), principal.NameOf(f.identity(ctx)), req.Params.URI, true)
	})
	hooks.AddAfterUnsubscribe(func(ctx context.Context, _ any, req *mcp.UnsubscribeRequest, _ *mcp.EmptyResult) {
		f.subs.Subscribed(ctx, sessionOf(ctx), principal.NameOf(f.identity(ctx)), req.Params.URI, false)
	})
	hooks.AddAfterSetLevel(func(ctx context.Context, _ any, req *mcp.SetLevelRequest, _ *mcp.EmptyResult) {
		f.levelSet(ctx, sessionOf(ctx), req.Params.Level)
	})
	// mcp-go pages resources and templates by name alone; these hooks page
	// them again by name and URI, as each principal may see them
	// (surface.Set.Resources; mcp-go sends what an after-hook leaves in
	// the result).
	hooks.AddAfterListResources(func(ctx context.Context, _ any, req *mcp.ListResourcesRequest, res *mcp.ListResourcesResult) {
		res.Resources, res.NextCursor = f.cats.Resources(f.identity(ctx), req.Params.Cursor)
	})
	hooks.AddAfterListResourceTemplates(func(ctx context.Context, _ any, req *mcp.ListResourceTemplatesRequest, res *mcp.ListResourceTemplatesResult) {
		res.ResourceTemplates, res.NextCursor = f.cats.Templates(f.identity(ctx), req.Params.Cursor)
	})
}

// surfaceOptions are the mcp-go options that serve the catalogs.
func (f *Front) surfaceOptions() []server.ServerOption {
	return []server.ServerOption{
		server.WithResourceCapabilities(true, true),
		server.WithPaginationLimit(PageSize),
		server.WithPromptCapabilities(true),
		server.WithPromptFilter(f.visiblePrompts),
		server.WithLogging(),
		server.WithCompletions(),
		server.WithPromptCompletionProvider(completions{f}),
		server.WithResourceCompletionProvider(completions{f}),
	}
}

// admitSubscribe checks a resources/subscribe of session x.s before
// mcp-go answers it (the principal's rate; subscriptions.Set.Admit: a URI
// a source the principal may see serves, not too long, within the
// session's and the principal's bounds), and returns
// the -32602 answering it when it is refused. An admitted URI is held for
// the session at once, so concurrent subscribes cannot pass the bounds
// together.
func (f *Front) admitSubscribe(x *exchange, m *message) *answer {
	var p struct {
		URI string `json:"uri"`
	}
	if json.Unmarshal(m.params, &p) != nil || p.URI == "" {
		return nil // mcp-go answers what is not a subscribe it can read
	}
	if refused := overRate(x.ident, m.id); refused != nil {
		return refused
	}
	if err := f.subs.Admit(x.s.id, principal.NameOf(x.ident), p.URI, f.cats.Readable(x.ident, p.URI)); err != nil {
		a := errorAnswer(m.id, mcp.INVALID_PARAMS, err.Error(), nil)
		return &a
	}
	return nil
}
