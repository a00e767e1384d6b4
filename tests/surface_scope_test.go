package tests

// The MCP surface beyond tools (resources, resource templates, prompts,
// completion, subscriptions) under the principal's rules (issue 31, item
// 2): an upstream's catalog only for principals allowed one of its tools,
// its requests counted against the principal's rate, passed through the
// hooks and counted in the metrics like tool calls.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// Tokens of adminAliceBob.
const (
	adminToken = "admin-token-0123456789abcdef"
	aliceToken = "alice-token-0123456789abcdef"
	bobToken   = "bob-token-0123456789abcdef"
)

// adminAliceBob is an auth section with three principals: admin (in
// auth.admins), alice, limited to 5 calls a second, and bob, who may not
// use the tools of the upstream ev.
const adminAliceBob = `auth:
  admins: [admin]
  tokens:
    - name: admin
      token: ` + adminToken + `
    - name: alice
      token: ` + aliceToken + `
      rate: 5/s
    - name: bob
      token: ` + bobToken + `
      deny: ["ev__*"]
`

// surfaceClient is an initialized client of srv sending token, failing t
// when it cannot connect.
func surfaceClient(t *testing.T, srv *server, token string) *client.Client {
	t.Helper()
	c, err := authClient(t, srv, token)
	if err != nil {
		t.Fatalf("connecting with a token: %v", err)
	}
	return c
}

