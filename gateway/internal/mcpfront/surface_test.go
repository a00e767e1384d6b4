package mcpfront

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/toolgate/toolgate/internal/mcppeer"
)

// levelsSet records the levels each fakeBackend was asked to pass on.
var (
	levelsMu  sync.Mutex
	levelsSet = map[*fakeBackend][]string{} // guarded by levelsMu
)

func (b *fakeBackend) SetLogLevel(_ context.Context, level string) {
	levelsMu.Lock()
	defer levelsMu.Unlock()
	levelsSet[b] = append(levelsSet[b], level)
}

func levelsOf(b *fakeBackend) []string {
	levelsMu.Lock()
	defer levelsMu.Unlock()
	return slices.Clone(levelsSet[b])
}

// fakeSource is a source whose Forward records its requests and answers
// them from answer.
type fakeSource struct {
	mu       sync.Mutex
	requests []string // "method params-JSON", guarded by mu
	answer   func(ctx context.Context, peer mcppeer.Peer, method string, params any) (json.RawMessage, error)
}

func (s *fakeSource) forward(ctx context.Context, peer mcppeer.Peer, method string, params any) (json.RawMessage, error) {
	b, _ := json.Marshal(params)
	s.mu.Lock()
	s.requests = append(s.requests, method+" "+string(b))
	s.mu.Unlock()
	return s.answer(ctx, peer, method, params)
}

func (s *fakeSource) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// surfaceClient connects an mcp-go client over streamable HTTP, with the
// GET stream open for notifications.
func surfaceClient(t *testing.T, url string, opts ...client.ClientOption) *client.Client {
	t.Helper()
	return newSurfaceClient(t, url, true, opts...)
}

// newSurfaceClient connects an mcp-go client over streamable HTTP, with
// the GET stream open when listen is set.
func newSurfaceClient(t *testing.T, url string, listen bool, opts ...client.ClientOption) *client.Client {
	t.Helper()
	var trOpts []transport.StreamableHTTPCOption
	if listen {
		trOpts = append(trOpts, transport.WithContinuousListening())
	}
	return surfaceClientWith(t, url, trOpts, opts...)
}

// surfaceClientWith connects an mcp-go client over streamable HTTP with
// trOpts.
func surfaceClientWith(t *testing.T, url string, trOpts []transport.StreamableHTTPCOption, opts ...client.ClientOption) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url+"/mcp", trOpts...)
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, append(opts, client.WithProtocolVersion(mcp.ProtocolVersion20251125))...)
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	init.Params.ClientInfo = mcp.Implementation{Name: "test", Version: "1"}
	res, err := c.Initialize(t.Context(), init)
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Capabilities.Resources; r == nil || !r.Subscribe || res.Capabilities.Prompts == nil || res.Capabilities.Logging == nil || res.Capabilities.Completions == nil {
		t.Fatalf("initialize capabilities = %+v, want resources (subscribe), prompts, logging and completions: options applied after NewMCPServer must count", res.Capabilities)
	}
	return c
}

