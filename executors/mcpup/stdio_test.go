package mcpup

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// pipeTransport is a stdioTransport whose upstream is the test: it reads
// what the transport writes from in and writes the upstream's messages
// to out.
func pipeTransport(t *testing.T) (tr *stdioTransport, in *bufio.Reader, out *os.File) {
	t.Helper()
	toUpR, toUpW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	fromUpR, fromUpW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	lines := &lineGuard{
		br:         bufio.NewReader(fromUpR),
		onGarbage:  func([]byte) {},
		onOversize: func(json.RawMessage, int64) []byte { return nil },
		onEnd:      func() {},
		done:       make(chan struct{}),
	}
	tr = newStdioTransport(lines, toUpW)
	if err := tr.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = tr.Close()
		_ = fromUpW.Close()
		_ = toUpR.Close()
		<-lines.done
		_ = fromUpR.Close()
	})
	return tr, bufio.NewReader(toUpR), fromUpW
}

// Concurrent calls share the pipe: every line the upstream reads is one
// whole message, and every call gets the response with its own ID, also
// when the upstream answers out of order.
func TestStdioTransportConcurrentCalls(t *testing.T) {
	tr, in, out := pipeTransport(t)
	const calls = 200
	upstreamDone := make(chan error, 1)
	go func() {
		// Answer in pairs, the second first.
		var held []byte
		for range calls {
			line, err := in.ReadBytes('\n')
			if err != nil {
				upstreamDone <- err
				return
			}
			var req struct {
				ID     json.RawMessage `json:"id"`
				Params struct {
					Arguments json.RawMessage `json:"arguments"`
				} `json:"params"`
			}
			if err := json.Unmarshal(line, &req); err != nil {
				upstreamDone <- fmt.Errorf("the upstream read %q: %v", line, err)
				return
			}
			resp := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":{"echo":%s}}`+"\n", req.ID, req.Params.Arguments)
			if held == nil {
				held = resp
				continue
			}
			if _, err := out.Write(append(resp, held...)); err != nil {
				upstreamDone <- err
				return
			}
			held = nil
		}
		upstreamDone <- nil
	}()
	var wg sync.WaitGroup
	errs := make(chan error, calls)
	for i := range calls {
		wg.Go(func() {
			id := fmt.Sprintf("toolgate-%d", i)
			args := fmt.Sprintf(`{"n":%d,"pad":%q}`, i, strings.Repeat("x", i*50))
			resp, err := tr.SendRequest(t.Context(), transport.JSONRPCRequest{
				JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(id), Method: "tools/call",
				Params: map[string]any{"arguments": json.RawMessage(args)},
			})
			if err != nil {
				errs <- err
				return
			}
			if want := `{"echo":` + args + `}`; resp.ID.String() != mcp.NewRequestId(id).String() || string(resp.Result) != want {
				errs <- fmt.Errorf("call %s got %s %s, want %s", id, resp.ID.String(), resp.Result, want)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := <-upstreamDone; err != nil {
		t.Fatal(err)
	}
}

// An upstream that stops reading its stdin holds one write; what queues
// behind it is bounded, a call past the bound fails at once (the answer
// to the upstream's own request is still queued), and Close ends the
// blocked write and the waiting calls.
func TestStdioTransportBacklog(t *testing.T) {
	tr, _, out := pipeTransport(t) // nothing reads what the transport writes
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	send := func(id string, size int) error {
		_, err := tr.SendRequest(ctx, transport.JSONRPCRequest{
			JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(id), Method: "tools/call",
			Params: map[string]string{"pad": strings.Repeat("x", size)},
		})
		return err
	}
	results := make(chan error, 3)
	// Over a pipe's buffer: this write blocks in the kernel.
	go func() { results <- send("blocked", 1<<20) }()
	until := func(cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(waitLimit); time.Now().Before(deadline); runtime.Gosched() {
			if cond() {
				return
			}
		}
		t.Fatal("condition never held")
	}
	writing := func() bool { tr.wmu.Lock(); defer tr.wmu.Unlock(); return tr.writing }
	until(writing)
	// Queued behind it: returns only with its response (or the end).
	// A queue at the bound: the first message waiting is taken whatever
	// its size.
	go func() { results <- send("queued", maxQueuedWrites) }()
	until(func() bool { tr.wmu.Lock(); defer tr.wmu.Unlock(); return len(tr.wbuf) > 0 })
	if err := send("over", 1); !errors.Is(err, errStdinBacklog) {
		t.Fatalf("a call past the backlog bound: %v, want %v", err, errStdinBacklog)
	}
	// The answer to the upstream's own request is queued past the bound:
	// the upstream waits for it, and nothing would send it again.
	tr.SetRequestHandler(func(_ context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
		return &transport.JSONRPCResponse{JSONRPC: mcp.JSONRPC_VERSION, ID: req.ID, Result: json.RawMessage(`{"roots":[]}`)}, nil
	})
	if _, err := io.WriteString(out, `{"jsonrpc":"2.0","id":7,"method":"roots/list"}`+"\n"); err != nil {
		t.Fatal(err)
	}
	until(func() bool { tr.wmu.Lock(); defer tr.wmu.Unlock(); return bytes.Contains(tr.wbuf, []byte(`"roots"`)) })
	if err := tr.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for range 2 {
		if err := <-results; err == nil {
			t.Error("a call the upstream never read returned no error")
		}
	}
	if _, err := tr.SendRequest(ctx, transport.JSONRPCRequest{ID: mcp.NewRequestId("late"), Method: "ping"}); !errors.Is(err, transport.ErrTransportClosed) {
		t.Errorf("SendRequest after Close: %v, want ErrTransportClosed", err)
	}
}

// The upstream's requests reach the handler and its answers the upstream;
// its notifications reach the notification handler; a line that is not a
// JSON-RPC object, and a response nobody waits for, are skipped.
func TestStdioTransportUpstreamMessages(t *testing.T) {
	tr, in, out := pipeTransport(t)
	notes := make(chan mcp.JSONRPCNotification, 1)
	tr.SetNotificationHandler(func(n mcp.JSONRPCNotification) { notes <- n })
	tr.SetRequestHandler(func(_ context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
		switch req.Method {
		case "roots/list":
			return &transport.JSONRPCResponse{JSONRPC: mcp.JSONRPC_VERSION, ID: req.ID, Result: json.RawMessage(`{"roots":[]}`)}, nil
		case "ping": // an answer that does not encode
			return &transport.JSONRPCResponse{JSONRPC: mcp.JSONRPC_VERSION, ID: req.ID, Result: json.RawMessage(`{"bad`)}, nil
		}
		return nil, fmt.Errorf("unexpected %s", req.Method)
	})
	msgs := `[1,2]` + "\n" +
		`{"jsonrpc":"2.0","id":"nobody","result":{}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hi"}}` + "\n" +
		`{"jsonrpc":"2.0","id":7,"method":"roots/list"}` + "\n" +
		`{"jsonrpc":"2.0","id":8,"method":"sampling/createMessage"}` + "\n" +
		`{"jsonrpc":"2.0","id":9,"method":"ping"}` + "\n"
	if _, err := io.WriteString(out, msgs); err != nil {
		t.Fatal(err)
	}
	if n := <-notes; n.Method != "notifications/message" || n.Params.AdditionalFields["data"] != "hi" {
		t.Errorf("notification %+v", n)
	}
	got := map[string]string{}
	for range 3 {
		line, err := in.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("the upstream read %q: %v", line, err)
		}
		switch {
		case r.Error != nil:
			got[string(r.ID)] = fmt.Sprint(r.Error.Code)
		default:
			got[string(r.ID)] = string(r.Result)
		}
	}
	if got["7"] != `{"roots":[]}` || got["8"] != fmt.Sprint(mcp.INTERNAL_ERROR) || got["9"] != fmt.Sprint(mcp.INTERNAL_ERROR) {
		t.Errorf("the upstream got answers %v", got)
	}
}

// readLines is what g hands the transport, line after line, until the end.
func readLines(g *lineGuard) ([]byte, error) {
	var all []byte
	for {
		line, err := g.next()
		if errors.Is(err, io.EOF) {
			return all, nil
		}
		if err != nil {
			return all, err
		}
		all = append(all, line...)
	}
}

// At the end of the upstream's stdout, a response whose line was whole
// reaches its call; one the end cut short is dropped, and its call gets
// ErrTransportClosed, as does a call sent after the end.
func TestStdioTransportEndOfStream(t *testing.T) {
	tr, in, out := pipeTransport(t)
	results := make(chan error, 2)
	for _, id := range []string{"toolgate-1", "toolgate-2"} {
		go func() {
			resp, err := tr.SendRequest(t.Context(), transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(id), Method: "ping"})
			if err == nil && string(resp.Result) != `{"whole":true}` {
				err = fmt.Errorf("%s answered %s", id, resp.Result)
			}
			results <- err
		}()
	}
	for range 2 { // both requests are out
		if _, err := in.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := io.WriteString(out, `{"jsonrpc":"2.0","id":"toolgate-1","result":{"whole":true}}`+"\n"+
		`{"jsonrpc":"2.0","id":"toolgate-2","result":{"whole":true}}`); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	var ok, closed int
	for range 2 {
		switch err := <-results; {
		case err == nil:
			ok++
		case errors.Is(err, transport.ErrTransportClosed):
			closed++
		default:
			t.Error(err)
		}
	}
	if ok != 1 || closed != 1 {
		t.Errorf("%d calls answered and %d ended, want 1 and 1", ok, closed)
	}
	if _, err := tr.SendRequest(t.Context(), transport.JSONRPCRequest{ID: mcp.NewRequestId("late"), Method: "ping"}); !errors.Is(err, transport.ErrTransportClosed) {
		t.Errorf("SendRequest after the end: %v, want ErrTransportClosed", err)
	}
}

// decodeResponse is what dispatch's decoding makes of line when it is a
// response: ok is false when it is not one.
func decodeResponse(line []byte) (id mcp.RequestId, m message, ok bool) {
	if json.Unmarshal(line, &m) != nil || m.Method != "" || len(m.ID) == 0 || string(m.ID) == "null" {
		return id, m, false
	}
	return id, m, json.Unmarshal(m.ID, &id) == nil
}

func TestScanResponse(t *testing.T) {
	for _, c := range []struct {
		line string
		read bool // scanResponse reads it; otherwise dispatch decodes it
	}{
		{`{"jsonrpc":"2.0","id":"toolgate-7","result":{"content":[{"type":"text","text":"hi"}]}}`, true},
		{` { "result" : null , "ID" : "toolgate-1" , "JsonRpc" : "2.0" , "extra" : [1, {"a": "\"b"}] } `, true},
		{`{"jsonrpc":"2.0","id":"a b~!","result":"x","_meta":{}}`, true},
		{`{"jsonrpc":"2.0","id":7,"result":{}}`, false},                            // a number: decoded
		{`{"jsonrpc":"2.0","id":"t\u002d1","result":{}}`, false},                   // an escape
		{`{"jsonrpc":"2.0","id":"é","result":{}}`, false},                          // not ASCII
		{`{"jsonrpc":"2.0","id":"t-1","result":{},"result":{"a":1}}`, false},       // twice: the last wins in a decoding
		{`{"jsonrpc":"2.0","id":"t-1","Id":"t-2","result":{}}`, false},             // twice, folded
		{`{"jsonrpc":"2.0","jsonrpc":"2.0","id":"t-1","result":{}}`, false},        // twice
		{`{"jsonrpc":"2.0","id":"t-1","error":{"code":-1,"message":"no"}}`, false}, // an error
		{`{"jsonrpc":"2.0","id":"t-1","result":{},"error":null}`, false},           // an error member at all
		{`{"jsonrpc":"2.0","id":"t-1","method":"ping"}`, false},                    // a request
		{`{"jsonrpc":"1.0","id":"t-1","result":{}}`, false},                        // another version
		{`{"id":"t-1","result":{}}`, false},                                        // no version
		{`{"jsonrpc":"2.0","id":"t-1"}`, false},                                    // no result
		{`{"jsonrpc":"2.0","id":null,"result":{}}`, false},                         // no id
		{`["jsonrpc"]`, false},
	} {
		sid, result, ok := scanResponse([]byte(c.line))
		if ok != c.read {
			t.Errorf("scanResponse(%s) ok = %v, want %v", c.line, ok, c.read)
			continue
		}
		if !ok {
			continue
		}
		id, m, dok := decodeResponse([]byte(c.line))
		if !dok || id.String() != mcp.NewRequestId(sid).String() || string(result) != string(m.Result) || m.JSONRPC != mcp.JSONRPC_VERSION {
			t.Errorf("scanResponse(%s) = %q, %s; decoding gives %v %s, %s", c.line, sid, result, dok, id.String(), m.Result)
		}
	}
}

// FuzzScanResponse: whatever scanResponse reads, a decoding reads alike.
func FuzzScanResponse(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":"toolgate-7","result":{"content":[{"type":"text","text":"hi"}]}}`,
		`{"RESULT":[1,2],"Id":"x","jsonRPC":"2.0","k":null}`,
		`{"jsonrpc":"2.0","id":"t","result":{},"result":1}`,
		`{"jsonrpc":"2.0","id":"t","result":"\u00e9\n"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if !json.Valid(line) { // the lineGuard passes nothing else
			return
		}
		sid, result, ok := scanResponse(line)
		if !ok {
			return
		}
		id, m, dok := decodeResponse(line)
		if !dok || m.Error != nil || m.JSONRPC != mcp.JSONRPC_VERSION || id.String() != mcp.NewRequestId(sid).String() || string(result) != string(m.Result) {
			t.Fatalf("%s: read %q %s, decoded %v %+v %s", line, sid, result, dok, m, id.String())
		}
	})
}
