package openapi

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/executors/rest"
	"github.com/toolgate/toolgate/registry"
)

// wireRequest is what the test server received.
type wireRequest struct {
	method, uri string
	header      http.Header
	body        []byte
}

// wireTools imports testdata/file with its server at an httptest server
// that records each request, and returns a call function per tool.
func wireTools(t *testing.T, file string, edit func(*Source)) (call func(name, args string) wireRequest) {
	t.Helper()
	got := make(chan wireRequest, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- wireRequest{method: r.Method, uri: r.RequestURI, header: r.Header.Clone(), body: b}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(srv.Close)
	loc := filepath.Join("testdata", file)
	b, err := os.ReadFile(loc)
	if err != nil {
		t.Fatal(err)
	}
	src := Source{Name: "w", Spec: b, Location: loc, BaseURL: srv.URL + "/base"}
	if edit != nil {
		edit(&src)
	}
	specs, warnings, err := Specs(src)
	if err != nil {
		t.Fatalf("Specs(%s) = %v", file, err)
	}
	for _, w := range warnings {
		if w.Skipped {
			t.Errorf("Specs(%s) skipped %s", file, w)
		}
	}
	e := rest.New(nil)
	t.Cleanup(e.Close)
	tools := map[string]struct {
		def  registry.Tool
		exec executors.Executor
	}{}
	for _, s := range specs {
		def, exec, err := e.Add(s)
		if err != nil {
			t.Fatalf("Add(%s) = %v", s.Name, err)
		}
		tools[s.Name] = struct {
			def  registry.Tool
			exec executors.Executor
		}{def, exec}
	}
	return func(name, args string) wireRequest {
		t.Helper()
		tool, ok := tools[name]
		if !ok {
			t.Fatalf("no tool %s", name)
		}
		var m map[string]any
		dec := json.NewDecoder(strings.NewReader(args))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		res, err := tool.exec.Execute(t.Context(), executors.Call{Tool: &tool.def, Args: m, Thread: "t"})
		if err != nil {
			t.Fatalf("%s(%s) = %v", name, args, err)
		}
		if res.IsError {
			t.Fatalf("%s(%s) = error result %v", name, args, res)
		}
		return <-got
	}
}

// TestWireParameters checks the exact request line, headers and cookies
// each parameter style and explode setting gives.
func TestWireParameters(t *testing.T) {
	call := wireTools(t, "wire.yaml", func(s *Source) { s.Auth = map[string]string{"key": "k-123456"} })
	tests := []struct {
		name, tool, args string
		uri              string
		header           map[string]string // "" means absent
	}{
		{
			name: "simple path: array and exploded object", tool: "w__pathSimple",
			args: `{"ids":[3,4,5],"obj":{"role":"admin","first name":"Ada/L"}}`,
			uri:  "/base/simple/3,4,5/first%20name=Ada%2FL,role=admin",
			// The document's security: the apiKey header.
			header: map[string]string{"X-Api-Key": "k-123456"},
		},
		{
			name: "label path, exploded", tool: "w__pathLabel",
			args: `{"ids":["a","b c"]}`, uri: "/base/label/.a.b%20c",
		},
		{
			name: "matrix path: array, exploded object", tool: "w__pathMatrix",
			args: `{"ids":["a","b"],"obj":{"x":"1","y":"2"}}`, uri: "/base/matrix/;ids=a,b/;x=1;y=2",
		},
		{
			name: "query styles, header array, cookies", tool: "w__queryStyles",
			args: `{"tags":["a","b&c"],"ids":[1,2],"words":["x","y"],"pipes":["p","q"],` +
				`"filter":{"status":"open","owner":{"id":7}},"point":{"x":1,"y":2},"where":{"a":1},` +
				`"X-Trace":["t1","t2"],"session":"s 1","prefs":["dark","compact"]}`,
			uri: "/base/query?tags=a&tags=b%26c&ids=1,2&words=x%20y&pipes=p%7Cq" +
				"&filter[owner][id]=7&filter[status]=open&x=1&y=2&where=%7B%22a%22%3A1%7D",
			header: map[string]string{"X-Trace": "t1,t2", "Cookie": "session=s%201; prefs=dark,compact", "X-Api-Key": ""},
		},
		{
			name: "absent optional parameters send nothing", tool: "w__queryStyles",
			args: `{}`, uri: "/base/query", header: map[string]string{"Cookie": "", "X-Trace": ""},
		},
		{
			name: "fragment dropped, query part fixed", tool: "w__searchV2",
			args: `{"q":"cats"}`, uri: "/base/search?action=find&q=cats",
		},
		{
			name: "other fragment of the same path", tool: "w__searchV1",
			args: `{"q":"dogs"}`, uri: "/base/search?q=dogs",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := call(tc.tool, tc.args)
			if r.uri != tc.uri {
				t.Errorf("request URI\n got %s\nwant %s", r.uri, tc.uri)
			}
			for k, want := range tc.header {
				if got := strings.Join(r.header.Values(k), "|"); got != want {
					t.Errorf("header %s = %q, want %q", k, got, want)
				}
			}
		})
	}
}

