package mcpfront

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/internal/principal"
)

// stdioWorkers is how many tool calls run at once over stdio; mcp-go's
// default of 5 would serialise a client's parallel calls.
const stdioWorkers = 64

// ServeStdio serves MCP over newline-delimited JSON-RPC on in and out, as
// Claude Desktop expects when it launches `toolgate stdio`. Nothing but
// protocol messages is written to out. The whole process is one session and
// one thread. ServeStdio returns when in reaches EOF (calls in flight are
// then cancelled, as the client has gone) or, after a graceful drain of up
// to server.shutdown_grace, when ctx is done, whether or not in is still
// open. Only one ServeStdio may run per process (an mcp-go limit). The
// caller still calls Close.
//
// A Read on in cannot be interrupted (a goroutine blocked reading os.Stdin
// stays blocked until the client writes or closes it), so when ServeStdio
// returns before in reaches EOF, the goroutine reading in is left behind
// until its Read returns; it then ends without handing on what it read.
// A process exits anyway; a caller that must not leave it behind closes in.
func (f *Front) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	lw := &lockedWriter{w: out}
	pr, pw := io.Pipe()
	stdio := server.NewStdioServer(f.mcp)
	server.WithWorkerPoolSize(stdioWorkers)(stdio)
	server.WithErrorLogger(slog.NewLogLogger(f.logger.Handler(), slog.LevelWarn))(stdio)

	// The launching process is the one principal, with every tool (of the
	// virtual server, with Options.Scope).
	id := &principal.Identity{Name: principal.Stdio}
	if f.o.Scope != nil {
		id = f.o.Scope(id)
	}
	listenCtx, stopListen := context.WithCancel(principal.With(context.WithoutCancel(ctx), id))
	defer stopListen()
	calls := f.newStdioCalls(listenCtx, lw, pw)
	server.WithStdioContextFunc(calls.learn)(stdio)
	stop := make(chan struct{})
	lines := readLines(in, int(f.o.MaxBodyBytes), stop)
	var wg sync.WaitGroup
	wg.Go(func() {
		err := f.pumpStdio(lines, stop, pw, lw, calls)
		pw.CloseWithError(err)
	})
	watchDone := make(chan struct{})
	wg.Go(func() {
		select {
		case <-ctx.Done():
			_ = f.b.Drain(context.WithoutCancel(ctx))
			stopListen()
		case <-watchDone:
		}
	})
	err := stdio.Listen(listenCtx, pr, lw)
	close(stop) // the pump takes no more lines; the reader may stay in a Read
	calls.close()
	close(watchDone)
	// Unblock the pump if it is waiting to hand a line to Listen.
	pr.CloseWithError(io.ErrClosedPipe)
	wg.Wait()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// stdinLine is one line read from the client, as readLine returns it.
type stdinLine struct {
	line    []byte
	tooLong bool
	err     error
}

