package resultedit

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/executors"
)

func upper(s string) string { return strings.ToUpper(s) }

func TestTexts(t *testing.T) {
	parts := &executors.Result{
		Content: []executors.Content{
			{Type: executors.TextContent, Text: "a"},
			{Type: executors.ImageContent, Text: "img"},
			{Type: executors.ResourceContent, Text: "r"},
		},
		Structured: map[string]any{"k": "v", "n": 1},
	}
	tests := []struct {
		name       string
		in         *executors.Result
		structured Structured
		notice     string
		want       *executors.Result
	}{
		{"parts, structured kept", parts, KeepStructured, "",
			&executors.Result{Content: []executors.Content{
				{Type: executors.TextContent, Text: "A"},
				{Type: executors.ImageContent, Text: "img"},
				{Type: executors.ResourceContent, Text: "R"},
			}, Structured: map[string]any{"k": "v", "n": 1}}},
		{"parts, structured edited, a notice", parts, EditStructured, "note",
			&executors.Result{Content: []executors.Content{
				{Type: executors.TextContent, Text: "A"},
				{Type: executors.ImageContent, Text: "img"},
				{Type: executors.ResourceContent, Text: "R"},
				{Type: executors.TextContent, Text: "note"},
			}, Structured: map[string]any{"k": "V", "n": json.Number("1")}}},
		{"passthrough edited", &executors.Result{Passthrough: json.RawMessage(
			`{"content": [{"type":"text","text":"a"},{"type":"resource","resource":{"text":"r"}}], "structuredContent":{"k":"v"}}`)}, EditStructured, "",
			&executors.Result{Passthrough: json.RawMessage(
				`{"content":[{"text":"A","type":"text"},{"resource":{"text":"R"},"type":"resource"}],"structuredContent":{"k":"V"}}`)}},
		{"passthrough unchanged kept byte for byte", &executors.Result{Passthrough: json.RawMessage(`{"content": [{"type":"text","text":"A"}], "n": 1.50}`)}, KeepStructured, "",
			&executors.Result{Passthrough: json.RawMessage(`{"content": [{"type":"text","text":"A"}], "n": 1.50}`)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Texts(tc.in, upper, tc.structured, tc.notice)
			if err != nil {
				t.Fatalf("Texts = %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Texts mismatch (-want +got):\n%s", diff)
			}
		})
	}
	if parts.Content[0].Text != "a" {
		t.Errorf("Texts changed its input: %+v", parts.Content)
	}
	if _, err := Texts(&executors.Result{Passthrough: json.RawMessage(`[1]`)}, upper, KeepStructured, ""); err == nil {
		t.Error("Texts of a passthrough that is not an object succeeded, want an error")
	}
}

func TestAppend(t *testing.T) {
	in := &executors.Result{Passthrough: json.RawMessage(`{"content":[{"type":"text","text":"hi"}],"structuredContent":{"n":1}}`)}
	got, err := Append(in, "note")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"content":[{"text":"hi","type":"text"},{"text":"note","type":"text"}],"structuredContent":{"n":1}}`
	if string(got.Passthrough) != want {
		t.Errorf("Append = %s, want %s", got.Passthrough, want)
	}
}
