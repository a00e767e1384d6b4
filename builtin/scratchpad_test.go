package builtin_test

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/retry"
)

// newScratchpad returns a fresh scratchpad instance for thread.
func newScratchpad(t *testing.T, thread string) executors.Instance {
	t.Helper()
	f := register(t, nil, "scratchpad").stateful["scratchpad"]
	inst, err := f.New(t.Context(), thread)
	if err != nil || inst == nil {
		t.Fatalf("Factory.New = %v, %v; want an instance", inst, err)
	}
	return inst
}

func TestScratchpad(t *testing.T) {
	type step struct {
		args           map[string]any
		wantText       string
		wantStructured any
		wantErr        retry.Class
		wantMsg        string
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"put then get", []step{
			{args: map[string]any{"op": "put", "key": "plan", "value": "step 1"}, wantText: "stored plan", wantStructured: map[string]any{"key": "plan"}},
			{args: map[string]any{"op": "get", "key": "plan"}, wantText: "step 1", wantStructured: map[string]any{"key": "plan", "value": "step 1"}},
			{args: map[string]any{"op": "put", "key": "plan", "value": "step 2"}, wantText: "stored plan", wantStructured: map[string]any{"key": "plan"}},
			{args: map[string]any{"op": "get", "key": "plan"}, wantText: "step 2", wantStructured: map[string]any{"key": "plan", "value": "step 2"}},
		}},
		{"empty value", []step{
			{args: map[string]any{"op": "put", "key": "k", "value": ""}, wantText: "stored k", wantStructured: map[string]any{"key": "k"}},
			{args: map[string]any{"op": "get", "key": "k"}, wantText: `{"key":"k","value":""}`, wantStructured: map[string]any{"key": "k", "value": ""}},
		}},
		{"list and clear", []step{
			{args: map[string]any{"op": "list"}, wantText: `{"keys":[]}`, wantStructured: map[string]any{"keys": []string{}}},
			{args: map[string]any{"op": "put", "key": "b", "value": "2"}, wantText: "stored b", wantStructured: map[string]any{"key": "b"}},
			{args: map[string]any{"op": "put", "key": "a", "value": "1"}, wantText: "stored a", wantStructured: map[string]any{"key": "a"}},
			{args: map[string]any{"op": "put", "key": "c", "value": "3"}, wantText: "stored c", wantStructured: map[string]any{"key": "c"}},
			{args: map[string]any{"op": "list"}, wantText: `{"keys":["a","b","c"]}`, wantStructured: map[string]any{"keys": []string{"a", "b", "c"}}},
			{args: map[string]any{"op": "clear"}, wantText: "cleared 3 notes", wantStructured: map[string]any{"removed": 3}},
			{args: map[string]any{"op": "get", "key": "a"}, wantErr: retry.NotFound},
			{args: map[string]any{"op": "list"}, wantText: `{"keys":[]}`, wantStructured: map[string]any{"keys": []string{}}},
			{args: map[string]any{"op": "clear"}, wantText: "cleared 0 notes", wantStructured: map[string]any{"removed": 0}},
			{args: map[string]any{"op": "put", "key": "z", "value": "26"}, wantText: "stored z", wantStructured: map[string]any{"key": "z"}},
			{args: map[string]any{"op": "clear"}, wantText: "cleared 1 note", wantStructured: map[string]any{"removed": 1}},
		}},
		{"not found", []step{
			{args: map[string]any{"op": "get", "key": "k"}, wantErr: retry.NotFound,
				wantMsg: `scratchpad: no note "k" in this thread's scratchpad; call op=list to see the keys`},
		}},
		{"bad calls", []step{
			{args: map[string]any{"op": "put", "key": "k"}, wantErr: retry.Validation, wantMsg: `scratchpad: op=put needs the argument "value"`},
			{args: map[string]any{"op": "put", "value": "v"}, wantErr: retry.Validation, wantMsg: `scratchpad: op=put needs the argument "key"`},
			{args: map[string]any{"op": "get"}, wantErr: retry.Validation, wantMsg: `scratchpad: op=get needs the argument "key"`},
			{args: map[string]any{}, wantErr: retry.Validation},
			{args: map[string]any{"op": "delete", "key": "k"}, wantErr: retry.Validation},
			{args: map[string]any{"op": 1.0}, wantErr: retry.Validation},
			{args: map[string]any{"op": "put", "key": 1.0, "value": "v"}, wantErr: retry.Validation},
			{args: map[string]any{"op": "put", "key": "k", "value": 1.0}, wantErr: retry.Validation},
			{args: map[string]any{"op": "put", "key": "", "value": "v"}, wantErr: retry.Validation},
			{args: map[string]any{"op": "list", "extra": true}, wantErr: retry.Validation},
			{args: map[string]any{"op": "put", "key": strings.Repeat("k", 257), "value": "v"}, wantErr: retry.Validation},
			{args: map[string]any{"op": "put", "key": "k", "value": strings.Repeat("v", 65537)}, wantErr: retry.Validation},
			{args: map[string]any{"op": "list"}, wantText: `{"keys":[]}`, wantStructured: map[string]any{"keys": []string{}}},
		}},
		{"size limits in characters", []step{
			{args: map[string]any{"op": "put", "key": strings.Repeat("é", 256), "value": strings.Repeat("€", 65536)},
				wantText: "stored " + strings.Repeat("é", 256), wantStructured: map[string]any{"key": strings.Repeat("é", 256)}},
		}},
	}
	tool := register(t, nil, "scratchpad").tool(t, "scratchpad")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			call := validated(t, tool, newScratchpad(t, "thread-1").Call)
			for i, s := range tc.steps {
				res, err := call(t.Context(), s.args)
				if s.wantErr != "" {
					if err == nil {
						t.Fatalf("step %d: Call(%v) = %v, want a %s error", i, s.args, res, s.wantErr)
					}
					wantClass(t, err, s.wantErr)
					if s.wantMsg != "" && err.Error() != s.wantMsg {
						t.Fatalf("step %d: Call(%v) error = %q, want %q", i, s.args, err, s.wantMsg)
					}
					continue
				}
				if err != nil {
					t.Fatalf("step %d: Call(%v) = %v", i, s.args, err)
				}
				if got := text(t, res); got != s.wantText {
					t.Errorf("step %d: Call(%v) text = %q, want %q", i, s.args, got, s.wantText)
				}
				if diff := cmp.Diff(s.wantStructured, res.Structured); diff != "" {
					t.Errorf("step %d: Call(%v) structured mismatch (-want +got):\n%s", i, s.args, diff)
				}
				checkOutput(t, tool, res)
			}
		})
	}
}

