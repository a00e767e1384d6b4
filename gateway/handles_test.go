package gateway

import (
	"encoding/json"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolgate/toolgate/config"
)

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
