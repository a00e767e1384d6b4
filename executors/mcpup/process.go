package mcpup

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"
)

const (
	// shutdownGrace is how long shutdown waits after closing stdin, and
	// again after SIGTERM, before escalating.
	shutdownGrace = 2 * time.Second
	// drainGrace is how long shutdown waits, once the process has exited,
	// for its pipes to reach EOF before closing them under their readers
	// (a descendant that left the process group may hold them open).
	drainGrace = 2 * time.Second
	// maxLogLine caps how much of one stderr or garbage line is logged.
	maxLogLine = 4096
)

// inheritedEnv lists the variables of the gateway's environment a stdio
// upstream gets unless [Upstream.InheritEnv] is set: those the official
// MCP SDKs pass on Unix (HOME, LOGNAME, PATH, SHELL, TERM, USER), plus
// LANG and TMPDIR. PATH lets a command like npx find node, HOME holds
// npm's cache; nothing else of the gateway's environment, such as the
// secrets of REST tools or of other upstreams, reaches the process.
var inheritedEnv = []string{"HOME", "LANG", "LOGNAME", "PATH", "SHELL", "TERM", "TMPDIR", "USER"}

// baseEnv is the environment a stdio upstream starts from, before
// [InstanceDirVar] and its own Env: the gateway's whole environment when
// inherit is set, else the variables of inheritedEnv it has. As in the
// official SDKs, a value starting with "()" (an exported shell function)
// is left out.
func baseEnv(inherit bool) []string {
	if inherit {
		return os.Environ()
	}
	env := make([]string, 0, len(inheritedEnv)+1)
	for _, k := range inheritedEnv {
		if v, ok := os.LookupEnv(k); ok && !strings.HasPrefix(v, "()") {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// errGarbage is why a stdio upstream that wrote non-JSON to stdout is dead.
var errGarbage = errors.New("the upstream wrote a line that is not JSON to stdout")

// process is a stdio upstream's child process, owned by one conn. It runs
// in its own process group, so that shutdown reaches whatever it spawned.
// Its pipes are os.Pipe pairs rather than exec's, so that Wait never closes
// stdout under the transport's reader before the last reply is read.
type process struct {
	cmd         *exec.Cmd
	m           *Manager // whose Kill reaches the process until shutdown has killed its group
	dir         string   // the process's own directory, removed by shutdown
	pgid        int
	stdin       *os.File      // our end; closing it asks the upstream to exit
	stdout      *lineGuard    // what the transport reads
	outR        *os.File      // our end of stdout
	errR        *os.File      // our end of stderr
	exited      chan struct{} // closed once Wait has returned
	waitErr     error         // written before exited is closed
	errDone     chan struct{} // closed when stderr has been drained
	closing     chan struct{} // closed when shutdown starts
	watcherDone chan struct{} // closed when the exit watcher has ended
	closeOnce   sync.Once
}

// startProcess starts u's command for conn c: stdin and stdout carry the
// protocol, stderr lines are logged, and the process's exit or a non-JSON
// line on stdout marks c dead.
func startProcess(u *upstream, thread string, c *conn) (*process, error) {
	dir, err := os.MkdirTemp("", "toolgate-"+u.cfg.Name+"-")
	if err != nil {
		return nil, fmt.Errorf("creating the process's directory: %w", err)
	}
	withDir := strings.NewReplacer(InstanceDirRef, dir)
	args := make([]string, len(u.cfg.Args))
	for i, a := range u.cfg.Args {
		args[i] = withDir.Replace(a)
	}
	cmd := exec.Command(u.cfg.Command, args...)
	env := baseEnv(u.cfg.InheritEnv)
	env = append(env, InstanceDirVar+"="+dir)
	for _, k := range slices.Sorted(maps.Keys(u.cfg.Env)) {
		env = append(env, k+"="+withDir.Replace(u.cfg.Env[k]))
	}
	cmd.Env = env
	cmd.Dir = u.cfg.Cwd
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}

	var files []*os.File // every pipe end, closed on failure
	closeAll := func() {
		for _, f := range files {
			_ = f.Close()
		}
		_ = os.RemoveAll(dir)
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	inR, inW, err := pipe()
	if err != nil {
		return nil, fmt.Errorf("creating stdin pipe: %w", err)
	}
	outR, outW, err := pipe()
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("creating stdout pipe: %w", err)
	}
	errR, errW, err := pipe()
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("creating stderr pipe: %w", err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := cmd.Start(); err != nil {
		closeAll()
		return nil, err
	}
	// The child has its own copies of its ends.
	_ = inR.Close()
	_ = outW.Close()
	_ = errW.Close()

	p := &process{
		cmd:         cmd,
		m:           u.m,
		dir:         dir,
		pgid:        cmd.Process.Pid,
		stdin:       inW,
		outR:        outR,
		errR:        errR,
		exited:      make(chan struct{}),
		errDone:     make(chan struct{}),
		closing:     make(chan struct{}),
		watcherDone: make(chan struct{}),
	}
	p.stdout = &lineGuard{
		br:  bufio.NewReaderSize(outR, guardBufferSize),
		max: u.maxMessageBytes,
		onOversize: func(id json.RawMessage, n int64) []byte {
			if id == nil {
				u.m.logger.Warn("upstream sent a notification or request over max_message_bytes; dropped it",
					"upstream", u.cfg.Name, "thread", thread, "bytes", n, "max_message_bytes", u.maxMessageBytes)
				return nil
			}
			u.m.logger.Warn("upstream sent a response over max_message_bytes; its call fails",
				"upstream", u.cfg.Name, "thread", thread, "bytes", n, "max_message_bytes", u.maxMessageBytes)
			return u.tooLargeLine(id, n)
		},
		onGarbage: func(line []byte) {
			u.m.logger.Warn("upstream wrote garbage to stdout; restarting it",
				"upstream", u.cfg.Name, "thread", thread, "line", u.redact(logLine(line)))
			c.markDead(errGarbage)
			p.signal(syscall.SIGKILL)
		},
		// The reader has dispatched every reply the upstream wrote.
		onEnd: func() { c.markDead(errors.New("the upstream closed its stdout")) },
		done:  make(chan struct{}),
	}
	u.m.addProcess(p)
	go func() {
		defer close(p.watcherDone)
		p.waitErr = cmd.Wait()
		close(p.exited)
		// Let the reader take the replies still in the pipe (a server may
		// answer and exit at once) before the connection counts as dead.
		t := time.NewTimer(drainGrace)
		defer t.Stop()
		select {
		case <-p.stdout.done:
		case <-p.closing:
		case <-t.C:
		}
		c.markDead(errors.New(p.exitReason()))
	}()
	go func() {
		defer close(p.errDone)
		u.logStderr(errR, thread)
	}()
	return p, nil
}

// exitReason describes the process's exit, or "" while it runs.
func (p *process) exitReason() string {
	select {
	case <-p.exited:
	default:
		return ""
	}
	if p.waitErr == nil {
		return "the process exited with status 0"
	}
	return "the process exited: " + p.waitErr.Error()
}

// signal sends sig to the process's group (ESRCH, nobody left, is fine).
func (p *process) signal(sig syscall.Signal) {
	_ = syscall.Kill(-p.pgid, sig)
}

// shutdown ends the process and reaps it: stdin is closed, then after
// shutdownGrace the group gets SIGTERM, then after shutdownGrace more
// SIGKILL; once the leader has exited, whatever is left of the group is
// killed. It returns when the process has been waited for and its stderr
// drained. The goroutines startProcess started have ended by then; the
// transport's reader ends when it next reads, since stdout is closed here.
func (p *process) shutdown() {
	p.closeOnce.Do(func() {
		close(p.closing)
		_ = p.stdin.Close()
		if !waitFor(p.exited, shutdownGrace) {
			p.signal(syscall.SIGTERM)
			if !waitFor(p.exited, shutdownGrace) {
				p.signal(syscall.SIGKILL)
				<-p.exited
			}
		}
		p.signal(syscall.SIGKILL) // descendants still in the group
		// Nothing of the group is left to Kill: once it is empty, its
		// number may be reused.
		p.m.removeProcess(p)
		// The connection is closing: replies still unread are of no use.
		// Closing our end unblocks the transport's reader, if it still reads.
		_ = p.outR.Close()
		if !waitFor(p.errDone, drainGrace) {
			_ = p.errR.Close()
			<-p.errDone
		}
		_ = p.errR.Close()
		<-p.watcherDone
		// Descendants that left the group may still write here; what
		// they leave behind is theirs, and RemoveAll's error is ignored.
		_ = os.RemoveAll(p.dir)
	})
}

// waitFor reports whether ch was closed within d.
func waitFor(ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// lineGuard passes a stdio upstream's stdout to the transport (next) line
// by line, and stops at the first line that is not JSON: mcp-go skips such
// lines silently, but an upstream that writes them has stdout shared with
// something else and cannot be trusted to stay in sync. Any end of the
// stream is reported to the transport as io.EOF.
//
// A line over max bytes is never kept whole: it is read in chunks, and
// only an idScanner sees them. In its place the transport gets, for a
// response, the error response onOversize makes up (so that the pending
// request fails and the upstream keeps running); for a notification or
// a request of the upstream's, nothing. An oversized line that is no JSON
// object with a usable id or a method counts as garbage.
type lineGuard struct {
	br          *bufio.Reader
	max         int64 // the cap on a line's length, its newline left out; 0 means DefaultMaxMessageBytes
	onGarbage   func(line []byte)
	onOversize  func(id json.RawMessage, n int64) []byte // id nil: a notification or request, dropped
	onEnd       func()                                   // called when the stream has ended (not for garbage)
	done        chan struct{}                            // closed when the stream has ended for the reader
	ended       bool                                     // no more data will be read
	endReported bool                                     // onEnd has been called (or garbage reported)
}

// guardBufferSize is the size of the chunks a lineGuard reads.
const guardBufferSize = 64 << 10

// next returns the next line, its newline kept (none on a last line the
// end of the stream cut short; an oversized line's stand-in may be
// empty), or io.EOF once the stream has ended (onEnd is called then) or a
// line of garbage came (onGarbage is). Each line is a slice of its own,
// the caller's to keep. It is called by the transport's read goroutine
// only.
func (g *lineGuard) next() ([]byte, error) {
	if g.ended {
		if !g.endReported {
			g.endReported = true
			g.onEnd()
		}
		return nil, io.EOF
	}
	line, garbage, err := g.readLine()
	if err == nil {
		if t := bytes.TrimSpace(line); garbage || len(t) > 0 && !json.Valid(t) {
			g.onGarbage(t)
			g.end()
			g.endReported = true
			return nil, io.EOF
		}
	}
	if err != nil {
		g.end() // deliver what came before the end, then EOF
	}
	return line, nil
}

// readLine returns the next line, or what stands in for it when it is
// over the cap: a made-up response, nil (dropped), or with garbage set
// its beginning.
func (g *lineGuard) readLine() (line []byte, garbage bool, err error) {
	if g.max <= 0 {
		g.max = DefaultMaxMessageBytes
	}
	for {
		chunk, err := g.br.ReadSlice('\n')
		size := int64(len(line) + len(chunk))
		if err == nil {
			size-- // the newline
		}
		if size > g.max {
			return g.oversized(line, chunk, err)
		}
		line = append(line, chunk...)
		if err != bufio.ErrBufferFull {
			return line, false, err
		}
	}
}

// oversized reads the rest of a line over the cap, of which head and chunk
// have been read, and returns what stands in for it (see readLine).
func (g *lineGuard) oversized(head, chunk []byte, err error) ([]byte, bool, error) {
	var s idScanner
	var n int64
	start := make([]byte, 0, maxLogLine) // for the log, if it is garbage
	feed := func(b []byte) {
		if len(start) < maxLogLine {
			start = append(start, b[:min(len(b), maxLogLine-len(start))]...)
		}
		n += int64(len(b))
		s.write(b)
	}
	feed(head)
	feed(chunk)
	for err == bufio.ErrBufferFull {
		chunk, err = g.br.ReadSlice('\n')
		feed(chunk)
	}
	if err != nil {
		return nil, false, err // the stream ended within the line
	}
	n-- // the newline
	id, ok := s.result()
	switch {
	case s.hasMethod:
		return g.onOversize(nil, n), false, nil
	case ok:
		return g.onOversize(id, n), false, nil
	}
	return start, true, nil
}

func (g *lineGuard) end() {
	if !g.ended {
		g.ended = true
		close(g.done)
	}
}

// logLine makes an upstream's output line fit for a log record: at most
// maxLogLine bytes of valid UTF-8.
func logLine(b []byte) string {
	b = bytes.TrimRight(b, "\r\n")
	if len(b) > maxLogLine {
		b = b[:maxLogLine]
		for len(b) > 0 && !utf8.Valid(b) {
			b = b[:len(b)-1]
		}
	}
	return string(bytes.ToValidUTF8(b, []byte("\uFFFD")))
}
