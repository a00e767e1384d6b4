package mcpfront

import (
	"encoding/json"
	"testing"
)

func TestScanCall(t *testing.T) {
	for _, tc := range []struct {
		msg          string
		method, name string
		hasID, ok    bool
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"a":[1,{"b":"}"}],"name2":"x"}}}`, "tools/call", "echo", true, true},
		{` { "params" : { "arguments" : {"name":"decoy"} , "name" : "real" } , "method":"tools/call","id":"x" } `, "tools/call", "real", true, true},
		{`{"method":"tools/call","params":{"name":"echo"}}`, "tools/call", "echo", false, true},
		{`{"id":null,"method":"tools/call","params":{"name":"echo"}}`, "tools/call", "echo", false, true},
		{`{"id":1,"method":"tools/call","params":{"name":"ec\u0068o"}}`, "tools/call", "", true, false},
		{`{"id":1,"method":"tools/call","params":[1,2]}`, "tools/call", "", true, true},
		{`{"id":1,"method":"tools/call","params":{"name":"echo"}`, "", "", false, false},
		{`[{"id":1,"method":"tools/call"}]`, "", "", false, false},
		{`{"id":1,"method":"tools/call","params":{"name":"echo"}} trailing`, "", "", false, false},
	} {
		method, name, id, ok := scanCall([]byte(tc.msg))
		hasID := isRequestID(id)
		if ok != tc.ok || (ok && (string(method) != tc.method || string(name) != tc.name || hasID != tc.hasID)) {
			t.Errorf("scanCall(%s) = %q, %q, %v, %v; want %q, %q, %v, %v", tc.msg, method, name, hasID, ok, tc.method, tc.name, tc.hasID, tc.ok)
		}
	}
}

// FuzzScanCall checks that whenever the scanner claims to have read a
// message, encoding/json reads the same method, name and id presence.
func FuzzScanCall(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`,
		`{"id":null,"method":"tools/call","params":{"name":"a","name":"b"}}`,
		`{"method":"x","params":{"arguments":{"name":"n"}}}`,
		`{"id":[1],"method":"tools/call","params":{"name":""}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		method, name, id, ok := scanCall(msg)
		hasID := isRequestID(id)
		if !ok || !json.Valid(msg) {
			return
		}
		var ref struct {
			ID     json.RawMessage `json:"id"`
			Method *string         `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(msg, &ref) != nil {
			return
		}
		if ref.Method != nil && *ref.Method != string(method) {
			t.Fatalf("method %q, json says %q", method, *ref.Method)
		}
		var p struct {
			Name *string `json:"name"`
		}
		if json.Unmarshal(ref.Params, &p) == nil && p.Name != nil && name != nil && *p.Name != string(name) {
			t.Fatalf("name %q, json says %q", name, *p.Name)
		}
		if refHasID := len(ref.ID) > 0 && string(ref.ID) != "null"; refHasID != hasID {
			t.Fatalf("hasID %v, json says %v (%s)", hasID, refHasID, ref.ID)
		}
		if (id != nil) != (ref.ID != nil) {
			t.Fatalf("id member %q, json says %q", id, ref.ID)
		}
	})
}

func BenchmarkPreflight(b *testing.B) {
	g, _ := newGateway(b, nil)
	msg := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello, toolgate"}}}`)
	b.ReportAllocs()
	for b.Loop() {
		g.preflight(msg, nil)
	}
}

func TestReadHead(t *testing.T) {
	for _, tc := range []struct {
		msg      string
		method   string
		idMember bool
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientInfo":{"name":"a\"b\n"}}}`, "initialize", true},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, "notifications/initialized", false},
		{`{"jsonrpc":"2.0","ID":null,"method":"notifications/initialized"}`, "notifications/initialized", true},
		{`{"jsonrpc":"2.0","id":1,"\u006dethod":"initialize"}`, "initialize", true}, // decoded
		{`{"jsonrpc":"2.0","id":1,"method":"init\u0069alize"}`, "initialize", true}, // decoded
		{`{"jsonrpc":"2.0","method":`, "", false},
	} {
		method, idMember := readHead([]byte(tc.msg))
		if string(method) != tc.method || idMember != tc.idMember {
			t.Errorf("readHead(%s) = %q, %v; want %q, %v", tc.msg, method, idMember, tc.method, tc.idMember)
		}
	}
}
