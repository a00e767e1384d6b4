package rest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

// newTestExecutor returns an executor closed when the test ends.
func newTestExecutor(t testing.TB, opts *Options) *Executor {
	t.Helper()
	e := New(opts)
	t.Cleanup(e.Close)
	return e
}

// startServer returns an httptest server closed when the test ends.
func startServer(t testing.TB, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

// testTool is a tool added to an executor: its definition, its executor,
// and the retry plan of its calls, as the gateway builds it.
type testTool struct {
	*registry.Tool
	exec executors.Executor
	plan retry.Plan
}

// mustAdd adds s (Name and Source defaulted) and returns its tool, whose
// calls are retried as policy says (at most one; none means the
// defaults).
func mustAdd(t testing.TB, e *Executor, s Spec, policy ...retry.Policy) *testTool {
	t.Helper()
	if s.Name == "" {
		s.Name = "tool"
	}
	if s.Source == "" {
		s.Source = "rest:" + s.Name
	}
	def, exec, err := e.Add(s)
	if err != nil {
		t.Fatalf("Add(%s) = %v", s.Name, err)
	}
	plan := retry.Plan{Idempotent: def.Idempotent, Subject: fmt.Sprintf("tool %q", def.Name)}
	if len(policy) > 0 {
		plan.Policy = policy[0]
	}
	return &testTool{Tool: &def, exec: exec, plan: plan}
}

// call returns a call of tool in thread t1 with args (nil means none).
func (tool *testTool) call(args map[string]any) executors.Call {
	if args == nil {
		args = map[string]any{}
	}
	return executors.Call{Tool: tool.Tool, Args: args, Thread: "t1", Retry: tool.plan}
}

func execute(ctx context.Context, tool *testTool, args map[string]any) (executors.Result, error) {
	return tool.exec.Execute(ctx, tool.call(args))
}

// asRetryError returns err as a *retry.Error, failing the test if it is
// not one.
func asRetryError(t *testing.T, err error) *retry.Error {
	t.Helper()
	re, ok := errors.AsType[*retry.Error](err)
	if !ok {
		t.Fatalf("error = %v (%T), want a *retry.Error", err, err)
	}
	return re
}

// attemptsOf returns the attempts a result reports: its
// executors.AttemptsMetaKey, absent (one attempt) as 1.
func attemptsOf(res executors.Result) any {
	if n, ok := res.Meta[executors.AttemptsMetaKey]; ok {
		return n
	}
	return 1
}

// roundTripFunc is an http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// handlerTransport serves every request with h on the calling goroutine:
// HTTP without sockets, for synctest bubbles.
func handlerTransport(h http.HandlerFunc) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Body != nil {
			defer r.Body.Close()
		}
		if err := r.Context().Err(); err != nil {
			return nil, err
		}
		rec := httptest.NewRecorder()
		h(rec, r)
		resp := rec.Result()
		resp.Request = r
		return resp, nil
	})
}

func zeroRand() float64 { return 0 }

func TestStatusClasses(t *testing.T) {
	tests := []struct {
		code           int
		want           retry.Class
		wantRetryAfter time.Duration
	}{
		{http.StatusBadRequest, retry.Validation, 0},
		{http.StatusUnauthorized, retry.Permission, 0},
		{http.StatusForbidden, retry.Permission, 0},
		{http.StatusNotFound, retry.NotFound, 0},
		{http.StatusRequestTimeout, retry.Timeout, 0},
		{http.StatusConflict, retry.Execution, 0},
		{http.StatusGone, retry.Execution, 0},
		{http.StatusTeapot, retry.Execution, 0},
		{http.StatusUnprocessableEntity, retry.Validation, 0},
		{http.StatusTooEarly, retry.Unavailable, 0},
		{http.StatusTooManyRequests, retry.RateLimited, 7 * time.Second},
		{http.StatusInternalServerError, retry.Unavailable, 0},
		{http.StatusNotImplemented, retry.Unavailable, 0},
		{http.StatusBadGateway, retry.Unavailable, 0},
		{http.StatusServiceUnavailable, retry.Unavailable, 7 * time.Second},
		{http.StatusGatewayTimeout, retry.Unavailable, 0},
		{http.StatusNotModified, retry.Execution, 0},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.code), func(t *testing.T) {
			srv := startServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", "7")
				w.WriteHeader(tc.code)
				io.WriteString(w, "  problem:\n field x is required ")
			})
			var codes []int
			e := newTestExecutor(t, &Options{OnResponse: func(_ string, code int) { codes = append(codes, code) }})
			tool := mustAdd(t, e, Spec{URL: srv.URL + "/items?token=abc"}, retry.Policy{Attempts: 1})
			_, err := execute(t.Context(), tool, nil)
			re := asRetryError(t, err)
			if re.Class != tc.want {
				t.Errorf("class = %q, want %q (error %v)", re.Class, tc.want, err)
			}
			want := fmt.Sprintf("GET %s/items returned %d %s after 1 attempt: problem: field x is required", srv.URL, tc.code, http.StatusText(tc.code))
			if tc.code == http.StatusNotModified { // no body allowed
				want = fmt.Sprintf("GET %s/items returned 304 Not Modified after 1 attempt", srv.URL)
			}
			if !permanent(tc.code, nil) {
				want += `; not retried: the retry policy of tool "tool" allows only 1 attempt`
			}
			if err.Error() != want {
				t.Errorf("error = %q, want %q", err.Error(), want)
			}
			if re.RetryAfter != tc.wantRetryAfter {
				t.Errorf("RetryAfter = %v, want %v", re.RetryAfter, tc.wantRetryAfter)
			}
			if diff := cmp.Diff([]int{tc.code}, codes); diff != "" {
				t.Errorf("OnResponse codes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestErrorExcerptCapped(t *testing.T) {
	srv := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, strings.Repeat("x", 10<<10))
	})
	e := newTestExecutor(t, nil)
	tool := mustAdd(t, e, Spec{URL: srv.URL + "/x"})
	_, err := execute(t.Context(), tool, nil)
	msg := err.Error()
	if !strings.HasSuffix(msg, strings.Repeat("x", excerptBytes)+" …") || len(msg) > excerptBytes+200 {
		t.Errorf("error is %d bytes ending %q; want a 2 KiB excerpt ending in …", len(msg), msg[max(0, len(msg)-20):])
	}
}

