// Package gzipjson compresses an HTTP handler's JSON responses for a
// client that accepts gzip, once they reach [MinBytes] (a whole tools/list
// of a large catalog, say); event streams, small answers and anything
// flushed before the decision are sent as they are. The gateway mounts
// the MCP front's endpoints through [Mux].
package gzipjson

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"
)

// MinBytes is the smallest JSON response compressed: below it gzip's
// header and the CPU cost more than the bytes saved.
const MinBytes = 1024

// gzipWriters reuses gzip writers. They compress statelessly: each Write
// is compressed on its own, with no match tables kept between writes, so
// what a response leaves held is klauspost's token buffer, about 280 KB
// per P, where a compress/gzip writer keeps 1.2 MB at any level; and a
// page is compressed in two thirds of the time (BenchmarkCompress). For
// the output to be as small as a streaming compressor's, the writer gets
// a response in pieces of at least blockBytes (or whole, if smaller): see
// [gzipResponse.compressed].
var gzipWriters = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(io.Discard, gzip.StatelessCompression) // a valid level: no error
	return w
}}

// blockBytes is the least a stateless writer is given at once, but for a
// response's last piece: smaller pieces compress worse, and pieces of a
// few dozen bytes grow.
const blockBytes = 64 << 10

// Mounter is what [Mux] mounts handlers on: an http.ServeMux, a chi router.
type Mounter interface {
	Handle(pattern string, h http.Handler)
}

// Mux returns mux with each handler mounted on it through [Compress]: the
// handler's JSON responses of at least MinBytes are gzip-compressed for a
// client that accepts gzip.
func Mux(mux Mounter) Mounter { return compressed{mux} }

type compressed struct{ mux Mounter }

func (c compressed) Handle(pattern string, h http.Handler) { c.mux.Handle(pattern, Compress(h)) }

// Compress compresses h's JSON responses to POST requests, of at least
// MinBytes, for clients that accept gzip.
func Compress(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !acceptsGzip(r.Header.Get("Accept-Encoding")) {
			h.ServeHTTP(w, r)
			return
		}
		gw := &gzipResponse{ResponseWriter: w, code: http.StatusOK}
		defer gw.finish()
		h.ServeHTTP(gw, r)
	})
}

// acceptsGzip reports whether an Accept-Encoding value accepts gzip (and
// does not refuse it with q=0).
func acceptsGzip(v string) bool {
	for part := range strings.SplitSeq(v, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(name), "gzip") {
			q := strings.ReplaceAll(params, " ", "")
			return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
		}
	}
	return false
}

// gzipResponse holds back a JSON response until it is known to reach
// MinBytes (compressed) or to end short of it (sent as it is). Any
// other response, and one flushed before the decision (a stream), passes
// through.
type gzipResponse struct {
	http.ResponseWriter
	code    int
	held    bool // the header is held back while the decision is open
	decided bool
	buf     bytes.Buffer // the body while undecided
	gz      *gzip.Writer // set when compressing
}

func (g *gzipResponse) WriteHeader(code int) {
	if g.decided || g.held {
		if !g.held {
			g.ResponseWriter.WriteHeader(code)
		}
		return
	}
	g.code = code
	hdr := g.Header()
	if code == http.StatusOK && strings.HasPrefix(hdr.Get("Content-Type"), "application/json") && hdr.Get("Content-Encoding") == "" {
		g.held = true
		return
	}
	g.decided = true
	g.ResponseWriter.WriteHeader(code)
}

func (g *gzipResponse) Write(p []byte) (int, error) {
	if !g.decided && !g.held {
		g.WriteHeader(http.StatusOK)
	}
	switch {
	case g.gz != nil:
		return g.compressed(p)
	case g.decided:
		return g.ResponseWriter.Write(p)
	}
	g.buf.Write(p)
	if g.buf.Len() >= MinBytes {
		g.compress()
	}
	return len(p), nil
}

// compress starts the compressed response: its header goes out, and what
// is held waits in buf for the gzip writer ([gzipResponse.compressed]).
func (g *gzipResponse) compress() {
	g.decided, g.held = true, false
	hdr := g.Header()
	hdr.Set("Content-Encoding", "gzip")
	hdr.Add("Vary", "Accept-Encoding")
	hdr.Del("Content-Length")
	g.ResponseWriter.WriteHeader(g.code)
	g.gz = gzipWriters.Get().(*gzip.Writer)
	g.gz.Reset(g.ResponseWriter)
}

// compressed takes p for the gzip writer: it is held with what is held
// already while they are less than blockBytes together; a piece of
// blockBytes or more is written as it comes, after what was held.
func (g *gzipResponse) compressed(p []byte) (int, error) {
	if g.buf.Len()+len(p) < blockBytes {
		g.buf.Write(p)
		return len(p), nil
	}
	if err := g.drain(); err != nil {
		return 0, err
	}
	if len(p) < blockBytes {
		g.buf.Write(p)
		return len(p), nil
	}
	return g.gz.Write(p)
}

// drain gives the gzip writer what is held for it.
func (g *gzipResponse) drain() error {
	if g.buf.Len() == 0 {
		return nil
	}
	_, err := g.gz.Write(g.buf.Bytes())
	g.buf.Reset()
	return err
}

// release sends what is held as it is.
func (g *gzipResponse) release() {
	if g.decided {
		return
	}
	g.decided = true
	if g.held {
		g.held = false
		g.ResponseWriter.WriteHeader(g.code)
	}
	if g.buf.Len() > 0 {
		_, _ = g.ResponseWriter.Write(g.buf.Bytes())
		g.buf.Reset()
	}
}

// Flush sends what is held (uncompressed, if the decision is still open:
// a flushed response is a stream) and flushes.
func (g *gzipResponse) Flush() {
	if g.gz != nil {
		_ = g.drain()
		_ = g.gz.Flush()
	} else {
		g.release()
	}
	if f, ok := g.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the underlying writer.
func (g *gzipResponse) Unwrap() http.ResponseWriter { return g.ResponseWriter }

// finish ends the response once the handler returns.
func (g *gzipResponse) finish() {
	if g.gz != nil {
		_ = g.drain()
		_ = g.gz.Close()
		g.gz.Reset(io.Discard)
		gzipWriters.Put(g.gz)
		g.gz = nil
		return
	}
	g.release()
}