func TestScratchpadThreadsAreSeparate(t *testing.T) {
	a, b := newScratchpad(t, "a"), newScratchpad(t, "b")
	if _, err := a.Call(t.Context(), map[string]any{"op": "put", "key": "k", "value": "v"}); err != nil {
		t.Fatal(err)
	}
	_, err := b.Call(t.Context(), map[string]any{"op": "get", "key": "k"})
	wantClass(t, err, retry.NotFound)
}

func TestScratchpadKeyLimit(t *testing.T) {
	inst := newScratchpad(t, "t")
	put := func(key string) error {
		_, err := inst.Call(t.Context(), map[string]any{"op": "put", "key": key, "value": "v"})
		return err
	}
	for i := range 1000 {
		if err := put(fmt.Sprintf("k%04d", i)); err != nil {
			t.Fatalf("put of key %d: %v", i, err)
		}
	}
	err := put("one-too-many")
	wantClass(t, err, retry.Validation)
	if want := "scratchpad: this thread's scratchpad is full: it holds at most 1000 notes; overwrite an existing key or call op=clear"; err == nil || err.Error() != want {
		t.Errorf("put past the key limit: %v, want %q", err, want)
	}
	if err := put("k0999"); err != nil {
		t.Errorf("overwriting a key of a full scratchpad: %v, want success", err)
	}
	res, err := inst.Call(t.Context(), map[string]any{"op": "list"})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(res.Structured.(map[string]any)["keys"].([]string)); n != 1000 {
		t.Errorf("list after the limit has %d keys, want 1000", n)
	}
	if _, err := inst.Call(t.Context(), map[string]any{"op": "clear"}); err != nil {
		t.Fatal(err)
	}
	if err := put("one-too-many"); err != nil {
		t.Errorf("put after clear: %v, want success", err)
	}
}

