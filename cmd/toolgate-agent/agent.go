package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/agent"
	"github.com/toolgate/toolgate/internal/cli"
)

// run runs the agent loop: a model (--provider, --model) works on the
// task through the tools of an in-process gateway (--config, or the
// embedded default), of an MCP endpoint (--mcp URL), or of a stdio MCP
// server whose command follows "--". The model's text streams to stdout;
// each tool call and its outcome go to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	// Everything after the first "--" is the stdio server's command, word
	// for word: no splitting or quoting rules to get wrong for a path with
	// spaces.
	var command []string
	if i := slices.Index(args, "--"); i >= 0 {
		args, command = args[:i], args[i+1:]
		if len(command) == 0 {
			return cli.ExitError{Code: 2, Msg: `nothing after "--": write the stdio MCP server's command there, e.g. -- toolgate stdio --config tools.yaml`}
		}
	}
	fs, c := cli.NewFlags("agent", stderr)
	provider := fs.String("provider", "", "model `provider`: anthropic, openai (Chat Completions), openai-responses (the Responses API) or gemini")
	model := fs.String("model", "", "model `name`")
	baseURL := fs.String("base-url", "", "the provider API's base `URL` (for compatible or local servers)")
	mcpURL := fs.String("mcp", "", "use the tools of the MCP server at this streamable HTTP `URL` (instead of --config; for a stdio server, write its command after --)")
	headers := map[string]string{}
	fs.Func("mcp-header", "send this `header` (\"Name: value\", repeatable) to the --mcp endpoint, e.g. \"Authorization: Bearer $TOKEN\"", func(v string) error {
		name, value, ok := strings.Cut(v, ":")
		if !ok || strings.TrimSpace(name) == "" {
			return errors.New(`write it as "Name: value"`)
		}
		headers[strings.TrimSpace(name)] = strings.TrimSpace(value)
		return nil
	})
	maxIter := fs.Int("max-iterations", agent.DefaultMaxIterations, "stop after `N` model calls")
	system := fs.String("system", "", "the system prompt `text`")
	maxTokens := fs.Int64("max-tokens", 0, "bound each response to `N` tokens (default: the provider's)")
	thinking := fs.Int64("thinking-budget", 0, "let the model think with up to `N` tokens first (Anthropic extended thinking, below --max-tokens; Gemini thinking)")
	idle := fs.Duration("idle-timeout", agent.DefaultIdleTimeout, "abandon a model call that sends nothing for this `long` (0: never)")
	maxTotal := fs.Int64("max-tokens-total", 0, "end the run once it has used `N` tokens in all, cache tokens included (0: no limit)")
	maxCost := fs.Float64("max-cost", 0, "end the run once it has cost this `much` by --price (0: no limit)")
	price := fs.String("price", "", "the model's `price` per million tokens, \"INPUT/OUTPUT\" or \"INPUT/OUTPUT/CACHE-READ/CACHE-WRITE\", for the cost printed at the end and --max-cost")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: toolgate agent --provider anthropic|openai|openai-responses|gemini --model NAME [flags] TASK [-- STDIO-SERVER-COMMAND...]")
		fmt.Fprintln(stderr, "the key comes from ANTHROPIC_API_KEY, OPENAI_API_KEY, or GEMINI_API_KEY (or GOOGLE_API_KEY)")
		fs.PrintDefaults()
	}
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	task := strings.TrimSpace(strings.Join(fs.Args(), " "))
	switch {
	case task == "":
		fs.Usage()
		return cli.ExitError{Code: 2, Msg: "no task: write what the model should do as the last argument"}
	case *model == "":
		return cli.ExitError{Code: 2, Msg: "no model: name one with --model"}
	case *mcpURL != "" && c.Config != "", *mcpURL != "" && command != nil, c.Config != "" && command != nil:
		return cli.ExitError{Code: 2, Msg: "--mcp, --config and a command after -- each name the tools: give one"}
	case len(headers) > 0 && *mcpURL == "":
		return cli.ExitError{Code: 2, Msg: "--mcp-header is sent to the --mcp URL, and there is none"}
	case *mcpURL != "" && !strings.HasPrefix(*mcpURL, "http://") && !strings.HasPrefix(*mcpURL, "https://"):
		return cli.ExitError{Code: 2, Msg: fmt.Sprintf("--mcp %q is not an http:// or https:// URL; for a stdio MCP server, write its command after --, e.g. -- toolgate stdio --config tools.yaml", *mcpURL)}
	}
	budget, err := budgetOptions(*maxTotal, *maxCost, *price)
	if err != nil {
		return cli.ExitError{Code: 2, Msg: err.Error()}
	}
	idleTimeout := *idle
	if idleTimeout == 0 {
		idleTimeout = -1 // the flag's 0 means never; the options' zero means the default
	}
	var p agent.Provider
	switch *provider {
	case "anthropic":
		p, err = agent.NewAnthropic(agent.AnthropicOptions{Model: *model, BaseURL: *baseURL, IdleTimeout: idleTimeout})
	case "openai":
		p, err = agent.NewOpenAI(agent.OpenAIOptions{Model: *model, BaseURL: *baseURL, IdleTimeout: idleTimeout})
	case "openai-responses":
		p, err = agent.NewOpenAIResponses(agent.OpenAIOptions{Model: *model, BaseURL: *baseURL, IdleTimeout: idleTimeout})
	case "gemini":
		p, err = agent.NewGemini(agent.GeminiOptions{Model: *model, BaseURL: *baseURL, IdleTimeout: idleTimeout})
	default:
		return cli.ExitError{Code: 2, Msg: fmt.Sprintf("unknown provider %q: use --provider anthropic, openai, openai-responses or gemini", *provider)}
	}
	if err != nil {
		return cli.ExitError{Code: 2, Msg: err.Error()}
	}

	var tools agent.Toolset
	if *mcpURL != "" || command != nil {
		// A stdio server is killed on a second signal from its start on,
		// also while the session is still being initialized.
		o := agent.MCPOptions{URL: *mcpURL, Headers: headers, Command: command, OnStart: abort.add}
		ts, err := agent.NewMCPToolset(ctx, o)
		if err != nil {
			if ctx.Err() != nil {
				return cli.ErrInterrupted
			}
			return cli.ExitError{Code: 1, Msg: oneLine(err.Error())}
		}
		defer ts.Close()
		tools = ts
	} else {
		if c.LogLevel == "" {
			c.LogLevel = "warn" // the gateway's info lines would drown the tool lines
		}
		_, _, g, err := cli.Build(c, stderr)
		if err != nil {
			return err
		}
		defer g.Close()
		abort.add(g.KillUpstreams)
		if err := cli.WaitUpstreams(ctx, g, stderr); err != nil {
			return err
		}
		tools = &agent.GatewayToolset{Gateway: g, Thread: fmt.Sprintf("agent-%d", os.Getpid())}
	}

	out := &agentOutput{stdout: stdout, stderr: stderr, started: make(map[string]time.Time)}
	r := agent.NewRunner(p, tools, agent.Params{System: *system, Messages: []agent.Message{agent.UserText(task)}, Model: agent.ModelOptions{MaxTokens: *maxTokens, ThinkingBudget: *thinking}},
		&agent.RunnerOptions{
			MaxIterations: *maxIter,
			// The CLI exits non-zero at the cap: the task may be unfinished.
			MaxIterationsIsError: true,
			OnPart:               out.part,
			OnIteration:          func(int, *agent.StepResult) { out.endText() },
			OnToolState:          out.toolState,
			OnToolResult:         out.toolResult,
			StopWhen:             budget.stop,
			Prices:               budget.prices,
		})
	_, err = r.RunUntilDone(ctx)
	out.endText()
	printTotals(stderr, r.Outcome(), budget.prices != nil)
	if err != nil {
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			return cli.ErrInterrupted
		}
		return cli.ExitError{Code: 1, Msg: oneLine(err.Error())}
	}
	return nil
}

