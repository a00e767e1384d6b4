package mcpfront

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/registry"
)

// answerYes is a client's user who accepts every question with decision
// "yes".
type answerYes struct{}

func (answerYes) Elicit(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{
		Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"decision": "yes"},
	}}, nil
}

// TestElicit pins fact 1: a session keeps the capabilities its client
// declared, so Request.Elicit is set only for a client that declared
// elicitation, and it reaches that client's user and brings the answer
// back.
func TestElicit(t *testing.T) {
	g, _ := newGateway(t, nil)
	// Registered for preflight to find, then replaced by a tool that sees
	// the Request.
	if err := g.reg.Add(registry.Tool{Name: "ask", Kind: registry.Stateless, Source: "test"}); err != nil {
		t.Fatal(err)
	}
	if (*g.tools.Load())["ask"] == nil { // Add delivers its change before it returns
		t.Fatal("the registered tool did not reach the front")
	}
	g.SetTools([]Tool{{Def: &registry.Tool{Name: "ask", Source: "test"}, Call: func(ctx context.Context, req *Request) *executors.Result {
		if req.Elicit == nil {
			return new(executors.Text("cannot ask"))
		}
		action, content, err := req.Elicit(ctx, "go on?", map[string]any{"type": "object", "properties": map[string]any{
			"decision": map[string]any{"type": "string", "enum": []string{"yes", "no"}},
		}})
		return new(executors.Text(fmt.Sprintf("%s %v %v", action, content["decision"], err)))
	}}}, nil)
	srv := serveHTTP(t, g)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name string
		opts []client.ClientOption
		want string
	}{
		{"declares elicitation", []client.ClientOption{client.WithElicitationHandler(answerYes{})}, "accept yes <nil>"},
		{"declares nothing", nil, "cannot ask"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := transport.NewStreamableHTTP(srv.URL + "/mcp")
			if err != nil {
				t.Fatal(err)
			}
			c := client.NewClient(tr, append(tc.opts, client.WithProtocolVersion(mcp.ProtocolVersion20251125))...)
			if err := c.Start(ctx); err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			init := mcp.InitializeRequest{}
			init.Params.ProtocolVersion = mcp.ProtocolVersion20251125
			init.Params.ClientInfo = mcp.Implementation{Name: "test", Version: "1"}
			if _, err := c.Initialize(ctx, init); err != nil {
				t.Fatal(err)
			}
			req := mcp.CallToolRequest{}
			req.Params.Name = "ask"
			res, err := c.CallTool(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Content[0].(mcp.TextContent).Text; got != tc.want {
				t.Errorf("ask = %q, want %q", got, tc.want)
			}
		})
	}
}