func TestRetryThenSuccess(t *testing.T) {
	var hits atomic.Int32
	srv := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	})
	var codes []int
	var classes []retry.Class
	e := newTestExecutor(t, &Options{
		Rand:       zeroRand,
		OnResponse: func(tool string, code int) { codes = append(codes, code) },
		OnRetry:    func(tool string, c retry.Class) { classes = append(classes, c) },
	})
	tool := mustAdd(t, e, Spec{URL: srv.URL + "/x"})
	var attempts []int
	call := tool.call(nil)
	call.OnAttempt = func(n int) { attempts = append(attempts, n) }
	res, err := tool.exec.Execute(t.Context(), call)
	if err != nil {
		t.Fatalf("Execute = %v", err)
	}
	if diff := cmp.Diff([]int{1, 2, 3}, attempts); diff != "" {
		t.Errorf("OnAttempt numbers (-want +got):\n%s", diff)
	}
	if got := attemptsOf(res); got != 3 {
		t.Errorf("Meta attempts = %v, want 3", got)
	}
	if hits.Load() != 3 {
		t.Errorf("server saw %d requests, want 3", hits.Load())
	}
	if diff := cmp.Diff([]int{503, 503, 200}, codes); diff != "" {
		t.Errorf("OnResponse codes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]retry.Class{retry.Unavailable, retry.Unavailable}, classes); diff != "" {
		t.Errorf("OnRetry classes (-want +got):\n%s", diff)
	}
}

func TestRetryPolicy(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		name       string
		method     string
		idempotent *bool
		status     int
		wantHits   int32
	}{
		{"GET 503 retried", "GET", nil, 503, 3},
		{"GET 500 retried", "GET", nil, 500, 3},
		{"GET 429 retried", "GET", nil, 429, 3},
		{"GET 408 retried", "GET", nil, 408, 3},
		{"GET 425 retried", "GET", nil, 425, 3},
		{"GET 502 retried", "GET", nil, 502, 3},
		{"GET 504 retried", "GET", nil, 504, 3},
		{"GET 501 not retried", "GET", nil, 501, 1},
		{"GET 404 not retried", "GET", nil, 404, 1},
		{"GET 400 not retried", "GET", nil, 400, 1},
		{"DELETE 503 retried", "DELETE", nil, 503, 3},
		{"POST 503 not retried", "POST", nil, 503, 1},
		{"PATCH 503 not retried", "PATCH", nil, 503, 1},
		{"POST idempotent retried", "POST", &yes, 503, 3},
		{"PUT declared non-idempotent", "PUT", &no, 503, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var hits atomic.Int32
			srv := startServer(t, func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				w.WriteHeader(tc.status)
			})
			e := newTestExecutor(t, &Options{Rand: zeroRand})
			tool := mustAdd(t, e, Spec{Method: tc.method, URL: srv.URL + "/x", Idempotent: tc.idempotent})
			_, err := execute(t.Context(), tool, nil)
			if err == nil {
				t.Fatal("Execute succeeded, want an error")
			}
			if hits.Load() != tc.wantHits {
				t.Errorf("server saw %d requests, want %d", hits.Load(), tc.wantHits)
			}
			want := "after 1 attempt"
			if tc.wantHits > 1 {
				want = fmt.Sprintf("after %d attempts", tc.wantHits)
			}
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		})
	}
}

func TestNetworkErrorRetried(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: connection refused

	var classes []retry.Class
	e := newTestExecutor(t, &Options{Rand: zeroRand, OnRetry: func(_ string, c retry.Class) { classes = append(classes, c) }})
	for _, tc := range []struct {
		method   string
		attempts int
	}{{"GET", 3}, {"POST", 1}} {
		t.Run(tc.method, func(t *testing.T) {
			classes = nil
			tool := mustAdd(t, e, Spec{Name: "t" + tc.method, Method: tc.method, URL: "http://" + addr + "/x?key=k"})
			_, err := execute(t.Context(), tool, nil)
			re := asRetryError(t, err)
			if re.Class != retry.Network {
				t.Errorf("class = %q, want network (%v)", re.Class, err)
			}
			prefix := fmt.Sprintf("%s http://%s/x failed after %d attempt", tc.method, addr, tc.attempts)
			if !strings.HasPrefix(err.Error(), prefix) {
				t.Errorf("error = %q, want it to start %q", err, prefix)
			}
			if len(classes) != tc.attempts-1 {
				t.Errorf("OnRetry called %d times, want %d", len(classes), tc.attempts-1)
			}
		})
	}
}

