package tests

// Resource subscriptions end with the sessions that made them: when the
// last session subscribed to an upstream's resource ends without
// unsubscribing, toolgate unsubscribes the upstream (in the background:
// the session's end does not wait for it).

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

// watchedURI is the one resource of the upstream subscriptionUpstream
// starts.
const watchedURI = "test://watched"

// subscriptionUpstream starts an MCP server (mcp-go, streamable HTTP on
// 127.0.0.1) with one resource that clients may subscribe to, and returns
// its URL and what it was asked: "subscribe <uri>" and "unsubscribe <uri>",
// recorded before it answers. It stops when t ends, after the toolgate
// serve a test starts later.
func subscriptionUpstream(t *testing.T) (url string, asked <-chan string) {
	t.Helper()
	ch := make(chan string, 32)
	hooks := &mcpserver.Hooks{}
	hooks.AddAfterSubscribe(func(_ context.Context, _ any, req *mcp.SubscribeRequest, _ *mcp.EmptyResult) {
		ch <- "subscribe " + req.Params.URI
	})
	hooks.AddAfterUnsubscribe(func(_ context.Context, _ any, req *mcp.UnsubscribeRequest, _ *mcp.EmptyResult) {
		ch <- "unsubscribe " + req.Params.URI
	})
	s := mcpserver.NewMCPServer("subscription-upstream", "1", mcpserver.WithResourceCapabilities(true, false), mcpserver.WithHooks(hooks))
	s.AddResource(mcp.NewResource(watchedURI, "watched", mcp.WithMIMEType("text/plain")),
		func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: watchedURI, MIMEType: "text/plain", Text: "w"}}, nil
		})
	return serveMCP(t, s), ch
}

// serveMCP serves s over streamable HTTP on 127.0.0.1 and returns its MCP
// endpoint's URL. It stops when t ends, after the toolgate serve a test
// starts later.
func serveMCP(t *testing.T, s *mcpserver.MCPServer) string {
	t.Helper()
	h := mcpserver.NewStreamableHTTPServer(s)
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), stopTimeout)
		defer cancel()
		_ = h.Shutdown(ctx)
		srv.Close()
	})
	return srv.URL + "/mcp"
}

// nextAsked returns what the upstream was asked next, failing t when it is
// asked nothing within callTimeout.
func nextAsked(t *testing.T, asked <-chan string) string {
	t.Helper()
	select {
	case a := <-asked:
		return a
	case <-time.After(callTimeout):
		t.Fatalf("the upstream was asked nothing within %v", callTimeout)
		return ""
	}
}

// nothingAsked fails t if the upstream was asked something. toolgate
// passes a client's subscribe or unsubscribe on before it answers it, so
// there is nothing to wait for. After a session's end (a DELETE), the
// unsubscribe of what no session wants any more goes out in the
// background, but toolgate decides whether to send one as the session
// ends, and tells the upstream only what is still wanted when it sends.
func nothingAsked(t *testing.T, asked <-chan string, after string) {
	t.Helper()
	select {
	case a := <-asked:
		t.Errorf("after %s the upstream was asked %q, want nothing", after, a)
	default:
	}
}

func TestSessionEndUnsubscribes(t *testing.T) {
	url, asked := subscriptionUpstream(t)
	srv := startServe(t, fmt.Sprintf("upstreams:\n  - name: w\n    transport: streamable-http\n    url: %q\n", url))
	probe := openRawSession(t, srv.URL)
	pollUntil(t, upstreamTimeout, "the upstream's resource through toolgate", func() (bool, string) {
		r := probe.post(t, []byte(`{"jsonrpc":"2.0","id":1,"method":"resources/list"}`), true).rpc(t)
		return r.Error == nil && len(r.Result) > 0 && strings.Contains(string(r.Result), watchedURI), string(r.Result)
	})
	subscribe := func(s *rawSession, method string) {
		t.Helper()
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":%q,"params":{"uri":%q}}`, method, watchedURI)
		if r := s.post(t, []byte(body), true).rpc(t); r.Error != nil {
			t.Fatalf("%s: JSON-RPC error %d %q", method, r.Error.Code, r.Error.Message)
		}
	}

	t.Run("only session", func(t *testing.T) {
		s := openRawSession(t, srv.URL)
		subscribe(s, "resources/subscribe")
		if got, want := nextAsked(t, asked), "subscribe "+watchedURI; got != want {
			t.Fatalf("after subscribing, the upstream was asked %q, want %q", got, want)
		}
		s.close(t) // DELETE, without unsubscribing
		if got, want := nextAsked(t, asked), "unsubscribe "+watchedURI; got != want {
			t.Fatalf("after the session's DELETE, the upstream was asked %q, want %q", got, want)
		}
		nothingAsked(t, asked, "the unsubscribe")
	})

	t.Run("two sessions", func(t *testing.T) {
		first, second := openRawSession(t, srv.URL), openRawSession(t, srv.URL)
		subscribe(first, "resources/subscribe")
		subscribe(second, "resources/subscribe")
		if got, want := nextAsked(t, asked), "subscribe "+watchedURI; got != want {
			t.Fatalf("after two sessions subscribed, the upstream was asked %q, want %q", got, want)
		}
		nothingAsked(t, asked, "the second session's subscribe")
		first.close(t)
		nothingAsked(t, asked, "the first session's DELETE, with the second still subscribed")
		second.close(t)
		if got, want := nextAsked(t, asked), "unsubscribe "+watchedURI; got != want {
			t.Fatalf("after the last subscribed session's DELETE, the upstream was asked %q, want %q", got, want)
		}
	})

	t.Run("unsubscribed before the end", func(t *testing.T) {
		s := openRawSession(t, srv.URL)
		subscribe(s, "resources/subscribe")
		subscribe(s, "resources/unsubscribe")
		for _, want := range []string{"subscribe " + watchedURI, "unsubscribe " + watchedURI} {
			if got := nextAsked(t, asked); got != want {
				t.Fatalf("the upstream was asked %q, want %q", got, want)
			}
		}
		s.close(t)
		nothingAsked(t, asked, "the DELETE of a session that had unsubscribed")
	})
}
