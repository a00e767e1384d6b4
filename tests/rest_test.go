package tests

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// attemptsMetaKey is the result _meta key holding how many HTTP attempts a
// REST call took.
const attemptsMetaKey = "toolgate/attempts"

// restToken is the value of TG_TEST_TOKEN in toolgate's environment: a
// secret that results and logs must never show.
const restToken = "tg-e2e-7f3Kq9-never-show-me"

// petPNG is what the fake API serves as every pet's photo: a PNG signature
// and an IHDR chunk, enough for a client to recognize a PNG.
const petPNG = "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89"

// recordedRequest is one request the fake API received, as it arrived.
type recordedRequest struct {
	Method      string
	EscapedPath string
	RawQuery    string
	Header      http.Header
	Body        []byte
}

// petstoreAPI is an in-process implementation of testdata/petstore.yaml,
// plus the two endpoints of the test's rest tools (/echo/{name} and
// /notes). It records every request.
type petstoreAPI struct {
	srv *httptest.Server

	mu    sync.Mutex
	reqs  []recordedRequest // guarded by mu
	flaky map[string]int    // requests per /flaky key; guarded by mu
}

// startPetstoreAPI serves the fake API on a free port of 127.0.0.1 until
// the test ends.
func startPetstoreAPI(t *testing.T) *petstoreAPI {
	t.Helper()
	api := &petstoreAPI{flaky: make(map[string]int)}
	api.srv = httptest.NewUnstartedServer(http.HandlerFunc(api.serveHTTP))
	if !strings.HasPrefix(api.srv.Listener.Addr().String(), "127.0.0.1:") {
		api.srv.Listener.Close()
		t.Fatalf("the fake API listens on %s, want 127.0.0.1", api.srv.Listener.Addr())
	}
	api.srv.Start()
	t.Cleanup(api.srv.Close)
	return api
}

// URL is the API's base URL, http://127.0.0.1:PORT.
func (a *petstoreAPI) URL() string { return a.srv.URL }

// count returns how many requests the API has received.
func (a *petstoreAPI) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.reqs)
}

// since returns the requests received after the first n.
func (a *petstoreAPI) since(n int) []recordedRequest {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.reqs[n:])
}

// only returns the single request received after the first n, failing
// the test unless there is exactly one.
func (a *petstoreAPI) only(t *testing.T, n int) recordedRequest {
	t.Helper()
	got := a.since(n)
	if len(got) != 1 {
		t.Fatalf("the API received %d requests, want 1: %+v", len(got), got)
	}
	return got[0]
}

// pets are the fake API's pets, by ID. The test compares results with them.
func pets() map[string]map[string]any {
	return map[string]map[string]any{
		"1": {"id": 1, "name": "Rex", "tag": "dog", "category": map[string]any{"id": 7, "name": "dogs"}},
		"2": {"id": 2, "name": "Tom", "tag": "cat"},
		"3": {"id": 3, "name": "Fido", "tag": "dog"},
	}
}

