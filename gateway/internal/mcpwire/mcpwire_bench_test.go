package mcpwire

import (
	"encoding/json"
	"testing"

	"github.com/toolgate/toolgate/executors"
)

// BenchmarkPassthroughResult is an upstream's echo result on its way to
// the client.
func BenchmarkPassthroughResult(b *testing.B) {
	r := executors.Result{Passthrough: json.RawMessage(`{"content":[{"type":"text","text":"hello"}]}`)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := JSON(&r); err != nil {
			b.Fatal(err)
		}
	}
}
