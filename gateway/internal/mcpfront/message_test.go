package mcpfront

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// TestDecodeMessage: what one decoding of a message accepts, and the
// JSON-RPC error everything else gets.
func TestDecodeMessage(t *testing.T) {
	for _, tc := range []struct {
		name, msg string
		code      int    // the error's code; 0: accepted
		id        string // the id the error answers (accepted: the id read)
	}{
		{"request", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, 0, "1"},
		{"spaced id", `{"jsonrpc":"2.0","id": "a b" ,"method":"ping"}`, 0, `"a b"`},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, 0, ""},
		{"response", `{"jsonrpc":"2.0","id":"toolgate-1","result":{}}`, 0, `"toolgate-1"`},
		{"not JSON", `{"jsonrpc":"2.0","id":1,`, -32700, "null"},
		{"not an object", `"ping"`, -32600, "null"},
		{"object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, -32600, "null"},
		{"array id", `{"jsonrpc":"2.0","id":[1],"method":"ping"}`, -32600, "null"},
		{"boolean id", `{"jsonrpc":"2.0","id":true,"method":"ping"}`, -32600, "null"},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, -32600, "null"},
		{"number method", `{"jsonrpc":"2.0","id":1,"method":5}`, -32600, "1"},
		{"empty method", `{"jsonrpc":"2.0","id":1,"method":""}`, -32600, "1"},
		{"no jsonrpc", `{"id":1,"method":"ping"}`, -32600, "1"},
		{"neither method nor result", `{"jsonrpc":"2.0","id":1}`, -32600, "1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, reject := decodeMessage([]byte(tc.msg))
			if tc.code == 0 {
				if reject != nil {
					t.Fatalf("refused: %s", reject)
				}
				if string(m.id) != tc.id {
					t.Errorf("id %s, want %s", m.id, tc.id)
				}
				return
			}
			var e struct {
				ID    json.RawMessage `json:"id"`
				Error struct{ Code int }
			}
			if err := json.Unmarshal(reject, &e); err != nil || e.Error.Code != tc.code || string(e.ID) != tc.id {
				t.Errorf("answer %s; want code %d for id %s", reject, tc.code, tc.id)
			}
		})
	}
}

// FuzzDecodeMessage feeds the front's one decoding: it never panics;
// what it accepts is a JSON-RPC message as encoding/json reads it (the
// same method and id), and what it refuses gets a JSON-RPC error; a
// tools/call's params are read as encoding/json reads them. The seeds are
// those the fuzzers of the former byte scanners held.
func FuzzDecodeMessage(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`,
		`{"id":null,"method":"tools/call","params":{"name":"a","name":"b"}}`,
		`{"method":"x","params":{"arguments":{"name":"n"}}}`,
		`{"id":[1],"method":"tools/call","params":{"name":""}}`,
		`{"JSONRPC":"2.0","Params":{"NAME":"a","Arguments":null,"_META":{"k":[1, 2]},"_meta":{"p":"q"}},"result":null}`,
		`{"params":{"_meta":{"a":1},"_meta":{"b":2},"task":{}},"error":{"code":1}}`,
		`{"params":{"name":"a","name":"b","arguments":{"x":1},"arguments":[2]}}`,
		`{"jsonrpc":null,"params":null}`,
		`{"jsonrpc":"2.0","id":"\u0041","method":"tools/\u0063all","params":{"name":"e\u0063ho","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
		`{"jsonrpc":"2.0","id":1e400,"method":"ping"}`,
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		m, reject := decodeMessage(msg)
		if reject != nil {
			if !json.Valid(reject) || !strings.Contains(string(reject), `"error"`) {
				t.Fatalf("refusal %q is not a JSON-RPC error", reject)
			}
			return
		}
		var ref struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Method  *string         `json:"method"`
			Params  json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal(msg, &ref); err != nil {
			t.Fatalf("accepted %q, which encoding/json does not read: %v", msg, err)
		}
		if ref.JSONRPC != "2.0" {
			t.Fatalf("accepted jsonrpc %q", ref.JSONRPC)
		}
		if (ref.Method == nil && m.method != "") || (ref.Method != nil && *ref.Method != m.method) {
			t.Fatalf("method %q; encoding/json reads %v", m.method, ref.Method)
		}
		if hasID := len(ref.ID) > 0 && string(ref.ID) != "null"; hasID != (m.id != nil) {
			t.Fatalf("id %q; encoding/json reads %q", m.id, ref.ID)
		}
		if m.method == "tools/call" && m.call != nil {
			var p struct{ Name string }
			if json.Unmarshal(ref.Params, &p) != nil || p.Name != m.call.Name {
				t.Fatalf("tool name %q; encoding/json reads %q", m.call.Name, p.Name)
			}
		}
	})
}

// TestStandardHeaders: a 2026-07-28 request's Mcp-Method must be its
// method and, for the three methods that name something, its Mcp-Name
// (plain, or Base64 in the =?base64?...?= wrapper) the name or uri of its
// params (SEP-2243); each refusal names the header and what is wrong.
func TestStandardHeaders(t *testing.T) {
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}`
	for _, tc := range []struct {
		name, msg, method, mcpName string
		err                        string // "" when the headers agree
	}{
		{"tools/call", call, "tools/call", "echo", ""},
		{"Base64 name", call, "tools/call", "=?base64?ZWNobw==?=", ""},
		{"method missing", call, "", "echo", "Mcp-Method: missing required header"},
		{"method differs", call, "tools/list", "echo", `Mcp-Method: header value "tools/list" does not match body value "tools/call"`},
		{"name missing", call, "tools/call", "", `Mcp-Name: missing required header for method "tools/call"`},
		{"name differs", call, "tools/call", "other", `Mcp-Name: header value "other" does not match body value "echo"`},
		{"bad Base64", call, "tools/call", "=?base64?!!?=", "Mcp-Name: invalid Base64 encoding"},
		{"no name needed", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "tools/list", "", ""},
		{"prompts/get", `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p"}}`, "prompts/get", "p", ""},
		{"resources/read", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///a"}}`, "resources/read", "file:///a", ""},
		{"resources/read by name", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///a"}}`, "resources/read", "a", `Mcp-Name: header value "a" does not match body value "file:///a"`},
		{"tools/call without params", `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`, "tools/call", "echo", `Mcp-Name: failed to extract name from parameters for method "tools/call"`},
		// The call's params do not decode as a whole (_meta is not an
		// object): the name is still read, and callTool refuses the params.
		{"tools/call with a bad _meta", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_meta":1}}`, "tools/call", "echo", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, reject := decodeMessage([]byte(tc.msg))
			if reject != nil {
				t.Fatalf("refused: %s", reject)
			}
			h := http.Header{}
			if tc.method != "" {
				h.Set(mcp.HeaderMethod, tc.method)
			}
			if tc.mcpName != "" {
				h.Set(mcp.HeaderName, tc.mcpName)
			}
			err := standardHeaders(h, &m)
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("standardHeaders = %v; want %q", err, tc.err)
			}
		})
	}
}
