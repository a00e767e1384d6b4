package builtin

import (
	"context"
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

const (
	// calcMaxLen is the longest expression calc accepts, in characters.
	calcMaxLen = 4096
	// calcMaxDepth bounds the nesting of parentheses, unary signs and
	// exponents, so the recursive-descent parser's stack stays small.
	calcMaxDepth = 64
	// calcHint ends every syntax error, telling the model what to send.
	calcHint = "write an arithmetic expression like (2+3)*4"
)

func calcTool() registry.Tool {
	return registry.Tool{
		Name:  "calc",
		Title: "Calculator",
		Description: "Evaluates an arithmetic expression exactly as written and returns its value as a " +
			"64-bit floating-point number. Supports numbers (42, 3.14, .5, 1e3, 2.5E-4), the binary " +
			"operators + - * / % ^, unary minus and plus, parentheses and whitespace. ^ is exponentiation: " +
			"it binds tightest and is right-associative, so 2^3^2 = 512 and -2^2 = -4; then * / % " +
			"(% is the floating-point remainder, with the sign of the dividend), then + -. There are no " +
			"variables, functions or constants. Division or remainder by zero and results that overflow " +
			"are errors.",
		Kind:   registry.Stateless,
		Source: source,
		InputSchema: json.RawMessage(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "expression": {
      "type": "string",
      "minLength": 1,
      "maxLength": 4096,
      "description": "The arithmetic expression to evaluate, for example \"(2+3)*4\" or \"2^-1 + 1e3 % 7\"."
    }
  },
  "required": ["expression"],
  "additionalProperties": false
}`),
		OutputSchema: json.RawMessage(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "value": {"type": "number", "description": "The value of the expression."}
  },
  "required": ["value"],
  "additionalProperties": false
}`),
		Annotations: registry.Annotations{
			Title:           "Calculator",
			ReadOnlyHint:    ptr(true),
			DestructiveHint: ptr(false),
			IdempotentHint:  ptr(true),
			OpenWorldHint:   ptr(false),
		},
		Idempotent: true,
	}
}

// calcArgs are calc's arguments.
type calcArgs struct {
	Expression string `json:"expression"`
}

// calc is the calc tool's StatelessFunc.
//
// It bounds the expression's length itself, although the input schema does
// too: the bound is part of calc's contract (its parser's cost is linear in
// the length), and its message says what to send instead.
func calc(_ context.Context, args map[string]any) (executors.Result, error) {
	a, err := decode[calcArgs]("calc", args)
	if err != nil {
		return executors.Result{}, err
	}
	if n := utf8.RuneCountInString(a.Expression); n < 1 || n > calcMaxLen {
		return executors.Result{}, fail(retry.Validation, "calc", "argument %q must be 1 to %d characters long, got %d", "expression", calcMaxLen, n)
	}
	v, err := evalCalc(a.Expression)
	if err != nil {
		return executors.Result{}, err
	}
	return executors.Structured(map[string]any{"value": v}, strconv.FormatFloat(v, 'g', -1, 64)), nil
}

// evalCalc parses and evaluates expr. It never panics; failures are
// *retry.Error of class validation (syntax, nesting, literal out of range)
// or execution (division by zero, a non-finite result). It runs in time
// linear in len(expr): every byte is looked at a bounded number of times.
func evalCalc(expr string) (float64, error) {
	p := &calcParser{s: expr}
	v, err := p.expr()
	if err != nil {
		return 0, err
	}
	p.skipSpace()
	if p.pos < len(p.s) {
		return 0, p.unexpected()
	}
	if v == 0 {
		v = 0 // normalise -0, which would print as "-0"
	}
	return v, nil
}

// calcParser is a recursive-descent parser that evaluates as it parses.
// The grammar, from loosest to tightest binding:
//
//	expr    = term { ("+" | "-") term }
//	term    = unary { ("*" | "/" | "%") unary }
//	unary   = ("-" | "+") unary | power
//	power   = primary [ "^" unary ]
//	primary = number | "(" expr ")"
//	number  = digits [ "." [ digits ] ] [ exponent ] | "." digits [ exponent ]
//	exponent = ("e" | "E") [ "+" | "-" ] digits
//
// Because the right operand of ^ is a unary, 2^-1 parses, ^ is
// right-associative, and -2^2 is -(2^2).
type calcParser struct {
	s     string
	pos   int // byte offset of the next unread byte
	depth int // current nesting of "(", unary signs and "^"
}