func (a *petstoreAPI) serveHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "reading the body", http.StatusBadRequest)
		return
	}
	escaped := r.URL.EscapedPath()
	a.mu.Lock()
	a.reqs = append(a.reqs, recordedRequest{
		Method: r.Method, EscapedPath: escaped, RawQuery: r.URL.RawQuery,
		Header: r.Header.Clone(), Body: body,
	})
	a.mu.Unlock()

	// Routing is by escaped segment, so that an escaped "/" or ".." stays
	// inside its segment (http.ServeMux would clean "..").
	segs := strings.Split(strings.TrimPrefix(escaped, "/"), "/")
	for i, s := range segs {
		if segs[i], err = url.PathUnescape(s); err != nil {
			http.Error(w, "bad escape", http.StatusBadRequest)
			return
		}
	}
	route := func(method string, pattern ...string) bool {
		if r.Method != method || len(segs) != len(pattern) {
			return false
		}
		for i, p := range pattern {
			if p != "*" && p != segs[i] {
				return false
			}
		}
		return true
	}
	switch {
	case route(http.MethodGet, "pets"):
		pets := pets()
		tag := r.URL.Query().Get("tag")
		limit := len(pets)
		if l := r.URL.Query().Get("limit"); l != "" {
			if limit, err = strconv.Atoi(l); err != nil {
				writeJSON(w, http.StatusBadRequest, map[string]any{"error": "limit is not an integer"})
				return
			}
		}
		out := []map[string]any{}
		for _, id := range slices.Sorted(maps.Keys(pets)) {
			if (tag == "" || pets[id]["tag"] == tag) && len(out) < limit {
				out = append(out, pets[id])
			}
		}
		writeJSON(w, http.StatusOK, out)
	case route(http.MethodPost, "pets"):
		var pet map[string]any
		if err := json.Unmarshal(body, &pet); err != nil || r.Header.Get("Content-Type") != "application/json" {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "want a JSON pet"})
			return
		}
		pet["id"] = 100
		writeJSON(w, http.StatusCreated, pet)
	case route(http.MethodGet, "pets", "*"):
		pet, ok := pets()[segs[1]]
		if !ok {
			writeJSON(w, http.StatusNotFound, map[string]any{"error": "no pet " + segs[1]})
			return
		}
		writeJSON(w, http.StatusOK, pet)
	case route(http.MethodGet, "pets", "*", "photo"):
		w.Header().Set("Content-Type", "image/png")
		_, _ = io.WriteString(w, petPNG)
	case route(http.MethodGet, "flaky", "*"):
		a.mu.Lock()
		a.flaky[segs[1]]++
		n := a.flaky[segs[1]]
		a.mu.Unlock()
		if n <= 2 {
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "try again"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"ok": true, "request": n})
	case route(http.MethodGet, "headers"):
		writeJSON(w, http.StatusOK, r.Header)
	case route(http.MethodGet, "echo", "*"):
		writeJSON(w, http.StatusOK, map[string]any{
			"path": escaped, "name": segs[1], "query": r.URL.Query(), "headers": r.Header,
		})
	case route(http.MethodPost, "notes"):
		var note any
		if err := json.Unmarshal(body, &note); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "want a JSON note"})
			return
		}
		writeJSON(w, http.StatusCreated, map[string]any{"id": "n1", "note": note})
	default:
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "no route " + r.Method + " " + escaped})
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// restConfig is the configuration of TestREST: two rest tools and the
// openapi source testdata/petstore.yaml, all calling the fake API at %[1]s;
// %[2]s is the document's absolute path. Debug logging makes toolgate log
// every retry, so the secret check of stderr covers those lines too.
const restConfig = `
log:
  level: debug
builtin: []
rest:
  - name: echo_request
    description: Shows the request the API received.
    method: GET
    url: %[1]s/echo/{name}
    query:
      q: "{q}"
      fixed: "yes"
    headers:
      Authorization: "Bearer ${TG_TEST_TOKEN}"
    input_schema:
      type: object
      properties:
        name: {type: string}
        q: {type: string}
      required: [name]
      additionalProperties: false
  - name: create_note
    description: Stores a note.
    method: POST
    url: %[1]s/notes
    body:
      title: "{title}"
      priority: "{priority}"
      tags: "{tags}"
      source: toolgate
    input_schema:
      type: object
      properties:
        title: {type: string}
        priority: {type: integer, minimum: 1, maximum: 5}
        tags: {type: array, items: {type: string}}
      required: [title]
      additionalProperties: false
openapi:
  - name: petstore
    spec: %[2]s
    base_url: %[1]s
    headers:
      X-Api-Key: "${TG_TEST_TOKEN}"
    retry: {attempts: 3, initial_backoff: 5ms, max_backoff: 20ms}
`

// restFixture is one toolgate serving restConfig against a fake API, with
// a streamable HTTP client.
type restFixture struct {
	api *petstoreAPI
	srv *server
	c   *client.Client
}

func startREST(t *testing.T) *restFixture {
	t.Helper()
	// startServe's child inherits the test process's environment.
	t.Setenv("TG_TEST_TOKEN", restToken)
	api := startPetstoreAPI(t)
	spec, err := filepath.Abs(filepath.Join("testdata", "petstore.yaml"))
	if err != nil {
		t.Fatalf("locating testdata/petstore.yaml: %v", err)
	}
	srv := startServe(t, fmt.Sprintf(restConfig, api.URL(), spec))
	return &restFixture{api: api, srv: srv, c: connect(t, streamableHTTP, srv)}
}

// call calls tool with args and returns the result and the requests the
// API received meanwhile.
func (f *restFixture) call(t *testing.T, tool string, args map[string]any) (*mcp.CallToolResult, []recordedRequest) {
	t.Helper()
	n := f.api.count()
	res := mustCall(t, f.c, tool, args, "")
	return res, f.api.since(n)
}

