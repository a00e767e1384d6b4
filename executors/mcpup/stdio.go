package mcpup

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// stdioTransport is mcp-go's client transport over a stdio upstream's
// pipes, in place of mcp-go's own (transport.NewIO), which is on every
// proxied call's path (issue 16):
//
//   - Each message is decoded once (decodeMessage: a result of
//     toolgate's own request, the message on every call's path, is
//     scanned, not decoded). mcp-go's reader copies each line twice more
//     and decodes a response twice (its shape, then the response).
//   - Writes are batched under load: a message sent while another is being
//     written joins a buffer that one flusher goroutine writes when that
//     write returns, so concurrent calls share write system calls (and the
//     upstream's reads) instead of queueing on a lock for one each. A call
//     that finds the pipe idle writes its message itself: no hand-off on
//     the path of a lone call.
//
// It reads through the lineGuard, which keeps its rules for garbage and
// oversized lines. The upstream's requests (sampling, elicitation, roots)
// go to the handler, each in a goroutine, as mcp-go's transport does.
type stdioTransport struct {
	lines *lineGuard
	out   io.WriteCloser // the upstream's stdin

	mu      sync.Mutex
	pending map[string]chan *transport.JSONRPCResponse // by request ID
	fences  map[string]func(pos uint64)                // by request ID: fence's pings (guarded by mu)

	nread uint64 // messages read so far; the read goroutine's only

	wmu     sync.Mutex
	wdone   *sync.Cond // on wmu: signalled when writing ends
	writing bool       // a write is in progress; others queue in wbuf
	closed  bool       // Close was called: nothing more is written
	wbuf    []byte     // messages waiting for the flusher
	spare   []byte     // the flusher's other buffer

	hmu       sync.RWMutex
	ctx       context.Context // Start's: the upstream's requests run under it
	onNotify  func(mcp.JSONRPCNotification)
	onRequest transport.RequestHandler

	done      chan struct{} // closed when the stream has ended or Close was called
	closeOnce sync.Once
	startOnce sync.Once
}

// maxQueuedWrites bounds what waits for the flusher: a call whose message
// would pass it while the upstream is not reading its stdin fails rather
// than growing the buffer without bound. A message alone is never refused.
const maxQueuedWrites = 8 << 20

// maxKeptBuffer is the largest write buffer kept for the next burst; a
// larger one (a burst of big messages) is left to the collector.
const maxKeptBuffer = 64 << 10

// errStdinBacklog fails a call whose message found maxQueuedWrites
// waiting; the connection stays up (classifyTransport).
var errStdinBacklog = fmt.Errorf("the upstream is not reading its stdin: over %d MiB of messages wait to be written", maxQueuedWrites>>20)

func newStdioTransport(lines *lineGuard, out io.WriteCloser) *stdioTransport {
	t := &stdioTransport{lines: lines, out: out, pending: make(map[string]chan *transport.JSONRPCResponse), fences: make(map[string]func(uint64)), done: make(chan struct{})}
	t.wdone = sync.NewCond(&t.wmu)
	return t
}

var _ transport.BidirectionalInterface = (*stdioTransport)(nil)

// Start starts reading the upstream's messages; calling it again does
// nothing.
func (t *stdioTransport) Start(ctx context.Context) error {
	t.startOnce.Do(func() {
		t.hmu.Lock()
		t.ctx = ctx
		t.hmu.Unlock()
		go t.read()
	})
	return nil
}

// read dispatches the upstream's messages until its stdout ends (or
// carries garbage: the lineGuard reports that as the end).
func (t *stdioTransport) read() {
	defer t.end()
	for {
		line, err := t.lines.next()
		if err != nil {
			return
		}
		// A line the end of the stream cut short is dropped, as a line
		// reader drops it.
		if n := len(line); n > 0 && line[n-1] == '\n' {
			t.dispatch(bytes.TrimSpace(line))
		}
	}
}

// dispatch hands one message to whoever waits for it. What is not a
// JSON-RPC object is skipped, as mcp-go's transport skips it.
func (t *stdioTransport) dispatch(line []byte) {
	m, ok := decodeMessage(line)
	t.nread++
	switch {
	case !ok:
	case m.resp != nil:
		t.deliver(m.resp, t.nread)
	case m.note != nil:
		t.hmu.RLock()
		h := t.onNotify
		t.hmu.RUnlock()
		if h != nil {
			h(*m.note)
		}
	case m.req != nil:
		t.handle(*m.req, t.nread)
	}
}

