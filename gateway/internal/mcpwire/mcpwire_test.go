package mcpwire

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/toolgate/toolgate/executors"
)

// TestPassthroughResultEncoding checks what the client gets for an
// upstream's result: the result as the upstream wrote it, unless toolgate
// adds to its _meta or it has no content, when it goes through mcp-go's
// types (and one they cannot read becomes its JSON in a text part).
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
			name: "an image part as sent",
			in:   `{"content":[{"type":"text","text":"a"},{"type":"image","data":"aGk=","mimeType":"image/png","x-extra":1}]}`,
			want: `{"content":[{"type":"text","text":"a"},{"type":"image","data":"aGk=","mimeType":"image/png","x-extra":1}]}`,
		},
		{
			name: "a result mcp-go cannot read, with meta",
			in:   `{"content":[{"type":"text","text":5}]}`,
			meta: map[string]any{"k": "v"},
			want: `{"_meta":{"k":"v"},"content":[{"type":"text","text":"{\"content\":[{\"type\":\"text\",\"text\":5}]}"}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := executors.Result{Passthrough: json.RawMessage(tt.in), Meta: tt.meta}
			got, err := JSON(&r)
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
