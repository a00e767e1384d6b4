package mcpfront

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/toolgate/toolgate/internal/mcppeer"
	"github.com/toolgate/toolgate/internal/principal"
)

// PageSize is how many entries one page of tools/list, resources/list,
// resources/templates/list or prompts/list holds; a longer list ends its
// page with nextCursor.
const PageSize = 100

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

// Catalog is what one source (an upstream MCP server) offers besides
// tools: its resources, resource templates and prompts, served by the
// front as the source listed them (URIs unchanged, prompts under their
// served names), and the function that forwards a client's requests about
// them to the source.
type Catalog struct {
	// Resources and Templates are the source's resources/list and
	// resources/templates/list entries, raw.
	Resources, Templates []json.RawMessage
	// Prompts are the source's prompts.
	Prompts []CatalogPrompt
	// Subscribe says the source serves resources/subscribe; Completions,
	// completion/complete.
	Subscribe, Completions bool
	// Forward sends a request to the source (resources/read, prompts/get
	// with the prompt's own name, completion/complete, resources/
	// subscribe and unsubscribe) and returns its result, raw. peer is the
	// client the request came from (nil when none), to whom the source's
	// own requests during it are relayed. An error with an RPCCode() int
	// method is the source's JSON-RPC error.
	Forward func(ctx context.Context, peer mcppeer.Peer, method string, params any) (json.RawMessage, error)
	// Namespace is the prefix of the source's tool names ("ev__"): a
	// source that serves no tools is visible to the principals whose
	// policy permits it (scope.go). "" hides such a source from every
	// principal with a policy.
	Namespace string

	source string // the name SetCatalog was given, as the source's tools name it (registry.Tool.Source)
}

// CatalogPrompt is one prompt of a source: Name is how the front serves
// it, Orig the source's own name, Raw its prompts/list entry.
type CatalogPrompt struct {
	Name, Orig string
	Raw        json.RawMessage
}

// surface is what the front serves of every source's catalog, rebuilt as
// a whole on every change and read without locks.
type surface struct {
	resources map[string]*Catalog        // URI → the source serving it
	resList   []mcp.Resource             // sorted by name, then URI: the order resources/list pages through
	tmplList  []mcp.ResourceTemplate     // sorted by name, then URI template
	tmplOwner map[string]*Catalog        // URI template → the source serving it
	templates []ownedTemplate            // in the order sources win
	prompts   map[string]ownedPrompt     // served name → its source
	raw       map[string]json.RawMessage // kind → what was registered, to skip unchanged kinds
}

type ownedTemplate struct {
	tmpl mcp.ResourceTemplate
	cat  *Catalog
}

type ownedPrompt struct {
	orig string
	cat  *Catalog
}

// catalogs holds the sources' catalogs and log levels.
type catalogs struct {
	mu      sync.Mutex          // guards bySrc and applying a change
	bySrc   map[string]*Catalog // source → its catalog
	current sync.Map            // "s" → *surface

	levelMu   sync.Mutex
	levels    map[string]mcp.LoggingLevel // session → the level it set
	forwarded mcp.LoggingLevel            // the level last passed to the sources
}

func (f *Front) surface() *surface {
	if s, ok := f.cats.current.Load("s"); ok {
		return s.(*surface)
	}
	return &surface{}
}

// SetCatalog replaces source's catalog with c (nil: removes it) and
// serves the union of every source's: a resource URI, template or prompt
// name two sources both list is served from the source whose name sorts
// first, and the other's is dropped with a warning naming both. Clients
// are told of what changed (notifications/resources/list_changed,
// prompts/list_changed).
func (f *Front) SetCatalog(source string, c *Catalog) {
	f.cats.mu.Lock()
	defer f.cats.mu.Unlock()
	if f.cats.bySrc == nil {
		f.cats.bySrc = map[string]*Catalog{}
	}
	if c == nil {
		delete(f.cats.bySrc, source)
	} else {
		c.source = source
		f.cats.bySrc[source] = c
	}
	old := f.surface()
	b := &surfaceBuild{f: f, owner: map[string]string{},
		s: &surface{resources: map[string]*Catalog{}, tmplOwner: map[string]*Catalog{}, prompts: map[string]ownedPrompt{}, raw: map[string]json.RawMessage{}}}
	for _, src := range slices.Sorted(maps.Keys(f.cats.bySrc)) {
		b.add(src, f.cats.bySrc[src])
	}
	s := b.s
	// Register a kind again only when it changed: each registration tells
	// every client that the list changed.
	changed := func(kind string, v any) bool {
		raw, _ := json.Marshal(v)
		s.raw[kind] = raw
		return !bytes.Equal(old.raw[kind], raw)
	}
	s.resList = resourceDefs(b.resources)
	slices.SortFunc(s.resList, func(a, b mcp.Resource) int { return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.URI, b.URI)) })
	s.tmplList = templateDefs(b.templates)
	slices.SortFunc(s.tmplList, func(a, b mcp.ResourceTemplate) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.URITemplate.Raw(), b.URITemplate.Raw()))
	})
	if changed("resources", resourceDefs(b.resources)) {
		f.mcp.SetResources(b.resources...)
	}
	if changed("templates", templateDefs(b.templates)) {
		f.mcp.SetResourceTemplates(b.templates...)
	}
	if changed("prompts", promptDefs(b.prompts)) {
		f.mcp.SetPrompts(b.prompts...)
	}
	f.cats.current.Store("s", s)
}

