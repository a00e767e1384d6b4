package mcpup

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/internal/telemetry"
)

// A tools/call to a streamable HTTP upstream goes out through mcpup's own
// POST, not mcp-go's transport (issue 25): one encoding, one POST on the
// upstream's own http.Transport, one decoding of the answer, whether the
// upstream answers application/json or text/event-stream. mcp-go's
// transport spends, per request, a goroutine that watches for its own
// Close and, for an event stream, one that reads it and one that closes
// it, and decodes each message two or three times. On an event stream,
// what comes before the response goes where mcp-go's transport would hand
// it: notifications to [conn.onNotification], the upstream's requests to
// [conn.onRequest] with the call's context, and their answers back in a
// POST of mcpup's own ([conn.answer]). The session is the one mcp-go's
// client negotiated, read through its API (GetSessionId, ProtocolVersion);
// mcp-go keeps initialize, the GET stream, every other request and the
// session's DELETE.

// Resuming an event stream the upstream ended before the response
// (SEP-1699), as mcp-go's transport does: after the wait the upstream
// asked for with its retry field, at least minResumeDelay, or after
// defaultResumeDelay when it asked none.
const (
	defaultResumeDelay = time.Second
	minResumeDelay     = 10 * time.Millisecond
)

// eventBufferSize is the read buffer of an event stream: events larger
// than it are gathered line by line.
const eventBufferSize = 16 << 10

// httpSession is what mcpup's own messages to a streamable HTTP upstream
// carry: its endpoint, and the headers of the session mcp-go's client
// negotiated. It is built once the connection is initialized and never
// modified.
type httpSession struct {
	client *http.Client // on the upstream's http.Transport; bodies are capped where they are read
	url    string
	header http.Header // shared by every request: net/http only reads it
}

// newHTTPSession returns the session of a streamable HTTP connection
// that mcp-go's client initialized with ID sessionID (none when empty)
// and protocol version. The headers are those mcp-go's transport sends,
// in its order: the upstream's own headers win.
func (u *upstream) newHTTPSession(sessionID, version string) *httpSession {
	h := make(http.Header, len(u.cfg.Headers)+4)
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	if sessionID != "" {
		h.Set(transport.HeaderKeySessionID, sessionID)
	}
	if version != "" {
		h.Set(transport.HeaderKeyProtocolVersion, version)
	}
	for k, v := range u.cfg.Headers {
		h.Set(k, v)
	}
	return &httpSession{client: u.via.call, url: u.cfg.URL, header: h}
}

// post POSTs msg, one JSON-RPC message, to the upstream. The caller
// closes the response's body.
func (s *httpSession) post(ctx context.Context, msg []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(msg))
	if err != nil {
		return nil, err
	}
	req.Header = s.header
	if telemetry.Traced(ctx) {
		req.Header = s.header.Clone() // shared by every request
		telemetry.Inject(ctx, req.Header)
	}
	return s.client.Do(req)
}