func TestBodyTemplateAndReplay(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	var contentTypes []string
	srv := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		contentTypes = append(contentTypes, r.Header.Get("Content-Type"))
		n := len(bodies)
		mu.Unlock()
		if n == 1 {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	e := newTestExecutor(t, &Options{Rand: zeroRand})
	tool := mustAdd(t, e, Spec{
		Method:      "POST",
		URL:         srv.URL + "/notes",
		Body:        json.RawMessage(`{"title":"{title}","tags":"{tags}","size":"{size}","text":"by {who}","draft":"{draft}","fixed":1}`),
		Idempotent:  new(true),
		InputSchema: json.RawMessage(`{"type":"object"}`),
	})
	res, err := execute(t.Context(), tool, map[string]any{"title": "Hi <you>", "tags": []any{"a", "b"}, "size": 3.0, "who": "Ann"})
	if err != nil {
		t.Fatalf("Execute = %v", err)
	}
	want := `{"fixed":1,"size":3,"tags":["a","b"],"text":"by Ann","title":"Hi <you>"}`
	if diff := cmp.Diff([]string{want, want}, bodies); diff != "" {
		t.Errorf("bodies received (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"application/json", "application/json"}, contentTypes); diff != "" {
		t.Errorf("Content-Type (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(executors.Text("HTTP 201 Created: empty response").Content, res.Content); diff != "" {
		t.Errorf("content (-want +got):\n%s", diff)
	}
}

func TestHeaders(t *testing.T) {
	var got http.Header
	var hits atomic.Int32
	srv := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		got = r.Header.Clone()
	})
	e := newTestExecutor(t, nil)
	tool := mustAdd(t, e, Spec{
		URL:         srv.URL + "/x",
		Headers:     map[string]string{"X-Trace": "t-{trace}", "X-Opt": "{opt}", "Accept": "text/plain"},
		InputSchema: json.RawMessage(`{"type":"object"}`),
	})
	tests := []struct {
		name      string
		args      map[string]any
		wantTrace string
		wantErr   bool
	}{
		{"expanded", map[string]any{"trace": 7.0}, "t-7", false},
		{"CRLF refused", map[string]any{"trace": "a\r\nX-Evil: 1"}, "", true},
		{"LF refused", map[string]any{"trace": "a\nb"}, "", true},
		{"NUL refused", map[string]any{"trace": "a\x00b"}, "", true},
		{"tab allowed", map[string]any{"trace": "a\tb"}, "t-a\tb", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hits.Store(0)
			got = nil
			_, err := execute(t.Context(), tool, tc.args)
			if tc.wantErr {
				if c := retry.Classify(err); c != retry.Validation {
					t.Errorf("error = %v (class %q), want validation", err, c)
				}
				if hits.Load() != 0 {
					t.Errorf("server saw %d requests, want none", hits.Load())
				}
				return
			}
			if err != nil {
				t.Fatalf("Execute = %v", err)
			}
			if got.Get("X-Trace") != tc.wantTrace {
				t.Errorf("X-Trace = %q, want %q", got.Get("X-Trace"), tc.wantTrace)
			}
			if _, sent := got["X-Opt"]; sent {
				t.Errorf("X-Opt sent as %q, want it left out (argument absent)", got.Get("X-Opt"))
			}
			if got.Get("Accept") != "text/plain" || got.Get("User-Agent") != "toolgate" {
				t.Errorf("Accept, User-Agent = %q, %q; want text/plain, toolgate", got.Get("Accept"), got.Get("User-Agent"))
			}
		})
	}
}

func TestPathEscapingReachesServer(t *testing.T) {
	var uri string
	srv := startServer(t, func(w http.ResponseWriter, r *http.Request) { uri = r.RequestURI })
	e := newTestExecutor(t, nil)
	tool := mustAdd(t, e, Spec{URL: srv.URL + "/users/{id}/posts", Query: map[string]string{"q": "{q}"},
		InputSchema: json.RawMessage(`{"type":"object"}`)})
	tests := []struct {
		name string
		args map[string]any
		want string
	}{
		{"dot dot slash", map[string]any{"id": "../admin"}, "/users/..%2Fadmin/posts"},
		{"dot dot", map[string]any{"id": ".."}, "/users/%2E%2E/posts"},
		{"dot", map[string]any{"id": "."}, "/users/%2E/posts"},
		{"query", map[string]any{"id": "7", "q": "a&b=c d"}, "/users/7/posts?q=a%26b%3Dc+d"},
		{"unicode", map[string]any{"id": "é/ü"}, "/users/%C3%A9%2F%C3%BC/posts"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := execute(t.Context(), tool, tc.args); err != nil {
				t.Fatalf("Execute = %v", err)
			}
			if uri != tc.want {
				t.Errorf("server saw %q, want %q", uri, tc.want)
			}
		})
	}
	t.Run("missing path argument", func(t *testing.T) {
		uri = ""
		_, err := execute(t.Context(), tool, map[string]any{"q": "x"})
		re := asRetryError(t, err)
		if re.Class != retry.Validation || !strings.Contains(re.Msg, `missing argument "id"`) || uri != "" {
			t.Errorf("error = %v (class %q), server saw %q; want validation naming id, no request", err, re.Class, uri)
		}
	})
}

