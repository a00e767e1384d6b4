package agent_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/agent"
	"github.com/toolgate/toolgate/retry"
)

// TestGenerateStalledStream: a stream that stops sending (the connection
// stays open, nothing more arrives) is abandoned after the provider's idle
// timeout, as an IncompleteError of class timeout carrying what arrived.
// The fake server holds the rest of the stream at a barrier no one
// releases; without the idle timeout the call would wait for it forever
// (and the fake server fails the test when its barrier times out).
func TestGenerateStalledStream(t *testing.T) {
	const idle = 200 * time.Millisecond
	for _, kind := range append(providers, "gemini") {
		t.Run(kind, func(t *testing.T) {
			r := script(t, kind, "cut")
			r.body = strings.Replace(r.body, ": cut", ": wait stall", 1)
			f := newFakeProvider(t, kind, r)
			var p agent.Provider
			var err error
			switch kind {
			case "anthropic":
				p, err = agent.NewAnthropic(agent.AnthropicOptions{Model: "claude-test", APIKey: "test-key", BaseURL: f.srv.URL, IdleTimeout: idle})
			case "gemini":
				p, err = agent.NewGemini(agent.GeminiOptions{Model: "gemini-test", APIKey: "test-key", BaseURL: f.srv.URL, IdleTimeout: idle})
			default:
				p, err = agent.NewOpenAI(agent.OpenAIOptions{Model: "gpt-test", APIKey: "test-key", BaseURL: f.srv.URL + "/v1", IdleTimeout: idle})
			}
			if err != nil {
				t.Fatal(err)
			}
			var ev agent.Events
			var got []agent.EventType
			ev.On(agent.EventError, func(e agent.Event) { got = append(got, e.Type) })
			ev.On(agent.EventAbort, func(e agent.Event) { got = append(got, e.Type) })
			_, err = agent.Generate(t.Context(), p, &agent.Request{Messages: []agent.Message{agent.UserText("hi")}},
				&agent.GenerateOptions{Retry: noRetry, Events: &ev})
			ie, ok := errors.AsType[*agent.IncompleteError](err)
			if !ok {
				t.Fatalf("Generate() error = %v (%T), want an *IncompleteError", err, err)
			}
			if got := ie.Received.Text(); got != "The first half" {
				t.Errorf("IncompleteError.Received.Text() = %q, want %q", got, "The first half")
			}
			if c := retry.Classify(err); c != retry.Timeout {
				t.Errorf("Classify(Generate() error) = %v, want %v (error %v)", c, retry.Timeout, err)
			}
			if !strings.Contains(err.Error(), "sent nothing for 200ms") {
				t.Errorf("Generate() error = %q, want it to name the idle period", err)
			}
			if len(got) != 1 || got[0] != agent.EventError {
				t.Errorf("events = %v, want one error event (not an abort: the caller did not cancel)", got)
			}
		})
	}
}

// TestGenerateNoResponse: a server that accepts the request and never
// answers (not even the headers) is abandoned after the idle timeout with
// an error of class timeout, not an IncompleteError: nothing arrived.
func TestGenerateNoResponse(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read the body first: only then does the server notice the
		// client closing the connection and end r's context.
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done() // until the client gives up
	}))
	t.Cleanup(srv.Close)
	for _, kind := range append(providers, "gemini") {
		t.Run(kind, func(t *testing.T) {
			var p agent.Provider
			var err error
			switch kind {
			case "anthropic":
				p, err = agent.NewAnthropic(agent.AnthropicOptions{Model: "claude-test", APIKey: "test-key", BaseURL: srv.URL, IdleTimeout: 100 * time.Millisecond})
			case "gemini":
				p, err = agent.NewGemini(agent.GeminiOptions{Model: "gemini-test", APIKey: "test-key", BaseURL: srv.URL, IdleTimeout: 100 * time.Millisecond})
			default:
				p, err = agent.NewOpenAI(agent.OpenAIOptions{Model: "gpt-test", APIKey: "test-key", BaseURL: srv.URL + "/v1", IdleTimeout: 100 * time.Millisecond})
			}
			if err != nil {
				t.Fatal(err)
			}
			_, err = agent.Generate(t.Context(), p, &agent.Request{Messages: []agent.Message{agent.UserText("hi")}}, &agent.GenerateOptions{Retry: noRetry})
			if c := retry.Classify(err); c != retry.Timeout {
				t.Fatalf("Classify(Generate() error) = %v, want %v (error %v)", c, retry.Timeout, err)
			}
			if _, ok := errors.AsType[*agent.IncompleteError](err); ok {
				t.Errorf("Generate() error = %v, an IncompleteError though nothing arrived", err)
			}
		})
	}
}
