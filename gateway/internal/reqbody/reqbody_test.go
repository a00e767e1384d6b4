package reqbody

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestRead checks the cap: a body within it is read whole, one announcing
// more is refused before a byte is read, one that says nothing and sends
// more is refused once past it; each refusal is a 413 naming the setting.
func TestRead(t *testing.T) {
	rd := &Reader{Limit: 8}
	for _, tc := range []struct {
		name, body string
		length     int64 // Content-Length; -1 for unknown
		want       int   // 0 for read
	}{
		{"within", "12345678", 8, 0},
		{"announced over", "123", 9, http.StatusRequestEntityTooLarge},
		{"unannounced over", "123456789", -1, http.StatusRequestEntityTooLarge},
	} {
		src := &countingReader{r: strings.NewReader(tc.body)}
		r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/mcp", src)
		r.ContentLength = tc.length
		b, err := rd.Read(httptest.NewRecorder(), r)
		switch {
		case tc.want == 0 && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want == 0 && string(b.Bytes()) != tc.body:
			t.Errorf("%s: read %q, want %q", tc.name, b.Bytes(), tc.body)
		case tc.want != 0 && (err == nil || err.Status != tc.want || !strings.Contains(err.Msg, "server.max_body_bytes")):
			t.Errorf("%s: error %+v, want %d naming server.max_body_bytes", tc.name, err, tc.want)
		case tc.name == "announced over" && src.n != 0:
			t.Errorf("%s: %d bytes read of a body announced too large", tc.name, src.n)
		}
		rd.Release(b)
	}
}

// TestReplay checks that a replayed body reads the message given, so a
// handler behind the reader sees the request as sent.
func TestReplay(t *testing.T) {
	rd := &Reader{Limit: 64}
	r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/message", strings.NewReader(`{"a":1}`))
	b, err := rd.Read(httptest.NewRecorder(), r)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Release(b)
	b.Replay(r, b.Bytes())
	got, _ := io.ReadAll(r.Body)
	if string(got) != `{"a":1}` || r.ContentLength != 7 {
		t.Errorf("replayed body %q (Content-Length %d), want {\"a\":1} (7)", got, r.ContentLength)
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}