// surfaceBuild is a surface being made from the sources' catalogs, in
// source order: what mcp-go is given to serve, and which source listed
// each resource, template and prompt first.
type surfaceBuild struct {
	f         *Front
	s         *surface
	resources []server.ServerResource
	templates []server.ServerResourceTemplate
	prompts   []server.ServerPrompt
	owner     map[string]string // kind:key → source
}

// taken reports whether a source before src listed kind key, which src's
// listing then loses, with a warning.
func (b *surfaceBuild) taken(kind, key, src string) bool {
	k := kind + ":" + key
	if first, dup := b.owner[k]; dup {
		b.f.logger.Warn("two sources list the same "+kind+"; serving the first's", "key", key, "served_from", first, "dropped_from", src)
		return true
	}
	b.owner[k] = src
	return false
}

// add adds source src's catalog cat: what it lists that no source before
// it did, skipping (with a warning) what the front cannot read.
func (b *surfaceBuild) add(src string, cat *Catalog) {
	f, s := b.f, b.s
	for _, raw := range cat.Resources {
		var r mcp.Resource
		if err := json.Unmarshal(raw, &r); err != nil || r.URI == "" {
			f.logger.Warn("skipping a resource the front cannot read", "source", src, "error", err)
		} else if !b.taken("resource", r.URI, src) {
			s.resources[r.URI] = cat
			b.resources = append(b.resources, server.ServerResource{Resource: r, Handler: f.readHandler(cat)})
		}
	}
	for _, raw := range cat.Templates {
		var t mcp.ResourceTemplate
		if err := json.Unmarshal(raw, &t); err != nil || t.URITemplate == nil {
			f.logger.Warn("skipping a resource template the front cannot read", "source", src, "error", err)
		} else if !b.taken("resource template", t.URITemplate.Raw(), src) {
			s.templates = append(s.templates, ownedTemplate{tmpl: t, cat: cat})
			s.tmplOwner[t.URITemplate.Raw()] = cat
			b.templates = append(b.templates, server.ServerResourceTemplate{Template: t, Handler: server.ResourceTemplateHandlerFunc(f.readHandler(cat))})
		}
	}
	for _, cp := range cat.Prompts {
		var p mcp.Prompt
		if err := json.Unmarshal(cp.Raw, &p); err != nil {
			f.logger.Warn("skipping a prompt the front cannot read", "source", src, "prompt", cp.Orig, "error", err)
		} else if !b.taken("prompt", cp.Name, src) {
			p.Name = cp.Name
			s.prompts[cp.Name] = ownedPrompt{orig: cp.Orig, cat: cat}
			b.prompts = append(b.prompts, server.ServerPrompt{Prompt: p, Handler: f.promptHandler(cp.Orig, cat)})
		}
	}
}

func resourceDefs(rs []server.ServerResource) []mcp.Resource {
	out := make([]mcp.Resource, len(rs))
	for i, r := range rs {
		out[i] = r.Resource
	}
	return out
}

func templateDefs(ts []server.ServerResourceTemplate) []mcp.ResourceTemplate {
	out := make([]mcp.ResourceTemplate, len(ts))
	for i, t := range ts {
		out[i] = t.Template
	}
	return out
}

func promptDefs(ps []server.ServerPrompt) []mcp.Prompt {
	out := make([]mcp.Prompt, len(ps))
	for i, p := range ps {
		out[i] = p.Prompt
	}
	return out
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
	p, ok := c.f.surface().prompts[name]
	if !ok || !p.cat.Completions || !c.f.entitled(c.f.identity(ctx), p.cat) {
		return &mcp.Completion{Values: []string{}}, nil
	}
	return c.f.complete(ctx, p.cat, map[string]any{"type": "ref/prompt", "name": p.orig}, arg, cc)
}

