// Package reqbody reads the request bodies of the MCP endpoints: whole,
// under a size cap (server.max_body_bytes) and a read deadline
// (server.read_timeout), into reused buffers. A body that announces a
// large Content-Length and then stalls holds little memory and no
// goroutine past the deadline.
package reqbody

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// chunk bounds what Read reserves before bytes arrive: a body announcing
// a large Content-Length and then stalling holds at most this much, and
// the buffer grows only as the body is read.
const chunk = 32 << 10

// maxPooled is the largest buffer kept for reuse.
const maxPooled = 64 << 10

// Reader reads request bodies. The zero value has no cap: set Limit.
type Reader struct {
	Limit   int64         // the largest body read, in bytes
	Timeout time.Duration // the time a body may take to arrive; 0 for none
	pool    sync.Pool     // *Body
}

// Body is one request body, read whole. It is also an io.ReadCloser over
// what Replay gave it, to hand the request on to another handler.
type Body struct {
	buf bytes.Buffer
	rd  bytes.Reader
}

// Bytes returns the body; valid until the Body is released.
func (b *Body) Bytes() []byte { return b.buf.Bytes() }

func (b *Body) Read(p []byte) (int, error) { return b.rd.Read(p) }
func (b *Body) Close() error               { return nil }

// Replay makes r's body read msg, through b, so that another handler can
// read a request whose body was read already.
func (b *Body) Replay(r *http.Request, msg []byte) {
	b.rd.Reset(msg)
	r.Body = b
	r.ContentLength = int64(len(msg))
}

// Error is a body that could not be read: the HTTP status to answer and
// a message saying why and what to do.
type Error struct {
	Status int
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

// Read reads r's body. The caller releases the Body with Release, after
// a failure too. On a timeout it has set Connection: close on w: the
// connection is mid-body and cannot carry another request.
//
// The read deadline is set on the connection for this body only: it is
// cleared once the body is read (as net/http's HTTP/1 server also does when
// it starts watching the connection), so that an answer streamed afterwards
// (an SSE response to a POST) is not cut; GET streams read no body and
// never get one. After a failure it stays, so that net/http's draining of
// the rest of the body cannot wait on a stalled client either.
func (rd *Reader) Read(w http.ResponseWriter, r *http.Request) (*Body, *Error) {
	b, ok := rd.pool.Get().(*Body)
	if !ok {
		b = &Body{}
	}
	var rc *http.ResponseController
	if rd.Timeout > 0 {
		rc = http.NewResponseController(w)
		// ErrNotSupported leaves the body without a deadline; the
		// connection's own timeouts still apply.
		if rc.SetReadDeadline(time.Now().Add(rd.Timeout)) != nil {
			rc = nil
		}
	}
	var err error
	if r.ContentLength > rd.Limit {
		err = &http.MaxBytesError{Limit: rd.Limit}
	} else {
		// Reserve what the body announces only up to chunk: the
		// announcement costs the client nothing.
		b.buf.Grow(int(min(max(r.ContentLength, 0), chunk)))
		_, err = b.buf.ReadFrom(http.MaxBytesReader(w, r.Body, rd.Limit))
	}
	if err == nil {
		if rc != nil {
			_ = rc.SetReadDeadline(time.Time{})
		}
		return b, nil
	}
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return b, &Error{http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes (server.max_body_bytes); send a smaller request or raise the limit", rd.Limit)}
	}
	if isTimeout(err) {
		w.Header().Set("Connection", "close")
		return b, &Error{http.StatusRequestTimeout, fmt.Sprintf("request body not received within %s (server.read_timeout); send the whole body at once or raise the limit", rd.Timeout)}
	}
	return b, &Error{http.StatusBadRequest, "reading the request body failed"}
}

// Release gives b back for reuse; b is not used after.
func (rd *Reader) Release(b *Body) {
	if b.buf.Cap() > maxPooled {
		return
	}
	b.buf.Reset()
	b.rd.Reset(nil)
	rd.pool.Put(b)
}

// isTimeout reports whether err is a read deadline passing.
func isTimeout(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	ne, ok := errors.AsType[net.Error](err)
	return ok && ne.Timeout()
}