func (p *calcParser) skipSpace() {
	for p.pos < len(p.s) {
		switch p.s[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// peek skips whitespace and returns the next byte, or 0 at the end.
func (p *calcParser) peek() byte {
	p.skipSpace()
	if p.pos >= len(p.s) {
		return 0
	}
	return p.s[p.pos]
}

// enter records one more level of nesting, opened by the operator or
// parenthesis at offset at; exit must follow on success.
func (p *calcParser) enter(at int) error {
	p.depth++
	if p.depth > calcMaxDepth {
		return fail(retry.Validation, "calc", "expression is nested more than %d levels deep at offset %d; simplify it", calcMaxDepth, at)
	}
	return nil
}

func (p *calcParser) exit() { p.depth-- }

// unexpected reports the token at p.pos (or the end of input) as a syntax
// error.
func (p *calcParser) unexpected() error {
	if p.pos >= len(p.s) {
		return fail(retry.Validation, "calc", "unexpected end of expression at offset %d; %s", p.pos, calcHint)
	}
	r, _ := utf8.DecodeRuneInString(p.s[p.pos:])
	return fail(retry.Validation, "calc", "unexpected %q at offset %d; %s", r, p.pos, calcHint)
}

func (p *calcParser) expr() (float64, error) {
	v, err := p.term()
	if err != nil {
		return 0, err
	}
	for {
		op := p.peek()
		if op != '+' && op != '-' {
			return v, nil
		}
		at := p.pos
		p.pos++
		r, err := p.term()
		if err != nil {
			return 0, err
		}
		if op == '+' {
			v += r
		} else {
			v -= r
		}
		if err := checkFinite(v, op, at); err != nil {
			return 0, err
		}
	}
}

func (p *calcParser) term() (float64, error) {
	v, err := p.unary()
	if err != nil {
		return 0, err
	}
	for {
		op := p.peek()
		if op != '*' && op != '/' && op != '%' {
			return v, nil
		}
		at := p.pos
		p.pos++
		r, err := p.unary()
		if err != nil {
			return 0, err
		}
		switch op {
		case '*':
			v *= r
		case '/', '%':
			if r == 0 {
				return 0, fail(retry.Execution, "calc", "division by zero at offset %d (the right operand of %q is 0)", at, rune(op))
			}
			if op == '/' {
				v /= r
			} else {
				v = math.Mod(v, r)
			}
		}
		if err := checkFinite(v, op, at); err != nil {
			return 0, err
		}
	}
}

func (p *calcParser) unary() (float64, error) {
	switch op := p.peek(); op {
	case '-', '+':
		if err := p.enter(p.pos); err != nil {
			return 0, err
		}
		p.pos++
		v, err := p.unary()
		if err != nil {
			return 0, err
		}
		p.exit()
		if op == '-' {
			v = -v
		}
		return v, nil
	}
	return p.power()
}

func (p *calcParser) power() (float64, error) {
	base, err := p.primary()
	if err != nil {
		return 0, err
	}
	if p.peek() != '^' {
		return base, nil
	}
	at := p.pos
	p.pos++
	if err := p.enter(at); err != nil {
		return 0, err
	}
	exp, err := p.unary()
	if err != nil {
		return 0, err
	}
	p.exit()
	v := math.Pow(base, exp)
	if err := checkFinite(v, '^', at); err != nil {
		return 0, err
	}
	return v, nil
}

func (p *calcParser) primary() (float64, error) {
	c := p.peek()
	switch {
	case c == '(':
		open := p.pos
		p.pos++
		if err := p.enter(open); err != nil {
			return 0, err
		}
		v, err := p.expr()
		if err != nil {
			return 0, err
		}
		p.exit()
		switch p.peek() {
		case ')':
			p.pos++
			return v, nil
		case 0:
			return 0, fail(retry.Validation, "calc", "missing ')' to close the '(' at offset %d; %s", open, calcHint)
		}
		return 0, p.unexpected()
	case c == '.' || isDigit(c):
		return p.number()
	}
	return 0, p.unexpected()
}

// number scans a numeric literal at p.pos.
func (p *calcParser) number() (float64, error) {
	start := p.pos
	digits := p.digits()
	if p.pos < len(p.s) && p.s[p.pos] == '.' {
		p.pos++
		digits += p.digits()
	}
	if digits == 0 {
		return 0, p.unexpectedAt(start)
	}
	if p.pos < len(p.s) && (p.s[p.pos] == 'e' || p.s[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.s) && (p.s[p.pos] == '+' || p.s[p.pos] == '-') {
			p.pos++
		}
		if p.digits() == 0 {
			return 0, fail(retry.Validation, "calc", "malformed number %q at offset %d: the exponent needs digits, as in 1e3 or 2.5e-4", p.s[start:p.pos], start)
		}
	}
	lit := p.s[start:p.pos]
	v, err := strconv.ParseFloat(lit, 64)
	if err != nil && !math.IsInf(v, 0) {
		// The scanner admits only well-formed literals; this is unreachable
		// but must not be ignored.
		return 0, fail(retry.Validation, "calc", "malformed number %q at offset %d; %s", lit, start, calcHint)
	}
	if math.IsInf(v, 0) {
		return 0, fail(retry.Validation, "calc", "number %q at offset %d is too large for a 64-bit float", lit, start)
	}
	return v, nil
}

// unexpectedAt reports the token at offset at as a syntax error.
func (p *calcParser) unexpectedAt(at int) error {
	p.pos = at
	return p.unexpected()
}

// digits consumes a run of ASCII digits and returns its length.
func (p *calcParser) digits() int {
	start := p.pos
	for p.pos < len(p.s) && isDigit(p.s[p.pos]) {
		p.pos++
	}
	return p.pos - start
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// checkFinite returns an execution error when v, the result of the operator
// op at offset at, is NaN or infinite.
func checkFinite(v float64, op byte, at int) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fail(retry.Execution, "calc", "result is not a finite number (%q at offset %d overflows or is undefined)", rune(op), at)
	}
	return nil
}