// deliver hands resp, read at position pos, to the call waiting for it,
// if any, after telling the fence waiting for it (see fence).
func (t *stdioTransport) deliver(resp *transport.JSONRPCResponse, pos uint64) {
	key := resp.ID.String()
	t.mu.Lock()
	ch, ok := t.pending[key]
	delete(t.pending, key)
	passed := t.fences[key]
	t.mu.Unlock()
	if passed != nil {
		passed(pos)
	}
	if ok {
		ch <- resp
	}
}

// readPosKey carries, in the context an upstream's request is handled
// with, its position on the upstream's stdout: the number of messages
// read up to it, itself included (fence).
type readPosKey struct{}

// readPosOf returns the position of the request ctx is the handler's
// context of, and whether it has one (it came over stdio).
func readPosOf(ctx context.Context) (uint64, bool) {
	pos, ok := ctx.Value(readPosKey{}).(uint64)
	return pos, ok
}

// fence sends the upstream a ping with ID id and returns once its answer
// has been read, or with ctx's error, or when the stream ends. Reading the
// answer, the read goroutine calls passed with the answer's position
// before it dispatches anything after it. The upstream reads its stdin and
// writes its stdout in order, so every message it wrote before it read
// the ping is read before the answer, at a lower position. passed must
// not block.
func (t *stdioTransport) fence(ctx context.Context, id string, passed func(pos uint64)) error {
	rid := mcp.NewRequestId(id)
	key := rid.String()
	t.mu.Lock()
	t.fences[key] = passed
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		delete(t.fences, key)
		t.mu.Unlock()
	}()
	_, err := t.SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: rid, Method: string(mcp.MethodPing)})
	return err
}

// handle runs the handler of the upstream's request, read at position
// pos, in a goroutine and sends its answer.
func (t *stdioTransport) handle(req transport.JSONRPCRequest, pos uint64) {
	t.hmu.RLock()
	h, ctx := t.onRequest, t.ctx
	t.hmu.RUnlock()
	ctx = context.WithValue(ctx, readPosKey{}, pos)
	if h == nil {
		t.answer(transport.NewJSONRPCErrorResponse(req.ID, mcp.METHOD_NOT_FOUND, "No request handler configured", nil))
		return
	}
	go func() {
		if err := ctx.Err(); err != nil { // the connection is closing
			t.answer(transport.NewJSONRPCErrorResponse(req.ID, mcp.INTERNAL_ERROR, err.Error(), nil))
			return
		}
		resp, err := h(ctx, req)
		if err != nil {
			resp = transport.NewJSONRPCErrorResponse(req.ID, mcp.INTERNAL_ERROR, err.Error(), nil)
		}
		if resp != nil {
			t.answer(resp)
		}
	}()
}

// answer sends resp to the upstream ([encodeAnswer]). A write that fails
// breaks the pipe, which ends the stream.
func (t *stdioTransport) answer(resp *transport.JSONRPCResponse) {
	b := encodeAnswer(resp)
	// Past the calls' backlog bound too: the upstream waits for it, and it
	// is sent once. Only an upstream that keeps asking while reading none
	// of it meets the answers' own bound, twice the calls'.
	_ = t.write(append(b, '\n'), 2*maxQueuedWrites)
}

// SendRequest sends request and waits for its response, the end of the
// stream (ErrTransportClosed) or ctx.
func (t *stdioTransport) SendRequest(ctx context.Context, request transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	select {
	case <-t.done:
		return nil, transport.ErrTransportClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	default:
	}
	b, err := json.Marshal(request)
	if err != nil {
		return nil, fmt.Errorf("encoding the request: %w", err)
	}
	key := request.ID.String()
	ch := make(chan *transport.JSONRPCResponse, 1)
	t.mu.Lock()
	t.pending[key] = ch
	t.mu.Unlock()
	forget := func() {
		t.mu.Lock()
		if t.pending[key] == ch {
			delete(t.pending, key)
		}
		t.mu.Unlock()
	}
	if err := t.write(append(b, '\n'), maxQueuedWrites); err != nil {
		forget()
		return nil, fmt.Errorf("writing to the upstream's stdin: %w", err)
	}
	select {
	case resp := <-ch:
		return resp, nil
	case <-ctx.Done():
		forget()
		return nil, ctx.Err()
	case <-t.done:
		select {
		case resp := <-ch: // answered just before the end
			return resp, nil
		default:
		}
		forget()
		return nil, transport.ErrTransportClosed
	}
}

