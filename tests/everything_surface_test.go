package tests

// server-everything behind toolgate as a prefixed upstream: what it offers
// besides tools (resources, templates, prompts, completion, logging), and
// its tools that ask toolgate's client for sampling and elicitation, all
// through toolgate, with an mcp-go client that answers both.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// sampler answers every sampling request with a fixed text and records
// the prompts it was asked.
type sampler struct{ asked chan string }

func (s sampler) CreateMessage(_ context.Context, req mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	text := ""
	if len(req.Messages) > 0 {
		if tc, ok := req.Messages[0].Content.(mcp.TextContent); ok {
			text = tc.Text
		}
	}
	select {
	case s.asked <- text:
	default:
	}
	return &mcp.CreateMessageResult{SamplingMessage: mcp.SamplingMessage{Role: mcp.RoleAssistant, Content: mcp.NewTextContent("sampled by the test client")}, Model: "test-model", StopReason: "endTurn"}, nil
}

// formFiller accepts every elicitation with a name.
type formFiller struct{}

func (formFiller) Elicit(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{
		Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"name": "Ada Lovelace"},
	}}, nil
}

func TestEverythingSurface(t *testing.T) {
	m := newProcMarker(t)
	srv := serveUpstreams(t, m, "upstreams:\n"+everythingUpstream(t, m))
	waitReady(t, srv)

	asked := make(chan string, 4)
	tr, err := transport.NewStreamableHTTP(srv.URL+"/mcp", transport.WithContinuousListening())
	if err != nil {
		t.Fatal(err)
	}
	// A 2025 session: sampling and elicitation reach it as server requests
	// (a 2026-07-28 client is tested in protocol2026_test.go).
	c := client.NewClient(tr, client.WithSamplingHandler(sampler{asked}), client.WithElicitationHandler(formFiller{}), client.WithProtocolVersion(protocolVersion))
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 2*callTimeout)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	logs := collect(c, "notifications/message")
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = protocolVersion
	init.Params.ClientInfo = mcp.Implementation{Name: "toolgate-e2e-surface", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	// server-everything registers its sampling and elicitation tools once
	// its client (toolgate) has declared those capabilities.
	waitTools(t, c, "ev__trigger-sampling-request", "ev__trigger-elicitation-request")
	// toolgate lists its resources and prompts just after its tools (and
	// again on their list_changed): wait until both are served.
	pollUntil(t, listenTimeout, "server-everything's resources and prompts through toolgate", func() (bool, string) {
		res, err := c.ListResources(ctx, mcp.ListResourcesRequest{})
		if err != nil {
			return false, err.Error()
		}
		ps, err := c.ListPrompts(ctx, mcp.ListPromptsRequest{})
		if err != nil {
			return false, err.Error()
		}
		return len(res.Resources) > 0 && len(ps.Prompts) > 0, fmt.Sprintf("%d resources, %d prompts", len(res.Resources), len(ps.Prompts))
	})

	t.Run("resources", func(t *testing.T) {
		list, err := c.ListResources(ctx, mcp.ListResourcesRequest{})
		if err != nil || len(list.Resources) == 0 {
			t.Fatalf("resources/list = %+v, %v; want server-everything's resources", list, err)
		}
		first := list.Resources[0]
		if !strings.HasPrefix(first.URI, "demo://") {
			t.Errorf("resource URI %q, want it as the upstream gives it (demo://...)", first.URI)
		}
		read := mcp.ReadResourceRequest{}
		read.Params.URI = first.URI
		if res, err := c.ReadResource(ctx, read); err != nil || len(res.Contents) == 0 {
			t.Errorf("resources/read %s = %+v, %v", first.URI, res, err)
		}
		tmpls, err := c.ListResourceTemplates(ctx, mcp.ListResourceTemplatesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var raw []string
		for _, tm := range tmpls.ResourceTemplates {
			raw = append(raw, tm.URITemplate.Raw())
		}
		if !slices.Contains(raw, "demo://resource/dynamic/text/{resourceId}") {
			t.Errorf("resources/templates/list = %v, want demo://resource/dynamic/text/{resourceId}", raw)
		}
		read.Params.URI = "demo://resource/dynamic/text/7"
		res, err := c.ReadResource(ctx, read)
		if err != nil || len(res.Contents) == 0 {
			t.Fatalf("resources/read of a templated URI = %+v, %v", res, err)
		}
		if tc, ok := res.Contents[0].(mcp.TextResourceContents); !ok || !strings.Contains(tc.Text, "7") {
			t.Errorf("resources/read demo://resource/dynamic/text/7 = %+v, want text naming resource 7", res.Contents[0])
		}

		// The links a tool result carries can be read through toolgate.
		call := mcp.CallToolRequest{}
		call.Params.Name, call.Params.Arguments = "ev__get-resource-links", map[string]any{"count": 2}
		links, err := c.CallTool(ctx, call)
		if err != nil || links.IsError {
			t.Fatalf("ev__get-resource-links = %+v, %v", links, err)
		}
		n := 0
		for _, part := range links.Content {
			link, ok := part.(mcp.ResourceLink)
			if !ok {
				continue
			}
			n++
			read.Params.URI = link.URI
			if res, err := c.ReadResource(ctx, read); err != nil || len(res.Contents) == 0 {
				t.Errorf("resources/read of the linked %s = %+v, %v", link.URI, res, err)
			}
		}
		if n != 2 {
			t.Errorf("ev__get-resource-links returned %d resource links, want 2", n)
		}
	})

	t.Run("prompts and completion", func(t *testing.T) {
		list, err := c.ListPrompts(ctx, mcp.ListPromptsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range list.Prompts {
			names = append(names, p.Name)
		}
		for _, want := range []string{"ev__simple-prompt", "ev__args-prompt", "ev__completable-prompt"} {
			if !slices.Contains(names, want) {
				t.Errorf("prompts/list = %v, want %s (prefixed like the tools)", names, want)
			}
		}
		get := mcp.GetPromptRequest{}
		get.Params.Name = "ev__completable-prompt"
		get.Params.Arguments = map[string]string{"department": "Sales", "name": "Eve"}
		res, err := c.GetPrompt(ctx, get)
		if err != nil || len(res.Messages) == 0 {
			t.Fatalf("prompts/get = %+v, %v", res, err)
		}
		if tc, ok := res.Messages[0].Content.(mcp.TextContent); !ok || !strings.Contains(tc.Text, "Eve") || !strings.Contains(tc.Text, "Sales") {
			t.Errorf("prompts/get message = %+v, want the arguments in it", res.Messages[0].Content)
		}
		comp := mcp.CompleteRequest{}
		comp.Params.Ref = mcp.PromptReference{Type: "ref/prompt", Name: "ev__completable-prompt"}
		comp.Params.Argument = mcp.CompleteArgument{Name: "department", Value: "Eng"}
		done, err := c.Complete(ctx, comp)
		if err != nil || !slices.Equal(done.Completion.Values, []string{"Engineering"}) {
			t.Errorf("completion/complete department Eng = %+v, %v; want [Engineering] from the upstream", done, err)
		}
	})

	t.Run("sampling and elicitation", func(t *testing.T) {
		call := func(name string, args map[string]any) string {
			req := mcp.CallToolRequest{}
			req.Params.Name, req.Params.Arguments = name, args
			res, err := c.CallTool(ctx, req)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			var b strings.Builder
			for _, part := range res.Content {
				if tc, ok := part.(mcp.TextContent); ok {
					b.WriteString(tc.Text)
				}
			}
			if res.IsError {
				t.Fatalf("%s failed: %s", name, b.String())
			}
			return b.String()
		}
		if got := call("ev__trigger-sampling-request", map[string]any{"prompt": "a haiku please"}); !strings.Contains(got, "sampled by the test client") {
			t.Errorf("trigger-sampling-request = %q, want the client's answer in it", got)
		}
		wasAsked(t, asked, "a haiku please")
		if got := call("ev__trigger-elicitation-request", map[string]any{}); !strings.Contains(got, "Ada Lovelace") {
			t.Errorf("trigger-elicitation-request = %q, want the client's answer in it", got)
		}
	})

	t.Run("logging", func(t *testing.T) {
		if err := c.SetLevel(ctx, mcp.SetLevelRequest{Params: mcp.SetLevelParams{Level: mcp.LoggingLevelDebug}}); err != nil {
			t.Fatal(err)
		}
		req := mcp.CallToolRequest{}
		req.Params.Name = "ev__toggle-simulated-logging"
		if _, err := c.CallTool(ctx, req); err != nil {
			t.Fatal(err)
		}
		// It logs once at once, then every 5 seconds, at random levels.
		timer := time.NewTimer(callTimeout)
		defer timer.Stop()
		select {
		case n := <-logs:
			if logger, _ := n.Params.AdditionalFields["logger"].(string); logger != "ev" && !strings.HasPrefix(logger, "ev/") {
				t.Errorf("log message logger = %q, want it to name the upstream ev", logger)
			}
		case <-timer.C:
			t.Fatalf("no log message from the upstream within %v", callTimeout)
		}
		if _, err := c.CallTool(ctx, req); err != nil { // stop it
			t.Fatal(err)
		}
	})
}

// wasAsked checks that the client's sampling handler was asked, with a
// prompt holding want, before the call that made the upstream ask
// returned.
func wasAsked(t *testing.T, asked <-chan string, want string) {
	t.Helper()
	select {
	case p := <-asked:
		if !strings.Contains(p, want) {
			t.Errorf("the client was asked %q, want the tool's prompt", p)
		}
	default:
		t.Error("the client's sampling handler was never asked")
	}
}