func TestSurfaceScopedByPrincipal(t *testing.T) {
	m := newProcMarker(t)
	srv := serveUpstreams(t, m, adminAliceBob+`hooks:
  - type: redact
    tools: ["ev__*"]
    patterns: ["[Rr]esource 7", "Eve"]
upstreams:
`+everythingUpstream(t, m))
	ctx, cancel := context.WithTimeout(t.Context(), 4*callTimeout)
	defer cancel()
	alice, bob := surfaceClient(t, srv, aliceToken), surfaceClient(t, srv, bobToken)
	var uri string
	pollUntil(t, listenTimeout, "server-everything's resources and prompts for alice", func() (bool, string) {
		res, err := alice.ListResources(ctx, mcp.ListResourcesRequest{})
		if err != nil {
			return false, err.Error()
		}
		ps, err := alice.ListPrompts(ctx, mcp.ListPromptsRequest{})
		if err != nil {
			return false, err.Error()
		}
		if len(res.Resources) > 0 {
			uri = res.Resources[0].URI
		}
		return len(res.Resources) > 0 && len(ps.Prompts) > 0, fmt.Sprintf("%d resources, %d prompts", len(res.Resources), len(ps.Prompts))
	})

	t.Run("bob sees nothing of ev", func(t *testing.T) {
		if res, err := bob.ListResources(ctx, mcp.ListResourcesRequest{}); err != nil || len(res.Resources) != 0 {
			t.Errorf("bob's resources/list = %+v, %v; want none of ev's", res, err)
		}
		if res, err := bob.ListResourceTemplates(ctx, mcp.ListResourceTemplatesRequest{}); err != nil || len(res.ResourceTemplates) != 0 {
			t.Errorf("bob's resources/templates/list = %+v, %v; want none of ev's", res, err)
		}
		if res, err := bob.ListPrompts(ctx, mcp.ListPromptsRequest{}); err != nil || len(res.Prompts) != 0 {
			t.Errorf("bob's prompts/list = %+v, %v; want none of ev's", res, err)
		}
		read := func(u string) error {
			req := mcp.ReadResourceRequest{}
			req.Params.URI = u
			res, err := bob.ReadResource(ctx, req)
			if err == nil {
				t.Errorf("bob's resources/read %s = %+v; want it refused", u, res)
			}
			return err
		}
		// A hidden resource is refused as one that does not exist is.
		hidden, none := read(uri), read("demo://no/such/resource")
		if hidden != nil && none != nil && strings.ReplaceAll(hidden.Error(), uri, "U") != strings.ReplaceAll(none.Error(), "demo://no/such/resource", "U") {
			t.Errorf("bob's read of a hidden resource: %v; of a missing one: %v; want the same answer", hidden, none)
		}
		read("demo://resource/dynamic/text/7")
		get := mcp.GetPromptRequest{}
		get.Params.Name = "ev__simple-prompt"
		if res, err := bob.GetPrompt(ctx, get); err == nil {
			t.Errorf("bob's prompts/get ev__simple-prompt = %+v; want it refused", res)
		}
		comp := mcp.CompleteRequest{}
		comp.Params.Ref = mcp.PromptReference{Type: "ref/prompt", Name: "ev__completable-prompt"}
		comp.Params.Argument = mcp.CompleteArgument{Name: "department", Value: "Eng"}
		if res, err := bob.Complete(ctx, comp); err == nil && len(res.Completion.Values) != 0 {
			t.Errorf("bob's completion/complete = %v; want no values", res.Completion.Values)
		}
		sub := mcp.SubscribeRequest{}
		sub.Params.URI = uri
		if err := bob.Subscribe(ctx, sub); err == nil {
			t.Errorf("bob's resources/subscribe %s succeeded; want it refused", uri)
		}
	})

	t.Run("hooks apply to alice's reads and prompts", func(t *testing.T) {
		req := mcp.ReadResourceRequest{}
		req.Params.URI = "demo://resource/dynamic/text/7"
		res, err := alice.ReadResource(ctx, req)
		if err != nil || len(res.Contents) == 0 {
			t.Fatalf("alice's resources/read = %+v, %v", res, err)
		}
		if tc, ok := res.Contents[0].(mcp.TextResourceContents); !ok || !strings.Contains(tc.Text, "[redacted]") || strings.Contains(tc.Text, "esource 7") {
			t.Errorf("alice's resources/read = %+v; want resource 7's name redacted", res.Contents[0])
		}
		get := mcp.GetPromptRequest{}
		get.Params.Name = "ev__completable-prompt"
		get.Params.Arguments = map[string]string{"department": "Sales", "name": "Eve"}
		pr, err := alice.GetPrompt(ctx, get)
		if err != nil || len(pr.Messages) == 0 {
			t.Fatalf("alice's prompts/get = %+v, %v", pr, err)
		}
		if tc, ok := pr.Messages[0].Content.(mcp.TextContent); !ok || strings.Contains(tc.Text, "Eve") || !strings.Contains(tc.Text, "[redacted]") {
			t.Errorf("alice's prompts/get message = %+v; want Eve redacted", pr.Messages[0].Content)
		}
	})

	t.Run("alice's reads count against her rate", func(t *testing.T) {
		req := mcp.ReadResourceRequest{}
		req.Params.URI = uri
		var ok, limited int
		for range 20 {
			_, err := alice.ReadResource(ctx, req)
			switch {
			case err == nil:
				ok++
			case strings.Contains(err.Error(), "rate_limited"):
				limited++
			default:
				t.Fatalf("alice's resources/read: %v", err)
			}
		}
		if limited == 0 || ok > 10 {
			t.Errorf("20 reads at once by alice (5/s): %d read, %d rate limited; want most refused as rate_limited", ok, limited)
		}
	})

	t.Run("events show them to their principal", func(t *testing.T) {
		state := func(token string) string {
			r := getWith(t, srv.URL+"/ui/state", token)
			if r.Status != http.StatusOK {
				t.Fatalf("GET /ui/state = %d %s", r.Status, r.Body)
			}
			return string(r.Body)
		}
		if body := state(aliceToken); !strings.Contains(body, `"tool":"ev__resources.read"`) || !strings.Contains(body, `"tool":"ev__prompts.get"`) {
			t.Errorf("alice's /ui/state = %s; want her reads and prompt gets among her recent calls", body)
		}
		if body := state(bobToken); strings.Contains(body, `"tool":"ev__resources.read"`) {
			t.Errorf("bob's /ui/state = %s; want none of alice's reads", body)
		}
	})

	t.Run("metrics count them like tool calls", func(t *testing.T) {
		text := scrapeWith(t, srv.URL, adminToken)
		var lines []string
		for line := range strings.Lines(text) {
			if strings.HasPrefix(line, "toolgate_tool_calls_total{") && strings.Contains(line, `tool="ev__resources.read"`) {
				lines = append(lines, strings.TrimSpace(line))
			}
		}
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, `class="rate_limited"`) }) ||
			!slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, `outcome="ok"`) }) {
			t.Errorf("toolgate_tool_calls_total for ev__resources.read = %q; want ok and rate_limited samples", lines)
		}
	})
}

// getWith sends a GET of url with token as the bearer token.
func getWith(t *testing.T, url, token string) httpReply {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := newHTTPClient().Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading %s: %v", url, err)
	}
	return httpReply{Status: resp.StatusCode, Body: body}
}