func TestRedirects(t *testing.T) {
	var otherHits atomic.Int32
	other := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		otherHits.Add(1)
		io.WriteString(w, "from other")
	})
	var loops atomic.Int32
	front := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, other.URL+"/landing", http.StatusFound)
		case "/loop":
			loops.Add(1)
			http.Redirect(w, r, "/loop", http.StatusFound)
		case "/local":
			http.Redirect(w, r, "/here", http.StatusMovedPermanently)
		default:
			io.WriteString(w, "from front")
		}
	})
	otherHost := strings.TrimPrefix(other.URL, "http://")
	frontHost := strings.TrimPrefix(front.URL, "http://")
	e := newTestExecutor(t, &Options{Rand: zeroRand})
	tests := []struct {
		name      string
		path      string
		allowed   []string
		wantText  string
		wantClass retry.Class
		wantOther int32
	}{
		{"same host followed", "/local", nil, "from front", "", 0},
		{"other host refused", "/away", nil, "", retry.Permission, 0},
		{"other host allowed", "/away", []string{frontHost, otherHost}, "from other", "", 1},
		{"host without port allows any port", "/away", []string{"127.0.0.1"}, "from other", "", 1},
		{"loop capped", "/loop", nil, "", retry.Execution, 0},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			otherHits.Store(0)
			loops.Store(0)
			tool := mustAdd(t, e, Spec{Name: fmt.Sprintf("r%d", i), URL: front.URL + tc.path, AllowedHosts: tc.allowed})
			res, err := execute(t.Context(), tool, nil)
			if got := retry.Classify(err); got != tc.wantClass {
				t.Fatalf("Execute error = %v (class %q), want class %q", err, got, tc.wantClass)
			}
			if err == nil && res.Content[0].Text != tc.wantText {
				t.Errorf("text = %q, want %q", res.Content[0].Text, tc.wantText)
			}
			if otherHits.Load() != tc.wantOther {
				t.Errorf("other host saw %d requests, want %d", otherHits.Load(), tc.wantOther)
			}
			switch tc.wantClass {
			case retry.Permission:
				if want := "refused a redirect to " + otherHost; !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "after 1 attempt") {
					t.Errorf("error = %q, want it to say %q, after 1 attempt", err, want)
				}
			case retry.Execution:
				if loops.Load() != maxRedirects+1 {
					t.Errorf("loop served %d requests, want %d (not retried)", loops.Load(), maxRedirects+1)
				}
			}
		})
	}
}

func TestResultMapping(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	tests := []struct {
		name   string
		status int
		ctype  string // "-" for no Content-Type header at all
		body   []byte
		want   executors.Result // Meta is added
	}{
		{"json object", 200, "application/json", []byte(`{"a":1,"b":[true]}`),
			executors.Structured(map[string]any{"a": json.Number("1"), "b": []any{true}}, `{"a":1,"b":[true]}`)},
		{"json array", 200, "application/json; charset=utf-8", []byte(`[1,2]`),
			executors.Structured(map[string]any{"result": []any{json.Number("1"), json.Number("2")}}, `[1,2]`)},
		{"json string", 200, "application/json", []byte(`"hi"`),
			executors.Structured(map[string]any{"result": "hi"}, `"hi"`)},
		{"problem+json", 200, "application/problem+json", []byte(`{"x":"y"}`),
			executors.Structured(map[string]any{"x": "y"}, `{"x":"y"}`)},
		{"big number kept exact", 200, "application/json", []byte(`{"id":12345678901234567890}`),
			executors.Structured(map[string]any{"id": json.Number("12345678901234567890")}, `{"id":12345678901234567890}`)},
		{"invalid json is text", 200, "application/json", []byte(`{"a":`), executors.Text(`{"a":`)},
		{"trailing garbage is text", 200, "application/json", []byte(`{} x`), executors.Text(`{} x`)},
		{"text", 200, "text/plain; charset=utf-8", []byte("hello"), executors.Text("hello")},
		{"html", 200, "text/html", []byte("<p>hi</p>"), executors.Text("<p>hi</p>")},
		{"svg is text", 200, "image/svg+xml", []byte("<svg/>"), executors.Text("<svg/>")},
		{"unknown utf-8 is text", 200, "application/x-thing", []byte("plain"), executors.Text("plain")},
		{"image", 200, "image/png", png,
			executors.Result{Content: []executors.Content{{Type: executors.ImageContent, Data: png, MIMEType: "image/png"}}}},
		{"sniffed image", 200, "-", png,
			executors.Result{Content: []executors.Content{{Type: executors.ImageContent, Data: png, MIMEType: "image/png"}}}},
		{"audio", 200, "audio/mpeg", []byte("ID3\x04\x00\xff"),
			executors.Result{Content: []executors.Content{{Type: executors.AudioContent, Data: []byte("ID3\x04\x00\xff"), MIMEType: "audio/mpeg"}}}},
		{"binary is a resource", 200, "application/octet-stream", []byte{0xff, 0xfe, 0x00, 0x01},
			executors.Result{Content: []executors.Content{{Type: executors.ResourceContent, Data: []byte{0xff, 0xfe, 0x00, 0x01},
				MIMEType: "application/octet-stream", URI: "SERVER/r/x"}}}},
		{"204", 204, "", nil, executors.Text("HTTP 204 No Content: empty response")},
		{"200 empty", 200, "application/json", nil, executors.Text("HTTP 200 OK: empty response")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := startServer(t, func(w http.ResponseWriter, r *http.Request) {
				switch tc.ctype {
				case "-":
					w.Header()["Content-Type"] = nil // no sniffing by the server
				case "":
				default:
					w.Header().Set("Content-Type", tc.ctype)
				}
				w.WriteHeader(tc.status)
				w.Write(tc.body)
			})
			e := newTestExecutor(t, nil)
			tool := mustAdd(t, e, Spec{URL: srv.URL + "/r/x?secret=1"})
			res, err := execute(t.Context(), tool, nil)
			if err != nil {
				t.Fatalf("Execute = %v", err)
			}
			want := tc.want
			for i := range want.Content {
				want.Content[i].URI = strings.Replace(want.Content[i].URI, "SERVER", srv.URL, 1)
			}
			// One attempt: no executors.AttemptsMetaKey, as for every kind.
			want.Structured, res.Structured = canonJSON(t, want.Structured), canonJSON(t, res.Structured)
			if diff := cmp.Diff(want, res); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTruncation(t *testing.T) {
	text100 := strings.Repeat("0123456789", 10)
	notice := func(shown, of int) executors.Content {
		return executors.Content{Type: executors.TextContent,
			Text: fmt.Sprintf("[response truncated: showed %d of %d bytes; raise max_response_bytes to see more]", shown, of)}
	}
	textContent := func(s string) executors.Content { return executors.Content{Type: executors.TextContent, Text: s} }
	tests := []struct {
		name    string
		ctype   string
		body    string
		chunked bool // no Content-Length: the size is counted
		want    []executors.Content
	}{
		{"with length", "text/plain", text100, false, []executors.Content{textContent("0123456789"), notice(10, 100)}},
		{"chunked", "text/plain", text100, true, []executors.Content{textContent("0123456789"), notice(10, 100)}},
		{"json becomes text", "application/json", `{"k":"` + text100 + `"}`, false, []executors.Content{textContent(`{"k":"0123`), notice(10, 108)}},
		{"rune not cut", "text/plain", "a" + strings.Repeat("é", 7), true, []executors.Content{textContent("aéééé"), notice(9, 15)}},
		{"image dropped", "image/png", text100, false, []executors.Content{notice(0, 100)}},
		{"exactly the cap", "text/plain", "0123456789", true, []executors.Content{textContent("0123456789")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := startServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.ctype)
				if tc.chunked {
					w.(http.Flusher).Flush()
				}
				io.WriteString(w, tc.body)
			})
			e := newTestExecutor(t, nil)
			tool := mustAdd(t, e, Spec{URL: srv.URL + "/big", MaxResponseBytes: 10})
			res, err := execute(t.Context(), tool, nil)
			if err != nil {
				t.Fatalf("Execute = %v", err)
			}
			if diff := cmp.Diff(tc.want, res.Content); diff != "" {
				t.Errorf("content (-want +got):\n%s", diff)
			}
			if res.Structured != nil {
				t.Errorf("Structured = %v, want nil for a cut body", res.Structured)
			}
		})
	}
}

