package mcpup

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/retry"
)

// allocated returns the bytes the program has allocated on the heap so
// far.
func allocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// A result over max_message_bytes fails its call with class execution and
// a message naming the setting, without toolgate ever holding the message
// (measured: what the call allocates stays far below its size), and the
// upstream keeps working: the next call succeeds on the same connection,
// with no restart.
func TestMessageCap(t *testing.T) {
	const (
		capBytes = 64 << 10
		big      = 32 << 20
	)
	for _, mode := range []string{"stdio", "streamable-http"} {
		t.Run(mode, func(t *testing.T) {
			up := stdioUpstream()
			if mode != "stdio" {
				url, _ := httpFake(t, "http")
				up = Upstream{Name: "fs", Transport: TransportStreamableHTTP, URL: url}
			}
			up.MaxMessageBytes = capBytes
			m, rec, _ := startUp(t, up, nil)
			pid := 0
			if mode == "stdio" {
				pid = pidOf(t, m, "t")
			}

			// Just under the cap passes.
			if got := text(t, mustCall(t, m, "t", "fs__big", `{"size":60000}`)); len(got) != 60000 {
				t.Fatalf("a 60000-byte text came back as %d bytes", len(got))
			}

			ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
			defer cancel()
			before := allocated()
			_, err := callIn(ctx, t, m, "t", "fs__big", `{"size":33554432}`, nil)
			grew := allocated() - before
			t.Logf("error: %v; allocated %d bytes", err, grew)
			wantClass(t, err, retry.Execution)
			for _, want := range []string{`upstream "fs" sent a message of`, "over upstreams[].max_message_bytes (64 KiB)", "keeps running"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if grew > 8<<20 {
				t.Errorf("a call answered with %d bytes allocated %d bytes; want it bounded by the cap, not the message", big, grew)
			}

			if got := text(t, mustCall(t, m, "t", "fs__echo", `{"after":"big"}`)); got != `{"after":"big"}` {
				t.Errorf("echo after the big result = %q", got)
			}
			if mode == "stdio" {
				if got := pidOf(t, m, "t"); got != pid {
					t.Errorf("pid after the big result = %d, want %d (no restart)", got, pid)
				}
			}
			select {
			case <-rec.restarts:
				t.Error("OnRestart was called; the upstream should have kept running")
			default:
			}
			select {
			case up := <-rec.states:
				t.Errorf("OnState(%v) was called; the upstream should have stayed up", up)
			default:
			}
		})
	}
}

func TestMaxMessageBytesValidated(t *testing.T) {
	up := stdioUpstream()
	up.MaxMessageBytes = 1000
	err := up.Validate()
	if err == nil || !strings.Contains(err.Error(), "max_message_bytes") || !strings.Contains(err.Error(), "at least 1024") {
		t.Errorf("Validate() = %v, want max_message_bytes: must be at least 1024", err)
	}
	up.MaxMessageBytes = MinMaxMessageBytes
	if err := up.Validate(); err != nil {
		t.Errorf("Validate() with %d = %v", MinMaxMessageBytes, err)
	}
}

func TestIDScanner(t *testing.T) {
	tests := []struct {
		msg    string
		id     string // "" for none
		method bool
	}{
		{`{"jsonrpc":"2.0","id":"toolgate-7","result":{"x":"yyy"}}`, `"toolgate-7"`, false},
		{`{"jsonrpc":"2.0","result":{"id":1,"text":"\"id\":5, {[","a":[{"id":2}]}, "id" : 42 }`, `42`, false},
		{`{"result":"\\","id":-3}`, `-3`, false},
		{`{"method":"notifications/progress","params":{"id":1}}`, ``, true},
		{`{"id":3,"method":"sampling/createMessage"}`, `3`, true},
		{`{"idx":1,"result":{}}`, ``, false},
		{`{"id":{"a":1},"result":{}}`, ``, false},
		{`{"id":null,"error":{}}`, ``, false},
		{`["id",1]`, ``, false},
		{`{"id":1,"result":"unterminated`, ``, false},
	}
	for _, tt := range tests {
		// Fed in pieces of every size, so that tokens straddle them.
		for _, size := range []int{1, 2, 3, 7, len(tt.msg)} {
			var s idScanner
			for rest := tt.msg; rest != ""; {
				n := min(size, len(rest))
				s.write([]byte(rest[:n]))
				rest = rest[n:]
			}
			id, ok := s.result()
			if got := string(id); got != tt.id || ok != (tt.id != "") {
				t.Errorf("%s in pieces of %d: id = %q, %v; want %q", tt.msg, size, got, ok, tt.id)
			}
			if s.hasMethod != tt.method {
				t.Errorf("%s in pieces of %d: hasMethod = %v", tt.msg, size, s.hasMethod)
			}
		}
	}
}

// An event stream is capped per event, not as a whole.
func TestLimitedBodyEvents(t *testing.T) {
	tr := &limitTransport{upstream: "fs", max: 1024}
	event := "event: message\r\ndata: " + strings.Repeat("x", 900) + "\r\n\r\n"
	b := &limitedBody{rc: io.NopCloser(strings.NewReader(strings.Repeat(event, 100))), t: tr, events: true}
	if n, err := io.Copy(io.Discard, b); err != nil || n != int64(100*len(event)) {
		t.Fatalf("100 events under the cap: read %d, %v", n, err)
	}

	note := &tooLargeNote{}
	over := "data: " + strings.Repeat("y", 600) + "\ndata: " + strings.Repeat("y", 600) + "\n\n"
	b = &limitedBody{rc: io.NopCloser(strings.NewReader(event + over + event)), t: tr, events: true, note: note}
	got, err := io.ReadAll(b)
	if _, ok := errors.AsType[*tooLargeError](err); !ok {
		t.Fatalf("an event over the cap: err = %v, want a *tooLargeError", err)
	}
	if len(got) > len(event)+1024 {
		t.Errorf("handed on %d bytes; want at most the cap past the first event", len(got))
	}
	if note.n.Load() <= 1024 {
		t.Errorf("note = %d, want the size read", note.n.Load())
	}

	b = &limitedBody{rc: io.NopCloser(strings.NewReader(strings.Repeat("z", 2000))), t: tr}
	if _, err := io.ReadAll(b); err == nil {
		t.Error("a 2000-byte body under a 1024-byte cap read without error")
	}
}

// The transport wraps every response body.
func TestLimitTransport(t *testing.T) {
	base := roundTripFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(`{"x":"` + strings.Repeat("a", 5000) + `"}`))}, nil
	})
	c := &http.Client{Transport: &limitTransport{base: base, upstream: "fs", max: 1024}}
	resp, err := c.Get("http://127.0.0.1:1/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v any
	if err := json.NewDecoder(resp.Body).Decode(&v); !strings.Contains(err.Error(), "max_message_bytes (1 KiB)") {
		t.Errorf("decoding an oversized body: %v", err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A line over the cap is replaced by what onOversize returns for its id
// (nothing, for a notification), or is garbage when it has neither; the
// lines around it pass.
func TestLineGuardOversize(t *testing.T) {
	pad := strings.Repeat(`x\"`, 3000)
	resp := `{"result":{"t":"` + pad + `"},"id":"toolgate-9"}`
	tests := []struct {
		name, in, want, wantGarbage string
	}{
		{"response, id last", `{"a":1}` + "\n" + resp + "\n" + `{"b":2}` + "\n",
			`{"a":1}` + "\n" + `{"id":"toolgate-9","n":` + strconv.Itoa(len(resp)) + "}\n" + `{"b":2}` + "\n", ""},
		{"notification", `{"method":"n","params":{"t":"` + pad + `"}}` + "\n" + `{"b":2}` + "\n", `{"b":2}` + "\n", ""},
		{"no id", `{"result":"` + pad + `"}` + "\n" + `{"b":2}` + "\n", "", `{"result":"x\"x\"`},
		{"not an object", `"` + pad + `"` + "\n", "", `"x\"x\"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var garbage string
			g := &lineGuard{
				br:  bufio.NewReaderSize(strings.NewReader(tc.in), 16),
				max: 1024,
				onOversize: func(id json.RawMessage, n int64) []byte {
					if id == nil {
						return nil
					}
					return []byte(`{"id":` + string(id) + `,"n":` + strconv.FormatInt(n, 10) + "}\n")
				},
				onGarbage: func(l []byte) { garbage = string(l) },
				onEnd:     func() {},
				done:      make(chan struct{}),
			}
			got, err := readLines(g)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want || !strings.HasPrefix(garbage, tc.wantGarbage) || (garbage == "") != (tc.wantGarbage == "") {
				t.Errorf("read %q, garbage %q; want %q, %q…", got, garbage, tc.want, tc.wantGarbage)
			}
		})
	}
}

// Over the legacy SSE transport responses come on the upstream's stream:
// an oversized one fails its call with class execution, ends the stream,
// and the upstream is reconnected.
func TestMessageCapSSE(t *testing.T) {
	url, _ := httpFake(t, "sse")
	m, rec, _ := startUp(t, Upstream{Name: "fs", Transport: TransportSSE, URL: url, MaxMessageBytes: 64 << 10}, nil)
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	_, err := callIn(ctx, t, m, "t", "fs__big", `{"size":1000000}`, nil)
	wantClass(t, err, retry.Execution)
	if !strings.Contains(err.Error(), "over upstreams[].max_message_bytes (64 KiB)") || !strings.Contains(err.Error(), "reconnecting") {
		t.Errorf("error %q does not name the setting and the reconnection", err)
	}
	rec.waitState(t, true)
	if got := text(t, mustCall(t, m, "t", "fs__echo", `{}`)); got != `{}` {
		t.Errorf("echo after reconnecting = %q", got)
	}
}
