package agent_test

import (
	"strings"
	"testing"

	"github.com/toolgate/toolgate/agent"
	"github.com/toolgate/toolgate/retry"
)

// TestProviderErrorsHideTheKey: a compatible server that echoes the key
// it refused does not get it into the error (which the CLI prints); the
// error keeps its class.
func TestProviderErrorsHideTheKey(t *testing.T) {
	const key = "sk-test-0123456789abcdef"
	for _, kind := range providers {
		t.Run(kind, func(t *testing.T) {
			f := newFakeProvider(t, kind, reply{status: 401,
				body: `{"type":"error","error":{"type":"authentication_error","message":"Invalid API key: ` + key + `"}}`})
			var p agent.Provider
			var err error
			if kind == "anthropic" {
				p, err = agent.NewAnthropic(agent.AnthropicOptions{Model: "claude-test", APIKey: key, BaseURL: f.srv.URL})
			} else {
				p, err = agent.NewOpenAI(agent.OpenAIOptions{Model: "gpt-test", APIKey: key, BaseURL: f.srv.URL + "/v1"})
			}
			if err != nil {
				t.Fatal(err)
			}
			_, err = agent.Generate(t.Context(), p, &agent.Request{Messages: []agent.Message{agent.UserText("hi")}}, &agent.GenerateOptions{Retry: noRetry})
			if err == nil {
				t.Fatal("Generate() succeeded against a 401")
			}
			if strings.Contains(err.Error(), key) {
				t.Errorf("Generate() error = %q, which holds the API key", err)
			}
			if !strings.Contains(err.Error(), "Invalid API key: [redacted]") {
				t.Errorf("Generate() error = %q, want the server's message with the key redacted", err)
			}
			if c := retry.Classify(err); c != retry.Permission {
				t.Errorf("Classify(Generate() error) = %v, want %v", c, retry.Permission)
			}
		})
	}
}