func TestSecretsRedacted(t *testing.T) {
	const secret = "s3cr3t/tok en"
	var gotAuth atomic.Value
	srv := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		gotAuth.Store(r.Header.Get("Authorization"))
		switch r.URL.Path {
		case "/ok":
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"auth": r.Header.Get("Authorization"), "query": r.URL.RawQuery,
				secret: []any{secret}})
		case "/flaky":
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, "bad token "+secret+" in "+r.URL.RawQuery)
		}
	})
	var logs bytes.Buffer
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e := newTestExecutor(t, &Options{Rand: zeroRand, Logger: logger})
	spec := func(name, path string) Spec {
		return Spec{Name: name, URL: srv.URL + path + "?key=" + strings.ReplaceAll(secret, " ", "%20") + "&q={q}",
			Headers: map[string]string{"Authorization": "Bearer " + secret}, Secrets: []string{secret, ""},
			InputSchema: json.RawMessage(`{"type":"object"}`)}
	}
	check := func(t *testing.T, what, s string) {
		t.Helper()
		if strings.Contains(s, "s3cr3t") || strings.Contains(s, "?key=") {
			t.Errorf("%s shows the secret or the query: %s", what, s)
		}
		if !strings.Contains(s, redacted) && what != "log" {
			t.Errorf("%s does not say %s: %s", what, redacted, s)
		}
	}

	t.Run("result", func(t *testing.T) {
		res, err := execute(t.Context(), mustAdd(t, e, spec("ok", "/ok")), nil)
		if err != nil {
			t.Fatalf("Execute = %v", err)
		}
		if gotAuth.Load() != "Bearer "+secret {
			t.Errorf("server got Authorization %q, want the secret sent", gotAuth.Load())
		}
		check(t, "text", res.Content[0].Text)
		b, _ := json.Marshal(res.Structured)
		check(t, "structured", string(b))
	})
	t.Run("status error", func(t *testing.T) {
		_, err := execute(t.Context(), mustAdd(t, e, spec("bad", "/bad")), map[string]any{"q": secret})
		check(t, "error", err.Error())
	})
	t.Run("path argument in error", func(t *testing.T) {
		s := spec("pathy", "/p/{p}")
		_, err := execute(t.Context(), mustAdd(t, e, s), map[string]any{"p": secret})
		check(t, "error", err.Error())
	})
	t.Run("retry log", func(t *testing.T) {
		_, err := execute(t.Context(), mustAdd(t, e, spec("flaky", "/flaky")), nil)
		if retry.Classify(err) != retry.Unavailable {
			t.Fatalf("Execute = %v, want unavailable", err)
		}
		logMu.Lock()
		out := logs.String()
		logMu.Unlock()
		check(t, "log", out)
		for _, want := range []string{"retrying request", "tool=flaky", "attempt=1", "attempt=2", "class=unavailable", "url=" + srv.URL + "/flaky "} {
			if !strings.Contains(out, want) {
				t.Errorf("log does not contain %q:\n%s", want, out)
			}
		}
		if n := strings.Count(out, "retrying request"); n != 2 {
			t.Errorf("log has %d retry lines, want 2:\n%s", n, out)
		}
	})
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestSharedConnectionPool shows that every tool and call, failed ones
// included, use one connection pool: go-retryablehttp's
// CloseIdleConnections after a failure must not empty it.
func TestSharedConnectionPool(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, "ok")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := ln.Addr().String()
	ln.Close()

	e := newTestExecutor(t, &Options{Rand: zeroRand})
	a := mustAdd(t, e, Spec{Name: "a", URL: srv.URL + "/a"})
	b := mustAdd(t, e, Spec{Name: "b", URL: srv.URL + "/b"})
	missing := mustAdd(t, e, Spec{Name: "missing", URL: srv.URL + "/missing"})
	down := mustAdd(t, e, Spec{Name: "down", URL: "http://" + closedAddr + "/"})
	for i, tool := range []*testTool{a, b, missing, down, a, b, missing, a} {
		_, err := execute(t.Context(), tool, nil)
		if (err != nil) != (tool == missing || tool == down) {
			t.Fatalf("call %d (%s) = %v", i, tool.Name, err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("server saw %d connections, want 1 (one shared pool)", n)
	}
}

func TestCancellationReachesServer(t *testing.T) {
	tests := []struct {
		name      string
		ctx       func(context.Context) (context.Context, context.CancelFunc)
		cancel    bool // cancel once the server has the request
		wantClass retry.Class
		wantMsg   string
	}{
		{"cancel", func(p context.Context) (context.Context, context.CancelFunc) { return context.WithCancel(p) }, true,
			retry.Cancelled, "was cancelled (after 1 attempt)"},
		{"deadline", func(p context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeout(p, 100*time.Millisecond)
		}, false, retry.Timeout, "did not finish before the call's deadline (after 1 attempt)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			started := make(chan struct{})
			closed := make(chan struct{})
			var once sync.Once
			srv := startServer(t, func(w http.ResponseWriter, r *http.Request) {
				once.Do(func() { close(started) })
				<-r.Context().Done() // the client went away
				close(closed)
			})
			e := newTestExecutor(t, &Options{Rand: zeroRand})
			tool := mustAdd(t, e, Spec{URL: srv.URL + "/slow"})
			ctx, cancel := tc.ctx(t.Context())
			defer cancel()
			errc := make(chan error, 1)
			go func() {
				_, err := execute(ctx, tool, nil)
				errc <- err
			}()
			<-started
			if tc.cancel {
				cancel()
			}
			<-closed
			err := <-errc
			re := asRetryError(t, err)
			if re.Class != tc.wantClass || !strings.HasSuffix(re.Msg, tc.wantMsg) {
				t.Errorf("error = %q (class %q), want class %q ending %q", err, re.Class, tc.wantClass, tc.wantMsg)
			}
		})
	}
}

