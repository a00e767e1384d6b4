package mcpfront

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/internal/mcppeer"
	"github.com/toolgate/toolgate/internal/principal"
	"github.com/toolgate/toolgate/registry"
)

// denyPolicy permits every tool but those matching deny.
type denyPolicy struct{ deny string }

func (p denyPolicy) Permits(tool string) bool {
	ok, _ := path.Match(p.deny, tool)
	return !ok
}

func (denyPolicy) Take() time.Duration { return 0 }

// bobDeniedS is a front whose clients are the principal their
// X-Test-Principal header names: bob is denied s__*, anyone else denied
// nothing.
func bobDeniedS(t *testing.T) *Front {
	auth := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			who := r.Header.Get("X-Test-Principal")
			id := &principal.Identity{Name: who, Policy: denyPolicy{deny: "none"}}
			if who == "bob" {
				id.Policy = denyPolicy{deny: "s__*"}
			}
			next.ServeHTTP(w, r.WithContext(principal.With(r.Context(), id)))
		})
	}
	f := New(&fakeBackend{reg: registry.New()}, Options{Name: "toolgate", Version: "test", MCPPath: "/mcp",
		SessionIdleTTL: time.Minute, MaxBodyBytes: 1 << 20, ReadTimeout: 10 * time.Second, Authenticate: auth})
	t.Cleanup(f.Close)
	return f
}

