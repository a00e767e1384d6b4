package gateway

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolgate/toolgate/config"
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

// sessionlessCall calls counter as a client without a session would (a
// 2026-07-28 client), as principal who ("" without authentication),
// passing handle unless it is empty; it returns the count and the handle
// the result gives, if any.
func sessionlessCall(t *testing.T, g *Gateway, who, handle string) (n float64, minted string, res *Result) {
	t.Helper()
	ctx := t.Context()
	c := &Call{Name: "counter", sessionless: true}
	if handle != "" {
		c.Raw = json.RawMessage(`{"thread":"` + handle + `"}`)
	}
	if who != "" {
		c.ident = g.embedderIdentity(WithPrincipal(ctx, who))
		c.Principal = who
	}
	res, err := g.handle(ctx, c)
	if err != nil || res.IsError {
		t.Fatalf("counter as %q (handle %q): %v %v", who, handle, err, res)
	}
	minted, _ = res.Meta[HandleMetaKey].(string)
	return structuredN(t, res), minted, res
}

// A thread minted for a handle-less call is provisional until its handle
// comes back: a flood of handle-less calls, each minting a thread, pushes
// out neither another client's thread in use nor, with authentication,
// another principal's.
func TestMintedThreadFlood(t *testing.T) {
	for _, tc := range []struct{ name, flooder, victim string }{
		{name: "without authentication"},
		{name: "another principal", flooder: "alice", victim: "bob"},
		{name: "the same principal", flooder: "bob", victim: "bob"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, fc := newGateway(t, func(c *config.Config) {
				c.Threads.MaxInstances = 10 // a tenth: one provisional instance per principal
				if tc.victim != "" {
					c.Auth.Tokens = []config.AuthToken{
						{Name: "alice", Token: aliceToken, Allow: []string{"*"}},
						{Name: "bob", Token: bobToken, Allow: []string{"*"}},
					}
				}
			})
			_, handle, _ := sessionlessCall(t, g, tc.victim, "")
			if n, _, _ := sessionlessCall(t, g, tc.victim, handle); n != 2 {
				t.Fatalf("the second call with the handle counted %v, want 2", n)
			}
			for range 30 {
				if _, h, _ := sessionlessCall(t, g, tc.flooder, ""); h == "" {
					t.Fatal("a handle-less call got no handle")
				}
			}
			if n, _, res := sessionlessCall(t, g, tc.victim, handle); n != 3 {
				t.Errorf("after the flood the thread in use counted %v, want 3 (%q)", n, resultText(t, res))
			}
			if live := fc.created.Load() - fc.closed.Load(); live != 2 {
				t.Errorf("%d instances live after the flood, want 2: the thread in use and the flood's last", live)
			}
		})
	}
}

// A minted thread's instance idles out after two minutes unless its handle
// comes back; then threads.idle_ttl applies.
func TestMintedThreadTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, fc := newGateway(t, nil) // threads.idle_ttl 30m
		_, once, _ := sessionlessCall(t, g, "", "")
		_, again, _ := sessionlessCall(t, g, "", "")
		sessionlessCall(t, g, "", again)
		time.Sleep(3 * time.Minute)
		synctest.Wait()
		if closed := fc.closed.Load(); closed != 1 {
			t.Errorf("after 3 minutes %d instances closed, want 1: the minted thread whose handle never came back", closed)
		}
		n, _, res := sessionlessCall(t, g, "", once)
		if n != 1 || !strings.Contains(resultText(t, res), "idle") {
			t.Errorf("the handle of the idled-out thread: count %v, text %q; want 1 and the eviction notice", n, resultText(t, res))
		}
		if n, _, _ := sessionlessCall(t, g, "", again); n != 3 {
			t.Errorf("the thread whose handle came back counted %v after 3 minutes, want 3", n)
		}
		time.Sleep(31 * time.Minute)
		synctest.Wait()
		if closed := fc.closed.Load(); closed != 3 {
			t.Errorf("after threads.idle_ttl %d instances closed, want 3", closed)
		}
	})
}
