package rest

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
)

func param(in, style string, explode bool) compiledParam {
	return compiledParam{Param: Param{Name: "id", In: in, Arg: "id", Style: style}, explode: explode}
}

func decode(t testing.TB, s string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestSerialize checks every style and explode setting against the
// examples of the OpenAPI specification's style table.
func TestSerialize(t *testing.T) {
	const arr, obj = `[3,4,5]`, `{"role":"admin","firstName":"Alex"}`
	tests := []struct {
		p    compiledParam
		v    string
		want string
	}{
		{param(InPath, StyleSimple, false), `5`, "5"},
		{param(InPath, StyleSimple, false), arr, "3,4,5"},
		{param(InPath, StyleSimple, false), obj, "firstName,Alex,role,admin"},
		{param(InPath, StyleSimple, true), obj, "firstName=Alex,role=admin"},
		{param(InPath, StyleLabel, false), arr, ".3,4,5"},
		{param(InPath, StyleLabel, true), arr, ".3.4.5"},
		{param(InPath, StyleLabel, true), obj, ".firstName=Alex.role=admin"},
		{param(InPath, StyleMatrix, false), `5`, ";id=5"},
		{param(InPath, StyleMatrix, false), arr, ";id=3,4,5"},
		{param(InPath, StyleMatrix, true), arr, ";id=3;id=4;id=5"},
		{param(InPath, StyleMatrix, false), obj, ";id=firstName,Alex,role,admin"},
		{param(InPath, StyleMatrix, true), obj, ";firstName=Alex;role=admin"},
		{param(InPath, StyleSimple, false), `"a/b c"`, "a%2Fb%20c"},
		{param(InQuery, StyleForm, true), arr, "id=3&id=4&id=5"},
		{param(InQuery, StyleForm, false), arr, "id=3,4,5"},
		{param(InQuery, StyleForm, true), obj, "firstName=Alex&role=admin"},
		{param(InQuery, StyleForm, false), obj, "id=firstName,Alex,role,admin"},
		{param(InQuery, StyleSpaceDelimited, false), arr, "id=3%204%205"},
		{param(InQuery, StylePipeDelimited, false), arr, "id=3%7C4%7C5"},
		{param(InQuery, StyleDeepObject, true), obj, "id[firstName]=Alex&id[role]=admin"},
		{param(InQuery, StyleDeepObject, true), arr, "id[0]=3&id[1]=4&id[2]=5"},
		{param(InQuery, StyleDeepObject, true), `[]`, ""},
		{param(InQuery, StyleForm, true), `"a&b=c#d"`, "id=a%26b%3Dc%23d"},
		{param(InQuery, StyleForm, true), `[]`, ""},
	}
	for _, tc := range tests {
		v := decode(t, tc.v)
		var got string
		switch tc.p.In {
		case InPath:
			got = serializePath(tc.p, v)
		case InQuery:
			got = strings.Join(serializeQuery(tc.p, v), "&")
		}
		if got != tc.want {
			t.Errorf("%s %s explode=%v %s = %q, want %q", tc.p.In, tc.p.Style, tc.p.explode, tc.v, got, tc.want)
		}
	}
	if got := serializeSimple(param(InHeader, StyleSimple, true), decode(t, obj)); got != "firstName=Alex,role=admin" {
		t.Errorf("header simple exploded object = %q", got)
	}
	if got := strings.Join(serializeCookie(param(InCookie, StyleForm, true), decode(t, arr)), "; "); got != "id=3; id=4; id=5" {
		t.Errorf("cookie form exploded array = %q", got)
	}
	if got := strings.Join(serializeCookie(param(InCookie, StyleForm, false), decode(t, `"a b;c"`)), "; "); got != "id=a%20b%3Bc" {
		t.Errorf("cookie value = %q", got)
	}
}

// FuzzSerialize checks that no argument value breaks out of its place:
// a path value stays one segment, a query value one parameter, a cookie
// one pair; and that the query pairs decode back to the text sent.
func FuzzSerialize(f *testing.F) {
	for _, s := range []string{`"x"`, `[1,"a b"]`, `{"a":{"b":["/?#&=;"]}}`, `"é\u0000\r\n"`, `null`, `true`, `1.5e3`} {
		f.Add(s, uint8(0))
	}
	styles := []compiledParam{
		param(InPath, StyleSimple, false), param(InPath, StyleSimple, true), param(InPath, StyleLabel, true),
		param(InPath, StyleMatrix, false), param(InPath, StyleMatrix, true),
		param(InQuery, StyleForm, true), param(InQuery, StyleForm, false), param(InQuery, StyleSpaceDelimited, false),
		param(InQuery, StylePipeDelimited, false), param(InQuery, StyleDeepObject, true),
		param(InCookie, StyleForm, true), param(InCookie, StyleForm, false),
	}
	f.Fuzz(func(t *testing.T, raw string, which uint8) {
		dec := json.NewDecoder(strings.NewReader(raw))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) != nil || v == nil {
			return
		}
		p := styles[int(which)%len(styles)]
		switch p.In {
		case InPath:
			s := serializePath(p, v)
			if strings.ContainsAny(s, "/?# \x00\r\n") {
				t.Errorf("path %s = %q leaves its segment", p.Style, s)
			}
		case InQuery:
			for _, pair := range serializeQuery(p, v) {
				if strings.ContainsAny(pair, "&#+ \x00\r\n") {
					t.Errorf("query %s pair %q leaves its parameter", p.Style, pair)
				}
				if _, err := url.ParseQuery(pair); err != nil {
					t.Errorf("query %s pair %q does not parse: %v", p.Style, pair, err)
				}
			}
		case InCookie:
			for _, pair := range serializeCookie(p, v) {
				if strings.ContainsAny(pair, "; \x00\r\n\"\\") {
					t.Errorf("cookie pair %q leaves its pair", pair)
				}
			}
		}
		if obj, ok := v.(map[string]any); ok {
			pl := &Payload{Arg: "b", Kind: PayloadForm}
			if body := encodeForm(pl, obj); strings.ContainsAny(body, " #\x00\r\n") {
				t.Errorf("form body %q holds a raw space or control character", body)
			}
		}
	})
}