// TestSurfaceScoped: a source's resources, templates and prompts are
// visible only to principals permitted one of its tools (issue 31, item
// 2). bob, denied s__*, sees none of them; a read of its resource is
// answered as that of a URI no source serves, a prompts/get as an unknown
// prompt (mcp-go's prompt filter, which filters prompts/list before paging
// and refuses prompts/get of a prompt it leaves out), a completion with no
// values; and nothing reaches the source. alice sees and reads them.
func TestSurfaceScoped(t *testing.T) {
	f := bobDeniedS(t)
	f.SetTools([]Tool{{Def: &registry.Tool{Name: "s__t", Kind: registry.MCP, Source: "upstream:s"}}}, nil)
	src := &fakeSource{answer: func(_ context.Context, _ mcppeer.Peer, method string, _ any) (json.RawMessage, error) {
		switch method {
		case "prompts/get":
			return json.RawMessage(`{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}]}`), nil
		case "completion/complete":
			return json.RawMessage(`{"completion":{"values":["x"]}}`), nil
		}
		return json.RawMessage(`{"contents":[{"uri":"test://r","text":"r"}]}`), nil
	}}
	f.SetCatalog("upstream:s", &Catalog{
		Resources:   []json.RawMessage{json.RawMessage(`{"uri":"test://r","name":"r"}`)},
		Templates:   []json.RawMessage{json.RawMessage(`{"uriTemplate":"test://t/{id}","name":"t"}`)},
		Prompts:     []CatalogPrompt{{Name: "s__p", Orig: "p", Raw: json.RawMessage(`{"name":"p","arguments":[{"name":"a"}]}`)}},
		Completions: true, Subscribe: true, Forward: src.forward,
	})
	mux := http.NewServeMux()
	f.Mount(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	ctx := t.Context()

	bob := scopedClient(t, srv.URL, "bob")
	if res, err := bob.ListResources(ctx, mcp.ListResourcesRequest{}); err != nil || len(res.Resources) != 0 {
		t.Errorf("bob's resources/list = %+v, %v; want none", res, err)
	}
	if res, err := bob.ListResourceTemplates(ctx, mcp.ListResourceTemplatesRequest{}); err != nil || len(res.ResourceTemplates) != 0 {
		t.Errorf("bob's resources/templates/list = %+v, %v; want none", res, err)
	}
	if res, err := bob.ListPrompts(ctx, mcp.ListPromptsRequest{}); err != nil || len(res.Prompts) != 0 {
		t.Errorf("bob's prompts/list = %+v, %v; want none", res, err)
	}
	read := func(uri string) string {
		req := mcp.ReadResourceRequest{}
		req.Params.URI = uri
		_, err := bob.ReadResource(ctx, req)
		if err == nil {
			t.Fatalf("bob's resources/read %s succeeded", uri)
		}
		return strings.ReplaceAll(err.Error(), uri, "URI")
	}
	if hidden, none := read("test://r"), read("test://none"); hidden != none {
		t.Errorf("bob's read of a hidden resource: %q; of one no source serves: %q; want the same", hidden, none)
	}
	read("test://t/7")
	get := mcp.GetPromptRequest{}
	get.Params.Name = "s__p"
	_, hidden := bob.GetPrompt(ctx, get)
	get.Params.Name = "s__none"
	_, none := bob.GetPrompt(ctx, get)
	if hidden == nil || none == nil || strings.ReplaceAll(hidden.Error(), "s__p", "P") != strings.ReplaceAll(none.Error(), "s__none", "P") {
		t.Errorf("bob's prompts/get of a hidden prompt: %v; of an unknown one: %v; want the same refusal", hidden, none)
	}
	comp := mcp.CompleteRequest{}
	comp.Params.Ref = mcp.PromptReference{Type: "ref/prompt", Name: "s__p"}
	comp.Params.Argument = mcp.CompleteArgument{Name: "a", Value: "x"}
	if res, err := bob.Complete(ctx, comp); err != nil || len(res.Completion.Values) != 0 {
		t.Errorf("bob's completion/complete = %+v, %v; want no values", res, err)
	}
	sub := mcp.SubscribeRequest{}
	sub.Params.URI = "test://r"
	if err := bob.Subscribe(ctx, sub); err == nil {
		t.Error("bob's resources/subscribe test://r succeeded")
	}
	if got := src.got(); len(got) != 0 {
		t.Errorf("bob's requests reached the source: %v", got)
	}

	alice := scopedClient(t, srv.URL, "alice")
	if res, err := alice.ListResources(ctx, mcp.ListResourcesRequest{}); err != nil || len(res.Resources) != 1 {
		t.Errorf("alice's resources/list = %+v, %v; want test://r", res, err)
	}
	if res, err := alice.ListPrompts(ctx, mcp.ListPromptsRequest{}); err != nil || len(res.Prompts) != 1 {
		t.Errorf("alice's prompts/list = %+v, %v; want s__p", res, err)
	}
	req := mcp.ReadResourceRequest{}
	req.Params.URI = "test://t/7"
	if _, err := alice.ReadResource(ctx, req); err != nil {
		t.Errorf("alice's resources/read test://t/7: %v", err)
	}
	if res, err := alice.Complete(ctx, comp); err != nil || len(res.Completion.Values) != 1 {
		t.Errorf("alice's completion/complete = %+v, %v; want the source's value", res, err)
	}
}

// scopedClient is an initialized client of the front at url, as who.
func scopedClient(t *testing.T, url, who string) *client.Client {
	t.Helper()
	return surfaceClientWith(t, url, []transport.StreamableHTTPCOption{transport.WithHTTPHeaders(map[string]string{"X-Test-Principal": who})})
}

// TestLogScoped: a source's log message that relates to no call reaches
// only the sessions whose principal may see the source (issue 31, item 3:
// ev's log messages triggered by admin reached bob, who may use none of
// ev's tools). bob, denied s__*, gets o's messages but never s's, though
// each round sends s's first on the same session stream; alice gets s's.
func TestLogScoped(t *testing.T) {
	f := bobDeniedS(t)
	f.SetTools([]Tool{
		{Def: &registry.Tool{Name: "s__t", Kind: registry.MCP, Source: "upstream:s"}},
		{Def: &registry.Tool{Name: "o__t", Kind: registry.MCP, Source: "upstream:o"}},
	}, nil)
	mux := http.NewServeMux()
	f.Mount(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	type note struct{ who, data string }
	logs := make(chan note, 1000)
	listen := func(who string) {
		c := surfaceClientWith(t, srv.URL, []transport.StreamableHTTPCOption{
			transport.WithHTTPHeaders(map[string]string{"X-Test-Principal": who}), transport.WithContinuousListening()})
		c.OnNotification(func(n mcp.JSONRPCNotification) {
			if n.Method == "notifications/message" {
				d, _ := n.Params.AdditionalFields["data"].(string)
				logs <- note{who, d}
			}
		})
		if err := c.SetLevel(t.Context(), mcp.SetLevelRequest{Params: mcp.SetLevelParams{Level: mcp.LoggingLevelInfo}}); err != nil {
			t.Fatal(err)
		}
	}
	listen("alice")
	listen("bob")
	// The messages travel on each session's GET stream, which opens after
	// initialize: send until bob has o's message and alice s's.
	send := func() {
		f.Log("upstream:s", "s__", map[string]any{"level": "info", "logger": "s", "data": "from s"})
		f.Log("upstream:o", "o__", map[string]any{"level": "info", "logger": "o", "data": "from o"})
	}
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	send()
	for bobO, aliceS := false, false; !bobO || !aliceS; {
		select {
		case n := <-logs:
			switch n {
			case note{"bob", "from s"}:
				t.Fatal("bob got s's log message; he may use none of s's tools")
			case note{"bob", "from o"}:
				bobO = true
			case note{"alice", "from s"}:
				aliceS = true
			}
		case <-tick.C:
			send()
		case <-deadline:
			t.Fatalf("within 10s: bob got o's message %v, alice s's %v; want both", bobO, aliceS)
		}
	}
}
