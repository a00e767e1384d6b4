package handles

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/gateway/internal/mcpwire"
	"github.com/toolgate/toolgate/gateway/internal/replica"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

const handleLen = len(prefix) + sealedLen // a lone toolgate's

func TestThreadHandles(t *testing.T) {
	k := NewKeys(replica.Alone())
	h, thread := k.Mint("alice")
	if len(h) != handleLen || !strings.HasPrefix(h, prefix) {
		t.Fatalf("Mint = %q, want %d characters starting %q", h, handleLen, prefix)
	}
	if h2, thread2 := k.Mint("alice"); h2 == h || thread2 == thread {
		t.Errorf("two mints gave %q and %q", h, h2)
	}
	got, err := k.Thread("alice", h)
	if err != nil || got != thread {
		t.Fatalf("Thread(alice, own handle) = %q, %v; want %q", got, err, thread)
	}
	flip := []byte(h) // one nonce character changed, still base64url
	if flip[5] == 'A' {
		flip[5] = 'B'
	} else {
		flip[5] = 'A'
	}
	for _, tc := range []struct{ name, principal, handle string }{
		{"another principal", "bob", h},
		{"no principal", "", h},
		{"altered", "alice", string(flip)},
		{"another gateway's key", "alice", func() string { h, _ := NewKeys(replica.Alone()).Mint("alice"); return h }()},
		{"made up", "alice", "th_" + strings.Repeat("A", handleLen-3)},
		{"empty", "alice", ""},
		{"too long", "alice", h + "A"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := k.Thread(tc.principal, tc.handle)
			if re, ok := errors.AsType[*retry.Error](err); !ok || re.Class != retry.Validation {
				t.Errorf("Thread(%q, %q) error = %v, want a validation error", tc.principal, tc.handle, err)
			}
		})
	}
	// The thread is in a namespace no named or session thread shares.
	if !strings.HasPrefix(thread, "h:alice\x00") {
		t.Errorf("thread = %q, want h:alice\\x00…", thread)
	}
}

func TestWithArg(t *testing.T) {
	for _, tc := range []struct {
		name, schema string
		want         bool
	}{
		{"no schema", ``, true},
		{"closed object", `{"type":"object","properties":{"op":{"type":"string"}},"additionalProperties":false}`, true},
		{"own thread argument", `{"type":"object","properties":{"thread":{"type":"integer"}}}`, false},
		{"not an object", `true`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := registry.Tool{Name: "x", InputSchema: json.RawMessage(tc.schema)}
			out, ok := WithArg(in, "")
			if ok != tc.want {
				t.Fatalf("WithArg(%s) added = %v, want %v", tc.schema, ok, tc.want)
			}
			if !ok {
				if string(out.InputSchema) != tc.schema {
					t.Errorf("schema changed to %s", out.InputSchema)
				}
				return
			}
			var s struct {
				Properties map[string]map[string]any `json:"properties"`
			}
			if err := json.Unmarshal(out.InputSchema, &s); err != nil || s.Properties[Arg]["type"] != "string" {
				t.Errorf("schema %s has no string %q property (%v)", out.InputSchema, Arg, err)
			}
		})
	}
}

// WithHandle adds the handle to an upstream's result as it sent it: a
// text part after its own, and _meta.
func TestWithHandlePassthrough(t *testing.T) {
	in := &executors.Result{Passthrough: json.RawMessage(`{"content":[{"type":"text","text":"hi"}],"structuredContent":{"n":1}}`)}
	out := WithHandle(in, "up__t", "th_x")
	var got struct {
		Content []struct {
			Type, Text string
		} `json:"content"`
		Structured map[string]any `json:"structuredContent"`
		Meta       map[string]any `json:"_meta"`
	}
	b, err := mcpwire.Encode(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Content) != 2 || got.Content[0].Text != "hi" || !strings.HasPrefix(got.Content[1].Text, "thread handle: th_x (") {
		t.Errorf("content = %+v, want the upstream's text, then the handle's", got.Content)
	}
	if got.Structured["n"] != 1.0 || got.Meta[MetaKey] != "th_x" {
		t.Errorf("structuredContent %v, _meta %v; want the upstream's and the handle", got.Structured, got.Meta)
	}
	if strings.Contains(string(in.Passthrough), "th_x") {
		t.Errorf("WithHandle changed its input: %s", in.Passthrough)
	}
}

func TestWithoutMember(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		{`{"q":"x","thread":"th_1"}`, `{"q":"x"}`},
		{`{ "thread" : "th_1" , "n": 1.0, "big": 12345678901234567890, "o": {"thread": 1} }`, `{"n":1.0,"big":12345678901234567890,"o":{"thread": 1}}`},
		{`{"thread":"a","thread":"b"}`, `{}`},
		{`{"z":1,"a":2}`, `{"z":1,"a":2}`},
		{`{"\u0074hread":"th_1","k\"ey":true}`, `{"k\"ey":true}`},
		{`[1]`, ``},
		{`{"q":`, ``},
		{``, ``},
	} {
		if got := string(withoutMember(json.RawMessage(tc.raw), Arg)); got != tc.want {
			t.Errorf("withoutMember(%s) = %s, want %s", tc.raw, got, tc.want)
		}
	}
}

func TestTake(t *testing.T) {
	args := map[string]any{"q": "x", Arg: "th_1"}
	h, raw, ok := Take(args, json.RawMessage(`{"q":"x","thread":"th_1"}`))
	if !ok || h != "th_1" || string(raw) != `{"q":"x"}` || len(args) != 1 {
		t.Errorf("Take = %q, %s, %v, args %v; want th_1, {\"q\":\"x\"}, true, args without it", h, raw, ok, args)
	}
	raw = json.RawMessage(`{"q":"x"}`)
	if h, got, ok := Take(map[string]any{"q": "x"}, raw); ok || h != "" || string(got) != string(raw) {
		t.Errorf("Take without the argument = %q, %s, %v; want nothing taken", h, got, ok)
	}
}

