package gzipjson

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestCompress(t *testing.T) {
	big := `{"jsonrpc":"2.0","id":1,"result":{"tools":["` + strings.Repeat("x", 4*MinBytes) + `"]}}`
	small := `{"jsonrpc":"2.0","id":1,"result":{}}`
	serve := func(contentType, body string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", contentType)
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, body)
		})
	}
	for _, tc := range []struct {
		name, accept, contentType, body string
		method                          string
		wantGzip                        bool
	}{
		{"large JSON, gzip accepted", "gzip, deflate", "application/json", big, http.MethodPost, true},
		{"large JSON, gzip not accepted", "", "application/json", big, http.MethodPost, false},
		{"large JSON, gzip refused", "gzip;q=0, identity", "application/json", big, http.MethodPost, false},
		{"small JSON", "gzip", "application/json", small, http.MethodPost, false},
		{"event stream", "gzip", "text/event-stream", big, http.MethodPost, false},
		{"GET", "gzip", "application/json", big, http.MethodGet, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(tc.method, "/mcp", nil)
			if tc.accept != "" {
				req.Header.Set("Accept-Encoding", tc.accept)
			}
			Compress(serve(tc.contentType, tc.body)).ServeHTTP(rec, req)
			got := rec.Body.Bytes()
			if enc := rec.Header().Get("Content-Encoding"); (enc == "gzip") != tc.wantGzip {
				t.Fatalf("Content-Encoding = %q, want gzip: %v", enc, tc.wantGzip)
			}
			if tc.wantGzip {
				zr, err := gzip.NewReader(bytes.NewReader(got))
				if err != nil {
					t.Fatal(err)
				}
				if got, err = io.ReadAll(zr); err != nil {
					t.Fatal(err)
				}
				if rec.Body.Len() >= len(tc.body)/2 {
					t.Errorf("compressed to %d bytes from %d", rec.Body.Len(), len(tc.body))
				}
			}
			if string(got) != tc.body {
				t.Errorf("body = %.60q…, want the handler's", got)
			}
		})
	}
}

// TestFlushedStream: a response flushed before it reaches the
// threshold is a stream and is sent as it is, as it is flushed.
func TestFlushedStream(t *testing.T) {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	Compress(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"a":1}`)
		w.(http.Flusher).Flush()
		if rec.Body.String() != `{"a":1}` || !rec.Flushed {
			t.Errorf("after Flush the client has %q (flushed %v), want what was written", rec.Body.String(), rec.Flushed)
		}
		_, _ = io.WriteString(w, strings.Repeat(" ", 2*MinBytes))
	})).ServeHTTP(rec, req)
	if enc := rec.Header().Get("Content-Encoding"); enc != "" {
		t.Errorf("Content-Encoding = %q, want none for a stream", enc)
	}
}
