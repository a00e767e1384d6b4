package mcpfront

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/toolgate/toolgate/executors"
)

// TestPassthroughResultEncoding checks what the client gets for an
// upstream's result: text parts and structured content as the upstream
// wrote them, other parts through mcp-go's types, and a result mcp-go
// cannot read as its JSON in a text part.
func TestPassthroughResultEncoding(t *testing.T) {
	tests := []struct {
		name, in, want string
		meta           map[string]any
	}{
		{
			name: "text parts and structured content as sent",
			in:   `{"content":[{"type":"text","text":"hi","x-extra":1},{"type":"text","text":"b"}],"structuredContent":{"b":1,"a":[2]}}`,
			want: `{"content":[{"type":"text","text":"hi","x-extra":1},{"type":"text","text":"b"}],"structuredContent":{"b":1,"a":[2]}}`,
		},
		{
			name: "isError and meta merged",
			in:   `{"content":[{"type":"text","text":"no"}],"isError":true}`,
			meta: map[string]any{"k": "v"},
			want: `{"_meta":{"k":"v"},"content":[{"type":"text","text":"no"}],"isError":true}`,
		},
		{
			name: "no content",
			in:   `{}`,
			want: `{"content":[]}`,
		},
		{
			name: "an image part goes through mcp-go",
			in:   `{"content":[{"type":"text","text":"a"},{"type":"image","data":"aGk=","mimeType":"image/png","x-extra":1}]}`,
			want: `{"content":[{"type":"text","text":"a"},{"type":"image","data":"aGk=","mimeType":"image/png"}]}`,
		},
		{
			name: "a text part mcp-go refuses",
			in:   `{"content":[{"type":"text","text":5}]}`,
			want: `{"content":[{"type":"text","text":"{\"content\":[{\"type\":\"text\",\"text\":5}]}"}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := executors.Result{Passthrough: json.RawMessage(tt.in), Meta: tt.meta}
			got, err := json.Marshal(wireResult(&r))
			if err != nil {
				t.Fatal(err)
			}
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tt.want), &w); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(g, w) {
				t.Errorf("encoded %s\nwant      %s", got, tt.want)
			}
		})
	}
}

// forwardable lets through only what mcp-go's types would give the client
// unchanged (TestSessionCallMatchesMCPGo compares whole answers); the
// rest takes the decoding path.
func TestForwardable(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want bool
	}{
		{`{"content":[{"type":"text","text":"x"}]}`, true},
		{`{"content":[],"structuredContent":{"n":1},"isError":false}`, true},
		{`{"content":[{"type":"text","text":"x","annotations":{"priority":0.5,"audience":["user"]},"_meta":{"k":1}}]}`, true},
		{`{"content":[{"type":"text","text":"x","annotations":{"priority":"high"}}]}`, false},
		{`{"content":[{"type":"text","text":"x","annotations":{"audience":"user"}}]}`, false},
		{`{"content":[{"type":"text","text":"a"}],"content":[{"type":"text","text":"b"}]}`, false},
		{`{"content":[],"isError":true,"isError":false}`, false},
		{`{"content":[],"structuredContent":{},"structuredContent":{"n":1}}`, false},
		{`{"content":[],"_meta":{"n":12345678901234567891}}`, false},
		{`{"content":[{"type":"image","data":"aGk=","mimeType":"image/png"}]}`, false},
		{`{"content":[{"type":"text","text":"x"}],"extra":1}`, false},
		{`{"Content":[{"type":"text","text":"x"}]}`, false},
		{`{"isError":true}`, false},
		{`{"content":[{"type":"text","text":5}]}`, false},
		{`{"content":[{"type":"text","text":"x"}]} {}`, false},
	} {
		if got := forwardable(json.RawMessage(tc.raw)); got != tc.want {
			t.Errorf("forwardable(%s) = %v, want %v", tc.raw, got, tc.want)
		}
	}
}