// agentOutput prints a run: text to stdout, tool lines to stderr. Its
// methods are called from the stream's goroutine and the tools'.
type agentOutput struct {
	stdout, stderr io.Writer

	mu      sync.Mutex // guards everything below and the writes
	started map[string]time.Time
	midLine bool // stdout's last text did not end a line
}

func (o *agentOutput) part(f agent.Fragment) {
	if f.Type != agent.FragText || f.Text == "" {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Fprint(o.stdout, f.Text)
	o.midLine = !strings.HasSuffix(f.Text, "\n")
}

// endText ends the model's line of text, if it is open.
func (o *agentOutput) endText() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.midLine {
		fmt.Fprintln(o.stdout)
		o.midLine = false
	}
}

func (o *agentOutput) toolState(c agent.ToolCall, s agent.ToolState) {
	if s != agent.ToolPending {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.midLine {
		// End the model's line first: on a terminal the two streams share
		// the screen.
		fmt.Fprintln(o.stdout)
		o.midLine = false
	}
	o.started[c.ID] = time.Now()
	fmt.Fprintf(o.stderr, "→ %s %s\n", c.Name, shorten(c.Arguments, 80))
}

func (o *agentOutput) toolResult(r agent.ToolResult) {
	o.mu.Lock()
	defer o.mu.Unlock()
	d := time.Since(o.started[r.CallID]).Round(time.Millisecond)
	delete(o.started, r.CallID)
	if r.IsError {
		fmt.Fprintf(o.stderr, "← %s error (%s): %s\n", r.Name, d, shorten(r.Text(), 120))
		return
	}
	fmt.Fprintf(o.stderr, "← %s ok (%s)\n", r.Name, d)
}

// shorten returns s on one line, cut to n bytes with "…".
func shorten(s string, n int) string { return cli.FirstLine(oneLine(s), n) }

// oneLine joins the lines of s.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// budget is the run's stop conditions and price table from the flags.
type budget struct {
	stop   []agent.StopCondition
	prices agent.Prices
}

// budgetOptions reads --max-tokens-total, --max-cost and --price.
func budgetOptions(maxTotal int64, maxCost float64, price string) (budget, error) {
	var b budget
	if maxTotal < 0 || maxCost < 0 {
		return b, errors.New("--max-tokens-total and --max-cost must not be negative")
	}
	if maxTotal > 0 {
		b.stop = append(b.stop, agent.MaxTokens(maxTotal))
	}
	if price != "" {
		var v [4]float64
		fields := strings.Split(price, "/")
		if len(fields) != 2 && len(fields) != 4 {
			return b, fmt.Errorf("--price %q: write INPUT/OUTPUT or INPUT/OUTPUT/CACHE-READ/CACHE-WRITE, per million tokens, e.g. 3/15", price)
		}
		for i, f := range fields {
			n, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || n < 0 {
				return b, fmt.Errorf("--price %q: %q is not a price; write numbers like 3/15", price, f)
			}
			v[i] = n
		}
		b.prices = agent.Prices{"": {Input: v[0], Output: v[1], CacheRead: v[2], CacheWrite: v[3]}}
	}
	if maxCost > 0 {
		if b.prices == nil {
			return b, errors.New("--max-cost needs the model's price: add --price INPUT/OUTPUT (per million tokens)")
		}
		b.stop = append(b.stop, agent.MaxCost(maxCost))
	}
	return b, nil
}

// printTotals writes the run's totals, and why it ended when it was not
// the model finishing, to stderr.
func printTotals(w io.Writer, o agent.Outcome, priced bool) {
	u := o.Usage
	line := fmt.Sprintf("tokens: %d in, %d out, %d cache read, %d cache write (%d in all) over %d model calls", u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens, u.Total(), o.Steps)
	if priced {
		line += fmt.Sprintf("; cost %.4f", o.Cost)
	}
	fmt.Fprintln(w, line)
	switch o.Reason {
	case agent.EndStopCondition:
		fmt.Fprintf(w, "stopped: %s reached\n", o.Condition)
	case agent.EndMaxIterations:
		fmt.Fprintln(w, "stopped: --max-iterations reached; the task may be unfinished")
	}
}
