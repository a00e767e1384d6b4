package builtin_test

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/retry"
)

func TestCalc(t *testing.T) {
	tests := []struct {
		name    string
		expr    string
		want    float64
		wantErr retry.Class
	}{
		// numbers
		{name: "integer", expr: "42", want: 42},
		{name: "decimal", expr: "3.25", want: 3.25},
		{name: "leading dot", expr: ".5", want: 0.5},
		{name: "trailing dot", expr: "5.", want: 5},
		{name: "exponent", expr: "1e3", want: 1000},
		{name: "exponent upper case negative", expr: "2.5E-1", want: 0.25},
		{name: "exponent plus", expr: "1e+2", want: 100},
		{name: "underflow to zero", expr: "1e-400", want: 0},
		{name: "inexact sum", expr: "0.1+0.2", want: 0.30000000000000004},
		// precedence and associativity
		{name: "mul before add", expr: "2+3*4", want: 14},
		{name: "parens", expr: "(2+3)*4", want: 20},
		{name: "sub left assoc", expr: "10-4-3", want: 3},
		{name: "div left assoc", expr: "100/10/5", want: 2},
		{name: "mod left assoc", expr: "100%7%4", want: 2},
		{name: "mixed term left assoc", expr: "12/4*3", want: 9},
		{name: "pow right assoc", expr: "2^3^2", want: 512},
		{name: "pow before mul", expr: "2*3^2", want: 18},
		{name: "pow before mul left", expr: "2^3*2", want: 16},
		{name: "pow fraction", expr: "2^0.5", want: math.Sqrt2},
		{name: "nested parens", expr: "((((1+1))))*((2))", want: 4},
		// unary
		{name: "neg pow", expr: "-2^2", want: -4},
		{name: "pow neg", expr: "2^-1", want: 0.5},
		{name: "neg pow neg", expr: "-2^-2", want: -0.25},
		{name: "paren neg pow", expr: "(-2)^2", want: 4},
		{name: "pow neg pow", expr: "2^-3^2", want: math.Pow(2, -9)},
		{name: "unary plus", expr: "+5", want: 5},
		{name: "double minus", expr: "--5", want: 5},
		{name: "minus plus", expr: "-+-5", want: 5},
		{name: "mul neg", expr: "2*-3", want: -6},
		{name: "sub neg", expr: "3-(-2)", want: 5},
		{name: "sub unary", expr: "3--2", want: 5},
		{name: "neg zero normalised", expr: "-0", want: 0},
		// remainder
		{name: "mod", expr: "7%3", want: 1},
		{name: "mod negative dividend", expr: "-7%3", want: -1},
		{name: "mod float", expr: "7.5%2", want: 1.5},
		// whitespace
		{name: "whitespace", expr: " \t1 +\n2 *\r3 ", want: 7},
		{name: "whitespace in unary and pow", expr: "- 2 ^ - 1", want: -0.5},
		// depth
		{name: "depth 64 parens", expr: strings.Repeat("(", 64) + "1" + strings.Repeat(")", 64), want: 1},
		{name: "depth 64 unary", expr: strings.Repeat("-", 64) + "1", want: 1},
		{name: "long flat expression", expr: "1" + strings.Repeat("+1", 2047), want: 2048},

		// syntax errors
		{name: "empty", expr: "", wantErr: retry.Validation},
		{name: "blank", expr: "   ", wantErr: retry.Validation},
		{name: "dangling operator", expr: "1+", wantErr: retry.Validation},
		{name: "leading operator", expr: "*2", wantErr: retry.Validation},
		{name: "double operator", expr: "2**3", wantErr: retry.Validation},
		{name: "lone close", expr: ")", wantErr: retry.Validation},
		{name: "unclosed", expr: "(1+2", wantErr: retry.Validation},
		{name: "extra close", expr: "(1+2))", wantErr: retry.Validation},
		{name: "empty parens", expr: "()", wantErr: retry.Validation},
		{name: "implicit mul", expr: "2(3)", wantErr: retry.Validation},
		{name: "two numbers", expr: "1 2", wantErr: retry.Validation},
		{name: "letters", expr: "abc", wantErr: retry.Validation},
		{name: "function", expr: "sqrt(4)", wantErr: retry.Validation},
		{name: "code", expr: "os.Exit(1)", wantErr: retry.Validation},
		{name: "non-ascii", expr: "2×3", wantErr: retry.Validation},
		{name: "invalid utf8", expr: "1+\xff", wantErr: retry.Validation},
		{name: "lone dot", expr: ".", wantErr: retry.Validation},
		{name: "two dots", expr: "1..2", wantErr: retry.Validation},
		{name: "two decimal points", expr: "1.2.3", wantErr: retry.Validation},
		{name: "exponent without digits", expr: "1e", wantErr: retry.Validation},
		{name: "exponent sign without digits", expr: "1e+", wantErr: retry.Validation},
		{name: "hex", expr: "0x10", wantErr: retry.Validation},
		{name: "underscore", expr: "1_000", wantErr: retry.Validation},
		{name: "literal overflow", expr: "1e999", wantErr: retry.Validation},
		{name: "too deep parens", expr: strings.Repeat("(", 65) + "1" + strings.Repeat(")", 65), wantErr: retry.Validation},
		{name: "too deep unary", expr: strings.Repeat("-", 65) + "1", wantErr: retry.Validation},
		{name: "too deep pow", expr: "1" + strings.Repeat("^1", 65), wantErr: retry.Validation},
		{name: "very deep parens", expr: strings.Repeat("(", 4000), wantErr: retry.Validation},
		{name: "too long", expr: "1" + strings.Repeat("+1", 2048), wantErr: retry.Validation},

		// execution errors
		{name: "div by zero", expr: "1/0", wantErr: retry.Execution},
		{name: "div by computed zero", expr: "1/(2-2)", wantErr: retry.Execution},
		{name: "div by negative zero", expr: "1/-0", wantErr: retry.Execution},
		{name: "mod by zero", expr: "5%0", wantErr: retry.Execution},
		{name: "zero div zero", expr: "0/0", wantErr: retry.Execution},
		{name: "mul overflow", expr: "1e308*10", wantErr: retry.Execution},
		{name: "add overflow", expr: "1.7e308+1.7e308", wantErr: retry.Execution},
		{name: "sub overflow", expr: "-1.7e308-1.7e308", wantErr: retry.Execution},
		{name: "div overflow", expr: "1e308/1e-10", wantErr: retry.Execution},
		{name: "pow overflow", expr: "2^2^2^2^2", wantErr: retry.Execution},
		{name: "pow of zero negative", expr: "0^-1", wantErr: retry.Execution},
		{name: "pow NaN", expr: "(-8)^(1/3)", wantErr: retry.Execution},
		{name: "overflow then shrink", expr: "1/(1e308*10)", wantErr: retry.Execution},
	}
	fn := statelessFunc(t, "calc", nil)
	tool := register(t, nil, "calc").tool(t, "calc")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := fn(t.Context(), map[string]any{"expression": tc.expr})
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("calc(%q) = %v, want a %s error", tc.expr, res.Structured, tc.wantErr)
				}
				wantClass(t, err, tc.wantErr)
				return
			}
			if err != nil {
				t.Fatalf("calc(%q) = %v, want %v", tc.expr, err, tc.want)
			}
			got, ok := res.Structured.(map[string]any)["value"].(float64)
			if !ok || got != tc.want || math.Signbit(got) != math.Signbit(tc.want) {
				t.Fatalf("calc(%q) = %#v, want %v", tc.expr, res.Structured, tc.want)
			}
			if want := strconv.FormatFloat(tc.want, 'g', -1, 64); text(t, res) != want {
				t.Errorf("calc(%q) text = %q, want %q", tc.expr, text(t, res), want)
			}
			checkOutput(t, tool, res)
		})
	}
}

