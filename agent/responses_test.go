package agent_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/agent"
)

// TestResponsesRun runs two steps against the Responses API's recorded
// stream format: the second request carries the first turn's text, its
// function_call and the function_call_output that answers it, the system
// prompt as instructions, and store off; stop sequences, which the API
// lacks, are a typed error.
func TestResponsesRun(t *testing.T) {
	f := newFakeProvider(t, "responses", script(t, "responses", "tool_then_text"), script(t, "responses", "plain_text"))
	ts := &fakeTools{fns: map[string]func(agent.ToolCall) (string, error){"lookup": func(agent.ToolCall) (string, error) { return "sunny", nil }}}
	r := agent.NewRunner(f.provider(), ts, agent.Params{System: "be brief", Messages: []agent.Message{agent.UserText("weather in Rome?")}}, nil)
	final, err := r.RunUntilDone(t.Context())
	if err != nil || final.Text() != "Hello, world!" {
		t.Fatalf("final = %q, %v", final.Text(), err)
	}
	var body struct {
		Instructions string `json:"instructions"`
		Store        *bool  `json:"store"`
		Input        []struct {
			Type    string `json:"type"`
			Role    string `json:"role"`
			Content any    `json:"content"`
			CallID  string `json:"call_id"`
			Name    string `json:"name"`
			Output  string `json:"output"`
		} `json:"input"`
		Tools []struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"tools"`
	}
	decode(t, f.Requests()[1], &body)
	if body.Instructions != "be brief" || body.Store == nil || *body.Store {
		t.Errorf("instructions %q, store %v", body.Instructions, body.Store)
	}
	var got []string
	for _, in := range body.Input {
		switch {
		case in.Type == "function_call":
			got = append(got, "call "+in.Name+" "+in.CallID)
		case in.Type == "function_call_output":
			got = append(got, "output "+in.CallID+" "+in.Output)
		default:
			got = append(got, in.Role+" "+in.Content.(string))
		}
	}
	want := []string{"user weather in Rome?", "assistant Looking it up.", "call lookup call_1", "output call_1 sunny"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("second request's input (-want +got):\n%s", diff)
	}
	if len(body.Tools) != 1 || body.Tools[0].Type != "function" || body.Tools[0].Name != "lookup" {
		t.Errorf("tools = %+v", body.Tools)
	}
	_, err = agent.Generate(t.Context(), f.provider(), &agent.Request{Messages: []agent.Message{agent.UserText("x")}, Options: agent.ModelOptions{StopSequences: []string{"END"}}}, &agent.GenerateOptions{Retry: noRetry})
	if ue, ok := errors.AsType[*agent.UnsupportedError](err); !ok || ue.Option != "stop sequences" {
		t.Errorf("stop sequences: err = %v, want an UnsupportedError", err)
	}
}
