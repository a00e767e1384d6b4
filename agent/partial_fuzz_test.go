package agent

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/toolgate/toolgate/internal/canonjson"
)

// FuzzParsePartial: parsePartial reads a model's streamed, possibly cut
// arguments (outside input). It never panics; on a whole JSON document it
// agrees with encoding/json; and every prefix of a document parses to
// something or to nil without error.
func FuzzParsePartial(f *testing.F) {
	for _, s := range []string{
		`{"city": "Paris", "days": [1, 2]}`,
		`{"a": {"b": [true, null, "x\"y"]}, "c": 1.5e3}`,
		`{"s": "\u00e9\\"}`,
		`[1, [2, [3]]]`,
		`{"k":`,
		`"open`,
		``,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var want any
		if json.Unmarshal([]byte(s), &want) == nil {
			if got := parsePartial(s); !reflect.DeepEqual(got, want) {
				t.Errorf("parsePartial(%q) = %#v, want %#v", s, got, want)
			}
		}
		if len(s) <= 256 { // every prefix: quadratic, so short inputs only
			for i := range len(s) {
				_ = parsePartial(s[:i])
			}
		}
		_ = canonjson.RawSum([]byte(s))
	})
}
