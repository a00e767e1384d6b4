package agent

import (
	"fmt"
	"slices"
)

// DefaultCompactionPrompt is [Compaction.Prompt] when empty.
const DefaultCompactionPrompt = `Summarise the conversation so far for yourself, to continue the task from the summary alone: the task and its constraints, what was done and found (tool results that matter, with their key values), what remains to do, and any decisions made. Write only the summary.`

// SummaryPrefix starts the user message that replaces a compacted
// history.
const SummaryPrefix = "Summary of the conversation so far (earlier turns were compacted):\n\n"

// Compaction is the built-in summariser of a [Runner]: when a step's
// context (input, cache writes, cache reads and output tokens) reaches
// Threshold, the model (or Provider) is asked for a summary with Prompt,
// tool calls without results are dropped from what it sees, and the
// history is replaced with one user message holding the summary; the run
// then goes on.
type Compaction struct {
	// Threshold is the context size in tokens that triggers a summary.
	Threshold int64
	// Prompt asks for the summary; empty means [DefaultCompactionPrompt].
	Prompt string
	// Provider makes the summary, a cheaper model say; nil means the
	// runner's.
	Provider Provider
	// Model are the summary call's settings (its model name, say).
	Model ModelOptions
}

// CompactionError reports a summary that could not replace the history:
// the call failed, or the summary is no smaller than the threshold that
// asked for it. The history is kept as it was.
type CompactionError struct {
	// Tokens is the summary's size, when it came back.
	Tokens, Threshold int64
	Err               error
}

// Error says why the history was not compacted.
func (e *CompactionError) Error() string {
	if e.Err != nil {
		return "compaction: the summary call failed, the history is kept: " + e.Err.Error()
	}
	return fmt.Sprintf("compaction: the summary has %d tokens, not below the threshold of %d; the history is kept (raise the threshold or ask for a shorter summary)", e.Tokens, e.Threshold)
}

// Unwrap returns the summary call's error.
func (e *CompactionError) Unwrap() error { return e.Err }

// compactIfDue compacts the history when the last step's context reached
// the threshold: by the Compact hook, else by the built-in summariser.
func (l *runLoop) compactIfDue() error {
	o := l.o
	switch {
	case o.Compact != nil && o.CompactAt > 0 && l.context >= o.CompactAt:
		out, err := o.Compact(l.ctx, l.r.History(), Usage{})
		if err != nil {
			return err
		}
		return l.replaceHistory(out)
	case o.Compact == nil && o.Compaction != nil && o.Compaction.Threshold > 0 && l.context >= o.Compaction.Threshold:
		summary, err := l.summarise(o.Compaction)
		if err != nil {
			return err
		}
		return l.replaceHistory([]Message{UserText(SummaryPrefix + summary)})
	}
	return nil
}

func (l *runLoop) replaceHistory(h []Message) error {
	l.context = 0
	l.r.mu.Lock()
	l.r.params.Messages = slices.Clone(h)
	l.r.mu.Unlock()
	if j := l.o.Journal; j != nil {
		return j.replace(h)
	}
	return nil
}

// summarise asks for a summary of the history.
func (l *runLoop) summarise(c *Compaction) (string, error) {
	p := c.Provider
	if p == nil {
		p = l.r.p
	}
	prompt := c.Prompt
	if prompt == "" {
		prompt = DefaultCompactionPrompt
	}
	r := l.r.Params()
	req := &Request{System: r.System, Messages: append(withoutDangling(r.Messages), UserText(prompt)), Tools: []ToolSpec{}, Options: c.Model}
	res, err := Generate(l.ctx, p, req, &GenerateOptions{Retry: l.o.Retry})
	if err != nil {
		return "", &CompactionError{Threshold: c.Threshold, Err: err}
	}
	if err := l.count(res.Model, res.Usage); err != nil {
		return "", err
	}
	text := res.Message.Text()
	tokens := res.Usage.OutputTokens
	if tokens == 0 {
		tokens = int64(len(text) / 4) // a provider that reports no usage: about 4 bytes a token
	}
	if tokens >= c.Threshold || text == "" {
		return "", &CompactionError{Tokens: tokens, Threshold: c.Threshold}
	}
	l.context = 0
	return text, nil
}

// withoutDangling returns h without the tool calls no tool message
// answers (a provider refuses them) and without empty messages left.
func withoutDangling(h []Message) []Message {
	answered := make(map[string]bool)
	for _, m := range h {
		if m.Result != nil {
			answered[m.Result.CallID] = true
		}
	}
	out := make([]Message, 0, len(h))
	for _, m := range h {
		if len(m.ToolCalls) > 0 {
			m.ToolCalls = slices.DeleteFunc(slices.Clone(m.ToolCalls), func(c ToolCall) bool { return !answered[c.ID] })
			if m.Empty() {
				continue
			}
		}
		out = append(out, m)
	}
	return out
}