// TestRetryAfterHonoured runs in a synctest bubble over an in-memory
// transport, so the waits are exact and take no real time.
func TestRetryAfterHonoured(t *testing.T) {
	tests := []struct {
		name     string
		policy   retry.Policy
		rand     float64
		replies  []func(w http.ResponseWriter) // then 200
		wantAt   []time.Duration               // when each attempt started
		wantFail retry.Class
	}{
		{
			name:   "seconds, date, capped",
			policy: retry.Policy{Attempts: 5, InitialBackoff: time.Second, MaxBackoff: 4 * time.Second},
			rand:   0.5,
			replies: []func(http.ResponseWriter){
				reply(429, "2"),
				func(w http.ResponseWriter) { // an HTTP-date 3s after this reply
					w.Header().Set("Retry-After", time.Now().Add(3*time.Second).UTC().Format(http.TimeFormat))
					w.WriteHeader(503)
				},
				reply(503, "60"), // capped at MaxBackoff
			},
			wantAt: []time.Duration{0, 2 * time.Second, 5 * time.Second, 9 * time.Second},
		},
		{
			name:    "full jitter without Retry-After",
			policy:  retry.Policy{Attempts: 3, InitialBackoff: time.Second, MaxBackoff: 10 * time.Second},
			rand:    0.5,
			replies: []func(http.ResponseWriter){reply(503, ""), reply(500, "")},
			wantAt:  []time.Duration{0, 500 * time.Millisecond, 1500 * time.Millisecond},
		},
		{
			name:    "jitter bounded by max",
			policy:  retry.Policy{Attempts: 4, InitialBackoff: time.Second, MaxBackoff: 1500 * time.Millisecond},
			rand:    0.999,
			replies: []func(http.ResponseWriter){reply(503, ""), reply(503, ""), reply(503, "")},
			wantAt:  []time.Duration{0, 999 * time.Millisecond, 2497500 * time.Microsecond, 3996 * time.Millisecond},
		},
		{
			name:     "attempts exhausted",
			policy:   retry.Policy{Attempts: 2, InitialBackoff: time.Second, MaxBackoff: time.Second},
			rand:     0,
			replies:  []func(http.ResponseWriter){reply(429, "1"), reply(429, "1"), reply(429, "1")},
			wantAt:   []time.Duration{0, time.Second},
			wantFail: retry.RateLimited,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				var at []time.Duration
				h := func(w http.ResponseWriter, r *http.Request) {
					at = append(at, time.Since(start))
					if n := len(at); n <= len(tc.replies) {
						tc.replies[n-1](w)
						return
					}
					io.WriteString(w, "done")
				}
				e := New(&Options{Transport: handlerTransport(h), Rand: func() float64 { return tc.rand }})
				defer e.Close()
				tool := mustAdd(t, e, Spec{URL: "http://api.test/x"}, tc.policy)
				res, err := execute(t.Context(), tool, nil)
				if got := retry.Classify(err); got != tc.wantFail {
					t.Fatalf("Execute = %v (class %q), want class %q", err, got, tc.wantFail)
				}
				if err == nil && attemptsOf(res) != len(tc.wantAt) {
					t.Errorf("Meta attempts = %v, want %d", attemptsOf(res), len(tc.wantAt))
				}
				if diff := cmp.Diff(tc.wantAt, at); diff != "" {
					t.Errorf("attempt start times (-want +got):\n%s", diff)
				}
			})
		})
	}
}