// TestWireBodies checks each request body type byte for byte, with the
// credentials each operation declares.
func TestWireBodies(t *testing.T) {
	call := wireTools(t, "wire.yaml", func(s *Source) {
		s.Auth = map[string]string{"qkey": "q-secret", "ckey": "c-secret", "bearer": "tok-abc", "basic": "ada:pw"}
	})
	t.Run("form with encoding, apiKey in query and cookie", func(t *testing.T) {
		r := call("w__postForm", `{"body":{"name":"Ada L","tags":["x","y"],"metadata":{"a":"1"},"extra":{"k":[1]}}}`)
		want := "extra=%7B%22k%22%3A%5B1%5D%7D&metadata[a]=1&name=Ada+L&tags=x&tags=y"
		if string(r.body) != want {
			t.Errorf("body\n got %s\nwant %s", r.body, want)
		}
		if ct := r.header.Get("Content-Type"); ct != "application/x-www-form-urlencoded" {
			t.Errorf("Content-Type = %q", ct)
		}
		if r.uri != "/base/form?api_key=q-secret" || r.header.Get("Cookie") != "sid=c-secret" {
			t.Errorf("uri %q, cookie %q; want the query and cookie keys", r.uri, r.header.Get("Cookie"))
		}
		if r.header.Get("Authorization") != "" || r.header.Get("X-Api-Key") != "" {
			t.Errorf("credentials of other schemes were sent: %v", r.header)
		}
	})
	t.Run("multipart with a base64 file, bearer", func(t *testing.T) {
		r := call("w__upload", `{"body":{"title":"cat","meta":{"n":1},"file":"iVBORw0K"}}`)
		if got := r.header.Get("Authorization"); got != "Bearer tok-abc" {
			t.Errorf("Authorization = %q", got)
		}
		mt, params, err := mime.ParseMediaType(r.header.Get("Content-Type"))
		if err != nil || mt != "multipart/form-data" {
			t.Fatalf("Content-Type = %q", r.header.Get("Content-Type"))
		}
		mr := multipart.NewReader(bytes.NewReader(r.body), params["boundary"])
		type part struct{ name, file, ct, data string }
		var got []part
		for {
			p, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(p)
			got = append(got, part{p.FormName(), p.FileName(), p.Header.Get("Content-Type"), string(b)})
		}
		want := []part{
			{"file", "file", "image/png", "\x89PNG\r\n"},
			{"meta", "", "application/json", `{"n":1}`},
			{"title", "", "", "cat"},
		}
		if len(got) != len(want) {
			t.Fatalf("parts = %q, want %q", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("part %d = %q, want %q", i, got[i], want[i])
			}
		}
	})
	t.Run("text/plain, basic", func(t *testing.T) {
		r := call("w__putNote", `{"body":"hello\nworld"}`)
		if string(r.body) != "hello\nworld" || r.header.Get("Content-Type") != "text/plain" {
			t.Errorf("body %q, Content-Type %q", r.body, r.header.Get("Content-Type"))
		}
		if got := r.header.Get("Authorization"); got != "Basic YWRhOnB3" {
			t.Errorf("Authorization = %q, want Basic base64(ada:pw)", got)
		}
	})
	t.Run("octet-stream from base64", func(t *testing.T) {
		r := call("w__putBlob", `{"body":"AAEC/w=="}`)
		if !bytes.Equal(r.body, []byte{0, 1, 2, 255}) || r.header.Get("Content-Type") != "application/octet-stream" {
			t.Errorf("body %v, Content-Type %q", r.body, r.header.Get("Content-Type"))
		}
	})
	t.Run("*/* as JSON; optional security sends nothing", func(t *testing.T) {
		r := call("w__postAny", `{"body":{"a":[1,"x"]}}`)
		if string(r.body) != `{"a":[1,"x"]}` || r.header.Get("Content-Type") != "application/json" {
			t.Errorf("body %q, Content-Type %q", r.body, r.header.Get("Content-Type"))
		}
		if r.header.Get("Authorization") != "" || r.header.Get("Cookie") != "" {
			t.Errorf("credentials sent on an operation whose security is optional: %v", r.header)
		}
	})
	t.Run("+json keeps its media type", func(t *testing.T) {
		r := call("w__postVendor", `{"body":{"data":{}}}`)
		if string(r.body) != `{"data":{}}` || r.header.Get("Content-Type") != "application/vnd.api+json" {
			t.Errorf("body %q, Content-Type %q", r.body, r.header.Get("Content-Type"))
		}
	})
}