// outRequest is a request toolgate sends an upstream.
type outRequest struct {
	JSONRPC string `json:"jsonrpc"`
	ID      string `json:"id"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

// callHTTP sends the tools/call with ID sid and params to the upstream and
// returns its response: a JSON body, or the response event of an event
// stream, what came before it handed on. An answer over the upstream's
// message cap is a *tooLargeError; a 404 (the upstream has forgotten the
// session) is transport.ErrSessionTerminated and a 401 an
// *transport.AuthorizationRequiredError, as from mcp-go's transport, for
// classifyTransport. The request ends with ctx or when the connection is
// closed (transport.ErrTransportClosed).
func (c *conn) callHTTP(ctx context.Context, sid string, params any) (*transport.JSONRPCResponse, error) {
	msg, err := json.Marshal(outRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: sid, Method: string(mcp.MethodToolsCall), Params: params})
	if err != nil {
		return nil, fmt.Errorf("encoding the request: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(c.life, cancel)()
	resp, err := c.readCall(ctx, sid, msg)
	if err != nil && c.life.Err() != nil {
		return nil, fmt.Errorf("the connection closed during the call: %w", transport.ErrTransportClosed)
	}
	return resp, err
}

// readCall POSTs msg, the call sid, and reads the answer (see callHTTP).
func (c *conn) readCall(ctx context.Context, sid string, msg []byte) (*transport.JSONRPCResponse, error) {
	resp, err := c.http.post(ctx, msg)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK, http.StatusAccepted:
	case http.StatusNotFound:
		return nil, transport.ErrSessionTerminated
	case http.StatusUnauthorized:
		return nil, &transport.AuthorizationRequiredError{}
	default:
		// A JSON-RPC error may come with an error status.
		r, b, _ := c.readJSON(resp, sid)
		if r == nil {
			return nil, fmt.Errorf("the upstream answered HTTP %d: %s", resp.StatusCode, logLine(b))
		}
		return r, nil
	}
	switch ct := resp.Header.Get("Content-Type"); mediaType(ct) {
	case "application/json":
		r, _, err := c.readJSON(resp, sid)
		if r == nil && err == nil {
			err = errors.New("the upstream answered the call with no JSON-RPC response to it")
		}
		return r, err
	case "text/event-stream":
		return c.readEvents(ctx, sid, resp.Body)
	default:
		return nil, fmt.Errorf("the upstream answered with content type %q", logLine([]byte(ct)))
	}
}

// readJSON reads resp's body, a JSON answer, and returns the response to
// the call sid it holds, or nil and the body when it holds none.
func (c *conn) readJSON(resp *http.Response, sid string) (*transport.JSONRPCResponse, []byte, error) {
	b, err := readBody(c.u.limitBody(resp.Body, false), resp.ContentLength, c.u.maxMessageBytes)
	if err == nil && json.Valid(b) {
		if m, ok := decodeMessage(b); ok && isResponseTo(m.resp, sid) {
			return m.resp, b, nil
		}
	}
	return nil, b, err
}

// readEvents reads body, the event stream that answers the call sid,
// until the call's response. A notification before it goes to
// onNotification at once, on this goroutine, as mcp-go's transport hands
// it on; a request of the upstream's is relayed on a goroutine of its own
// (relay), under the call's context. The relays end with the stream: an
// upstream that has answered the call, or whose call has ended, needs none
// of their answers. A stream the upstream ends before the response, after
// an event with an ID, is resumed (resume).
func (c *conn) readEvents(ctx context.Context, sid string, body io.ReadCloser) (*transport.JSONRPCResponse, error) {
	rctx, stop := context.WithCancel(ctx)
	var relays sync.WaitGroup
	defer func() { stop(); relays.Wait() }()
	ev := newEventReader(c.u.limitBody(body, true))
	var resumed io.ReadCloser // the body of the latest resumption; body is the caller's to close
	defer func() {
		if resumed != nil {
			_ = resumed.Close()
		}
	}()
	for {
		data, err := ev.next()
		switch {
		case errors.Is(err, io.EOF) && ev.lastID != "":
			if resumed != nil {
				_ = resumed.Close()
			}
			if resumed, err = c.resume(ctx, ev); err != nil {
				return nil, err
			}
			ev.reset(c.u.limitBody(resumed, true))
			continue
		case errors.Is(err, io.EOF):
			return nil, errors.New("the upstream ended the event stream before the call's response")
		case err != nil:
			return nil, err
		}
		if !json.Valid(data) {
			continue // skipped, as mcp-go's transport skips it
		}
		m, ok := decodeMessage(data)
		switch {
		case !ok:
		case m.note != nil:
			c.onNotification(*m.note)
		case m.req != nil:
			req := *m.req
			relays.Go(func() { c.relay(rctx, req) })
		case isResponseTo(m.resp, sid):
			return m.resp, nil
		}
	}
}

// resume waits the time the upstream asked for, then reopens the event
// stream it ended before the call's response with a GET carrying
// Last-Event-ID: how a client polls a long call since 2025-11-25
// (SEP-1699). The caller closes the returned body.
func (c *conn) resume(ctx context.Context, ev *eventReader) (io.ReadCloser, error) {
	delay := defaultResumeDelay
	if ev.hasRetry {
		delay = max(ev.retry, minResumeDelay)
	}
	if !sleep(ctx, delay) {
		return nil, ctx.Err()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.http.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header = c.http.header.Clone()
	req.Header.Del("Content-Type")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", ev.lastID)
	resp, err := c.http.client.Do(req)
	if err != nil {
		return nil, err
	}
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || mediaType(ct) != "text/event-stream" {
		_ = resp.Body.Close()
		return nil, fmt.Errorf("resuming the call's event stream: the upstream answered HTTP %d, content type %q", resp.StatusCode, logLine([]byte(ct)))
	}
	return resp.Body, nil
}

// relay answers req, a request of the upstream's made under ctx, through
// onRequest, and sends the answer.
func (c *conn) relay(ctx context.Context, req transport.JSONRPCRequest) {
	if resp, _ := c.onRequest(ctx, req); resp != nil {
		c.answer(ctx, resp)
	}
}

// onTransportRequest is the handler of the upstream's requests that
// mcp-go's streamable HTTP transport reads: those on the GET stream and on
// the streams of the requests it sends. It relays them as those of a
// call's stream are, answer included, and leaves the transport nothing to
// send. The transport runs it on a goroutine of its own, with a context it
// ends after 30 seconds, which the wait for the client (onRequest) and the
// answer outlive.
func (c *conn) onTransportRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	c.relay(ctx, req)
	return nil, nil
}

// answer POSTs resp, toolgate's answer to a request of the upstream's made
// under ctx, within answerTimeout: also when ctx has reached its deadline
// (an answer may take a human longer than mcp-go's transport gives its
// handler), not when it was cancelled (the call, or the stream the request
// came on, has ended). A failure is logged: nothing else reports it.
func (c *conn) answer(ctx context.Context, resp *transport.JSONRPCResponse) {
	ctx, stop := outlive(ctx, context.WithoutCancel(ctx), answerTimeout)
	defer stop()
	r, err := c.http.post(ctx, encodeAnswer(resp))
	if err == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, maxLogLine))
		_ = r.Body.Close()
		if r.StatusCode != http.StatusOK && r.StatusCode != http.StatusAccepted {
			err = fmt.Errorf("the upstream answered HTTP %d", r.StatusCode)
		}
	}
	if err != nil && ctx.Err() == nil {
		c.u.m.logger.Warn("sending an answer to the upstream failed", "upstream", c.u.cfg.Name, "error", c.u.redact(err.Error()))
	}
}

// isResponseTo reports whether resp is the response to toolgate's
// request sid.
func isResponseTo(resp *transport.JSONRPCResponse, sid string) bool {
	if resp == nil {
		return false
	}
	id, ok := resp.ID.Value().(string)
	return ok && id == sid
}

// mediaType is the media type of a Content-Type header, in lower case,
// without its parameters.
func mediaType(ct string) string {
	mt, _, _ := strings.Cut(ct, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

// readBody reads r to its end. n is its length when known (-1 when not),
// taken as a hint up to max.
func readBody(r io.Reader, n, max int64) ([]byte, error) {
	var b bytes.Buffer
	if n >= 0 && n <= max {
		b.Grow(int(n) + bytes.MinRead) // ReadFrom wants MinRead free to read on
	}
	_, err := b.ReadFrom(r)
	return b.Bytes(), err
}

// eventReader reads an event stream (text/event-stream, the server-sent
// events format) event by event, and keeps what resuming it needs: the
// ID of the last event and the reconnection time the server asked for.
// Event types are not read: an MCP server sends messages only. Lines end
// in LF or CRLF.
type eventReader struct {
	br       *bufio.Reader
	data     []byte // the current event's data lines, each ended by \n
	long     []byte // a line longer than br's buffer, gathered
	idBuf    string // the last id field read
	lastID   string // the ID of the last event dispatched
	retry    time.Duration
	hasRetry bool
}

func newEventReader(r io.Reader) *eventReader {
	return &eventReader{br: bufio.NewReaderSize(r, eventBufferSize)}
}

// reset reads on from r, a stream resumed, keeping the last event's ID and
// the reconnection time.
func (r *eventReader) reset(rd io.Reader) { r.br.Reset(rd) }

// next returns the data of the next event that has some, the reader's
// until the next call, or the error that ends the stream (io.EOF at its
// end). An event the end cuts short is returned, as mcp-go's transport
// hands it on, but its ID does not count.
func (r *eventReader) next() ([]byte, error) {
	r.data = r.data[:0]
	for {
		line, err := r.line()
		switch {
		case err != nil && len(r.data) > 0 && errors.Is(err, io.EOF):
			return r.data[:len(r.data)-1], nil
		case err != nil:
			return nil, err
		case len(line) > 0:
			r.field(line)
			continue
		}
		// An empty line ends the event.
		r.lastID = r.idBuf
		if len(r.data) > 0 {
			return r.data[:len(r.data)-1], nil
		}
	}
}

// line returns the next line without its end, valid until the next read.
// A last line the end of the stream cuts short counts as a line.
func (r *eventReader) line() ([]byte, error) {
	line, err := r.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		r.long = append(r.long[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			line, err = r.br.ReadSlice('\n')
			r.long = append(r.long, line...)
		}
		line = r.long
	}
	if err != nil && (!errors.Is(err, io.EOF) || len(line) == 0) {
		return nil, err
	}
	line = bytes.TrimSuffix(line, []byte("\n"))
	return bytes.TrimSuffix(line, []byte("\r")), nil
}

// field reads one field line of an event.
func (r *eventReader) field(line []byte) {
	name, value, _ := bytes.Cut(line, []byte(":"))
	value = bytes.TrimPrefix(value, []byte(" "))
	switch string(name) {
	case "data":
		r.data = append(r.data, value...)
		r.data = append(r.data, '\n')
	case "id":
		if bytes.IndexByte(value, 0) < 0 && string(value) != r.idBuf {
			r.idBuf = string(value)
		}
	case "retry":
		if ms, err := strconv.ParseUint(string(value), 10, 31); err == nil { // digits only
			r.retry, r.hasRetry = time.Duration(ms)*time.Millisecond, true
		}
	}
}
