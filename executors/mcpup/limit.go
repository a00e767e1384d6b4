package mcpup

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// DefaultMaxMessageBytes caps one message from an upstream when
// [Upstream.MaxMessageBytes] is zero.
const DefaultMaxMessageBytes = 16 << 20

// MinMaxMessageBytes is the smallest [Upstream.MaxMessageBytes] allowed.
const MinMaxMessageBytes = 1 << 10

// maxIDBytes bounds the JSON-RPC id the line guard keeps of an oversized
// message; a longer id is none of mcpup's (they are "toolgate-<n>") nor
// mcp-go's (integers).
const maxIDBytes = 128

// tooLargeError is why a request failed: the upstream's message answering
// it was over the cap. It does not break the connection.
type tooLargeError struct {
	upstream string
	n        int64 // the message's size, or (atLeast) how much of it was read
	atLeast  bool
	max      int64
	// dropped: the message came on a long-lived stream (legacy SSE), which
	// it ended; the connection is being replaced.
	dropped bool
}

func (e *tooLargeError) Error() string {
	plus, after := "", "the upstream keeps running"
	if e.atLeast {
		plus = "+"
	}
	if e.dropped {
		after = "the stream that carried it was dropped and is reconnecting"
	}
	return fmt.Sprintf("upstream %q sent a message of %d%s bytes, over upstreams[].max_message_bytes (%s); %s: ask the tool for less, or raise the setting",
		e.upstream, e.n, plus, formatBytes(e.max), after)
}

// formatBytes writes n in MiB or KiB when it is a whole number of them.
func formatBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// newTag returns the random tag that marks the errors a stdio upstream's
// line guard makes up, so that an upstream cannot forge one.
func newTag() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "toolgate-too-large-" + hex.EncodeToString(b)
}

// tooLargeLine is the JSON-RPC error response the line guard hands mcp-go
// in place of an oversized response to request id: the pending request
// fails at once, and [conn.request] recognises the error by its data,
// "<tag>:<size>".
func (u *upstream) tooLargeLine(id json.RawMessage, n int64) []byte {
	e := &tooLargeError{upstream: u.cfg.Name, n: n, max: u.maxMessageBytes}
	line, _ := json.Marshal(map[string]any{
		"jsonrpc": mcp.JSONRPC_VERSION,
		"id":      id,
		"error": map[string]any{
			"code":    mcp.INTERNAL_ERROR,
			"message": e.Error(),
			"data":    u.tag + ":" + strconv.FormatInt(n, 10),
		},
	})
	return append(line, '\n')
}

// tooLarge returns the error a response made up by the line guard stands
// for, or nil when resp is not one.
func (u *upstream) tooLarge(resp *transport.JSONRPCResponse) error {
	if resp == nil || resp.Error == nil {
		return nil
	}
	data, ok := resp.Error.Data.(string)
	if !ok {
		return nil
	}
	size, ok := strings.CutPrefix(data, u.tag+":")
	if !ok {
		return nil
	}
	n, err := strconv.ParseInt(size, 10, 64)
	if err != nil {
		return nil
	}
	return &tooLargeError{upstream: u.cfg.Name, n: n, max: u.maxMessageBytes}
}

// idScanner finds the top-level "id" and "method" members of a JSON object
// fed to it in pieces, keeping nothing of it but the id's value. It is how
// the line guard answers an oversized message whose bytes it discards: the
// id may come anywhere in the object (mcp-go and most servers write it
// early, but JSON does not order members), so every byte is scanned, and
// cheaply: inside strings, which are nearly all of a large message, it
// skips to the next quote or backslash. It checks structure only as far
// as it needs to: quotes, escapes and nesting.
type idScanner struct {
	depth     int
	first     byte // the first byte that is not white space
	inStr     bool
	esc       bool
	inKey     bool // the string being read is a top-level member's name
	expectKey bool // at the top level, a member's name comes next
	key       []byte
	keyLong   bool
	capture   bool // the id's value is being read
	id        []byte
	idLong    bool
	hasID     bool
	hasMethod bool
	broken    bool
}

func (s *idScanner) keep(b []byte) {
	switch {
	case s.inKey:
		if len(s.key)+len(b) > len("method") {
			s.keyLong = true
		} else {
			s.key = append(s.key, b...)
		}
	case s.capture:
		if len(s.id)+len(b) > maxIDBytes {
			s.idLong = true
		} else {
			s.id = append(s.id, b...)
		}
	}
}

