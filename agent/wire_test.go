package agent_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/agent"
)

// TestAnthropicRoundTrip converts a history with every part Anthropic has
// to the Messages API and back.
func TestAnthropicRoundTrip(t *testing.T) {
	history := []agent.Message{
		{Role: agent.RoleUser, Parts: []agent.Part{agent.Text("look at these"), agent.Image("data:image/png;base64,iVBORw0KGgo="), agent.Image("https://example.com/cat.jpg")}},
		{Role: agent.RoleAssistant, Parts: []agent.Part{
			{Type: agent.PartThinking, Text: "two images", Signature: "sig-1"},
			{Type: agent.PartThinking, Redacted: "opaque"},
			agent.Text("Let me check."),
		}, ToolCalls: []agent.ToolCall{{ID: "t1", Name: "lookup", Arguments: `{"q":"cat"}`}, {ID: "t2", Name: "ping", Arguments: `{}`}}},
		agent.ToolMessage(agent.ToolResult{CallID: "t1", Content: []agent.Part{agent.Text("a cat"), agent.Image("data:image/gif;base64,R0lGOD==")}}),
		agent.ToolMessage(agent.ToolResult{CallID: "t2", Content: []agent.Part{agent.Text("timeout: no answer")}, IsError: true}),
		agent.UserText("and?"),
		{Role: agent.RoleAssistant, Parts: []agent.Part{agent.Text("A cat.")}},
	}
	wire, system := agent.AnthropicMessages(append([]agent.Message{agent.SystemText("be kind")}, history...))
	if system != "be kind" {
		t.Errorf("system = %q", system)
	}
	if len(wire) != 4 {
		t.Errorf("got %d API messages, want 4 (the tool results and the next user text in one user message)", len(wire))
	}
	if _, err := json.Marshal(wire); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(history, agent.FromAnthropicMessages(wire)); diff != "" {
		t.Errorf("round trip mismatch (-want +got):\n%s", diff)
	}
}

// TestOpenAIRoundTrip converts a history with every part Chat Completions
// has to its messages and back.
func TestOpenAIRoundTrip(t *testing.T) {
	history := []agent.Message{
		agent.UserText("hello"),
		{Role: agent.RoleUser, Parts: []agent.Part{agent.Text("and this"), agent.Image("https://example.com/cat.jpg")}},
		{Role: agent.RoleAssistant, Parts: []agent.Part{agent.Text("Checking.")}, ToolCalls: []agent.ToolCall{{ID: "c1", Name: "lookup", Arguments: `{"q": "cat"}`}, {ID: "c2", Name: "ping", Arguments: `{}`}}},
		agent.ToolMessage(agent.ToolResult{CallID: "c1", Content: []agent.Part{agent.Text("a cat")}}),
		agent.ToolMessage(agent.ToolResult{CallID: "c2", Content: []agent.Part{agent.Text("pong")}}),
		{Role: agent.RoleAssistant, Parts: []agent.Part{agent.Text("A cat.")}},
	}
	wire := agent.OpenAIMessages("be kind", history)
	if _, err := json.Marshal(wire); err != nil {
		t.Fatal(err)
	}
	system, got := agent.FromOpenAIMessages(wire)
	if system != "be kind" {
		t.Errorf("system = %q", system)
	}
	if diff := cmp.Diff(history, got); diff != "" {
		t.Errorf("round trip mismatch (-want +got):\n%s", diff)
	}
}

func TestHistoryQueries(t *testing.T) {
	h := agent.History{agent.UserText("a"), {Role: agent.RoleAssistant, Parts: []agent.Part{agent.Text("b")}}, agent.UserText("c")}
	if got := h.Last(2); len(got) != 2 || got[0].Text() != "b" {
		t.Errorf("Last(2) = %v", got)
	}
	if got := h.Last(9); len(got) != 3 {
		t.Errorf("Last(9) has %d, want 3", len(got))
	}
	if got := h.ByRole(agent.RoleUser); len(got) != 2 || got[1].Text() != "c" {
		t.Errorf("ByRole(user) = %v", got)
	}
	if got := h.Range(1, 10); len(got) != 2 || got[0].Text() != "b" {
		t.Errorf("Range(1, 10) = %v", got)
	}
	if got := h.Range(2, 1); got != nil {
		t.Errorf("Range(2, 1) = %v, want nil", got)
	}
	if m, ok := h.LastAssistant(); !ok || m.Text() != "b" {
		t.Errorf("LastAssistant() = %v, %v", m, ok)
	}
}

// TestGeminiRoundTrip converts a history with every part Gemini has to
// its contents and back.
func TestGeminiRoundTrip(t *testing.T) {
	const sig = "BwgJCgsMDQ4PEBESExQVFhcYGRobHB0e"
	history := []agent.Message{
		{Role: agent.RoleUser, Parts: []agent.Part{agent.Text("look at these"), agent.Image("data:image/png;base64,iVBORw0KGgo="), agent.Image("https://example.com/cat.jpg")}},
		{Role: agent.RoleAssistant, Parts: []agent.Part{
			{Type: agent.PartThinking, Text: "two images", Signature: sig},
			agent.Text("Let me check."),
		}, ToolCalls: []agent.ToolCall{{ID: "fc1", Name: "lookup", Arguments: `{"q":"cat"}`, Signature: sig}, {ID: "fc2", Name: "ping", Arguments: `{}`}}},
		agent.ToolMessage(agent.ToolResult{CallID: "fc1", Name: "lookup", Content: []agent.Part{agent.Text("a cat"), agent.Image("data:image/gif;base64,R0lGOA==")}}),
		agent.ToolMessage(agent.ToolResult{CallID: "fc2", Name: "ping", Content: []agent.Part{agent.Text("timeout: no answer")}, IsError: true}),
		agent.UserText("and?"),
		{Role: agent.RoleAssistant, Parts: []agent.Part{{Type: agent.PartText, Text: "A cat.", Signature: sig}}},
	}
	wire, system := agent.GeminiContents(append([]agent.Message{agent.SystemText("be kind")}, history...))
	if system != "be kind" {
		t.Errorf("system = %q", system)
	}
	if len(wire) != 4 {
		t.Errorf("got %d contents, want 4 (the function responses and the next user text in one user content)", len(wire))
	}
	if _, err := json.Marshal(wire); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(history, agent.FromGeminiContents(wire)); diff != "" {
		t.Errorf("round trip mismatch (-want +got):\n%s", diff)
	}
}
