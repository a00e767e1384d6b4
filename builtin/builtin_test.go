package builtin_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolgate/toolgate/builtin"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeRegistrar records what Register registers. When failOn names a tool,
// registering it returns errFake.
type fakeRegistrar struct {
	failOn    string
	tools     []registry.Tool
	stateless map[string]executors.StatelessFunc
	stateful  map[string]executors.Factory
}

var errFake = errors.New("fake registrar refuses")

func newFakeRegistrar() *fakeRegistrar {
	return &fakeRegistrar{stateless: map[string]executors.StatelessFunc{}, stateful: map[string]executors.Factory{}}
}

func (f *fakeRegistrar) RegisterStateless(tool registry.Tool, fn executors.StatelessFunc) error {
	if tool.Name == f.failOn {
		return errFake
	}
	f.tools = append(f.tools, tool)
	f.stateless[tool.Name] = fn
	return nil
}

func (f *fakeRegistrar) RegisterStateful(tool registry.Tool, fac executors.Factory) error {
	if tool.Name == f.failOn {
		return errFake
	}
	f.tools = append(f.tools, tool)
	f.stateful[tool.Name] = fac
	return nil
}

func (f *fakeRegistrar) names() []string {
	var out []string
	for _, t := range f.tools {
		out = append(out, t.Name)
	}
	return out
}

func (f *fakeRegistrar) tool(t *testing.T, name string) registry.Tool {
	t.Helper()
	for _, tl := range f.tools {
		if tl.Name == name {
			return tl
		}
	}
	t.Fatalf("tool %q was not registered", name)
	return registry.Tool{}
}

// register registers the named builtin tools with a new fake and fails the
// test on error.
func register(t testing.TB, opts *builtin.Options, names ...string) *fakeRegistrar {
	t.Helper()
	r := newFakeRegistrar()
	if err := builtin.Register(r, names, opts); err != nil {
		t.Fatalf("Register(%q) = %v", names, err)
	}
	return r
}

// statelessFunc returns the registered function of the stateless tool name.
func statelessFunc(t testing.TB, name string, opts *builtin.Options) executors.StatelessFunc {
	t.Helper()
	fn := register(t, opts, name).stateless[name]
	if fn == nil {
		t.Fatalf("Register(%q) registered no stateless function", name)
	}
	return fn
}

// validated returns call wrapped as the gateway calls a tool: args must
// first pass tool's input schema, after a JSON round trip as from a client;
// a violation is a validation error and call is not called. Tools trust the
// schema, so tests of arguments it rejects call through this.
func validated(t *testing.T, tool registry.Tool, call executors.StatelessFunc) executors.StatelessFunc {
	t.Helper()
	checked, ok := addToRegistry(t, tool).Get(tool.Name)
	if !ok {
		t.Fatalf("registry lost tool %q", tool.Name)
	}
	return func(ctx context.Context, args map[string]any) (executors.Result, error) {
		if vs := checked.Validate(decode(t, args)); len(vs) != 0 {
			return executors.Result{}, retry.Errorf(retry.Validation, "%s: invalid arguments: %v", tool.Name, vs)
		}
		return call(ctx, args)
	}
}

// wantClass fails the test unless err is a *retry.Error of class want.
func wantClass(t *testing.T, err error, want retry.Class) {
	t.Helper()
	if err == nil {
		t.Fatalf("err = nil, want class %s", want)
	}
	if _, ok := errors.AsType[*retry.Error](err); !ok {
		t.Fatalf("err = %T (%v), want *retry.Error", err, err)
	}
	if got := retry.Classify(err); got != want {
		t.Fatalf("Classify(%v) = %s, want %s", err, got, want)
	}
}

// text returns the single text block of res.
func text(t *testing.T, res executors.Result) string {
	t.Helper()
	if len(res.Content) != 1 || res.Content[0].Type != executors.TextContent {
		t.Fatalf("result content = %+v, want one text block", res.Content)
	}
	return res.Content[0].Text
}