// SendNotification sends a notification.
func (t *stdioTransport) SendNotification(ctx context.Context, n mcp.JSONRPCNotification) error {
	select {
	case <-t.done:
		return transport.ErrTransportClosed
	case <-ctx.Done():
		return ctx.Err()
	default:
	}
	b, err := json.Marshal(n)
	if err != nil {
		return fmt.Errorf("encoding the notification: %w", err)
	}
	if err := t.write(append(b, '\n'), maxQueuedWrites); err != nil {
		return fmt.Errorf("writing to the upstream's stdin: %w", err)
	}
	return nil
}

// write writes msg, one or more whole lines, to the upstream's stdin: at
// once when no write is in progress, else by the flusher. A queued message
// that fails to go out is not reported to its sender: the pipe is broken,
// so the stream ends and its call with it. A write the upstream does not
// read blocks its caller, whatever the call's context, until the upstream
// reads or Close closes the pipe (as mcp-go's transport does); calls
// queued behind it wait with their contexts. A message that would take
// the bytes waiting past limit is refused (errStdinBacklog); the first one
// waiting is always taken.
func (t *stdioTransport) write(msg []byte, limit int) error {
	t.wmu.Lock()
	switch {
	case t.closed:
		t.wmu.Unlock()
		return transport.ErrTransportClosed
	case t.writing:
		if len(t.wbuf) > 0 && len(t.wbuf)+len(msg) > limit {
			t.wmu.Unlock()
			return errStdinBacklog
		}
		t.wbuf = append(t.wbuf, msg...)
		t.wmu.Unlock()
		return nil
	}
	t.writing = true
	t.wmu.Unlock()
	_, err := t.out.Write(msg)
	t.wmu.Lock()
	if len(t.wbuf) > 0 {
		go t.flush() // writing stays true
	} else {
		t.writing = false
		t.wdone.Broadcast()
	}
	t.wmu.Unlock()
	return err
}

// flush writes what was queued while a write was in progress, until
// nothing is left.
func (t *stdioTransport) flush() {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	for len(t.wbuf) > 0 {
		buf := t.wbuf
		t.wbuf, t.spare = t.spare[:0], nil
		t.wmu.Unlock()
		_, err := t.out.Write(buf)
		t.wmu.Lock()
		if cap(buf) <= maxKeptBuffer {
			t.spare = buf[:0]
		}
		if err != nil {
			t.wbuf = t.wbuf[:0] // the pipe is broken: the stream ends
		}
	}
	t.writing = false
	t.wdone.Broadcast()
}

// end unblocks the calls waiting for a response.
func (t *stdioTransport) end() {
	t.closeOnce.Do(func() { close(t.done) })
}

// Close ends the transport: waiting calls get ErrTransportClosed, and
// the upstream's stdin is closed, which asks it to exit (a write blocked
// on a full pipe returns). The process is the connection's to end.
func (t *stdioTransport) Close() error {
	t.end()
	t.wmu.Lock()
	t.closed = true
	t.wmu.Unlock()
	err := t.out.Close()
	t.wmu.Lock()
	for t.writing {
		t.wdone.Wait()
	}
	t.wmu.Unlock()
	return err
}

func (t *stdioTransport) SetNotificationHandler(h func(mcp.JSONRPCNotification)) {
	t.hmu.Lock()
	t.onNotify = h
	t.hmu.Unlock()
}

func (t *stdioTransport) SetRequestHandler(h transport.RequestHandler) {
	t.hmu.Lock()
	t.onRequest = h
	t.hmu.Unlock()
}

func (t *stdioTransport) GetSessionId() string { return "" }