// TestSurface serves two sources' catalogs: lists merge with a URI both
// list served from the source whose name sorts first, and every request
// reaches the source owning what it names, under the source's own names.
func TestSurface(t *testing.T) {
	g, _ := newGateway(t, nil)
	a := &fakeSource{answer: func(_ context.Context, _ mcppeer.Peer, method string, _ any) (json.RawMessage, error) {
		return json.RawMessage(`{"contents":[{"uri":"test://x","mimeType":"text/plain","text":"from a"}]}`), nil
	}}
	b := &fakeSource{answer: func(_ context.Context, _ mcppeer.Peer, method string, params any) (json.RawMessage, error) {
		switch method {
		case "resources/read":
			uri := params.(map[string]any)["uri"].(string)
			if uri == "test://missing/1" {
				return nil, errors.New("no such thing")
			}
			return json.RawMessage(`{"contents":[{"uri":"` + uri + `","text":"from b"}]}`), nil
		case "prompts/get":
			return json.RawMessage(`{"messages":[{"role":"user","content":{"type":"text","text":"hello"}}]}`), nil
		case "completion/complete":
			return json.RawMessage(`{"completion":{"values":["paris","park"],"total":2}}`), nil
		}
		return json.RawMessage(`{}`), nil
	}}
	g.SetCatalog("upstream:b", &Catalog{
		Resources: []json.RawMessage{json.RawMessage(`{"uri":"test://x","name":"x of b"}`), json.RawMessage(`{"uri":"test://y","name":"y"}`)},
		Templates: []json.RawMessage{json.RawMessage(`{"uriTemplate":"test://t/{id}","name":"t"}`), json.RawMessage(`{"uriTemplate":"test://missing/{id}","name":"m"}`)},
		Prompts:   []CatalogPrompt{{Name: "b__greet", Orig: "greet", Raw: json.RawMessage(`{"name":"greet","description":"d","arguments":[{"name":"city"}]}`)}},
		Subscribe: true, Completions: true, Forward: b.forward,
	})
	g.SetCatalog("upstream:a", &Catalog{
		Resources: []json.RawMessage{json.RawMessage(`{"uri":"test://x","name":"x of a"}`)},
		Forward:   a.forward,
	})
	c := surfaceClient(t, serveHTTP(t, g).URL)
	ctx := t.Context()

	list, err := c.ListResources(ctx, mcp.ListResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range list.Resources {
		names = append(names, r.URI+"="+r.Name)
	}
	if want := []string{"test://x=x of a", "test://y=y"}; !slices.Equal(names, want) {
		t.Errorf("resources/list = %v, want %v", names, want)
	}
	read := func(uri string) (string, error) {
		req := mcp.ReadResourceRequest{}
		req.Params.URI = uri
		res, err := c.ReadResource(ctx, req)
		if err != nil {
			return "", err
		}
		return res.Contents[0].(mcp.TextResourceContents).Text, nil
	}
	if got, err := read("test://x"); got != "from a" || err != nil {
		t.Errorf("read test://x = %q, %v; want from a", got, err)
	}
	if got, err := read("test://t/7"); got != "from b" || err != nil {
		t.Errorf("read test://t/7 (a template of b) = %q, %v; want from b", got, err)
	}
	// A handler's error reaches the client as -32603 with its text.
	if _, err := read("test://missing/1"); err == nil || !strings.Contains(err.Error(), "no such thing") {
		t.Errorf("read of a failing URI: %v, want the source's error", err)
	}

	prompts, err := c.ListPrompts(ctx, mcp.ListPromptsRequest{})
	if err != nil || len(prompts.Prompts) != 1 || prompts.Prompts[0].Name != "b__greet" || prompts.Prompts[0].Description != "d" {
		t.Fatalf("prompts/list = %+v, %v; want b__greet as b described it", prompts, err)
	}
	get := mcp.GetPromptRequest{}
	get.Params.Name = "b__greet"
	get.Params.Arguments = map[string]string{"city": "Paris"}
	if res, err := c.GetPrompt(ctx, get); err != nil || len(res.Messages) != 1 {
		t.Errorf("prompts/get b__greet = %+v, %v", res, err)
	}
	comp := mcp.CompleteRequest{}
	comp.Params.Ref = mcp.PromptReference{Type: "ref/prompt", Name: "b__greet"}
	comp.Params.Argument = mcp.CompleteArgument{Name: "city", Value: "par"}
	if res, err := c.Complete(ctx, comp); err != nil || !slices.Equal(res.Completion.Values, []string{"paris", "park"}) {
		t.Errorf("completion/complete = %+v, %v; want paris, park", res, err)
	}
	want := []string{
		`resources/read {"uri":"test://t/7"}`,
		`resources/read {"uri":"test://missing/1"}`,
		`prompts/get {"arguments":{"city":"Paris"},"name":"greet"}`,
		`completion/complete {"argument":{"name":"city","value":"par"},"ref":{"name":"greet","type":"ref/prompt"}}`,
	}
	if got := b.got(); !slices.Equal(got, want) {
		t.Errorf("b's requests:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := a.got(); len(got) != 1 {
		t.Errorf("a's requests = %v, want the one read", got)
	}
}

// TestSurfaceSubscribeAndLevel: a subscription reaches the owning source
// once, an update reaches the subscribed session, and a session's
// logging/setLevel reaches the backend before the client has its answer
// (mcp-go runs after-hooks before it answers).
func TestSurfaceSubscribeAndLevel(t *testing.T) {
	g, _ := newGateway(t, nil)
	src := &fakeSource{answer: func(context.Context, mcppeer.Peer, string, any) (json.RawMessage, error) {
		return json.RawMessage(`{}`), nil
	}}
	g.SetCatalog("upstream:s", &Catalog{
		Resources: []json.RawMessage{json.RawMessage(`{"uri":"test://w","name":"w"}`)},
		Subscribe: true, Forward: src.forward,
	})
	updates := make(chan mcp.JSONRPCNotification, 10)
	logs := make(chan mcp.JSONRPCNotification, 10)
	c := surfaceClient(t, serveHTTP(t, g).URL)
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		switch n.Method {
		case "notifications/resources/updated":
			updates <- n
		case "notifications/message":
			logs <- n
		}
	})
	ctx := t.Context()
	sub := mcp.SubscribeRequest{}
	sub.Params.URI = "test://w"
	if err := c.Subscribe(ctx, sub); err != nil {
		t.Fatal(err)
	}
	if got := src.got(); !slices.Equal(got, []string{`resources/subscribe {"uri":"test://w"}`}) {
		t.Errorf("source requests = %v, want one subscribe", got)
	}
	if err := c.SetLevel(ctx, mcp.SetLevelRequest{Params: mcp.SetLevelParams{Level: mcp.LoggingLevelInfo}}); err != nil {
		t.Fatal(err)
	}
	if got := levelsOf(g.b); !slices.Equal(got, []string{"info"}) {
		t.Errorf("levels passed on = %v, want [info] by the time setLevel is answered", got)
	}
	// Updates and logs travel on the session's GET stream, which opens
	// after initialize: send until one arrives.
	waitNote(t, updates, func() { g.ResourceUpdated("test://w") })
	waitNote(t, logs, func() { g.Log("upstream:s", "s__", map[string]any{"level": "info", "logger": "s", "data": "hello"}) })
}