// addToRegistry adds tools to a new registry, which compiles their input
// and output schemas, and fails the test if it refuses them.
func addToRegistry(t *testing.T, tools ...registry.Tool) *registry.Registry {
	t.Helper()
	reg := registry.New()
	if err := reg.Add(tools...); err != nil {
		t.Fatalf("registry.Add: %v", err)
	}
	return reg
}

// outputChecker returns a tool whose input schema is tool's output schema,
// added to a registry, so that structured content can be validated with
// [registry.Tool.Validate].
func outputChecker(t *testing.T, tool registry.Tool) *registry.Tool {
	t.Helper()
	checker := registry.Tool{Name: "out_" + tool.Name, Kind: registry.Stateless, Source: "test", InputSchema: tool.OutputSchema}
	got, ok := addToRegistry(t, checker).Get(checker.Name)
	if !ok {
		t.Fatalf("registry lost tool %q", checker.Name)
	}
	return got
}

// decode round-trips v through JSON, as a client sees it.
func decode(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshalling %#v: %v", v, err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkOutput validates res.Structured against tool's output schema, as a
// client would after a JSON round trip.
func checkOutput(t *testing.T, tool registry.Tool, res executors.Result) {
	t.Helper()
	if tool.OutputSchema == nil {
		if res.Structured != nil {
			t.Fatalf("%s returned structured content but declares no output schema", tool.Name)
		}
		return
	}
	if res.Structured == nil {
		t.Fatalf("%s declares an output schema but returned no structured content", tool.Name)
	}
	if vs := outputChecker(t, tool).Validate(decode(t, res.Structured)); len(vs) != 0 {
		t.Fatalf("%s structured content %#v does not match its output schema: %v", tool.Name, res.Structured, vs)
	}
}

func TestNames(t *testing.T) {
	want := []string{"calc", "clock_now", "scratchpad", "sleep"}
	got := builtin.Names()
	if !slices.Equal(got, want) {
		t.Fatalf("Names() = %q, want %q", got, want)
	}
	got[0] = "changed"
	if again := builtin.Names(); !slices.Equal(again, want) {
		t.Fatalf("Names() after modifying an earlier result = %q, want %q", again, want)
	}
}

func TestRegisterEachName(t *testing.T) {
	wantKind := map[string]registry.Kind{
		"calc": registry.Stateless, "clock_now": registry.Stateless,
		"scratchpad": registry.Stateful, "sleep": registry.Stateless,
	}
	for _, name := range builtin.Names() {
		t.Run(name, func(t *testing.T) {
			r := register(t, nil, name)
			if got := r.names(); !slices.Equal(got, []string{name}) {
				t.Fatalf("Register(%q) registered %q", name, got)
			}
			tool := r.tools[0]
			if tool.Kind != wantKind[name] {
				t.Errorf("Kind = %q, want %q", tool.Kind, wantKind[name])
			}
			switch tool.Kind {
			case registry.Stateless:
				if r.stateless[name] == nil {
					t.Errorf("stateless tool %q registered with a nil function", name)
				}
			case registry.Stateful:
				f, ok := r.stateful[name]
				if !ok || f.New == nil {
					t.Errorf("stateful tool %q registered without a factory", name)
				}
				if f.Concurrent {
					t.Errorf("Factory.Concurrent = true, want false")
				}
			}
			if tool.Source != "builtin" {
				t.Errorf("Source = %q, want builtin", tool.Source)
			}
			if tool.Title == "" || tool.Annotations.Title == "" || len(tool.Description) < 40 {
				t.Errorf("tool %q lacks a title or a useful description: %+v", name, tool)
			}
			a := tool.Annotations
			if a.ReadOnlyHint == nil || a.IdempotentHint == nil || a.DestructiveHint == nil || a.OpenWorldHint == nil {
				t.Errorf("tool %q leaves annotation hints unset: %+v", name, a)
			}
			if a.IdempotentHint != nil && *a.IdempotentHint != tool.Idempotent {
				t.Errorf("IdempotentHint = %v but Idempotent = %v", *a.IdempotentHint, tool.Idempotent)
			}
		})
	}
}

func TestSchemas(t *testing.T) {
	r := register(t, nil, builtin.Names()...)
	if got := r.names(); !slices.Equal(got, builtin.Names()) {
		t.Fatalf("Register(Names()) registered %q, want %q", got, builtin.Names())
	}
	addToRegistry(t, r.tools...) // the registry compiles every schema
	for _, tool := range r.tools {
		t.Run(tool.Name, func(t *testing.T) {
			if !json.Valid(tool.InputSchema) {
				t.Fatalf("InputSchema is not valid JSON: %s", tool.InputSchema)
			}
			var in struct {
				Type                 string         `json:"type"`
				AdditionalProperties *bool          `json:"additionalProperties"`
				Properties           map[string]any `json:"properties"`
				Schema               string         `json:"$schema"`
			}
			if err := json.Unmarshal(tool.InputSchema, &in); err != nil {
				t.Fatal(err)
			}
			if in.Type != "object" || in.AdditionalProperties == nil || *in.AdditionalProperties || len(in.Properties) == 0 {
				t.Errorf("InputSchema must be an object schema with properties and additionalProperties false: %s", tool.InputSchema)
			}
			if in.Schema != "https://json-schema.org/draft/2020-12/schema" {
				t.Errorf("InputSchema $schema = %q, want draft 2020-12", in.Schema)
			}
			if tool.OutputSchema != nil {
				if !json.Valid(tool.OutputSchema) {
					t.Fatalf("OutputSchema is not valid JSON: %s", tool.OutputSchema)
				}
				outputChecker(t, tool) // compiles it
			}
		})
	}
}

// TestInputSchemas checks that each input schema accepts and rejects what
// the tool's contract says.
func TestInputSchemas(t *testing.T) {
	tests := []struct {
		tool string
		args string
		ok   bool
	}{
		{"calc", `{"expression":"1+2"}`, true},
		{"calc", `{"expression":""}`, false},
		{"calc", `{}`, false},
		{"calc", `{"expression":"1","x":1}`, false},
		{"calc", `{"expression":"` + strings.Repeat("1", 4097) + `"}`, false},
		{"clock_now", `{}`, true},
		{"clock_now", `{"timezone":"Europe/Paris"}`, true},
		{"clock_now", `{"timezone":7}`, false},
		{"clock_now", `{"tz":"UTC"}`, false},
		{"scratchpad", `{"op":"put","key":"k","value":"v"}`, true},
		{"scratchpad", `{"op":"list"}`, true},
		{"scratchpad", `{"op":"delete"}`, false},
		{"scratchpad", `{"op":"get","key":""}`, false},
		{"scratchpad", `{"op":"get","key":"` + strings.Repeat("k", 257) + `"}`, false},
		{"scratchpad", `{"op":"put","key":"k","value":"` + strings.Repeat("v", 65537) + `"}`, false},
		{"scratchpad", `{"key":"k"}`, false},
		{"sleep", `{"ms":0}`, true},
		{"sleep", `{"ms":60000}`, true},
		{"sleep", `{"ms":60001}`, false},
		{"sleep", `{"ms":-1}`, false},
		{"sleep", `{"ms":1.5}`, false},
		{"sleep", `{}`, false},
	}
	reg := addToRegistry(t, register(t, nil, builtin.Names()...).tools...)
	for _, tc := range tests {
		name := tc.tool + " " + tc.args
		if len(name) > 60 {
			name = name[:60]
		}
		t.Run(name, func(t *testing.T) {
			tool, ok := reg.Get(tc.tool)
			if !ok {
				t.Fatalf("registry has no tool %q", tc.tool)
			}
			var args any
			if err := json.Unmarshal([]byte(tc.args), &args); err != nil {
				t.Fatal(err)
			}
			if vs := tool.Validate(args); (len(vs) == 0) != tc.ok {
				t.Fatalf("Validate(%s) = %v, want ok=%v", name, vs, tc.ok)
			}
		})
	}
}

func TestRegisterErrors(t *testing.T) {
	tests := []struct {
		name  string
		names []string
		// wantIn are substrings the error must contain.
		wantIn []string
	}{
		{"unknown", []string{"calc", "clock"}, []string{`"clock"`, "calc", "clock_now", "scratchpad", "sleep"}},
		{"empty name", []string{""}, []string{`""`, "calc, clock_now, scratchpad, sleep"}},
		{"duplicate", []string{"sleep", "calc", "sleep"}, []string{`"sleep"`, "twice"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newFakeRegistrar()
			err := builtin.Register(r, tc.names, nil)
			if err == nil {
				t.Fatalf("Register(%q) = nil, want an error", tc.names)
			}
			for _, s := range tc.wantIn {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("Register(%q) = %q, want it to mention %s", tc.names, err, s)
				}
			}
			if len(r.tools) != 0 {
				t.Errorf("Register(%q) registered %q before failing, want nothing", tc.names, r.names())
			}
		})
	}

	t.Run("nil registrar", func(t *testing.T) {
		if err := builtin.Register(nil, []string{"calc"}, nil); err == nil {
			t.Fatal("Register(nil, ...) = nil, want an error")
		}
	})
	t.Run("registrar refuses", func(t *testing.T) {
		r := newFakeRegistrar()
		r.failOn = "scratchpad"
		err := builtin.Register(r, builtin.Names(), nil)
		if !errors.Is(err, errFake) {
			t.Fatalf("Register = %v, want it to wrap %v", err, errFake)
		}
		if !strings.Contains(err.Error(), `"scratchpad"`) {
			t.Errorf("Register = %q, want it to name the tool", err)
		}
		if got, want := r.names(), []string{"calc", "clock_now"}; !slices.Equal(got, want) {
			t.Errorf("registered %q before the failure, want %q", got, want)
		}
	})
	t.Run("no names", func(t *testing.T) {
		r := newFakeRegistrar()
		if err := builtin.Register(r, nil, nil); err != nil || len(r.tools) != 0 {
			t.Fatalf("Register(nil names) = %v, registered %q; want nil and nothing", err, r.names())
		}
	})
}