// okCall is call for calls that must succeed after exactly one request.
func (f *restFixture) okCall(t *testing.T, tool string, args map[string]any) (*mcp.CallToolResult, recordedRequest) {
	t.Helper()
	res, reqs := f.call(t, tool, args)
	if res.IsError {
		t.Fatalf("tools/call %s %v: isError result %q (class %q)", tool, args, resultText(res), errorClass(res))
	}
	if len(reqs) != 1 {
		t.Fatalf("tools/call %s %v: the API received %d requests, want 1: %+v", tool, args, len(reqs), reqs)
	}
	return res, reqs[0]
}

// metaNumber returns the number under key in res's _meta.
func metaNumber(t *testing.T, res *mcp.CallToolResult, key string) float64 {
	t.Helper()
	if res.Meta == nil {
		t.Fatalf("result has no _meta, want %q", key)
	}
	switch v := res.Meta.AdditionalFields[key].(type) {
	case float64:
		return v
	case json.Number:
		f, err := v.Float64()
		if err != nil {
			t.Fatalf("_meta[%q] = %q: %v", key, v, err)
		}
		return f
	default:
		t.Fatalf("_meta[%q] = %#v, want a number", key, v)
		return 0
	}
}

// asJSON round-trips v through JSON into a generic value, so that values
// compare without regard to their Go types.
func asJSON(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("encoding %#v: %v", v, err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	return out
}

// dig follows keys through nested JSON objects.
func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func TestREST(t *testing.T) {
	f := startREST(t)
	retried := false // the retry subtest ran and passed

	t.Run("tools/list", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
		defer cancel()
		res, err := f.c.ListTools(ctx, mcp.ListToolsRequest{})
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		byName := map[string]mcp.Tool{}
		var names []string
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
			byName[tool.Name] = tool
		}
		slices.Sort(names)
		want := []string{
			"create_note", "echo_request",
			"petstore__createPet", "petstore__echoHeaders", "petstore__getFlaky",
			"petstore__getPetById", "petstore__getPetPhoto", "petstore__listPets", "petstore__uploadPetPhoto",
		}
		if diff := cmp.Diff(want, names); diff != "" {
			t.Errorf("tools/list names (-want +got):\n%s", diff)
		}
		// The request body's schema is inlined: NewPet and, inside it,
		// Category.
		schema := asJSON(t, byName["petstore__createPet"])
		for _, path := range [][]string{
			{"inputSchema", "properties", "body", "properties", "name", "type"},
			{"inputSchema", "properties", "body", "properties", "category", "properties", "name", "type"},
		} {
			if got := dig(schema, path...); got != "string" {
				t.Errorf("petstore__createPet %s = %v, want \"string\"; tool:\n%v", strings.Join(path, "."), got, schema)
			}
		}
		if got := dig(schema, "inputSchema", "properties", "X-Request-Id"); got != nil {
			t.Errorf("petstore__createPet has an X-Request-Id property %v; only listPets declares it", got)
		}
		if got := dig(asJSON(t, byName["petstore__listPets"]), "inputSchema", "properties", "X-Request-Id", "type"); got != "string" {
			t.Errorf("petstore__listPets inputSchema.properties.X-Request-Id.type = %v, want \"string\"", got)
		}
	})

	t.Run("one info line for the source", func(t *testing.T) {
		var found bool
		for line := range strings.Lines(f.srv.Stderr()) {
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) != nil {
				continue
			}
			if rec["msg"] == `openapi source "petstore": 7 tools, 0 operations skipped` && rec["level"] == "INFO" {
				found = true
			}
			if rec["level"] == "WARN" && strings.Contains(line, "skipped") {
				t.Errorf("a warning says skipped: %s", line)
			}
		}
		if !found {
			t.Errorf("no info line for the openapi source; stderr:\n%s", f.srv.Stderr())
		}
	})

	t.Run("path escaping", func(t *testing.T) {
		tests := []struct {
			id       string
			wantPath string
		}{
			{"a/b", "a%2Fb"},
			{"../../admin", "..%2F..%2Fadmin"},
			{"..", "%2E%2E"},
			{"x y?z#w", "x%20y%3Fz%23w"},
		}
		for _, tc := range tests {
			t.Run(tc.id, func(t *testing.T) {
				// The openapi tool: the server sees one escaped segment
				// (and answers 404, as no pet has that id).
				res, req := f.call(t, "petstore__getPetById", map[string]any{"petId": tc.id})
				wantError(t, res, "not_found")
				if len(req) != 1 {
					t.Fatalf("the API received %d requests, want 1: %+v", len(req), req)
				}
				if want := "/pets/" + tc.wantPath; req[0].EscapedPath != want {
					t.Errorf("petstore__getPetById petId=%q reached %q, want %q", tc.id, req[0].EscapedPath, want)
				}
				// The rest tool: the server reports the segment it decoded.
				res, got := f.okCall(t, "echo_request", map[string]any{"name": tc.id})
				if want := "/echo/" + tc.wantPath; got.EscapedPath != want {
					t.Errorf("echo_request name=%q reached %q, want %q", tc.id, got.EscapedPath, want)
				}
				if name := structured(t, res)["name"]; name != tc.id {
					t.Errorf("echo_request name=%q: the API decoded the segment as %v", tc.id, name)
				}
			})
		}
	})

	t.Run("query", func(t *testing.T) {
		tests := []struct {
			name string
			tool string
			args map[string]any
			want url.Values
		}{
			{"rest optional absent", "echo_request", map[string]any{"name": "n"}, url.Values{"fixed": {"yes"}}},
			{"rest optional present", "echo_request", map[string]any{"name": "n", "q": "a b&c=d"}, url.Values{"fixed": {"yes"}, "q": {"a b&c=d"}}},
			{"openapi none", "petstore__listPets", map[string]any{}, url.Values{}},
			{"openapi one", "petstore__listPets", map[string]any{"tag": "dog"}, url.Values{"tag": {"dog"}}},
			{"openapi both", "petstore__listPets", map[string]any{"tag": "dog", "limit": 1}, url.Values{"tag": {"dog"}, "limit": {"1"}}},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				_, req := f.okCall(t, tc.tool, tc.args)
				got, err := url.ParseQuery(req.RawQuery)
				if err != nil {
					t.Fatalf("the API received the query %q: %v", req.RawQuery, err)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("%s %v: query %q (-want +got):\n%s", tc.tool, tc.args, req.RawQuery, diff)
				}
			})
		}
	})

	t.Run("header parameter", func(t *testing.T) {
		_, req := f.okCall(t, "petstore__listPets", map[string]any{"X-Request-Id": "req-42"})
		if got := req.Header.Values("X-Request-Id"); !slices.Equal(got, []string{"req-42"}) {
			t.Errorf("X-Request-Id at the API = %q, want [req-42]", got)
		}
		_, req = f.okCall(t, "petstore__listPets", map[string]any{})
		if got := req.Header.Values("X-Request-Id"); len(got) != 0 {
			t.Errorf("X-Request-Id at the API = %q without the argument, want none", got)
		}
	})

	t.Run("JSON becomes structuredContent", func(t *testing.T) {
		res, _ := f.okCall(t, "petstore__getPetById", map[string]any{"petId": "1"})
		want := asJSON(t, pets()["1"])
		if diff := cmp.Diff(want, asJSON(t, res.StructuredContent)); diff != "" {
			t.Errorf("structuredContent (-want +got):\n%s", diff)
		}
		var text any
		if err := json.Unmarshal([]byte(resultText(res)), &text); err != nil || !cmp.Equal(want, text) {
			t.Errorf("text content %q is not the JSON of the pet (%v)", resultText(res), err)
		}
		// A JSON array is wrapped: structuredContent must be an object.
		res, _ = f.okCall(t, "petstore__listPets", map[string]any{"tag": "dog"})
		if diff := cmp.Diff(asJSON(t, map[string]any{"result": []any{pets()["1"], pets()["3"]}}), asJSON(t, res.StructuredContent)); diff != "" {
			t.Errorf("listPets structuredContent (-want +got):\n%s", diff)
		}
	})

	t.Run("request bodies", func(t *testing.T) {
		tests := []struct {
			name     string
			tool     string
			args     map[string]any
			wantBody string
			wantPath string
		}{
			{
				name:     "rest template",
				tool:     "create_note",
				args:     map[string]any{"title": "buy \"milk\"", "priority": 2, "tags": []any{"home", "food"}},
				wantBody: `{"title":"buy \"milk\"","priority":2,"tags":["home","food"],"source":"toolgate"}`,
				wantPath: "/notes",
			},
			{
				name:     "rest template, absent arguments dropped",
				tool:     "create_note",
				args:     map[string]any{"title": "t"},
				wantBody: `{"title":"t","source":"toolgate"}`,
				wantPath: "/notes",
			},
			{
				name:     "openapi $ref schema",
				tool:     "petstore__createPet",
				args:     map[string]any{"body": map[string]any{"name": "Kit", "tag": "cat", "category": map[string]any{"id": 8, "name": "cats"}}},
				wantBody: `{"name":"Kit","tag":"cat","category":{"id":8,"name":"cats"}}`,
				wantPath: "/pets",
			},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				res, req := f.okCall(t, tc.tool, tc.args)
				if req.Method != http.MethodPost || req.EscapedPath != tc.wantPath {
					t.Errorf("the API received %s %s, want POST %s", req.Method, req.EscapedPath, tc.wantPath)
				}
				if ct := req.Header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type at the API = %q, want application/json", ct)
				}
				var got, want any
				if err := json.Unmarshal(req.Body, &got); err != nil {
					t.Fatalf("the API received a body that is not JSON: %q", req.Body)
				}
				if err := json.Unmarshal([]byte(tc.wantBody), &want); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("body at the API %s (-want +got):\n%s", req.Body, diff)
				}
				if res.StructuredContent == nil {
					t.Errorf("the 201 JSON answer has no structuredContent; text %q", resultText(res))
				}
			})
		}
	})

	t.Run("image", func(t *testing.T) {
		res, req := f.okCall(t, "petstore__getPetPhoto", map[string]any{"petId": "1"})
		if req.EscapedPath != "/pets/1/photo" {
			t.Errorf("the API received %s, want /pets/1/photo", req.EscapedPath)
		}
		if len(res.Content) != 1 {
			t.Fatalf("result has %d contents, want 1 image: %+v", len(res.Content), res.Content)
		}
		img, ok := mcp.AsImageContent(res.Content[0])
		if !ok {
			t.Fatalf("result content is %T, want image content", res.Content[0])
		}
		if img.MIMEType != "image/png" {
			t.Errorf("image mimeType = %q, want image/png", img.MIMEType)
		}
		data, err := base64.StdEncoding.DecodeString(img.Data)
		if err != nil || string(data) != petPNG {
			t.Errorf("image data = %q (%v), want the API's PNG bytes %q", data, err, petPNG)
		}
	})

	t.Run("404 is not_found and not retried", func(t *testing.T) {
		res, reqs := f.call(t, "petstore__getPetById", map[string]any{"petId": "999"})
		wantError(t, res, "not_found")
		if len(reqs) != 1 {
			t.Errorf("the API received %d requests for a 404, want 1 (no retry)", len(reqs))
		}
		if text := resultText(res); !strings.Contains(text, "404") || !strings.Contains(text, "no pet 999") {
			t.Errorf("error text %q does not give the status and the API's message", text)
		}
	})

	t.Run("503 twice then 200 is retried", func(t *testing.T) {
		const tool = "petstore__getFlaky"
		before := scrape(t, f.srv.URL)
		retries := map[string]string{"tool": tool, "error_class": "unavailable"}
		code503 := map[string]string{"tool": tool, "code": "503"}
		code200 := map[string]string{"tool": tool, "code": "200"}
		r0 := metricOrZero(before, "toolgate_retries_total", retries)
		n503 := metricOrZero(before, "toolgate_http_requests_total", code503)
		n200 := metricOrZero(before, "toolgate_http_requests_total", code200)

		res, reqs := f.call(t, tool, map[string]any{"key": "k1"})
		if res.IsError {
			t.Fatalf("result is an error: %q", resultText(res))
		}
		if len(reqs) != 3 {
			t.Errorf("the API received %d requests, want 3", len(reqs))
		}
		if got := metaNumber(t, res, attemptsMetaKey); got != 3 {
			t.Errorf("_meta[%q] = %v, want 3", attemptsMetaKey, got)
		}
		if got := structured(t, res)["request"]; got != float64(3) {
			t.Errorf("structuredContent.request = %v, want 3", got)
		}
		waitMetric(t, f.srv.URL, "toolgate_retries_total", retries, r0+2)
		waitMetric(t, f.srv.URL, "toolgate_http_requests_total", code503, n503+2)
		waitMetric(t, f.srv.URL, "toolgate_http_requests_total", code200, n200+1)
		retried = !t.Failed()
	})

	t.Run("secrets redacted in results", func(t *testing.T) {
		tests := []struct {
			name   string
			tool   string
			args   map[string]any
			header string
			sent   string // the header's value at the API
			shown  string // the header's value in the result
		}{
			{"rest header", "echo_request", map[string]any{"name": "who"}, "Authorization", "Bearer " + restToken, "Bearer [redacted]"},
			{"openapi source header", "petstore__echoHeaders", map[string]any{}, "X-Api-Key", restToken, "[redacted]"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				res, req := f.okCall(t, tc.tool, tc.args)
				if got := req.Header.Get(tc.header); got != tc.sent {
					t.Errorf("%s at the API = %q, want %q", tc.header, got, tc.sent)
				}
				headers := structured(t, res)
				if tc.tool == "echo_request" {
					headers, _ = headers["headers"].(map[string]any)
				}
				if got := asJSON(t, headers[tc.header]); !cmp.Equal(got, []any{tc.shown}) {
					t.Errorf("echoed %s = %v, want [%q]", tc.header, got, tc.shown)
				}
				wire, err := json.Marshal(res)
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(string(wire), restToken) {
					t.Errorf("the result shows the token:\n%s", wire)
				}
			})
		}
	})

	t.Run("invalid arguments", func(t *testing.T) {
		tests := []struct {
			name string
			tool string
			args map[string]any
		}{
			{"rest missing required", "echo_request", map[string]any{"q": "x"}},
			{"rest wrong type", "echo_request", map[string]any{"name": 5}},
			{"rest extra property", "echo_request", map[string]any{"name": "n", "host": "evil.example"}},
			{"rest body out of range", "create_note", map[string]any{"title": "t", "priority": 9}},
			{"rest body wrong item type", "create_note", map[string]any{"title": "t", "tags": []any{1}}},
			{"openapi missing path parameter", "petstore__getPetById", map[string]any{}},
			{"openapi query wrong type", "petstore__listPets", map[string]any{"limit": "ten"}},
			{"openapi query out of range", "petstore__listPets", map[string]any{"limit": 0}},
			{"openapi body missing", "petstore__createPet", map[string]any{}},
			{"openapi nested $ref required", "petstore__createPet", map[string]any{"body": map[string]any{"name": "x", "category": map[string]any{"id": 1}}}},
			{"openapi body extra property", "petstore__createPet", map[string]any{"body": map[string]any{"name": "x", "owner": "me"}}},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				res, reqs := f.call(t, tc.tool, tc.args)
				wantError(t, res, "validation")
				if len(reqs) != 0 {
					t.Errorf("tools/call %s %v: the API received %d requests, want none: %+v", tc.tool, tc.args, len(reqs), reqs)
				}
			})
		}
	})

	// Last: stopping the server makes its stderr complete.
	t.Run("token never in stderr", func(t *testing.T) {
		if code := f.srv.Stop(t); code != 0 {
			t.Errorf("toolgate serve exited with code %d after SIGTERM, want 0", code)
		}
		stderr := f.srv.Stderr()
		if retried && !strings.Contains(stderr, `"retrying request"`) {
			t.Errorf("stderr has no \"retrying request\" debug line; the check below would prove little:\n%s", stderr)
		}
		if strings.Contains(stderr, restToken) {
			t.Errorf("the token appears in toolgate's stderr:\n%s", stderr)
		}
	})
}

