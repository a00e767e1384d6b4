package gateway

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

func TestThreadHandles(t *testing.T) {
	k := newHandleKeys()
	h, thread := k.mint("alice")
	if len(h) != handleLen || !strings.HasPrefix(h, handlePrefix) {
		t.Fatalf("mint = %q, want %d characters starting %q", h, handleLen, handlePrefix)
	}
	if h2, thread2 := k.mint("alice"); h2 == h || thread2 == thread {
		t.Errorf("two mints gave %q and %q", h, h2)
	}
	got, err := k.thread("alice", h)
	if err != nil || got != thread {
		t.Fatalf("thread(alice, own handle) = %q, %v; want %q", got, err, thread)
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
		{"another gateway's key", "alice", func() string { h, _ := newHandleKeys().mint("alice"); return h }()},
		{"made up", "alice", "th_" + strings.Repeat("A", handleLen-3)},
		{"empty", "alice", ""},
		{"too long", "alice", h + "A"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := k.thread(tc.principal, tc.handle)
			if re, ok := errors.AsType[*retry.Error](err); !ok || re.Class != retry.Validation {
				t.Errorf("thread(%q, %q) error = %v, want a validation error", tc.principal, tc.handle, err)
			}
		})
	}
	// The thread is in a namespace no named or session thread shares.
	if !strings.HasPrefix(thread, "h:alice\x00") {
		t.Errorf("thread = %q, want h:alice\\x00…", thread)
	}
}

func TestWithHandleArg(t *testing.T) {
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
			out, ok := withHandleArg(in)
			if ok != tc.want {
				t.Fatalf("withHandleArg(%s) added = %v, want %v", tc.schema, ok, tc.want)
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
			if err := json.Unmarshal(out.InputSchema, &s); err != nil || s.Properties[HandleArg]["type"] != "string" {
				t.Errorf("schema %s has no string %q property (%v)", out.InputSchema, HandleArg, err)
			}
		})
	}
}
