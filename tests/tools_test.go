package tests

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/mcp"
)

func TestListTools(t *testing.T) {
	srv := startServe(t, baseConfig)
	// Required properties of each tool's input schema.
	wantProps := map[string][]string{
		"calc":       {"expression"},
		"clock_now":  {"timezone"},
		"scratchpad": {"op", "key", "value"},
		"sleep":      {"ms"},
	}
	for _, tr := range allTransports {
		t.Run(tr, func(t *testing.T) {
			c := connect(t, tr, srv)
			ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
			defer cancel()
			res, err := c.ListTools(ctx, mcp.ListToolsRequest{})
			if err != nil {
				t.Fatalf("tools/list: %v", err)
			}
			var names []string
			for _, tool := range res.Tools {
				names = append(names, tool.Name)
				if tool.Description == "" {
					t.Errorf("tool %s has no description", tool.Name)
				}
				if tool.InputSchema.Type != "object" {
					t.Errorf("tool %s: inputSchema.type = %q, want object", tool.Name, tool.InputSchema.Type)
				}
				for _, p := range wantProps[tool.Name] {
					if _, ok := tool.InputSchema.Properties[p]; !ok {
						t.Errorf("tool %s: inputSchema has no property %q; properties %v", tool.Name, p, tool.InputSchema.Properties)
					}
				}
			}
			slices.Sort(names)
			if diff := cmp.Diff([]string{"calc", "clock_now", "scratchpad", "sleep"}, names); diff != "" {
				t.Errorf("tools/list names (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCallDemoTools(t *testing.T) {
	srv := startServe(t, baseConfig)
	for _, tr := range allTransports {
		t.Run(tr, func(t *testing.T) {
			c := connect(t, tr, srv)

			t.Run("calc", func(t *testing.T) {
				res := mustCall(t, c, "calc", map[string]any{"expression": "2+3*4"}, "")
				wantOK(t, res, "14")
				if diff := cmp.Diff(map[string]any{"value": 14.0}, structured(t, res)); diff != "" {
					t.Errorf("calc structuredContent (-want +got):\n%s", diff)
				}
			})
			t.Run("calc division by zero", func(t *testing.T) {
				res := mustCall(t, c, "calc", map[string]any{"expression": "1/0"}, "")
				wantError(t, res, "execution")
			})
			t.Run("calc garbage", func(t *testing.T) {
				res := mustCall(t, c, "calc", map[string]any{"expression": "2+*"}, "")
				wantError(t, res, "validation")
			})
			t.Run("clock_now Europe/Paris", func(t *testing.T) {
				before := time.Now().Unix()
				res := mustCall(t, c, "clock_now", map[string]any{"timezone": "Europe/Paris"}, "")
				after := time.Now().Unix()
				if res.IsError {
					t.Fatalf("clock_now is an error: %q", resultText(res))
				}
				sc := structured(t, res)
				if sc["timezone"] != "Europe/Paris" {
					t.Errorf("clock_now timezone = %v, want Europe/Paris", sc["timezone"])
				}
				stamp, _ := sc["time"].(string)
				ts, err := time.Parse(time.RFC3339, stamp)
				if err != nil {
					t.Fatalf("clock_now time %q is not RFC 3339: %v", stamp, err)
				}
				paris, err := time.LoadLocation("Europe/Paris")
				if err != nil {
					t.Fatalf("loading Europe/Paris on the test machine: %v", err)
				}
				_, gotOff := ts.Zone()
				if _, wantOff := ts.In(paris).Zone(); gotOff != wantOff {
					t.Errorf("clock_now time %q does not carry Europe/Paris's UTC offset (%ds)", stamp, wantOff)
				}
				unix, _ := sc["unix"].(float64)
				if int64(unix) != ts.Unix() {
					t.Errorf("clock_now unix = %v, want %d (the time field)", sc["unix"], ts.Unix())
				}
				if int64(unix) < before-1 || int64(unix) > after+1 {
					t.Errorf("clock_now unix = %v, want between %d and %d", unix, before, after)
				}
			})
			t.Run("clock_now default UTC", func(t *testing.T) {
				res := mustCall(t, c, "clock_now", map[string]any{}, "")
				if res.IsError {
					t.Fatalf("clock_now is an error: %q", resultText(res))
				}
				if tz := structured(t, res)["timezone"]; tz != "UTC" {
					t.Errorf("clock_now timezone = %v, want UTC", tz)
				}
			})
			t.Run("clock_now unknown zone", func(t *testing.T) {
				res := mustCall(t, c, "clock_now", map[string]any{"timezone": "Mars/Olympus_Mons"}, "")
				wantError(t, res, "validation")
			})
			t.Run("scratchpad", func(t *testing.T) {
				res := mustCall(t, c, "scratchpad", map[string]any{"op": "put", "key": "greeting", "value": "bonjour"}, "")
				if res.IsError {
					t.Fatalf("scratchpad put is an error: %q", resultText(res))
				}
				wantOK(t, mustCall(t, c, "scratchpad", map[string]any{"op": "get", "key": "greeting"}, ""), "bonjour")
				res = mustCall(t, c, "scratchpad", map[string]any{"op": "list"}, "")
				if res.IsError {
					t.Fatalf("scratchpad list is an error: %q", resultText(res))
				}
				if diff := cmp.Diff(map[string]any{"keys": []any{"greeting"}}, structured(t, res)); diff != "" {
					t.Errorf("scratchpad list structuredContent (-want +got):\n%s", diff)
				}
				res = mustCall(t, c, "scratchpad", map[string]any{"op": "get", "key": "absent"}, "")
				wantError(t, res, "not_found")
			})
			t.Run("sleep", func(t *testing.T) {
				wantOK(t, mustCall(t, c, "sleep", map[string]any{"ms": 10}, ""), "slept 10 ms")
			})
		})
	}
}

func TestInvalidArguments(t *testing.T) {
	srv := startServe(t, baseConfig)
	tests := []struct {
		name string
		tool string
		args any
		// want are substrings of the error text: every violation's JSON
		// pointer or offending property.
		want []string
	}{
		{"wrong type and extra property", "calc", map[string]any{"expression": 5, "extra": 1}, []string{"/expression", "extra"}},
		{"missing required", "calc", map[string]any{}, []string{"expression"}},
		{"out of range and extra", "sleep", map[string]any{"ms": 60001, "nap": true}, []string{"/ms", "nap"}},
		{"bad enum and empty key", "scratchpad", map[string]any{"op": "erase", "key": ""}, []string{"/op", "/key"}},
	}
	for _, tr := range allTransports {
		t.Run(tr, func(t *testing.T) {
			c := connect(t, tr, srv)
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					res := mustCall(t, c, tc.tool, tc.args, "")
					wantError(t, res, "validation")
					text := resultText(res)
					for _, w := range tc.want {
						if !strings.Contains(text, w) {
							t.Errorf("tools/call %s %v: error text %q does not mention %q", tc.tool, tc.args, text, w)
						}
					}
				})
			}
		})
	}
}

func TestUnknownTool(t *testing.T) {
	srv := startServe(t, baseConfig)
	for _, tr := range allTransports {
		t.Run(tr, func(t *testing.T) {
			c := connect(t, tr, srv)
			res, err := callTool(t, c, "calcc", map[string]any{"expression": "1"}, "")
			if err == nil {
				t.Fatalf("tools/call calcc = result %q, want a JSON-RPC error", resultText(res))
			}
			msg := err.Error()
			if !strings.Contains(msg, `unknown tool "calcc"`) || !strings.Contains(msg, `"calc"`) {
				t.Errorf("tools/call calcc: error %q, want it to contain `unknown tool \"calcc\"` and suggest \"calc\"", msg)
			}
			// The session survives the error.
			wantOK(t, mustCall(t, c, "calc", map[string]any{"expression": "1+1"}, ""), "2")
		})
	}
}

func TestUnknownToolSuggestionsRaw(t *testing.T) {
	srv := startServe(t, baseConfig)
	before := metricOrZero(scrape(t, srv.URL), "toolgate_unknown_tool_calls_total", nil)
	s := openRawSession(t, srv.URL)
	r := s.call(t, 7, "calcc", map[string]any{"expression": "1"})
	if string(r.ID) != "7" {
		t.Errorf("response id = %s, want 7", r.ID)
	}
	if r.Error == nil {
		t.Fatalf("tools/call calcc: result %s, want a JSON-RPC error", r.Result)
	}
	if r.Error.Code != -32602 {
		t.Errorf("tools/call calcc: error code %d, want -32602", r.Error.Code)
	}
	if !strings.HasPrefix(r.Error.Message, `unknown tool "calcc"; did you mean "calc"`) {
		t.Errorf("tools/call calcc: error message %q, want it to start with `unknown tool \"calcc\"; did you mean \"calc\"`", r.Error.Message)
	}
	var data struct {
		Suggestions []string `json:"suggestions"`
	}
	if err := json.Unmarshal(r.Error.Data, &data); err != nil {
		t.Fatalf("error.data %s: %v", r.Error.Data, err)
	}
	if len(data.Suggestions) == 0 || len(data.Suggestions) > 3 || !slices.Contains(data.Suggestions, "calc") {
		t.Errorf("error.data.suggestions = %q, want 1 to 3 names including calc", data.Suggestions)
	}
	if len(data.Suggestions) > 0 && data.Suggestions[0] != "calc" {
		t.Errorf("error.data.suggestions[0] = %q, want calc (the closest name)", data.Suggestions[0])
	}
	after := metricOrZero(scrape(t, srv.URL), "toolgate_unknown_tool_calls_total", nil)
	if after-before != 1 {
		t.Errorf("toolgate_unknown_tool_calls_total went from %v to %v, want +1", before, after)
	}

	// A name nothing resembles still gets a well-formed error.
	r = s.call(t, 8, "zzzzzzzzzzzz", map[string]any{})
	if r.Error == nil || r.Error.Code != -32602 || !strings.Contains(r.Error.Message, `unknown tool "zzzzzzzzzzzz"`) {
		t.Errorf("tools/call zzzzzzzzzzzz: %+v, want a -32602 error naming the tool", r.Error)
	}
}

func TestMiscasedToolName(t *testing.T) {
	srv := startServe(t, baseConfig)
	for _, tr := range allTransports {
		t.Run(tr, func(t *testing.T) {
			c := connect(t, tr, srv)
			wantOK(t, mustCall(t, c, "CALC", map[string]any{"expression": "1+1"}, ""), "2")
			res := mustCall(t, c, "Clock_Now", map[string]any{"timezone": "UTC"}, "")
			if res.IsError {
				t.Fatalf("Clock_Now is an error: %q", resultText(res))
			}
			if tz := structured(t, res)["timezone"]; tz != "UTC" {
				t.Errorf("Clock_Now timezone = %v, want UTC", tz)
			}
		})
	}
}
