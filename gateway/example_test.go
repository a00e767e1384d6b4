package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/registry"
)

func ExampleGateway_RegisterStateless() {
	cfg, _ := config.Default(nil)
	g, _ := gateway.New(cfg)
	defer g.Close()
	err := g.RegisterStateless(registry.Tool{
		Name:        "greet",
		Description: "Greets someone by name",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`),
	}, func(ctx context.Context, args map[string]any) (executors.Result, error) {
		return executors.Text("hello " + args["name"].(string)), nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	res, _ := g.Call(context.Background(), "greet", json.RawMessage(`{"name":"Ada"}`), nil)
	fmt.Println(res.Content[0].(mcp.TextContent).Text)
	// Output: hello Ada
}

// notes is a per-thread instance: each thread gets its own.
type notes struct{ items []string }

func (n *notes) Call(_ context.Context, args map[string]any) (executors.Result, error) {
	n.items = append(n.items, args["add"].(string))
	return executors.Structured(map[string]any{"count": len(n.items)}, ""), nil
}

func ExampleGateway_RegisterStateful() {
	cfg, _ := config.Default(nil)
	g, _ := gateway.New(cfg)
	defer g.Close()
	_ = g.RegisterStateful(registry.Tool{
		Name:        "notes",
		Description: "Adds a note to this thread's list",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"add":{"type":"string"}},"required":["add"]}`),
	}, executors.Factory{
		New: func(context.Context, string) (executors.Instance, error) { return &notes{}, nil },
	})
	thread := map[string]any{gateway.ThreadMetaKey: "demo"}
	for _, note := range []string{"a", "b"} {
		res, _ := g.Call(context.Background(), "notes", json.RawMessage(`{"add":"`+note+`"}`), thread)
		b, _ := json.Marshal(res.StructuredContent)
		fmt.Println(string(b))
	}
	// Output:
	// {"count":1}
	// {"count":2}
}