func reply(code int, retryAfter string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.WriteHeader(code)
	}
}

func TestDeadlineStopsRetries(t *testing.T) {
	tests := []struct {
		name        string
		retryAfter  string
		wantAt      []time.Duration
		wantElapsed time.Duration
	}{
		{"wait would pass the deadline", "10", []time.Duration{0}, 0},
		{"retries until the next would pass it", "2", []time.Duration{0, 2 * time.Second, 4 * time.Second}, 4 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				var at []time.Duration
				h := func(w http.ResponseWriter, r *http.Request) {
					at = append(at, time.Since(start))
					reply(503, tc.retryAfter)(w)
				}
				e := New(&Options{Transport: handlerTransport(h), Rand: zeroRand})
				defer e.Close()
				tool := mustAdd(t, e, Spec{URL: "http://api.test/x"}, retry.Policy{Attempts: 10, MaxBackoff: time.Minute})
				ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
				defer cancel()
				_, err := execute(ctx, tool, nil)
				re := asRetryError(t, err)
				want := fmt.Sprintf("after %d attempt", len(tc.wantAt))
				if re.Class != retry.Unavailable || !strings.Contains(re.Msg, want) {
					t.Errorf("error = %q (class %q), want the last failure, unavailable, %s", err, re.Class, want)
				}
				if diff := cmp.Diff(tc.wantAt, at); diff != "" {
					t.Errorf("attempt start times (-want +got):\n%s", diff)
				}
				if elapsed := time.Since(start); elapsed != tc.wantElapsed {
					t.Errorf("Execute returned after %v, want %v", elapsed, tc.wantElapsed)
				}
			})
		})
	}
}

func TestAddDefinition(t *testing.T) {
	e := newTestExecutor(t, nil)
	tests := []struct {
		name string
		spec Spec
		want registry.Tool
	}{
		{
			name: "GET derived schema",
			spec: Spec{Name: "weather", Title: "Weather", Description: "d", Source: "rest:weather",
				URL:     "https://api.example.com/v1/{city}/now?units={units}",
				Query:   map[string]string{"lang": "{lang}"},
				Headers: map[string]string{"X-Key": "{key}"},
				Timeout: 5 * time.Second},
			want: registry.Tool{Name: "weather", Title: "Weather", Description: "d", Kind: registry.REST, Source: "rest:weather",
				InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"key":{"type":"string"},"lang":{"type":"string"},"units":{"type":"string"}},"required":["city","key","lang","units"],"additionalProperties":false}`),
				Annotations: registry.Annotations{ReadOnlyHint: new(true), IdempotentHint: new(true), OpenWorldHint: new(true)},
				Timeout:     5 * time.Second, Idempotent: true},
		},
		{
			name: "POST with body and given schema",
			spec: Spec{Name: "create", Source: "openapi:pets", Method: "post", URL: "http://h/pets",
				Body: json.RawMessage(`"{body}"`), InputSchema: json.RawMessage(`{"type":"object","properties":{"body":{}}}`)},
			want: registry.Tool{Name: "create", Kind: registry.REST, Source: "openapi:pets",
				InputSchema: json.RawMessage(`{"type":"object","properties":{"body":{}}}`),
				Annotations: registry.Annotations{ReadOnlyHint: new(false), IdempotentHint: new(false), OpenWorldHint: new(true)}},
		},
		{
			name: "no placeholders",
			spec: Spec{Name: "ping", Source: "rest:ping", Method: "PUT", URL: "http://h/ping", Idempotent: new(false)},
			want: registry.Tool{Name: "ping", Kind: registry.REST, Source: "rest:ping",
				InputSchema: json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`),
				Annotations: registry.Annotations{ReadOnlyHint: new(false), IdempotentHint: new(false), OpenWorldHint: new(true)}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, exec, err := e.Add(tc.spec)
			if err != nil || exec == nil {
				t.Fatalf("Add = %v, %v, want an executor", exec, err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(registry.Tool{})); diff != "" {
				t.Errorf("Add (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConcurrentCalls(t *testing.T) {
	srv := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"path":%q}`, r.URL.Path)
	})
	e := newTestExecutor(t, nil)
	tool := mustAdd(t, e, Spec{URL: srv.URL + "/items/{id}"})
	var wg sync.WaitGroup
	errs := make([]error, 32)
	for i := range errs {
		wg.Go(func() {
			res, err := execute(t.Context(), tool, map[string]any{"id": fmt.Sprint(i)})
			if err == nil {
				if got := canonJSON(t, res.Structured).(map[string]any)["path"]; got != fmt.Sprintf("/items/%d", i) {
					err = fmt.Errorf("call %d got path %v", i, got)
				}
			}
			errs[i] = err
		})
	}
	var churnErr error
	wg.Go(func() {
		for i := range 20 {
			name := fmt.Sprintf("churn%d", i)
			if _, _, err := e.Add(Spec{Name: name, Source: "rest:x", URL: srv.URL}); err != nil {
				churnErr = fmt.Errorf("Add(%s) while calls run = %v", name, err)
			}
		}
	})
	wg.Wait()
	if err := errors.Join(append(errs, churnErr)...); err != nil {
		t.Error(err)
	}
}

func BenchmarkExecute(b *testing.B) {
	srv := startServer(b, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":42,"name":"widget","tags":["a","b"]}`)
	})
	e := newTestExecutor(b, nil)
	tool := mustAdd(b, e, Spec{URL: srv.URL + "/items/{id}", Query: map[string]string{"v": "{v}"}})
	args := map[string]any{"id": "42", "v": "1"}
	call := tool.call(args)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tool.exec.Execute(b.Context(), call); err != nil {
			b.Fatal(err)
		}
	}
}