func (c completions) CompleteResourceArgument(ctx context.Context, uri string, arg mcp.CompleteArgument, cc mcp.CompleteContext) (*mcp.Completion, error) {
	for _, t := range c.f.surface().templates {
		if t.tmpl.URITemplate.Raw() == uri && t.cat.Completions && c.f.entitled(c.f.identity(ctx), t.cat) {
			return c.f.complete(ctx, t.cat, map[string]any{"type": "ref/resource", "uri": uri}, arg, cc)
		}
	}
	return &mcp.Completion{Values: []string{}}, nil
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

// owner returns the source serving uri: the one listing it, else the
// first whose template matches it; nil when none does.
func (s *surface) owner(uri string) *Catalog {
	if c := s.resources[uri]; c != nil {
		return c
	}
	for _, t := range s.templates {
		if t.tmpl.URITemplate.Match(uri) != nil {
			return t.cat
		}
	}
	return nil
}

// passSubscription subscribes the source serving uri to it (on), or
// unsubscribes it, if the source serves subscriptions; a failure is
// logged and reported as false.
func (f *Front) passSubscription(ctx context.Context, uri string, on bool) bool {
	cat := f.surface().owner(uri)
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
	c := &f.cats
	c.levelMu.Lock()
	delete(c.levels, id)
	c.levelMu.Unlock()
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
// rule of its catalog, scope.go); namespace is the source's tool prefix.
func (f *Front) Log(source, namespace string, params map[string]any) {
	n := logNotification(params)
	f.clients.Range(func(_, v any) bool {
		if s := v.(*session); f.entitledTo(s.ident, source, namespace) {
			_ = f.mcp.SendLogMessageToSpecificClient(s.id, n)
		}
		return true
	})
}

// levelSet records the level a session set and, when the most verbose
// level any session wants changes, passes it to the sources
// (Backend.SetLogLevel), before the client gets its answer.
func (f *Front) levelSet(ctx context.Context, session string, level mcp.LoggingLevel) {
	f.cats.levelMu.Lock()
	defer f.cats.levelMu.Unlock()
	if f.cats.levels == nil {
		f.cats.levels = map[string]mcp.LoggingLevel{}
	}
	f.cats.levels[session] = level
	want := level
	for _, l := range f.cats.levels {
		if want.ShouldSendTo(l) {
			want = l // l is more verbose
		}
	}
	if want == f.cats.forwarded {
		return
	}
	f.cats.forwarded = want
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), setLevelTimeout)
	defer cancel()
	f.b.SetLogLevel(ctx, string(want))
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
	// mcp-go pages resources and templates by name alone, which upstreams
	// need not keep unique: a page boundary between two of one name would
	// skip one, and their order would vary. These hooks page them again by
	// name and URI (mcp-go sends what an after-hook leaves in the result).
	// Each principal pages through what it may see (scope.go).
	hooks.AddAfterListResources(func(ctx context.Context, _ any, req *mcp.ListResourcesRequest, res *mcp.ListResourcesResult) {
		s, visible := f.surface(), f.visibleTo(f.identity(ctx))
		list := keep(s.resList, func(r mcp.Resource) bool { return visible(s.resources[r.URI]) })
		res.Resources, res.NextCursor = page(list, req.Params.Cursor, func(r mcp.Resource) string { return r.Name + "\x00" + r.URI })
	})
	hooks.AddAfterListResourceTemplates(func(ctx context.Context, _ any, req *mcp.ListResourceTemplatesRequest, res *mcp.ListResourceTemplatesResult) {
		s, visible := f.surface(), f.visibleTo(f.identity(ctx))
		list := keep(s.tmplList, func(t mcp.ResourceTemplate) bool { return visible(s.tmplOwner[t.URITemplate.Raw()]) })
		res.ResourceTemplates, res.NextCursor = page(list, req.Params.Cursor, func(t mcp.ResourceTemplate) string { return t.Name + "\x00" + t.URITemplate.Raw() })
	})
}

// page returns the page of list (sorted by key) after cursor (the key of
// the last entry of the page before, base64-encoded, as mcp-go's cursors
// are), at most PageSize entries, and the cursor of the next page ("" at
// the end).
func page[T any](list []T, cursor mcp.Cursor, key func(T) string) ([]T, mcp.Cursor) {
	start := 0
	if cursor != "" {
		if after, err := base64.StdEncoding.DecodeString(string(cursor)); err == nil {
			start, _ = slices.BinarySearchFunc(list, string(after), func(e T, k string) int {
				if key(e) <= k {
					return -1
				}
				return 1
			})
		}
	}
	end := min(start+PageSize, len(list))
	out := append(make([]T, 0, end-start), list[start:end]...)
	if end == len(list) {
		return out, ""
	}
	return out, mcp.Cursor(base64.StdEncoding.EncodeToString([]byte(key(list[end-1]))))
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
	if err := f.subs.Admit(x.s.id, principal.NameOf(x.ident), p.URI, f.readable(x.ident, p.URI)); err != nil {
		a := errorAnswer(m.id, mcp.INVALID_PARAMS, err.Error(), nil)
		return &a
	}
	return nil
}