// readLines reads in line by line on a goroutine of its own and sends each
// line on the channel it returns, the last one with a non-nil err. The
// goroutine ends after that line, or once stop is closed and the Read it
// may be blocked in returns: a Read cannot be interrupted.
func readLines(in io.Reader, limit int, stop <-chan struct{}) <-chan stdinLine {
	ch := make(chan stdinLine)
	go func() {
		br := bufio.NewReaderSize(in, 64<<10)
		for {
			line, tooLong, err := readLine(br, limit)
			select {
			case ch <- stdinLine{line, tooLong, err}:
			case <-stop:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return ch
}

// pumpStdio copies messages from lines to mcp-go (w), answering oversized
// lines itself (on out) and handing tools/call and tools/list requests and batches to
// calls. It returns at the last line or once stop is closed.
func (f *Front) pumpStdio(lines <-chan stdinLine, stop <-chan struct{}, w io.Writer, out *lockedWriter, calls *stdioCalls) error {
	limit := int(f.o.MaxBodyBytes)
	for {
		var l stdinLine
		select {
		case l = <-lines:
		case <-stop:
			return nil
		}
		line, err := l.line, l.err
		var werr error
		switch {
		case l.tooLong:
			msg := fmt.Sprintf("message exceeds %d bytes (server.max_body_bytes); send a smaller request or raise the limit", limit)
			_, werr = out.Write(append(jsonRPCError(mcp.INVALID_REQUEST, msg), '\n'))
		case len(line) == 0:
		default:
			var served bool
			if served, werr = calls.serve(line); !served && werr == nil {
				_, werr = w.Write(append(line, '\n'))
			}
		}
		if werr != nil {
			return werr
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// readLine reads one line without its newline. A line longer than limit is
// consumed and reported as tooLong, without keeping more than limit bytes.
func readLine(br *bufio.Reader, limit int) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > limit+1 { // +1: the newline
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if n := len(line); n > 0 && line[n-1] == '\n' {
			line = line[:n-1]
		}
		return line, tooLong, err
	}
}

// lockedWriter serialises whole-message writes to the stdio output: mcp-go
// writes each message in one Write call, and so does preflight.
type lockedWriter struct {
	mu sync.Mutex // guards w
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// stdioCalls serves the tools/calls and batches of one ServeStdio, on
// goroutines of their own: the process is one session, mcp-go's, which
// learn captures when mcp-go starts listening.
type stdioCalls struct {
	f      *Front
	ctx    context.Context // ends when the client has gone; cancelled by close
	cancel context.CancelFunc
	out    *lockedWriter // to the client
	fwd    io.Writer     // to mcp-go's read loop; the pump's goroutine only
	runs   batchRuns
	learnt sync.Once
	ready  chan struct{} // closed by learn, which sets inner
	inner  server.ClientSession
}

func (f *Front) newStdioCalls(ctx context.Context, out *lockedWriter, fwd io.Writer) *stdioCalls {
	ctx, cancel := context.WithCancel(ctx)
	return &stdioCalls{f: f, ctx: ctx, cancel: cancel, out: out, fwd: fwd, ready: make(chan struct{})}
}

// learn is mcp-go's stdio context function.
func (c *stdioCalls) learn(ctx context.Context) context.Context {
	if s := server.ClientSessionFromContext(ctx); s != nil {
		c.learnt.Do(func() {
			c.inner = s
			close(c.ready)
		})
	}
	return ctx
}

// serve serves line when it is the front's to serve — a batch, a
// tools/call or tools/list request — and reports whether it did; a notifications/
// cancelled cancels the front's call it names, and goes to mcp-go too.
// A batch's notifications and client answers go to mcp-go as lines of
// their own, which is what routes answers to the requests waiting for
// them. serve runs on the pump's goroutine; err is a failed write to
// mcp-go.
func (c *stdioCalls) serve(line []byte) (served bool, err error) {
	batch := isBatch(line)
	var m message
	if !batch {
		var reject []byte
		if m, reject = decodeMessage(line); reject != nil ||
			(!frontServes(&m) && !frontChecks(&m) && m.method != string(mcp.MethodNotificationCancelled)) {
			return false, nil // mcp-go answers what it cannot read, and every other method
		}
	}
	select {
	case <-c.ready:
	case <-c.ctx.Done():
		return true, nil
	}
	x := c.exchange()
	switch {
	case m.method == string(mcp.MethodNotificationCancelled):
		x.s.cancelCall(m.params)
		return false, nil
	case !batch && m.id == nil:
		return false, nil
	case !batch:
		m.raw = bytes.Clone(line)
		c.runs.start(func() { c.write(c.f.traced(x, &m).body) })
		return true, nil
	}
	elems, reject := splitBatch(line)
	if reject == nil {
		reject = batchVersionError(x.s.negotiated())
	}
	if reject != nil {
		c.write(reject)
		return true, nil
	}
	var calls []batchElem
	for _, e := range elems {
		if e.reject == nil && (e.m.notification() || e.m.response) {
			if _, err := c.fwd.Write(append(bytes.Clone(e.m.raw), '\n')); err != nil {
				return true, err
			}
			continue
		}
		calls = append(calls, e)
	}
	if len(calls) > 0 {
		c.runs.start(func() { c.write(c.f.serveBatch(*x, calls, func(*message) {})) })
	}
	return true, nil
}

// exchange is the exchange of a message of the stdio session.
func (c *stdioCalls) exchange() *exchange {
	s := c.f.liveClient(c.inner.SessionID())
	if s == nil || s.inner != c.inner {
		s = &session{id: c.inner.SessionID(), inner: c.inner, done: make(chan struct{})}
	}
	ident := principal.From(c.ctx)
	return &exchange{ctx: c.f.mcp.WithContext(c.ctx, c.inner), s: s, ident: ident}
}

// write writes an answer (none: nil) to the client as one line. An error
// means the client has gone; nothing is left to tell.
func (c *stdioCalls) write(msg []byte) {
	if msg != nil {
		_, _ = c.out.Write(append(msg, '\n'))
	}
}

// close cancels the calls in flight and waits for them.
func (c *stdioCalls) close() {
	c.cancel()
	c.runs.wait()
}
