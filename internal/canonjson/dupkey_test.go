package canonjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
)

func TestDuplicateKey(t *testing.T) {
	for _, tc := range []struct {
		in, pointer, name string
		found             bool
	}{
		{`{"msg":"forbidden","msg":"ok"}`, "", "msg", true},
		{`{"a":1,"b":{"c":[{"x":1},{"y":2,"y":3}]}}`, "/b/c/1", "y", true},
		{`{ "b" : 1 , "\u0062" : 2 }`, "", "b", true},
		{`{"a/b":{"~":1,"~":2}}`, "/a~1b", "~", true},
		{`{"b":1,"a":2}`, "", "", false},
		{`{"a":{"a":{"a":1}},"b":[{"a":1},{"a":2}]}`, "", "", false},
		{`[1,"x",true,null,{"k":"}\"{"}]`, "", "", false},
		{`"just a string"`, "", "", false},
	} {
		p, n, found := DuplicateKey([]byte(tc.in))
		if p != tc.pointer || n != tc.name || found != tc.found {
			t.Errorf("DuplicateKey(%s) = %q, %q, %v; want %q, %q, %v", tc.in, p, n, found, tc.pointer, tc.name, tc.found)
		}
	}
}

// dupByTokens is DuplicateKey's reference: a walk of encoding/json's
// tokens.
func dupByTokens(data []byte) bool {
	d := json.NewDecoder(bytes.NewReader(data))
	type frame struct {
		names   map[string]bool
		isObj   bool
		wantKey bool
	}
	var stack []*frame
	for {
		tok, err := d.Token()
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.isObj && top.wantKey {
			if s, ok := tok.(string); ok {
				if top.names[s] {
					return true
				}
				top.names[s] = true
				top.wantKey = false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{names: map[string]bool{}, isObj: true, wantKey: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 && stack[len(stack)-1].isObj {
			stack[len(stack)-1].wantKey = true
		}
	}
}

func FuzzDuplicateKey(f *testing.F) {
	for _, s := range []string{`{"a":1,"a":2}`, `{"a":{"b":1},"c":[{"d":1,"d":2}]}`, `{"\u0061":1,"a":2}`, `[{"x":1},{"x":1}]`, `{"k":"v"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return
		}
		_, _, found := DuplicateKey(data)
		if want := dupByTokens(data); found != want {
			t.Fatalf("DuplicateKey(%s) found %v; encoding/json's tokens say %v", data, found, want)
		}
	})
}

func BenchmarkDuplicateKey(b *testing.B) {
	data := []byte(`{"path":"/tmp/notes.txt","content":"hello, world","mode":"append","lines":[1,2,3],"opts":{"sync":true,"backup":false}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, found := DuplicateKey(data); found {
			b.Fatal(fmt.Sprint("found a duplicate in ", string(data)))
		}
	}
}