// TestCalcMessages pins the text a model sees for each kind of failure: it
// must say where the problem is and what to write instead.
func TestCalcMessages(t *testing.T) {
	tests := []struct {
		expr string
		want string
	}{
		{"(2+3))", "calc: unexpected ')' at offset 5; write an arithmetic expression like (2+3)*4"},
		{"1 + x", "calc: unexpected 'x' at offset 4; write an arithmetic expression like (2+3)*4"},
		{"2×3", "calc: unexpected '×' at offset 1; write an arithmetic expression like (2+3)*4"},
		{"1 +", "calc: unexpected end of expression at offset 3; write an arithmetic expression like (2+3)*4"},
		{"2 * (3 + 4", "calc: missing ')' to close the '(' at offset 4; write an arithmetic expression like (2+3)*4"},
		{"1e+", `calc: malformed number "1e+" at offset 0: the exponent needs digits, as in 1e3 or 2.5e-4`},
		{"2+1e999", `calc: number "1e999" at offset 2 is too large for a 64-bit float`},
		{strings.Repeat("(", 70), "calc: expression is nested more than 64 levels deep at offset 64; simplify it"},
		{"1 / 0", "calc: division by zero at offset 2 (the right operand of '/' is 0)"},
		{"1 % (1-1)", "calc: division by zero at offset 2 (the right operand of '%' is 0)"},
		{"10^400", "calc: result is not a finite number ('^' at offset 2 overflows or is undefined)"},
		{"", `calc: argument "expression" must be 1 to 4096 characters long, got 0`},
	}
	fn := statelessFunc(t, "calc", nil)
	for _, tc := range tests {
		t.Run(tc.expr, func(t *testing.T) {
			_, err := fn(t.Context(), map[string]any{"expression": tc.expr})
			if err == nil || err.Error() != tc.want {
				t.Fatalf("calc(%q) error = %v, want %q", tc.expr, err, tc.want)
			}
		})
	}
}