// TestNamesMatchRegister checks that Register accepts exactly Names().
func TestNamesMatchRegister(t *testing.T) {
	for _, name := range builtin.Names() {
		if err := builtin.Register(newFakeRegistrar(), []string{name}, nil); err != nil {
			t.Errorf("Register(%q) = %v, want nil", name, err)
		}
	}
	for _, name := range []string{"clock", "Calc", "calc ", "now", "builtin__calc"} {
		if err := builtin.Register(newFakeRegistrar(), []string{name}, nil); err == nil {
			t.Errorf("Register(%q) = nil, want an error", name)
		}
	}
}

// TestNilOptionsNow checks that nil options and a nil Now fall back to the
// real clock.
func TestNilOptionsNow(t *testing.T) {
	for _, opts := range []*builtin.Options{nil, {}} {
		fn := statelessFunc(t, "clock_now", opts)
		before := time.Now().Unix()
		res, err := fn(t.Context(), map[string]any{})
		after := time.Now().Unix()
		if err != nil {
			t.Fatal(err)
		}
		unix := res.Structured.(map[string]any)["unix"].(int64)
		if unix < before || unix > after {
			t.Errorf("opts %+v: unix = %d, want between %d and %d", opts, unix, before, after)
		}
	}
}

var _ builtin.Registrar = (*fakeRegistrar)(nil)
