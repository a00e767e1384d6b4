package gzipjson

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
)

func TestCompress(t *testing.T) {
	big := `{"jsonrpc":"2.0","id":1,"result":{"tools":["` + strings.Repeat("x", 4*MinBytes) + `"]}}`
	small := `{"jsonrpc":"2.0","id":1,"result":{}}`
	// A page of a tool list, larger than blockBytes: JSON that repeats.
	var page strings.Builder
	page.WriteString(`{"jsonrpc":"2.0","id":1,"result":{"tools":[`)
	for i := range 1000 {
		fmt.Fprintf(&page, `{"name":"tool_%04d","description":"Does thing %d with its inputs.","inputSchema":{"type":"object"}},`, i, i)
	}
	page.WriteString(`{}]}}`)
	serve := func(contentType, body string, chunks []int) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", contentType)
			w.WriteHeader(http.StatusOK)
			rest := body
			for _, n := range chunks {
				for len(rest) > n {
					_, _ = io.WriteString(w, rest[:n])
					rest = rest[n:]
				}
			}
			_, _ = io.WriteString(w, rest)
		})
	}
	for _, tc := range []struct {
		name, accept, contentType, body string
		method                          string
		chunks                          []int // the sizes the handler writes in, in turn; the rest at once
		wantGzip                        bool
	}{
		{"large JSON, gzip accepted", "gzip, deflate", "application/json", big, http.MethodPost, nil, true},
		{"large JSON, gzip not accepted", "", "application/json", big, http.MethodPost, nil, false},
		{"large JSON, gzip refused", "gzip;q=0, identity", "application/json", big, http.MethodPost, nil, false},
		{"small JSON", "gzip", "application/json", small, http.MethodPost, nil, false},
		{"event stream", "gzip", "text/event-stream", big, http.MethodPost, nil, false},
		{"GET", "gzip", "application/json", big, http.MethodGet, nil, false},
		// Written in pieces of 40 bytes, each of which a stateless writer
		// would make larger: held, they compress as the whole page does.
		{"a page in small writes", "gzip", "application/json", page.String(), http.MethodPost, []int{40}, true},
		{"a small write, then the rest at once", "gzip", "application/json", page.String(), http.MethodPost, []int{2 * MinBytes}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(tc.method, "/mcp", nil)
			if tc.accept != "" {
				req.Header.Set("Accept-Encoding", tc.accept)
			}
			Compress(serve(tc.contentType, tc.body, tc.chunks)).ServeHTTP(rec, req)
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
				if rec.Body.Len() >= len(tc.body)/4 {
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

// BenchmarkCompress sends a 100-tool page of a list (about 30 KB of JSON)
// through Compress, against compress/gzip at BestSpeed streaming the same
// page into a recorder from a pool (the baseline, in the same run: what
// Compress did before, less its handler). "retained-B" is what one
// response leaves held once it is sent, in the writers' pool and the
// compressor's own pools, after a collection (sync.Pool keeps its items
// through one): per P, as each P's pool keeps one of each.
func BenchmarkCompress(b *testing.B) {
	var page strings.Builder
	page.WriteString(`{"jsonrpc":"2.0","id":1,"result":{"tools":[`)
	for i := range 100 {
		fmt.Fprintf(&page, `{"name":"tool_%04d","description":"Does thing number %d with the given inputs and returns a structured result describing what happened.","inputSchema":{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}},"required":["a"]}},`, i, i)
	}
	page.WriteString(`{}]}}`)
	body := []byte(page.String())
	retained := func(respond func()) float64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.GC() // every sync.Pool is empty after two
		runtime.ReadMemStats(&before)
		respond()
		runtime.GC()
		runtime.ReadMemStats(&after)
		return float64(after.HeapAlloc) - float64(before.HeapAlloc)
	}
	b.Run("baseline=compress-gzip", func(b *testing.B) {
		pool := sync.Pool{New: func() any {
			w, _ := gzip.NewWriterLevel(io.Discard, gzip.BestSpeed)
			return w
		}}
		respond := func() {
			gz := pool.Get().(*gzip.Writer)
			gz.Reset(httptest.NewRecorder())
			_, _ = gz.Write(body)
			_ = gz.Close()
			pool.Put(gz)
		}
		b.ReportAllocs()
		for b.Loop() {
			respond()
		}
		b.ReportMetric(retained(respond), "retained-B")
	})
	b.Run("Compress", func(b *testing.B) {
		req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		req.Header.Set("Accept-Encoding", "gzip")
		h := Compress(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(body)
		}))
		respond := func() { h.ServeHTTP(httptest.NewRecorder(), req) }
		b.ReportAllocs()
		for b.Loop() {
			respond()
		}
		b.ReportMetric(retained(respond), "retained-B")
	})
}