// An upstream's tools are marked while they are served with the argument;
// a failed registration leaves the marks of the tools served before.
func TestMarksAddUpstream(t *testing.T) {
	var m Marks
	m.SetStateful("counter", true)
	const source = "upstream:th"
	tools := func(names ...string) []executors.Bound {
		var bs []executors.Bound
		for _, n := range names {
			bs = append(bs, executors.Bound{Tool: registry.Tool{Name: n, Kind: registry.MCP, Source: source}})
		}
		return bs
	}
	takes := func(name string) bool { return m.Takes(&registry.Tool{Name: name, Kind: registry.MCP, Source: source}) }
	ok := func() error { return nil }
	bs := tools("a", "b", "counter")
	if err := m.AddUpstream(source, bs, ok); err != nil {
		t.Fatal(err)
	}
	if !takes("a") || !takes("b") || takes("counter") {
		t.Errorf("after the first listing: a %v, b %v, counter %v; want true, true, false", takes("a"), takes("b"), takes("counter"))
	}
	if !strings.Contains(string(bs[0].Tool.InputSchema), `"thread"`) {
		t.Errorf("a's schema = %s, want the handle argument", bs[0].Tool.InputSchema)
	}
	if !m.Takes(&registry.Tool{Name: "counter", Kind: registry.Stateful}) {
		t.Error("the stateful tool counter lost its mark")
	}
	failed := errors.New("refused")
	if err := m.AddUpstream(source, tools("c"), func() error { return failed }); !errors.Is(err, failed) {
		t.Fatalf("AddUpstream = %v, want add's error", err)
	}
	if !takes("a") || !takes("b") || takes("c") {
		t.Errorf("after a failed listing: a %v, b %v, c %v; want true, true, false", takes("a"), takes("b"), takes("c"))
	}
	if err := m.AddUpstream(source, tools("a"), ok); err != nil {
		t.Fatal(err)
	}
	if !takes("a") || takes("b") {
		t.Errorf("after listing a alone: a %v, b %v; want true, false", takes("a"), takes("b"))
	}
	m.SetStateful("counter", false)
	if m.Takes(&registry.Tool{Name: "counter", Kind: registry.Stateful}) {
		t.Error("counter takes handles after SetStateful(false)")
	}
}

// TestHandlesAcrossReplicas checks what lets a handle travel in a
// cluster: it names the replica that minted it, every replica of the
// cluster checks it (and one rotating from that secret), the minting one
// gives its thread, another says whose it is, and a handle renamed to
// another replica, of another cluster or of another principal is unknown.
func TestHandlesAcrossReplicas(t *testing.T) {
	const secret, next = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	r1, r2 := NewKeys(replica.Member("r1", secret, "")), NewKeys(replica.Member("r2", next, secret))
	h, thread := r1.Mint("alice")
	if !strings.HasPrefix(h, prefix+"r1.") {
		t.Fatalf("r1 minted %q; want it to name r1", h)
	}
	if got, err := r1.Thread("alice", h); err != nil || got != thread {
		t.Errorf("r1: Thread = %q, %v; want %q", got, err, thread)
	}
	if _, err := r2.Thread("alice", h); !errorsAs[*ElsewhereError](err, func(e *ElsewhereError) bool { return e.Owner == "r1" }) {
		t.Errorf("r2: Thread = %v; want an ElsewhereError naming r1", err)
	}
	if owner, ok := r2.Owner("alice", h); !ok || owner != "r1" {
		t.Errorf("r2: Owner = %q, %v; want r1", owner, ok)
	}
	for name, tc := range map[string]struct {
		k         *Keys
		who, hand string
	}{
		"renamed":           {r2, "alice", strings.Replace(h, "r1.", "r2.", 1)},
		"another cluster":   {NewKeys(replica.Member("r1", next, "")), "alice", h},
		"another principal": {r2, "bob", h},
		"a lone toolgate":   {NewKeys(replica.Alone()), "alice", h},
	} {
		if owner, ok := tc.k.Owner(tc.who, tc.hand); ok {
			t.Errorf("%s: opened, owner %q", name, owner)
		}
		if _, err := tc.k.Thread(tc.who, tc.hand); !errorsAs[*retry.Error](err, func(e *retry.Error) bool { return e.Class == retry.Validation }) {
			t.Errorf("%s: Thread = %v; want unknown (validation)", name, err)
		}
	}
}

func errorsAs[E error](err error, ok func(E) bool) bool {
	e, is := errors.AsType[E](err)
	return is && ok(e)
}

// TestWithArgHeader checks the cluster's marking: the handle argument is
// an x-mcp-header parameter a front accepts (mcp-go's own check).
func TestWithArgHeader(t *testing.T) {
	out, ok := WithArg(registry.Tool{Name: "scratchpad", InputSchema: json.RawMessage(`{"type":"object","properties":{"op":{"type":"string"}}}`)}, HeaderName)
	if !ok || !strings.Contains(string(out.InputSchema), `"x-mcp-header":"Toolgate-Thread"`) {
		t.Fatalf("WithArg with a header: %v, %s", ok, out.InputSchema)
	}
	wire := mcp.Tool{Name: out.Name, RawInputSchema: out.InputSchema}
	if err := mcp.ValidateParamHeaderAnnotations(&wire); err != nil {
		t.Errorf("the marked argument is not a valid x-mcp-header parameter: %v", err)
	}
}