// One thread's notes take at most 1 MiB: puts of maximal values (65536
// three-byte characters each) stop succeeding once it is reached, whereas
// without the limit 1000 of them would hold almost 200 MB (50 are tried).
func TestScratchpadByteLimit(t *testing.T) {
	call := newScratchpad(t, "t").Call // the values are valid: see TestScratchpad's size limits
	put := func(key, value string) error {
		_, err := call(t.Context(), map[string]any{"op": "put", "key": key, "value": value})
		return err
	}
	big := strings.Repeat("€", 65536) // 196608 bytes, the schema's longest value
	stored := 0
	for i := range 50 {
		key := fmt.Sprintf("k%04d", i)
		err := put(key, big)
		if err == nil {
			stored += len(key) + len(big)
			continue
		}
		wantClass(t, err, retry.Validation)
		if !strings.Contains(err.Error(), "at most 1048576 bytes (1 MiB)") || !strings.Contains(err.Error(), "op=clear") {
			t.Fatalf("put %d past the byte limit: %q, want it to name the limit and op=clear", i, err)
		}
	}
	if stored > 1<<20 || stored < 1<<20-len(big)-5 {
		t.Errorf("stored %d bytes, want at most 1 MiB and within one note of it", stored)
	}

	// Up to the byte, then overwriting with less, then clear.
	if _, err := call(t.Context(), map[string]any{"op": "clear"}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := put(fmt.Sprintf("%d", i), big); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	rest := 1<<20 - 5*(1+len(big)) - 1 // the exact room left for key "r" and its value
	if err := put("r", strings.Repeat("x", rest+1)); err == nil {
		t.Fatal("put one byte past 1 MiB succeeded")
	}
	if err := put("r", strings.Repeat("x", rest)); err != nil {
		t.Fatalf("put filling 1 MiB exactly: %v", err)
	}
	if err := put("s", ""); err == nil {
		t.Fatal("put of a one-byte note into a full scratchpad succeeded")
	}
	if err := put("0", "short"); err != nil {
		t.Fatalf("overwriting a note with a shorter value: %v", err)
	}
	if err := put("s", ""); err != nil {
		t.Fatalf("put after freeing room: %v", err)
	}
	if _, err := call(t.Context(), map[string]any{"op": "clear"}); err != nil {
		t.Fatal(err)
	}
	if err := put("0", big); err != nil {
		t.Errorf("put after clear: %v", err)
	}
}

func TestScratchpadClose(t *testing.T) {
	inst := newScratchpad(t, "t")
	if _, err := inst.Call(t.Context(), map[string]any{"op": "put", "key": "k", "value": "v"}); err != nil {
		t.Fatal(err)
	}
	c, ok := inst.(io.Closer)
	if !ok {
		t.Fatalf("scratchpad instance %T does not implement io.Closer", inst)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	_, err := inst.Call(t.Context(), map[string]any{"op": "get", "key": "k"})
	wantClass(t, err, retry.Unavailable)
	if err := c.Close(); err != nil {
		t.Errorf("second Close() = %v, want nil", err)
	}
	// A new instance for the same thread starts empty.
	_, err = newScratchpad(t, "t").Call(t.Context(), map[string]any{"op": "get", "key": "k"})
	wantClass(t, err, retry.NotFound)
}
