package reqmeta

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// FuzzRequestMeta: the front's one decoding of a request's _meta reads
// what mcp.Meta and its accessors read, the reading toolgate had before
// (mcp-go's own): the same _meta refused, the same progress token,
// protocol version, client info, capabilities and log level, and the same
// members passed on to a tool. An object naming a member twice (or two
// differing only in case) inside the client info or capabilities is read
// differently, mcp.Meta's map keeping the last and encoding/json merging
// the two: JSON leaves that reading open (RFC 8259 §4), and the fuzzer
// compares the rest of such input only.
func FuzzRequestMeta(f *testing.F) {
	for _, s := range []string{
		`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"b","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`,
		`{"progressToken":7,"io.modelcontextprotocol/clientCapabilities":{"sampling":{"tools":{}},"elicitation":{},"experimental":{"x":[1,2.5]}},"io.modelcontextprotocol/logLevel":"debug"}`,
		`{"progressToken":"p"}`,
		`{}`,
		`null`,
		`5`,
		`["a"]`,
		`"x"`,
		` { "traceparent" : "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" , "k\"q" : { "a" : [ "}" , "]" ] } } `,
		`{"io.modelcontextprotocol/clientInfo":5,"io.modelcontextprotocol/protocolVersion":2026,"io.modelcontextprotocol/logLevel":null}`,
		`{"io.modelcontextprotocol/clientInfo":{"name":1},"io.modelcontextprotocol/clientCapabilities":[]}`,
		`{"io.modelcontextprotocol\/protocolVersion":"2026-07-28","progress\u0054oken":null}`,
		`{"IO.MODELCONTEXTPROTOCOL/PROTOCOLVERSION":"2026-07-28","io.modelcontextprotocol/other":1}`,
		`{"io.modelcontextprotocol/protocolVersion":"a","io.modelcontextprotocol/protocolVersion":"b"}`,
		`{"x":1e400}`,
		`{"x":"1e400","y":-0.5E-3,"z":1E+2}`,
		`{"toolgate/thread":"t1","io.modelcontextprotocol/protocolVersion":"2026-07-28"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, meta []byte) {
		msg := append(append([]byte(`{"_meta":`), meta...), '}')
		if !json.Valid(msg) {
			return // not a message: decodeMessage refuses it first
		}
		var want struct {
			Meta *mcp.Meta `json:"_meta"`
		}
		var got struct {
			Meta *Meta `json:"_meta"`
		}
		wantErr, gotErr := json.Unmarshal(msg, &want), json.Unmarshal(msg, &got)
		if (wantErr == nil) != (gotErr == nil) {
			t.Fatalf("_meta %s: error %v; mcp.Meta's %v", meta, gotErr, wantErr)
		}
		if wantErr != nil {
			return
		}
		w, g := want.Meta, got.Meta
		if (w == nil) != (g == nil) {
			t.Fatalf("_meta %s: read %v; mcp.Meta reads %v", meta, g, w)
		}
		if w == nil {
			return
		}
		check := func(what string, got, want any) {
			t.Helper()
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("_meta %s: %s %#v; mcp.Meta reads %#v", meta, what, got, want)
			}
		}
		check("progress token", g.ProgressToken, w.ProgressToken)
		check("protocol version", g.Version(), w.ProtocolVersion())
		check("log level", g.LogLevel, w.LogLevel())
		legacy, modern := nonEmpty(w.AdditionalFields), nonEmpty(withoutProtocolMembers(w.AdditionalFields))
		check("members passed on", g.Fields(false), legacy)
		check("members passed on in 2026-07-28", g.Fields(true), modern)
		if foldedDuplicates(json.NewDecoder(bytes.NewReader(meta))) {
			return
		}
		check("client info", g.ClientInfo, w.ClientInfo())
		check("client capabilities", g.Caps, w.ClientCapabilities())
	})
}

// nonEmpty is m, or nil when it has no member.
func nonEmpty(m map[string]any) map[string]any {
	if len(m) == 0 {
		return nil
	}
	return m
}

// withoutProtocolMembers is m without the protocol's own members, as
// toolgate passed a 2026-07-28 tools/call's _meta on before.
func withoutProtocolMembers(m map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		if !strings.HasPrefix(k, "io.modelcontextprotocol/") {
			out[k] = v
		}
	}
	return out
}

// foldedDuplicates reports whether the value d reads next has an object
// naming two members alike but for case, or the same member twice.
func foldedDuplicates(d *json.Decoder) bool {
	tok, err := d.Token()
	if err != nil {
		return false
	}
	switch tok {
	case json.Delim('{'):
		var seen []string
		for d.More() {
			k, _ := d.Token()
			key, _ := k.(string)
			for _, s := range seen {
				if strings.EqualFold(s, key) {
					return true
				}
			}
			seen = append(seen, key)
			if foldedDuplicates(d) {
				return true
			}
		}
		_, _ = d.Token()
	case json.Delim('['):
		for d.More() {
			if foldedDuplicates(d) {
				return true
			}
		}
		_, _ = d.Token()
	}
	return false
}

// TestRequestMetaPassesOn: the members a tools/call's _meta passes on to
// its tool: every one but progressToken from a legacy request; from a
// 2026-07-28 one, none of the protocol's own, which are its protocol
// information; nothing decoded for a request that has none to pass on.
func TestRequestMetaPassesOn(t *testing.T) {
	var rm Meta
	if err := json.Unmarshal([]byte(`{"progressToken":1,"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`), &rm); err != nil {
		t.Fatal(err)
	}
	if rm.others || rm.Fields(true) != nil {
		t.Errorf("2026-07-28 request with protocol members only passes on %v", rm.Fields(true))
	}
	if got := rm.Fields(false); len(got) != 2 || got["progressToken"] != nil {
		t.Errorf("legacy request passes on %v, want the two protocol members", got)
	}
	if err := json.Unmarshal([]byte(`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","toolgate/thread":"t1"}`), &rm); err != nil {
		t.Fatal(err)
	}
	if got := rm.Fields(true); !reflect.DeepEqual(got, map[string]any{"toolgate/thread": "t1"}) {
		t.Errorf("2026-07-28 request passes on %v, want its thread alone", got)
	}
}