func TestRESTValidateUnsetEnv(t *testing.T) {
	// Make sure UNSET_VAR is unset; t.Setenv restores it afterwards.
	t.Setenv("UNSET_VAR", "")
	if err := os.Unsetenv("UNSET_VAR"); err != nil {
		t.Fatal(err)
	}
	const value = `"Bearer ${UNSET_VAR}"`
	yaml := "builtin: []\n" +
		"rest:\n" +
		"  - name: needs_token\n" +
		"    url: http://127.0.0.1:9/items/{id}\n" +
		"    headers:\n" +
		"      Authorization: " + value + "\n"
	cfg := writeConfig(t, yaml)

	// The position of the scalar that names the variable, 1-based.
	off := strings.Index(yaml, value)
	line := strings.Count(yaml[:off], "\n") + 1
	col := off - strings.LastIndex(yaml[:off], "\n")

	r := runCLI(t, "validate", "--config", cfg)
	if r.code != 1 {
		t.Errorf("validate exit code %d, want 1\n%v", r.code, r)
	}
	want := fmt.Sprintf("%s:%d:%d: rest[0].headers.Authorization: ", cfg, line, col)
	if !strings.Contains(r.stderr, want) {
		t.Errorf("stderr does not contain %q\n%v", want, r)
	}
	if !strings.Contains(r.stderr, "UNSET_VAR") {
		t.Errorf("stderr does not name UNSET_VAR\n%v", r)
	}
	if strings.Contains(r.stdout, "valid") {
		t.Errorf("validate printed %q on stdout", r.stdout)
	}
}
