package rest

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/retry"
)

// excerptBytes caps the part of an error response's body quoted in the
// error, so that the model can fix its call.
const excerptBytes = 2 << 10

// statusClass returns the class of a failed call that ended with code.
func statusClass(code int) retry.Class {
	switch {
	case code == http.StatusBadRequest || code == http.StatusUnprocessableEntity:
		return retry.Validation
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return retry.Permission
	case code == http.StatusNotFound:
		return retry.NotFound
	case code == http.StatusRequestTimeout:
		return retry.Timeout
	case code == http.StatusTooEarly:
		return retry.Unavailable
	case code == http.StatusTooManyRequests:
		return retry.RateLimited
	case code >= 500 && code <= 599:
		return retry.Unavailable
	}
	return retry.Execution // 409, the other 4xx, an unfollowed 3xx
}

// statusError is the error of a call whose final response is not 2xx:
// "<METHOD> <URL> returned <code> <text> after N attempts: <excerpt>".
func (c *callState) statusError() error {
	text := http.StatusText(c.status)
	if text == "" {
		text = "(unknown status)"
	}
	msg := fmt.Sprintf("%s %s returned %d %s %s", c.t.method, c.t.displayURL(c.u), c.status, text, c.attempts())
	if ex := excerpt(c.body, c.truncated); ex != "" {
		msg += ": " + ex
	}
	e := &retry.Error{Class: statusClass(c.status), Msg: c.t.redact(msg), Status: c.status}
	if c.status == http.StatusTooManyRequests || c.status == http.StatusServiceUnavailable {
		if d, ok := retry.ParseRetryAfter(c.header.Get("Retry-After"), time.Now()); ok && d > 0 {
			e.RetryAfter = d
		}
	}
	return e
}

// excerpt returns an error body as one trimmed line of valid UTF-8.
func excerpt(body []byte, truncated bool) string {
	if truncated {
		body = trimPartialRune(body)
	}
	s := strings.TrimSpace(strings.ToValidUTF8(string(body), "\uFFFD"))
	s = strings.Join(strings.Fields(s), " ")
	if truncated && s != "" {
		s += " …"
	}
	return s
}

// result maps a 2xx response to a result. A call that took more than one
// HTTP request says how many under [executors.AttemptsMetaKey], as every
// kind does.
func (c *callState) result() executors.Result {
	res := c.content()
	if c.attempt > 1 {
		res.Meta = map[string]any{executors.AttemptsMetaKey: c.attempt}
	}
	return res
}

func (c *callState) content() executors.Result {
	if len(c.body) == 0 && !c.truncated {
		return executors.Text(fmt.Sprintf("HTTP %d %s: empty response", c.status, http.StatusText(c.status)))
	}
	mt := mediaType(c.header.Get("Content-Type"), c.body)
	body := c.body
	if c.truncated {
		body = trimPartialRune(body)
	}
	kind := bodyKindOf(mt, body)
	var notice []executors.Content
	if c.truncated {
		if kind != textBody && kind != jsonBody {
			// A cut image, sound or file cannot be decoded: say so instead.
			return executors.Text(c.truncationNotice(0))
		}
		notice = []executors.Content{{Type: executors.TextContent, Text: c.truncationNotice(len(body))}}
	}
	switch kind {
	case jsonBody:
		if c.truncated {
			break // cut JSON does not decode; the model gets the text
		}
		text := c.t.redact(string(body))
		if v, ok := c.structured(body, text); ok {
			return executors.Structured(v, text)
		}
	case imageBody:
		return executors.Result{Content: []executors.Content{{Type: executors.ImageContent, Data: body, MIMEType: mt}}}
	case audioBody:
		return executors.Result{Content: []executors.Content{{Type: executors.AudioContent, Data: body, MIMEType: mt}}}
	case blobBody:
		return executors.Result{Content: []executors.Content{{Type: executors.ResourceContent, Data: body, MIMEType: mt, URI: c.t.displayURL(c.u)}}}
	}
	text := c.t.redact(strings.ToValidUTF8(string(body), "\uFFFD"))
	return executors.Result{Content: append([]executors.Content{{Type: executors.TextContent, Text: text}}, notice...)}
}

// respKind says how a response body becomes content.
type respKind uint8

const (
	textBody respKind = iota
	jsonBody
	imageBody
	audioBody
	blobBody
)

// bodyKindOf maps a media type (and, for types that are not known to be
// text, the body's bytes) to the content a body becomes. SVG is text:
// clients take raster images only.
func bodyKindOf(mt string, body []byte) respKind {
	switch {
	case isJSON(mt):
		return jsonBody
	case strings.HasPrefix(mt, "image/") && mt != "image/svg+xml":
		return imageBody
	case strings.HasPrefix(mt, "audio/"):
		return audioBody
	case strings.HasPrefix(mt, "text/") || mt == "image/svg+xml" || utf8.Valid(body):
		return textBody
	}
	return blobBody
}

// truncationNotice tells the model what it did not see.
func (c *callState) truncationNotice(shown int) string {
	if !c.sizeKnown {
		return fmt.Sprintf("[response truncated: showed %d of more than %d bytes; raise max_response_bytes to see more]", shown, c.size)
	}
	return fmt.Sprintf("[response truncated: showed %d of %d bytes; raise max_response_bytes to see more]", shown, c.size)
}

// mediaType returns the lowercase media type of a response, sniffed from
// the body when the server sent none.
func mediaType(contentType string, body []byte) string {
	if contentType == "" {
		contentType = http.DetectContentType(body)
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return "application/octet-stream"
	}
	return mt
}

func isJSON(mt string) bool {
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// structured returns a JSON body as structuredContent, which must be an
// object: a non-object value v becomes {"result": v}. When the body holds
// no secret (redacted is the body's text unchanged) the bytes are passed
// through as they are, without decoding; otherwise the body is decoded and
// every string redacted, so that a replacement cannot break the JSON.
func (c *callState) structured(body []byte, redacted string) (any, bool) {
	trimmed := bytes.TrimSpace(body)
	if redacted == string(body) && json.Valid(trimmed) {
		if trimmed[0] == '{' {
			return json.RawMessage(trimmed), true
		}
		wrapped := make([]byte, 0, len(trimmed)+len(`{"result":}`))
		wrapped = append(append(append(wrapped, `{"result":`...), trimmed...), '}')
		return json.RawMessage(wrapped), true
	}
	v, ok := decodeBody(body)
	if !ok {
		return nil, false
	}
	v = c.t.redactValue(v)
	if _, isObj := v.(map[string]any); !isObj {
		v = map[string]any{"result": v}
	}
	return v, true
}

// decodeBody decodes exactly one JSON value, keeping numbers exact.
func decodeBody(b []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return v, true
}

// trimPartialRune drops an incomplete UTF-8 sequence cut at the end of b.
func trimPartialRune(b []byte) []byte {
	i := len(b) - 1
	for i > 0 && i > len(b)-utf8.UTFMax && !utf8.RuneStart(b[i]) {
		i--
	}
	if i >= 0 && !utf8.FullRune(b[i:]) {
		return b[:i]
	}
	return b
}

// isCertError reports a failure to verify the server's certificate,
// which no retry fixes.
func isCertError(err error) bool {
	if _, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.UnknownAuthorityError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.HostnameError](err); ok {
		return true
	}
	_, ok := errors.AsType[x509.CertificateInvalidError](err)
	return ok
}
