package agent

import (
	"errors"
	"fmt"
)

// ErrConsumed is returned when a [Runner]'s steps are iterated a second
// time: a run can be consumed once.
var ErrConsumed = errors.New("agent: the runner's steps were already consumed; build a new Runner to run again")

// ErrNoAPIKey is returned by [NewAnthropic], [NewOpenAI] and [NewGemini]
// when no API key was given and the environment has none.
var ErrNoAPIKey = errors.New("no API key")

// EmptyResponseError reports a model response with no content at all: no
// text, no thinking, no tool call.
type EmptyResponseError struct {
	// ID is the provider's ID of the response, if it sent one.
	ID string
	// StopReason is why the model said it stopped.
	StopReason StopReason
}

// Error says the response was empty and what to do.
func (e *EmptyResponseError) Error() string {
	return fmt.Sprintf("the model returned an empty response (id %q, stop reason %q); try again or rephrase the request", e.ID, e.StopReason)
}

// IncompleteError reports a stream that broke off before its end: the
// connection dropped (class network), the provider sent an error event
// (unavailable, for an overload or a server error), or the provider stopped
// sending for longer than its idle timeout (timeout; see
// [AnthropicOptions.IdleTimeout]). Received holds what had arrived
// (complete parts and tool calls, and the partial last ones). It unwraps
// to the cause, a *retry.Error, so retry.Classify sees the class.
type IncompleteError struct {
	Received Message
	Err      error
}

// Error says the stream broke off, and why.
func (e *IncompleteError) Error() string {
	return "the model's stream broke off before its end: " + e.Err.Error()
}

// Unwrap returns the classified cause.
func (e *IncompleteError) Unwrap() error { return e.Err }

// TruncatedError reports a turn that ended for length, refusal or a content
// filter ([StopReason.Truncated]). Its tool calls were not executed.
type TruncatedError struct {
	Reason  StopReason
	Message Message
}

// Error says why the turn was cut and that its calls did not run.
func (e *TruncatedError) Error() string {
	switch e.Reason {
	case StopLength:
		return "the model's turn was cut off at its token limit; its tool calls were not run (raise max tokens)"
	case StopRefusal:
		return "the model refused to continue; its tool calls were not run"
	default:
		return "the model's turn was stopped by a content filter; its tool calls were not run"
	}
}

// MaxIterationsError reports a [Runner] that made its maximum number of
// steps without the model finishing. The history so far is kept.
type MaxIterationsError struct{ Max int }

// Error says the cap was reached and what to do.
func (e *MaxIterationsError) Error() string {
	return fmt.Sprintf("the model was still calling tools after %d steps (the maximum); raise MaxIterations or simplify the task", e.Max)
}

// ToolFailuresError reports a [Runner] stopped because that many steps in a
// row had a failing tool call.
type ToolFailuresError struct{ Steps int }

// Error says how many steps in a row failed.
func (e *ToolFailuresError) Error() string {
	return fmt.Sprintf("stopped after %d steps in a row with failing tool calls; check the tools or the task", e.Steps)
}

// LoopError reports a [Runner] stopped by its loop guard: the model made
// the same call (tool and canonical arguments) Count times in a row.
type LoopError struct {
	Tool  string
	Count int
}

// Error names the repeated call.
func (e *LoopError) Error() string {
	return fmt.Sprintf("loop guard: the model called %q with the same arguments %d times in a row", e.Tool, e.Count)
}

// UnsupportedError reports a request option a provider does not have.
type UnsupportedError struct {
	Provider, Option string
}

// Error names the option and the provider.
func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("%s: %s is not supported by this provider; leave it unset", e.Provider, e.Option)
}

// PermissionError reports a run stopped because a tool answered with a
// permission-class error ("permission: ..."): going on would only repeat
// calls the caller may not make. Set [RunnerOptions.ContinueOnPermission]
// to let the model see it and go on instead.
type PermissionError struct {
	Tool    string
	Message string
}

// Error names the tool and what it said.
func (e *PermissionError) Error() string {
	return fmt.Sprintf("stopped: the tool %q refused the call for lack of permission (%s); grant it or set ContinueOnPermission", e.Tool, e.Message)
}

// UnknownPriceError reports a step whose model has no entry in
// [RunnerOptions.Prices] (and the table has no "" fallback entry), so its
// cost cannot be counted.
type UnknownPriceError struct{ Model string }

// Error names the model.
func (e *UnknownPriceError) Error() string {
	return fmt.Sprintf("no price for the model %q in the price table; add it, or a \"\" entry as the default", e.Model)
}