// waitNote calls send every 50 ms until ch delivers a notification.
func waitNote(t *testing.T, ch <-chan mcp.JSONRPCNotification, send func()) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	send()
	for {
		select {
		case <-ch:
			return
		case <-tick.C:
			send()
		case <-deadline.C:
			t.Fatal("no notification reached the client within 10s")
		}
	}
}

// samplingAnswer answers every sampling request with "sampled".
type samplingAnswer struct{}

func (samplingAnswer) CreateMessage(context.Context, mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	return &mcp.CreateMessageResult{SamplingMessage: mcp.SamplingMessage{Role: mcp.RoleAssistant, Content: mcp.NewTextContent("sampled")}, Model: "m"}, nil
}

type rootsAnswer struct{}

func (rootsAnswer) ListRoots(context.Context, mcp.ListRootsRequest) (*mcp.ListRootsResult, error) {
	return &mcp.ListRootsResult{Roots: []mcp.Root{{URI: "file:///work", Name: "work"}}}, nil
}

// TestRelay: a source's sampling/createMessage or roots/list during a
// client's request reaches that client and its answer comes back, whether
// or not the client has its GET stream open (a request is sent on the
// request's own stream: ask.go); a client that declared no such
// capability gets nothing and the source gets -32601.
func TestRelay(t *testing.T) {
	g, _ := newGateway(t, nil)
	src := &fakeSource{answer: func(ctx context.Context, peer mcppeer.Peer, srcMethod string, params any) (json.RawMessage, error) {
		method, ask := "sampling/createMessage", json.RawMessage(`{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxTokens":5}`)
		if p, _ := params.(map[string]any); p["uri"] == "test://roots" {
			method, ask = "roots/list", nil
		}
		res, err := peer.Request(ctx, method, ask)
		if err != nil {
			var rpc interface{ RPCCode() int }
			if errors.As(err, &rpc) {
				return json.RawMessage(fmt.Sprintf(`{"contents":[{"uri":"test://r","text":"code %d"}]}`, rpc.RPCCode())), nil
			}
			return nil, err
		}
		var r struct {
			Content struct{ Text string }  `json:"content"`
			Roots   []struct{ URI string } `json:"roots"`
		}
		_ = json.Unmarshal(res, &r)
		text := r.Content.Text
		if len(r.Roots) > 0 {
			text = r.Roots[0].URI
		}
		switch srcMethod {
		case "completion/complete":
			return json.RawMessage(`{"completion":{"values":["` + text + `"]}}`), nil
		case "prompts/get":
			return json.RawMessage(`{"messages":[{"role":"user","content":{"type":"text","text":"` + text + `"}}]}`), nil
		}
		return json.RawMessage(`{"contents":[{"uri":"test://r","text":"` + text + `"}]}`), nil
	}}
	g.SetCatalog("upstream:s", &Catalog{Resources: []json.RawMessage{
		json.RawMessage(`{"uri":"test://r","name":"r"}`), json.RawMessage(`{"uri":"test://roots","name":"roots"}`),
	}, Prompts: []CatalogPrompt{{Name: "s__p", Orig: "p", Raw: json.RawMessage(`{"name":"p","arguments":[{"name":"city"}]}`)}},
		Completions: true, Forward: src.forward})
	url := serveHTTP(t, g).URL
	read := func(t *testing.T, c *client.Client, uri string) string {
		// mcp-go alone sends a request only on the GET stream, where the
		// client may never see it: the read then waits for ever.
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		req := mcp.ReadResourceRequest{}
		req.Params.URI = uri
		res, err := c.ReadResource(ctx, req)
		if err != nil {
			t.Fatalf("reading %s: %v", uri, err)
		}
		return res.Contents[0].(mcp.TextResourceContents).Text
	}
	for _, listen := range []bool{true, false} {
		t.Run(fmt.Sprintf("GET stream %v", listen), func(t *testing.T) {
			c := newSurfaceClient(t, url, listen, client.WithSamplingHandler(samplingAnswer{}), client.WithRootsHandler(rootsAnswer{}))
			if got := read(t, c, "test://r"); got != "sampled" {
				t.Errorf("with sampling: %q, want the client's answer", got)
			}
			if got := read(t, c, "test://roots"); got != "file:///work" {
				t.Errorf("with roots: %q, want the client's root", got)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			get := mcp.GetPromptRequest{}
			get.Params.Name = "s__p"
			if res, err := c.GetPrompt(ctx, get); err != nil || len(res.Messages) != 1 || res.Messages[0].Content.(mcp.TextContent).Text != "sampled" {
				t.Errorf("prompts/get = %+v, %v; want the client's answer", res, err)
			}
			comp := mcp.CompleteRequest{}
			comp.Params.Ref = mcp.PromptReference{Type: "ref/prompt", Name: "s__p"}
			comp.Params.Argument = mcp.CompleteArgument{Name: "city", Value: "par"}
			if res, err := c.Complete(ctx, comp); err != nil || !slices.Equal(res.Completion.Values, []string{"sampled"}) {
				t.Errorf("completion/complete = %+v, %v; want the client's answer", res, err)
			}
			if got := read(t, newSurfaceClient(t, url, listen), "test://r"); got != "code -32601" {
				t.Errorf("without sampling: %q, want the source to get -32601", got)
			}
		})
	}
}

// TestSurfacePages: resources/list pages through every resource once, in
// the order of name then URI, even with names shared across a page
// boundary (mcp-go's own paging, by name alone, would skip some); prompts
// and templates page too.
func TestSurfacePages(t *testing.T) {
	g, _ := newGateway(t, nil)
	src := &fakeSource{answer: func(context.Context, mcppeer.Peer, string, any) (json.RawMessage, error) {
		return json.RawMessage(`{}`), nil
	}}
	var res, tmpls []json.RawMessage
	var prompts []CatalogPrompt
	var want []string
	for i := range 2*PageSize + 50 {
		uri := fmt.Sprintf("test://r/%03d", i)
		name := fmt.Sprintf("same name %d", i/7) // seven resources a name
		res = append(res, json.RawMessage(fmt.Sprintf(`{"uri":%q,"name":%q}`, uri, name)))
		want = append(want, name+" "+uri)
		tmpls = append(tmpls, json.RawMessage(fmt.Sprintf(`{"uriTemplate":"test://t%03d/{x}","name":"t"}`, i)))
		prompts = append(prompts, CatalogPrompt{Name: fmt.Sprintf("p%03d", i), Orig: "p", Raw: json.RawMessage(`{"name":"p"}`)})
	}
	slices.Sort(want)
	g.SetCatalog("upstream:s", &Catalog{Resources: res, Templates: tmpls, Prompts: prompts, Forward: src.forward})
	c := surfaceClient(t, serveHTTP(t, g).URL)
	ctx := t.Context()

	var got []string
	pages := 0
	req := mcp.ListResourcesRequest{}
	for {
		page, err := c.ListResourcesByPage(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(page.Resources) > PageSize {
			t.Fatalf("a page of %d resources, want at most %d", len(page.Resources), PageSize)
		}
		for _, r := range page.Resources {
			got = append(got, r.Name+" "+r.URI)
		}
		if page.NextCursor == "" {
			break
		}
		req.Params.Cursor = page.NextCursor
	}
	if pages != 3 || !slices.Equal(got, want) {
		t.Errorf("resources/list: %d pages, %d resources; want 3 pages of every resource once in order (first differences: %v)", pages, len(got), firstDiff(got, want))
	}
	all, err := c.ListResourceTemplates(ctx, mcp.ListResourceTemplatesRequest{})
	if err != nil || len(all.ResourceTemplates) != len(tmpls) {
		t.Errorf("resources/templates/list (every page) = %d templates, %v; want %d", len(all.ResourceTemplates), err, len(tmpls))
	}
	ps, err := c.ListPrompts(ctx, mcp.ListPromptsRequest{})
	if err != nil || len(ps.Prompts) != len(prompts) {
		t.Errorf("prompts/list (every page) = %d prompts, %v; want %d", len(ps.Prompts), err, len(prompts))
	}
	first, err := c.ListPromptsByPage(ctx, mcp.ListPromptsRequest{})
	if err != nil || len(first.Prompts) != PageSize || first.NextCursor == "" {
		t.Errorf("prompts/list first page = %d prompts, cursor %q, %v; want %d and a cursor", len(first.Prompts), first.NextCursor, err, PageSize)
	}
}

func firstDiff(got, want []string) []string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return []string{got[i], want[i]}
		}
	}
	return nil
}

