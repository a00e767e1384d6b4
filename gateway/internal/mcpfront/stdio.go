package mcpfront

import (
	"bufio"
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

	// The launching process is the one principal, with every tool.
	listenCtx, stopListen := context.WithCancel(principal.With(context.WithoutCancel(ctx), &principal.Identity{Name: principal.Stdio}))
	defer stopListen()
	batches := f.newStdioBatches(listenCtx, lw, pw)
	server.WithStdioContextFunc(batches.learn)(stdio)
	stop := make(chan struct{})
	lines := readLines(in, int(f.o.MaxBodyBytes), stop)
	var wg sync.WaitGroup
	wg.Go(func() {
		err := f.pumpStdio(lines, stop, pw, lw, batches)
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
	batches.close()
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
// lines and unknown tools itself (on out) and handing batches to batches.
// It returns at the last line or once stop is closed.
func (f *Front) pumpStdio(lines <-chan stdinLine, stop <-chan struct{}, w io.Writer, out *lockedWriter, batches *stdioBatches) error {
	limit := int(f.o.MaxBodyBytes)
	for {
		var l stdinLine
		select {
		case l = <-lines:
		case <-stop:
			return nil
		}
		line, err := l.line, l.err
		if l.tooLong {
			msg := fmt.Sprintf("message exceeds %d bytes (server.max_body_bytes); send a smaller request or raise the limit", limit)
			if _, werr := out.Write(append(jsonRPCError(mcp.INVALID_REQUEST, msg), '\n')); werr != nil {
				return werr
			}
		} else if isBatch(line) {
			if serr := batches.serve(line); serr != nil {
				return serr
			}
		} else if len(line) > 0 {
			reply, fwd := f.preflight(line, nil) // stdio may call every tool
			var werr error
			if reply != nil {
				_, werr = out.Write(append(reply, '\n'))
			} else {
				_, werr = w.Write(append(fwd, '\n'))
			}
			if werr != nil {
				return werr
			}
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
