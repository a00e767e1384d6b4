package agent_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/toolgate/toolgate/agent"
	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/registry"
)

// scripted is a Provider that plays back one turn per call: a stand-in for
// agent.NewAnthropic or agent.NewOpenAI, which need a network.
type scripted struct{ turns [][]agent.Fragment }

func (s *scripted) Stream(ctx context.Context, req *agent.Request, emit func(agent.Fragment)) (*agent.StreamEnd, error) {
	turn := s.turns[0]
	s.turns = s.turns[1:]
	stop := agent.StopEnd
	for _, f := range turn {
		if f.Type == agent.FragToolCall {
			stop = agent.StopToolUse
		}
		emit(f)
	}
	return &agent.StreamEnd{ID: "msg", StopReason: stop}, nil
}

// A Runner drives a model through the tools of an in-process gateway until
// the model stops calling them.
func ExampleRunner() {
	cfg, _ := config.Default(nil)
	g, _ := gateway.New(cfg)
	defer g.Close()
	_ = g.RegisterStateless(registry.Tool{
		Name:        "add",
		Description: "Adds two numbers",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}`),
	}, func(ctx context.Context, args map[string]any) (executors.Result, error) {
		return executors.Text(fmt.Sprint(args["a"].(float64) + args["b"].(float64))), nil
	})

	model := &scripted{turns: [][]agent.Fragment{
		{ // the model calls add, its arguments streamed in two pieces
			{Type: agent.FragToolCall, Index: 0, ID: "call_1", Name: "add", Text: `{"a": 2,`},
			{Type: agent.FragToolArgs, Index: 0, Text: ` "b": 40}`},
		},
		{{Type: agent.FragText, Index: 0, Text: "2 + 40 = 42"}},
	}}
	r := agent.NewRunner(model, &agent.GatewayToolset{Gateway: g, Thread: "example"},
		agent.Params{Messages: []agent.Message{agent.UserText("What is 2 + 40?")}},
		&agent.RunnerOptions{
			OnToolResult: func(res agent.ToolResult) { fmt.Printf("%s → %s\n", res.Name, res.Text()) },
		})
	final, err := r.RunUntilDone(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(final.Text())
	// Output:
	// add → 42
	// 2 + 40 = 42
}

// Generate makes one streamed call; Events shows the text as it arrives,
// and OnToolCall sees each call as soon as its arguments are whole.
func ExampleGenerate() {
	model := &scripted{turns: [][]agent.Fragment{{
		{Type: agent.FragText, Index: 0, Text: "Checking "},
		{Type: agent.FragText, Index: 0, Text: "the weather."},
		{Type: agent.FragToolCall, Index: 1, ID: "call_1", Name: "weather", Text: `{"city":`},
		{Type: agent.FragToolArgs, Index: 1, Text: ` "Oslo"}`},
	}}}
	var ev agent.Events
	ev.On(agent.EventText, func(e agent.Event) { fmt.Printf("text so far: %q\n", e.Snapshot) })
	res, err := agent.Generate(context.Background(), model, &agent.Request{Messages: []agent.Message{agent.UserText("Weather in Oslo?")}},
		&agent.GenerateOptions{
			Events:     &ev,
			OnToolCall: func(c agent.ToolCall) { fmt.Println("call:", c.Name, c.Arguments) },
		})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Message.Text(), len(res.Message.ToolCalls), res.StopReason)
	// Output:
	// text so far: "Checking "
	// text so far: "Checking the weather."
	// call: weather {"city": "Oslo"}
	// Checking the weather. 1 tool_use
}
