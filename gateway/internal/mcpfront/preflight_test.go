package mcpfront

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/config"
)

func TestPreflight(t *testing.T) {
	g, _ := newGateway(t, nil)
	noRepair, _ := newGateway(t, func(c *config.Config) { c.Guards.NameRepair = false })
	tests := []struct {
		name      string
		g         *harness
		msg       string
		wantReply string // substring of the reply; "" means no reply
		wantName  string // name in the forwarded message; "" means forwarded unchanged
	}{
		{name: "known tool", g: g, msg: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`},
		{name: "other method", g: g, msg: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`},
		{name: "notification", g: g, msg: `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"nope"}}`},
		{name: "batch", g: g, msg: `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope"}}]`},
		{name: "garbage", g: g, msg: `{"jsonrpc":"2.0","id":1,"method":"tools/call",`},
		{name: "no name", g: g, msg: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`},
		{name: "unknown", g: g, msg: `{"jsonrpc":"2.0","id":"a-1","method":"tools/call","params":{"name":"ecoh"}}`,
			wantReply: `{"jsonrpc":"2.0","id":"a-1","error":{"code":-32602,"message":"unknown tool \"ecoh\"; did you mean \"echo\"?","data":{"suggestions":["echo"]}}}`},
		{name: "unknown without suggestions", g: g, msg: `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"zzzzzzzzzzzz"}}`,
			wantReply: `"data":{"suggestions":[]}`},
		{name: "miscased", g: g, msg: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ECHO","arguments":{"text":"x"},"_meta":{"progressToken":3}}}`, wantName: "echo"},
		{name: "miscased stateful", g: g, msg: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"Counter"}}`, wantName: "counter"},
		{name: "repair off", g: noRepair, msg: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ECHO"}}`, wantReply: `"code":-32602`},
		{name: "hostile name", g: g, msg: fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":%q}}`, strings.Repeat("\u202e<script>", 5000)), wantReply: `"code":-32602`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reply, fwd := tc.g.preflight([]byte(tc.msg), nil)
			if tc.wantReply != "" {
				if fwd != nil || !strings.Contains(string(reply), tc.wantReply) || !json.Valid(reply) {
					t.Fatalf("preflight = reply %s, forward %s; want a reply containing %s", reply, fwd, tc.wantReply)
				}
				if len(reply) > 2048 {
					t.Errorf("reply is %d bytes; a hostile name must not be echoed whole", len(reply))
				}
				return
			}
			if reply != nil {
				t.Fatalf("preflight replied %s, want the message forwarded", reply)
			}
			if tc.wantName == "" {
				if string(fwd) != tc.msg {
					t.Fatalf("preflight forwarded %s, want the message unchanged", fwd)
				}
				return
			}
			var m struct {
				ID     any            `json:"id"`
				Params map[string]any `json:"params"`
			}
			if err := json.Unmarshal(fwd, &m); err != nil {
				t.Fatal(err)
			}
			if m.Params["name"] != tc.wantName || m.ID != 1.0 {
				t.Errorf("forwarded %s, want name %q and the rest kept", fwd, tc.wantName)
			}
			if strings.Contains(tc.msg, "progressToken") && !strings.Contains(string(fwd), `"progressToken":3`) {
				t.Errorf("forwarded %s lost _meta", fwd)
			}
		})
	}
}

func TestEventStoreIsBounded(t *testing.T) {
	s := newEventStore(3)
	ctx := t.Context()
	var ids []string
	for i := range 5 {
		id, err := s.StoreEvent(ctx, "sess", "stream-1", json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if _, err := s.StoreEvent(ctx, "sess", "stream-2", json.RawMessage(`{"other":true}`)); err != nil {
		t.Fatal(err)
	}
	if got := len(s.sessions["sess"]); got != 3 {
		t.Fatalf("stored events = %d, want 3 (bounded)", got)
	}
	if _, err := s.ReplayEventsAfter(ctx, "sess", ids[0], func(string, json.RawMessage) error { return nil }); err == nil {
		t.Error("replay after an evicted event succeeded, want ErrUnknownEventID")
	}
	var got []string
	stream, err := s.ReplayEventsAfter(ctx, "sess", ids[3], func(_ string, m json.RawMessage) error {
		got = append(got, string(m))
		return nil
	})
	if err != nil || stream != "stream-1" || strings.Join(got, ",") != `{"n":4}` {
		t.Errorf("replay after %s = %v, %q, %v; want stream-1 and only {\"n\":4}", ids[3], got, stream, err)
	}
	if err := s.PurgeSession(ctx, "sess"); err != nil || len(s.sessions) != 0 {
		t.Errorf("PurgeSession left %d sessions, err %v", len(s.sessions), err)
	}
}
