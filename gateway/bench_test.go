package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/registry"
)

// newBenchGateway returns a gateway built from the embedded default
// configuration, without builtins, serving one stateless echo tool. It is
// closed when b ends.
func newBenchGateway(b *testing.B) *gateway.Gateway {
	b.Helper()
	cfg, err := config.Default(nil)
	if err != nil {
		b.Fatalf("config.Default(nil) error = %v", err)
	}
	cfg.Builtin = nil
	g, err := gateway.New(cfg, gateway.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		b.Fatalf("gateway.New() error = %v", err)
	}
	b.Cleanup(func() { g.Close() })
	err = g.RegisterStateless(registry.Tool{
		Name:        "echo",
		Description: "Returns its text argument.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
	}, func(_ context.Context, args map[string]any) (executors.Result, error) {
		s, ok := args["text"].(string)
		if !ok {
			return executors.Result{}, errors.New("echo: text is not a string")
		}
		return executors.Text(s), nil
	})
	if err != nil {
		b.Fatalf("RegisterStateless(echo) error = %v", err)
	}
	return g
}

// resultText returns the text of a result's single text block, or "".
func resultText(res *gateway.Result) string {
	if res == nil || len(res.Content) != 1 || res.Content[0].Type != executors.TextContent {
		return ""
	}
	return res.Content[0].Text
}

// BenchmarkPipeline measures one in-process call of a stateless tool
// through the whole pipeline: resolve, validate, dispatch (with its
// one-call thread), map and record.
func BenchmarkPipeline(b *testing.B) {
	g := newBenchGateway(b)
	ctx := b.Context()
	args := json.RawMessage(`{"text":"hello, toolgate"}`)

	res, err := g.Call(ctx, "echo", args, nil)
	if err != nil || res.IsError || resultText(res) != "hello, toolgate" {
		b.Fatalf("Call(echo) = %+v, %v; want the text echoed", res, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.Call(ctx, "echo", args, nil); err != nil {
			b.Fatalf("Call(echo) error = %v", err)
		}
	}
}

// BenchmarkPipelineValidationError measures a call whose arguments violate
// the input schema: the pipeline stops at validation and builds the isError
// result that lists the violations.
func BenchmarkPipelineValidationError(b *testing.B) {
	g := newBenchGateway(b)
	ctx := b.Context()
	args := json.RawMessage(`{"text":42,"extra":true}`)

	res, err := g.Call(ctx, "echo", args, nil)
	if err != nil || !res.IsError || !strings.HasPrefix(resultText(res), "validation") {
		b.Fatalf("Call(echo, %s) = %+v, %v; want an isError validation result", args, res, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.Call(ctx, "echo", args, nil); err != nil {
			b.Fatalf("Call(echo) error = %v", err)
		}
	}
}