// write scans the next piece of the message. A resumable scanner (the
// message arrives in pieces), one case per state: its states only make
// sense together.
func (s *idScanner) write(b []byte) {
	for i := 0; i < len(b); i++ {
		if s.inStr {
			if s.esc {
				s.esc = false
				s.keep(b[i : i+1])
				continue
			}
			j := bytes.IndexAny(b[i:], `"\`)
			if j < 0 {
				s.keep(b[i:])
				return
			}
			s.keep(b[i : i+j])
			i += j
			if b[i] == '\\' {
				s.esc = true
				s.keep(b[i : i+1])
				continue
			}
			s.inStr = false
			if s.inKey {
				s.inKey = false
				continue
			}
			s.keep(b[i : i+1])
			continue
		}
		c := b[i]
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		if s.first == 0 {
			s.first = c
			if c != '{' {
				s.broken = true
			}
		}
		if s.broken {
			return
		}
		switch c {
		case '"':
			s.inStr = true
			if s.depth == 1 && s.expectKey {
				s.inKey, s.key, s.keyLong, s.expectKey = true, s.key[:0], false, false
				continue
			}
		case '{', '[':
			s.depth++
			if s.depth == 1 {
				s.expectKey = true
			}
		case '}', ']':
			if s.depth == 1 {
				s.capture = false
			}
			s.depth--
			if s.depth < 0 {
				s.broken = true
			}
		case ',':
			if s.depth == 1 {
				s.capture, s.expectKey = false, true
				continue
			}
		case ':':
			if s.depth == 1 {
				name := string(s.key)
				if s.keyLong {
					name = ""
				}
				s.key = s.key[:0]
				switch name {
				case "id":
					s.capture, s.hasID, s.id, s.idLong = true, true, s.id[:0], false
				case "method":
					s.hasMethod = true
				}
				continue
			}
		}
		s.keep(b[i : i+1])
	}
}

// result returns the top-level id, when the message was an object with a
// usable one (a string or a number).
func (s *idScanner) result() (json.RawMessage, bool) {
	if s.broken || s.depth != 0 || s.first != '{' || !s.hasID || s.idLong {
		return nil, false
	}
	id := bytes.TrimSpace(s.id)
	if len(id) == 0 || !json.Valid(id) || !(id[0] == '"' || id[0] == '-' || id[0] >= '0' && id[0] <= '9') {
		return nil, false
	}
	return json.RawMessage(id), true
}

// tooLargeNote travels in the context of a request to an HTTP upstream:
// the response body's reader records there that it stopped a message over
// the cap, since mcp-go does not always pass that error on.
type tooLargeNote struct{ n atomic.Int64 }

type tooLargeKey struct{}

// limitTransport caps the messages of an HTTP upstream: a response body
// (one message), or each event of an event stream (text/event-stream,
// where a body carries many messages over time). A body that goes over
// fails its reader, and the request it answers fails with a
// *tooLargeError.
type limitTransport struct {
	base     http.RoundTripper
	upstream string
	max      int64
}

func (t *limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	note, _ := req.Context().Value(tooLargeKey{}).(*tooLargeNote)
	resp.Body = &limitedBody{rc: resp.Body, t: t, events: mt == "text/event-stream", note: note}
	return resp, nil
}

// limitedBody is a response body that fails once a message in it is over
// the cap; what it hands on is at most the cap of any one message.
type limitedBody struct {
	rc     io.ReadCloser
	t      *limitTransport
	events bool          // an event stream: the cap is per event
	note   *tooLargeNote // nil when the request did not ask for one
	n      int64         // bytes of the current message
	line   int64         // bytes of the current line (events), CR left out
	err    error
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if !b.events && int64(len(p)) > b.t.max-b.n+1 {
		p = p[:b.t.max-b.n+1]
	}
	k, err := b.rc.Read(p)
	if b.events {
		b.count(p[:k])
	} else {
		b.n += int64(k)
	}
	if b.n > b.t.max {
		b.err = &tooLargeError{upstream: b.t.upstream, n: b.n, atLeast: true, max: b.t.max}
		if b.note != nil {
			b.note.n.Store(b.n)
		}
		return 0, b.err
	}
	return k, err
}

// count adds data to the current event, which ends at an empty line.
func (b *limitedBody) count(data []byte) {
	for len(data) > 0 && b.n <= b.t.max {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			b.n += int64(len(data))
			b.line += int64(len(data) - bytes.Count(data, []byte{'\r'}))
			return
		}
		seg := data[:i]
		b.n += int64(i + 1)
		b.line += int64(len(seg) - bytes.Count(seg, []byte{'\r'}))
		if b.line == 0 && b.n <= b.t.max {
			b.n = 0 // an empty line ends the event
		}
		b.line = 0
		data = data[i+1:]
	}
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// limitBody caps body, a response body of u's that mcpup reads itself
// (events: an event stream), as u's limitTransport caps those it carries.
func (u *upstream) limitBody(body io.ReadCloser, events bool) io.ReadCloser {
	return &limitedBody{rc: body, t: u.limit, events: events}
}

// withTooLargeNote returns ctx carrying a fresh note, for a request to an
// HTTP upstream.
func withTooLargeNote(ctx context.Context) (context.Context, *tooLargeNote) {
	n := &tooLargeNote{}
	return context.WithValue(ctx, tooLargeKey{}, n), n
}