// TestWireSwagger2 checks a Swagger 2.0 document: formData becomes a form
// body, a body parameter a JSON body, securityDefinitions credentials.
func TestWireSwagger2(t *testing.T) {
	call := wireTools(t, "swagger2.yaml", func(s *Source) { s.Auth = map[string]string{"token": "t-98765"} })
	r := call("w__updatePet", `{"id":5,"body":{"name":"Rex","tags":["a","b"]}}`)
	if r.method != http.MethodPost || r.uri != "/base/pets/5" || string(r.body) != "name=Rex&tags=a&tags=b" ||
		r.header.Get("Content-Type") != "application/x-www-form-urlencoded" || r.header.Get("X-Token") != "t-98765" {
		t.Errorf("updatePet: %s %s %q %v", r.method, r.uri, r.body, r.header)
	}
	r = call("w__addPet", `{"body":{"name":"Rex"}}`)
	if r.uri != "/base/pets" || string(r.body) != `{"name":"Rex"}` || r.header.Get("X-Token") != "" {
		t.Errorf("addPet: %s %q %v", r.uri, r.body, r.header)
	}
}

// TestWireExternalRef checks a JSON OpenAPI 3.1 document whose request
// body schema is in a YAML file next to it.
func TestWireExternalRef(t *testing.T) {
	call := wireTools(t, "ext/main.json", nil)
	r := call("w__addThing", `{"body":{"name":"x"}}`)
	if r.uri != "/base/things" || string(r.body) != `{"name":"x"}` {
		t.Errorf("addThing: %s %q", r.uri, r.body)
	}
}

// TestWireCredentialsRedacted checks that credentials from auth are
// secrets: a backend that echoes the request shows none of them, in any
// form they were sent in.
func TestWireCredentialsRedacted(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, r.URL.RawQuery+" | "+r.Header.Get("Authorization")+" | "+r.Header.Get("Cookie"))
	}))
	defer srv.Close()
	b, err := os.ReadFile(filepath.Join("testdata", "wire.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const q, c, basic = "q secret/+1", "c-secret-42", "ada:pa55word"
	specs, _, err := Specs(Source{Name: "w", Spec: b, BaseURL: srv.URL, Include: []string{"postForm", "putNote"},
		Auth: map[string]string{"qkey": q, "ckey": c, "basic": basic}})
	if err != nil {
		t.Fatal(err)
	}
	e := rest.New(nil)
	defer e.Close()
	for _, s := range specs {
		def, exec, err := e.Add(s)
		if err != nil {
			t.Fatal(err)
		}
		res, err := exec.Execute(t.Context(), executors.Call{Tool: &def, Args: map[string]any{"body": map[string]any{"name": "x"}}, Thread: "t"})
		if s.Name == "w__putNote" {
			res, err = exec.Execute(t.Context(), executors.Call{Tool: &def, Args: map[string]any{"body": "hi"}, Thread: "t"})
		}
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		text, _ := json.Marshal(res)
		for _, secret := range []string{q, "q+secret%2F%2B1", "q%20secret%2F%2B1", c, basic, "YWRhOnBhNTV3b3Jk"} {
			if strings.Contains(string(text), secret) {
				t.Errorf("%s result shows %q: %s", s.Name, secret, text)
			}
		}
		if !strings.Contains(string(text), "[redacted]") {
			t.Errorf("%s result has no [redacted]: %s", s.Name, text)
		}
	}
}