// blockingSource is a source whose subscribe and unsubscribe calls each
// wait until the test releases them (or their context ends), recording
// "<method> started" and "<method> done".
type blockingSource struct {
	release chan struct{}
	mu      sync.Mutex
	log     []string // guarded by mu
}

func (s *blockingSource) note(e string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, e)
}

func (s *blockingSource) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log)
}

func (s *blockingSource) forward(ctx context.Context, _ mcppeer.Peer, method string, _ any) (json.RawMessage, error) {
	m := strings.TrimPrefix(method, "resources/")
	s.note(m + " started")
	select {
	case <-s.release:
	case <-ctx.Done():
		s.note(m + " cancelled")
		return nil, ctx.Err()
	}
	s.note(m + " done")
	return json.RawMessage(`{}`), nil
}

// TestSubscriptionOrder: session A, the only subscriber to a URI, ends
// while the source is slow, and session B subscribes to it meanwhile.
// A's end does not wait for the unsubscribe (the idle sweeper ends
// sessions), and B's subscribe goes out only after A's unsubscribe is
// done, so the source ends up subscribed, as B asked. At Close a
// pending unsubscribe is cut short and nothing is left running.
func TestSubscriptionOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, _ := newGateway(t, nil)
		src := &blockingSource{release: make(chan struct{})}
		const uri = "test://w"
		g.SetCatalog("upstream:s", &Catalog{
			Resources: []json.RawMessage{json.RawMessage(`{"uri":"test://w","name":"w"}`)},
			Subscribe: true, Forward: src.forward,
		})
		want := func(log ...string) {
			t.Helper()
			synctest.Wait()
			if got := src.got(); !slices.Equal(got, log) {
				t.Fatalf("source calls = %q, want %q", got, log)
			}
		}
		ctx := t.Context()

		subscribedA := make(chan struct{})
		go func() { g.subs.Subscribed(ctx, "A", "", uri, true); close(subscribedA) }()
		want("subscribe started")
		src.release <- struct{}{}
		<-subscribedA

		forgot := make(chan struct{})
		go func() { g.forgetSession("A"); close(forgot) }()
		want("subscribe started", "subscribe done", "unsubscribe started")
		select {
		case <-forgot:
		default:
			t.Fatal("forgetSession waits for the source's unsubscribe")
		}

		subscribedB := make(chan struct{})
		go func() { g.subs.Subscribed(ctx, "B", "", uri, true); close(subscribedB) }()
		want("subscribe started", "subscribe done", "unsubscribe started") // B's subscribe waits
		src.release <- struct{}{}
		want("subscribe started", "subscribe done", "unsubscribe started", "unsubscribe done", "subscribe started")
		src.release <- struct{}{}
		<-subscribedB
		want("subscribe started", "subscribe done", "unsubscribe started", "unsubscribe done", "subscribe started", "subscribe done")

		// B ends; the front closes while the unsubscribe waits.
		g.forgetSession("B")
		want("subscribe started", "subscribe done", "unsubscribe started", "unsubscribe done", "subscribe started", "subscribe done",
			"unsubscribe started")
		g.Close()
		// Close has waited for the unsubscribe to end: no synctest.Wait.
		if log := src.got(); log[len(log)-1] != "unsubscribe cancelled" {
			t.Fatalf("when Close returned the source had heard %q, want the unsubscribe ended", log)
		}
		want("subscribe started", "subscribe done", "unsubscribe started", "unsubscribe done", "subscribe started", "subscribe done",
			"unsubscribe started", "unsubscribe cancelled")
	})
}

