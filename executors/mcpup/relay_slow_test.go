package mcpup

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// pipeListener is a net.Listener whose connections are in-memory pipes
// made by its dial: what lets an HTTP server and client talk inside a
// synctest bubble, where fake time only passes while every goroutine is
// blocked on something of the bubble's.
type pipeListener struct {
	conns     chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	srv, cli := net.Pipe()
	select {
	case l.conns <- srv:
		return cli, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// An upstream over streamable HTTP (mcp-go's server and client transport,
// unchanged) whose tool elicits gets an answer the human gives after 45
// seconds, past the 30 seconds mcp-go's client transport gives toolgate's
// handler, and the call completes with it; in fake time.
func TestSlowElicitationOverStreamableHTTP(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := server.NewMCPServer("slow", "1", server.WithToolCapabilities(true))
		srv.AddTool(mcp.NewTool("ask", mcp.WithDescription("Asks the user's name.")),
			func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				res, err := srv.RequestElicitation(ctx, mcp.ElicitationRequest{Params: mcp.ElicitationParams{
					Message:         "your name?",
					RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}},
				}})
				if err != nil {
					return mcp.NewToolResultError("eliciting: " + err.Error()), nil
				}
				b, _ := json.Marshal(res.Content)
				return mcp.NewToolResultText(string(res.Action) + " " + string(b)), nil
			})
		l := newPipeListener()
		hs := &http.Server{Handler: server.NewStreamableHTTPServer(srv)}
		served := make(chan error, 1)
		go func() { served <- hs.Serve(l) }()

		u := bareUpstream(t)
		u.cfg.Transport = TransportStreamableHTTP
		base := &http.Transport{DialContext: l.dial}
		tr, err := transport.NewStreamableHTTP("http://pipe/mcp", transport.WithHTTPBasicClient(&http.Client{Transport: &answerTransport{base: base}}))
		if err != nil {
			t.Fatal(err)
		}
		c := newConn(u, "", func() {})
		c.tr = tr
		c.client = client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
		ctx := t.Context()
		if err := c.client.Start(ctx); err != nil {
			t.Fatal(err)
		}
		tr.SetRequestHandler(c.onRequest) // as dial does, after Start
		init := mcp.InitializeRequest{}
		init.Params.ProtocolVersion = mcp.ProtocolVersion20251125
		init.Params.Capabilities.Elicitation = &mcp.ElicitationCapability{}
		if _, err := c.client.Initialize(ctx, init); err != nil {
			t.Fatalf("initialize: %v", err)
		}

		call, cancel := context.WithTimeout(WithPeer(ctx, &slowPeer{delay: 45 * time.Second}), 5*time.Minute)
		defer cancel()
		start := time.Now()
		resp, err := c.request(call, string(mcp.MethodToolsCall), callParams{Name: "ask", Arguments: json.RawMessage(`{}`)})
		took := time.Since(start)
		if err != nil {
			t.Fatalf("tools/call after %v: %v", took, err)
		}
		if resp.Error != nil || !strings.Contains(string(resp.Result), `accept {\"name\":\"Ada\"}`) {
			t.Errorf("tools/call after %v = %s (error %+v), want the tool to have the answer", took, resp.Result, resp.Error)
		}
		if took != 45*time.Second {
			t.Errorf("tools/call took %v, want 45s: the time the human took", took)
		}

		_ = c.client.Close()
		_ = hs.Close()
		base.CloseIdleConnections()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serving: %v", err)
		}
	})
}
