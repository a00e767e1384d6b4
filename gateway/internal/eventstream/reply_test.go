package eventstream

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recordingWriter is an http.ResponseWriter that records what is written,
// in order.
type recordingWriter struct {
	mu   sync.Mutex
	hdr  http.Header
	code int
	out  bytes.Buffer
}

func (w *recordingWriter) Header() http.Header { return w.hdr }
func (w *recordingWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}
func (w *recordingWriter) Flush() {}
func (w *recordingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.WriteHeader(http.StatusOK)
	return w.out.Write(p)
}

// A request's notifications make its response an event stream, each one
// an event, and its answer the last event; nothing is queued after it.
func TestReplyStreamEventsThenAnswer(t *testing.T) {
	rw := &recordingWriter{hdr: http.Header{}}
	st := NewReply(rw)
	for i := range 2 {
		if !st.Notify("notifications/progress", map[string]any{"progress": i + 1}) {
			t.Fatal("notify refused")
		}
	}
	st.Finish(http.StatusBadRequest, []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	if st.Notify("notifications/progress", map[string]any{"progress": 3}) {
		t.Error("a notification was queued after the answer")
	}
	want := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\n\n" +
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":2}}\n\n" +
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"
	if got := rw.out.String(); got != want {
		t.Fatalf("the stream:\n%s\nwant:\n%s", got, want)
	}
	if ct := rw.hdr.Get("Content-Type"); ct != "text/event-stream" || rw.code != http.StatusOK {
		t.Errorf("Content-Type %q, status %d; want an event stream with 200", ct, rw.code)
	}
}

// Without a notification the answer is JSON with its status; once it has
// begun nothing more is queued: a notification is dropped, and a request
// (mcpfront/ask.go) is told so and goes to the GET stream instead of waiting for an
// answer its client never sees.
func TestReplyStreamJSONAnswer(t *testing.T) {
	rw := &recordingWriter{hdr: http.Header{}}
	st := NewReply(rw)
	st.Finish(http.StatusBadRequest, []byte(`{"jsonrpc":"2.0","id":1,"error":{}}`))
	if err := st.Send([]byte(`{"jsonrpc":"2.0","id":"toolgate-1","method":"roots/list"}`)); !errors.Is(err, ErrEnded) {
		t.Errorf("send after the JSON answer began = %v, want ErrEnded", err)
	}
	if got := rw.out.String(); got != "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{}}\n" || rw.code != http.StatusBadRequest ||
		rw.hdr.Get("Content-Type") != "application/json" {
		t.Errorf("the response: %d %q %s", rw.code, rw.hdr.Get("Content-Type"), got)
	}
}

// A message sent while the answer starts is either refused or written,
// never accepted and then dropped (a request accepted and dropped would
// wait for an answer its client never saw).
func TestReplyStreamSendRacesAnswer(t *testing.T) {
	lost := 0
	for range 5000 {
		rw := &recordingWriter{hdr: http.Header{}}
		st := NewReply(rw)
		var err error
		var wg sync.WaitGroup
		wg.Go(func() { err = st.Send([]byte(`{"jsonrpc":"2.0","method":"x"}`)) })
		wg.Go(func() { st.Finish(http.StatusOK, []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)) })
		wg.Wait()
		if err == nil && !strings.Contains(rw.out.String(), `"method":"x"`) {
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("%d of 5000 messages were accepted and never written", lost)
	}
}