func TestCalcBadArgs(t *testing.T) {
	tests := []struct {
		name string
		args map[string]any
	}{
		{"missing", map[string]any{}},
		{"nil", map[string]any{"expression": nil}},
		{"number", map[string]any{"expression": 42.0}},
		{"unknown argument", map[string]any{"expression": "1", "precision": 2.0}},
		{"too many characters", map[string]any{"expression": strings.Repeat("1", 4097)}},
	}
	fn := statelessFunc(t, "calc", nil)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := fn(t.Context(), tc.args)
			wantClass(t, err, retry.Validation)
		})
	}
	// 4096 characters are allowed even when they take more bytes.
	long := strings.Repeat(" ", 4095) + "1"
	if _, err := fn(t.Context(), map[string]any{"expression": long}); err != nil {
		t.Errorf("calc(4096 characters) = %v, want success", err)
	}
}

func FuzzCalc(f *testing.F) {
	for _, s := range []string{
		"1+2", "(2+3)*4", "-2^2", "2^-1", "1e3%7", ".5", "1/0", "((1)", "2^2^2^2^2",
		"1e999", "1e-400", "--+-1", "0/0", "(-8)^(1/3)", "1 2", "1e+", "\xff", "",
	} {
		f.Add(s)
	}
	fn := statelessFunc(f, "calc", nil)
	f.Fuzz(func(t *testing.T, expr string) {
		res, err := fn(t.Context(), map[string]any{"expression": expr})
		if err != nil {
			e, ok := errors.AsType[*retry.Error](err)
			if !ok {
				t.Fatalf("calc(%q) error %T %v, want *retry.Error", expr, err, err)
			}
			if e.Class != retry.Validation && e.Class != retry.Execution {
				t.Fatalf("calc(%q) error class %s, want validation or execution", expr, e.Class)
			}
			return
		}
		v, ok := res.Structured.(map[string]any)["value"].(float64)
		if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
			t.Fatalf("calc(%q) = %#v, want a finite number", expr, res.Structured)
		}
	})
}

func BenchmarkCalc(b *testing.B) {
	fn := statelessFunc(b, "calc", nil)
	args := map[string]any{"expression": "(" + strings.Repeat("1.5*2^-1+", 400) + "1)%7"}
	for b.Loop() {
		if _, err := fn(b.Context(), args); err != nil {
			b.Fatal(err)
		}
	}
}
