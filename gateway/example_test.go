package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
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
	fmt.Println(res.Text())
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
		b, _ := json.Marshal(res.Structured)
		fmt.Println(string(b))
	}
	// Output:
	// {"count":1}
	// {"count":2}
}

// Middleware added with Use runs around the dispatch of every call, once
// the call is resolved, validated and in its thread: here one refuses
// calls whose text names a secret and another upper-cases every result.
func ExampleGateway_Use() {
	cfg, _ := config.Default(nil)
	g, _ := gateway.New(cfg)
	defer g.Close()
	_ = g.RegisterStateless(registry.Tool{
		Name:        "echo",
		Description: "Echoes its text",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
	}, func(ctx context.Context, args map[string]any) (executors.Result, error) {
		return executors.Text(args["text"].(string)), nil
	})
	g.Use(
		func(next gateway.Handler) gateway.Handler {
			return func(ctx context.Context, c *gateway.Call) (*gateway.Result, error) {
				if text, _ := c.Args["text"].(string); strings.Contains(text, "password") {
					return &gateway.Result{
						Content: []gateway.Content{{Type: executors.TextContent, Text: "refused: the text names a secret"}},
						IsError: true,
						Class:   retry.Validation,
					}, nil
				}
				return next(ctx, c)
			}
		},
		func(next gateway.Handler) gateway.Handler {
			return func(ctx context.Context, c *gateway.Call) (*gateway.Result, error) {
				res, err := next(ctx, c)
				if err == nil && !res.IsError {
					for i := range res.Content {
						res.Content[i].Text = strings.ToUpper(res.Content[i].Text)
					}
				}
				return res, err
			}
		},
	)
	for _, text := range []string{"hello", "my password is x"} {
		res, _ := g.Call(context.Background(), "echo", json.RawMessage(`{"text":"`+text+`"}`), nil)
		fmt.Println(res.IsError, res.Class, res.Text())
	}
	// Output:
	// false  HELLO
	// true validation refused: the text names a secret
}