// TestSubscribeBounds checks what a session may subscribe to: only URIs a
// source serves (listed, or matching a template), of at most
// maxSubscribeURI bytes, and at most maxSubscriptionsPerSession of them;
// each refusal is -32602 saying why, and nothing refused is held. A red
// team's 20,000 made-up 10 KB URIs held +750 MB before.
func TestSubscribeBounds(t *testing.T) {
	g, _ := newGateway(t, nil)
	src := &fakeSource{answer: func(context.Context, mcppeer.Peer, string, any) (json.RawMessage, error) {
		return json.RawMessage(`{}`), nil
	}}
	g.SetCatalog("upstream:s", &Catalog{
		Resources: []json.RawMessage{json.RawMessage(`{"uri":"test://w","name":"w"}`)},
		Templates: []json.RawMessage{json.RawMessage(`{"uriTemplate":"test://item/{id}","name":"item"}`)},
		Subscribe: true, Forward: src.forward,
	})
	c := surfaceClient(t, serveHTTP(t, g).URL)
	subscribe := func(uri string) error {
		req := mcp.SubscribeRequest{}
		req.Params.URI = uri
		return c.Subscribe(t.Context(), req)
	}
	for _, tc := range []struct{ uri, want string }{
		{"made://up", "no source serves this resource"},
		{"test://item/" + strings.Repeat("x", maxSubscribeURI), "URI is too long"},
	} {
		if err := subscribe(tc.uri); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("subscribe %.40s…: %v; want a refusal saying %q", tc.uri, err, tc.want)
		}
	}
	if err := subscribe("test://w"); err != nil {
		t.Fatalf("subscribe test://w: %v", err)
	}
	for i := 1; i < maxSubscriptionsPerSession; i++ {
		if err := subscribe(fmt.Sprintf("test://item/%d", i)); err != nil {
			t.Fatalf("subscription %d of %d: %v", i+1, maxSubscriptionsPerSession, err)
		}
	}
	if err := subscribe("test://item/one-too-many"); err == nil || !strings.Contains(err.Error(), "unsubscribe") {
		t.Errorf("subscription %d: %v; want a refusal naming the limit and what to do", maxSubscriptionsPerSession+1, err)
	}
	if n := len(g.subs.Sessions("made://up")); n != 0 {
		t.Errorf("a refused URI is held by %d sessions", n)
	}
}
