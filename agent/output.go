package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/toolgate/toolgate/schemas"
)

// OutputSchemaError reports an output schema ([RunnerOptions.Output])
// that does not compile; the run does not start.
type OutputSchemaError struct{ Err error }

// Error says the schema is broken.
func (e *OutputSchemaError) Error() string {
	if ce, ok := errors.AsType[*schemas.CompileError](e.Err); ok {
		return "the " + ce.Describe("output") + "; fix RunnerOptions.Output"
	}
	return "the output schema does not compile: " + e.Err.Error() + "; fix RunnerOptions.Output"
}

// Unwrap returns the compiler's error.
func (e *OutputSchemaError) Unwrap() error { return e.Err }

// OutputError reports a final answer that is not JSON matching the output
// schema, after its one repair round. The history keeps both answers.
type OutputError struct {
	// Problem lists what is wrong.
	Problem string
}

// Error says the answer does not match.
func (e *OutputError) Error() string {
	return "the final answer does not match the output schema after a repair round: " + e.Problem
}

// outputCheck validates final answers against the output schema.
type outputCheck struct {
	schema   *schemas.Schema
	repaired bool
}

func newOutputCheck(o *OutputSchema) (*outputCheck, error) {
	if o == nil {
		return nil, nil
	}
	s, err := schemas.Compile(o.Schema)
	if err != nil {
		return nil, &OutputSchemaError{Err: err}
	}
	return &outputCheck{schema: s}, nil
}

// check returns text as the JSON value it holds (inside a ``` fence or
// not) when it matches the schema, else an *OutputError.
func (c *outputCheck) check(text string) ([]byte, error) {
	text = unfence(text)
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		return nil, &OutputError{Problem: "it is not JSON (" + err.Error() + ")"}
	}
	if vs := c.schema.Validate(v); len(vs) > 0 {
		return nil, &OutputError{Problem: schemas.Format(vs)}
	}
	return []byte(text), nil
}

func (c *outputCheck) repairPrompt(err error) string {
	var oe *OutputError
	problem := err.Error()
	if errors.As(err, &oe) {
		problem = oe.Problem
	}
	return "Your answer does not match the required JSON Schema: " + problem + "\nAnswer again with only the corrected JSON value."
}

// unfence returns s without a surrounding Markdown code fence.
func unfence(s string) string {
	s = strings.TrimSpace(s)
	if rest, ok := strings.CutPrefix(s, "```"); ok {
		if i := strings.IndexByte(rest, '\n'); i >= 0 {
			rest = rest[i+1:]
		}
		s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "```"))
	}
	return s
}

// RepairFunc fixes a tool call whose arguments are malformed or break its
// tool's input schema (spec, nil when the tool is unknown): it returns the
// call to run instead, or an error to give up, and the call is then
// answered with its isError result.
type RepairFunc func(ctx context.Context, call ToolCall, spec *ToolSpec, problem error) (ToolCall, error)

// ModelRepair returns a RepairFunc that asks p (the run's model, or a
// cheaper one) once for corrected arguments, telling it the tool's schema
// and what was wrong.
func ModelRepair(p Provider, opts ModelOptions) RepairFunc {
	return func(ctx context.Context, c ToolCall, spec *ToolSpec, problem error) (ToolCall, error) {
		schema := `{"type":"object"}`
		if spec != nil && len(spec.InputSchema) > 0 {
			schema = string(spec.InputSchema)
		}
		req := &Request{
			System:   "You fix the arguments of a tool call. Answer with the corrected JSON object only, nothing else.",
			Messages: []Message{UserText(fmt.Sprintf("Tool: %s\nInput schema: %s\nArguments: %s\nProblem: %s", c.Name, schema, c.Arguments, problem))},
			Tools:    []ToolSpec{},
			Options:  opts,
		}
		res, err := Generate(ctx, p, req, nil)
		if err != nil {
			return c, err
		}
		c.Arguments = unfence(res.Message.Text())
		return c, nil
	}
}

// argsChecker validates arguments against their tool's input schema,
// compiling each schema once.
type argsChecker struct {
	sel *toolSelector

	mu       sync.Mutex // guards compiled
	compiled map[string]*schemas.Schema
}

func newArgsChecker(sel *toolSelector) *argsChecker {
	return &argsChecker{sel: sel, compiled: make(map[string]*schemas.Schema)}
}

func (a *argsChecker) check(c ToolCall) error {
	spec := a.sel.spec(c.Name)
	if spec == nil || len(spec.InputSchema) == 0 {
		return nil
	}
	a.mu.Lock()
	s, ok := a.compiled[string(spec.InputSchema)]
	if !ok {
		s, _ = schemas.Compile(spec.InputSchema) // a broken schema checks nothing: the tool's own validation answers
		a.compiled[string(spec.InputSchema)] = s
	}
	a.mu.Unlock()
	if s == nil {
		return nil
	}
	var v any
	if err := json.Unmarshal([]byte(c.Arguments), &v); err != nil {
		return err
	}
	if vs := s.Validate(v); len(vs) > 0 {
		return fmt.Errorf("validation: the arguments of %q break its input schema: %s", c.Name, schemas.Format(vs))
	}
	return nil
}