func TestDisplayURL(t *testing.T) {
	tl := &tool{secrets: secretReplacer([]string{"hunter2"}, nil)}
	tests := []struct{ in, want string }{
		{"https://api.example.com/v1/x?key=abc#f", "https://api.example.com/v1/x"},
		{"https://user:pw@api.example.com:8443/x", "https://api.example.com:8443/x"},
		{"http://h/users/%2E%2E/p", "http://h/users/%2E%2E/p"},
		{"http://h/u/hunter2/x", "http://h/u/[redacted]/x"},
	}
	for _, tc := range tests {
		u, err := url.Parse(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := tl.displayURL(u); got != tc.want {
			t.Errorf("displayURL(%s) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// BenchmarkBareGET is the hand-written minimum BenchmarkExecute compares
// with: the same request with a plain pooled client, the body read whole.
func BenchmarkBareGET(b *testing.B) {
	srv := startServer(b, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":42,"name":"widget","tags":["a","b"]}`)
	})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	b.Cleanup(client.CloseIdleConnections)
	b.ReportAllocs()
	for b.Loop() {
		req, _ := http.NewRequestWithContext(b.Context(), http.MethodGet, srv.URL+"/items/42?v=1", nil)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadAll(resp.Body); err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
	}
}

// canonJSON returns v as decoded JSON (numbers exact), so that structured
// content passed through as raw bytes and decoded values compare equal.
func canonJSON(t testing.TB, v any) any {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Errorf("marshalling structured content: %v", err)
		return nil
	}
	out, ok := decodeBody(b)
	if !ok {
		t.Errorf("structured content %s is not one JSON value", b)
	}
	return out
}

// TestBasicAuthRedacted pins down that credentials written as the URL's
// userinfo come back redacted when a backend echoes what it got: the
// Authorization header net/http builds from them (base64 of user:pass),
// the password alone, or its base64 alone.
func TestBasicAuthRedacted(t *testing.T) {
	const secret = "pa55-w0rd!"
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	srv := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		user, pass, _ := r.BasicAuth()
		echo := map[string]any{
			"authorization": r.Header.Get("Authorization"),
			"url":           r.URL.String(),
			"user":          user,
			"password":      pass,
			"password_b64":  b64(pass),
			"raw_b64":       base64.RawStdEncoding.EncodeToString([]byte(pass)),
		}
		if r.URL.Path == "/bad" {
			w.WriteHeader(http.StatusBadRequest)
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(echo)
	})
	var logs bytes.Buffer
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e := newTestExecutor(t, &Options{Rand: zeroRand, Logger: logger})
	withUser := strings.Replace(srv.URL, "://", "://bob:"+secret+"@", 1)
	spec := func(name, path string) Spec {
		return Spec{Name: name, URL: withUser + path, Secrets: []string{secret}, InputSchema: json.RawMessage(`{"type":"object"}`)}
	}
	check := func(t *testing.T, what, s string) {
		t.Helper()
		for _, leak := range []string{secret, b64("bob:" + secret), b64(secret), base64.RawStdEncoding.EncodeToString([]byte(secret))} {
			if strings.Contains(s, leak) {
				t.Errorf("%s shows %q: %s", what, leak, s)
			}
		}
		if !strings.Contains(s, redacted) {
			t.Errorf("%s does not say %s: %s", what, redacted, s)
		}
	}

	t.Run("result", func(t *testing.T) {
		res, err := execute(t.Context(), mustAdd(t, e, spec("echo", "/echo")), nil)
		if err != nil {
			t.Fatalf("Execute = %v", err)
		}
		check(t, "text", res.Content[0].Text)
		b, _ := json.Marshal(res.Structured)
		check(t, "structured", string(b))
		if !strings.Contains(res.Content[0].Text, `"authorization":"Basic [redacted]"`) {
			t.Errorf("text = %s, want the Authorization echo redacted", res.Content[0].Text)
		}
	})
	t.Run("error", func(t *testing.T) {
		_, err := execute(t.Context(), mustAdd(t, e, spec("bad", "/bad")), nil)
		if err == nil {
			t.Fatal("Execute = nil error, want a status error")
		}
		check(t, "error", err.Error())
	})
	t.Run("log", func(t *testing.T) {
		logMu.Lock()
		out := logs.String()
		logMu.Unlock()
		if strings.Contains(out, secret) || strings.Contains(out, b64("bob:"+secret)) {
			t.Errorf("log shows the credentials:\n%s", out)
		}
	})
}

// BenchmarkRequest is the part of BenchmarkExecute that is toolgate's own
// before the network: building one call's request from its arguments.
func BenchmarkRequest(b *testing.B) {
	t, _, err := compile(Spec{Name: "items", Source: "rest:items", URL: "http://127.0.0.1:9/items/{id}", Query: map[string]string{"v": "{v}", "msg": "{msg}"}})
	if err != nil {
		b.Fatal(err)
	}
	args := map[string]any{"id": "42", "v": "1", "msg": "hello"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := t.request(b.Context(), args); err != nil {
			b.Fatal(err)
		}
	}
}
