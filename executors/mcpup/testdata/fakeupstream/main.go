// Command fakeupstream is a small MCP server used by the mcpup tests as an
// upstream. It serves stdio (the default), streamable HTTP or SSE on
// 127.0.0.1:0; in the HTTP modes it prints "listening <url>" on stderr.
//
// Its tools exercise what mcpup must proxy: raw schemas, structured and
// image results, progress, cancellation, runtime tool registration
// (list_changed), crashes, and stdout garbage.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// RawSchema is the input schema of the "raw" tool: keywords mcp.Tool would
// drop ($schema, oneOf, title) must reach the gateway unchanged.
const RawSchema = `{"$schema":"http://json-schema.org/draft-07/schema#","title":"Raw","type":"object","oneOf":[{"required":["a"]},{"required":["b"]}],"properties":{"a":{"type":"string"},"b":{"type":"integer","minimum":1}}}`

// RawOutputSchema is the output schema of the "raw" tool.
const RawOutputSchema = `{"type":"object","properties":{"ok":{"type":"boolean"}},"additionalProperties":false}`

// ImagePNG is what the "image" tool returns (not a real PNG; it need not be).
var ImagePNG = []byte("\x89PNG\r\n\x1a\nfake image bytes")

// LongName is a tool name that is valid alone but too long once prefixed.
var LongName = strings.Repeat("x", 62)

// stats counts cancellations: notifications/cancelled messages received and
// slow handlers that saw their ctx end.
type stats struct {
	listed atomic.Int64 // tools/list requests answered (pages)

	mu       sync.Mutex
	notes    int
	handlers int
	changed  chan struct{} // closed and replaced on every change
}

func newStats() *stats { return &stats{changed: make(chan struct{})} }

func (s *stats) add(notes, handlers int) {
	s.mu.Lock()
	s.notes += notes
	s.handlers += handlers
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

// waitAtLeast blocks until both counts reach n or ctx ends, and returns them.
func (s *stats) waitAtLeast(ctx context.Context, n int) (int, int) {
	for {
		s.mu.Lock()
		notes, handlers, ch := s.notes, s.handlers, s.changed
		s.mu.Unlock()
		if notes >= n && handlers >= n {
			return notes, handlers
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return notes, handlers
		}
	}
}

// noteReader passes stdin through line by line, counting
// notifications/cancelled messages.
type noteReader struct {
	br      *bufio.Reader
	pending []byte
	st      *stats
}

func (r *noteReader) Read(p []byte) (int, error) {
	if len(r.pending) == 0 {
		line, err := r.br.ReadBytes('\n')
		if bytes.Contains(line, []byte(`"notifications/cancelled"`)) {
			r.st.add(1, 0)
		}
		r.pending = line
		if len(line) == 0 {
			return 0, err
		}
	}
	n := copy(p, r.pending)
	r.pending = r.pending[n:]
	return n, nil
}

func main() {
	mode := flag.String("mode", "stdio", "stdio, http or sse")
	page := flag.Int("page", 3, "tools/list page size")
	stderrLines := flag.Int("stderr-lines", 0, "lines to write to stderr at start")
	stderrText := flag.String("stderr", "", "a line to write to stderr at start")
	flag.Parse()

	if *stderrText != "" {
		fmt.Fprintln(os.Stderr, *stderrText)
	}

	for i := range *stderrLines {
		fmt.Fprintf(os.Stderr, "fake stderr line %d\n", i)
	}

	st := newStats()
	hooks := &server.Hooks{}
	hooks.AddAfterListTools(func(context.Context, any, *mcp.ListToolsRequest, *mcp.ListToolsResult) { st.listed.Add(1) })
	srv := server.NewMCPServer("fakeupstream", "1.0.0",
		server.WithToolCapabilities(true),
		server.WithPaginationLimit(*page),
		server.WithHooks(hooks),
	)
	addTools(srv, st, *mode == "stdio")

	switch *mode {
	case "stdio":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		in := &noteReader{br: bufio.NewReader(os.Stdin), st: st}
		if err := server.NewStdioServer(srv).Listen(ctx, in, os.Stdout); err != nil && err != context.Canceled {
			fmt.Fprintln(os.Stderr, "serving stdio:", err)
		}
	case "http", "sse":
		serveHTTP(srv, st, *mode)
	default:
		fmt.Fprintln(os.Stderr, "unknown mode", *mode)
		os.Exit(2)
	}
}

func serveHTTP(srv *server.MCPServer, st *stats, mode string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "listening:", err)
		os.Exit(1)
	}
	base := "http://" + ln.Addr().String()
	var h http.Handler
	url := base + "/mcp"
	if mode == "sse" {
		url = base + "/sse"
		h = server.NewSSEServer(srv, server.WithBaseURL(base))
	} else {
		h = server.NewStreamableHTTPServer(srv, server.WithStateful(true))
	}
	counting := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte(`"notifications/cancelled"`)) {
				st.add(1, 0)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, r)
	})
	fmt.Fprintf(os.Stderr, "listening %s\n", url)
	hs := &http.Server{Handler: counting, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
		<-sig
		os.Exit(0)
	}()
	_ = hs.Serve(ln)
}

func text(s string) *mcp.CallToolResult { return mcp.NewToolResultText(s) }

func addTools(srv *server.MCPServer, st *stats, stdio bool) {
	anyArgs := json.RawMessage(`{"type":"object"}`)

	echo := func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		raw := req.Params.RawArguments
		if len(raw) == 0 {
			raw = json.RawMessage("null")
		}
		res := text(string(raw))
		res.RawStructuredContent = json.RawMessage(`{"received":` + string(raw) + `}`)
		return res, nil
	}
	srv.AddTool(rawTool("echo",
		mcp.WithDescription("Echoes its raw arguments."),
		mcp.WithTitleAnnotation("Echo"),
		mcp.WithIdempotentHintAnnotation(true),
		mcp.WithRawInputSchema(anyArgs),
	), echo)

	raw := mcp.NewToolWithRawSchema("raw", "Has a schema mcp.Tool cannot model.", json.RawMessage(RawSchema))
	raw.RawOutputSchema = json.RawMessage(RawOutputSchema)
	raw.Annotations.ReadOnlyHint = mcp.ToBoolPtr(true)
	srv.AddTool(raw, func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res := text(`{"ok":true}`)
		res.RawStructuredContent = json.RawMessage(`{"ok":true}`)
		return res, nil
	})

	srv.AddTool(rawTool("image", mcp.WithDescription("Returns an image."), mcp.WithRawInputSchema(anyArgs)),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultImage("an image", base64.StdEncoding.EncodeToString(ImagePNG), "image/png"), nil
		})

	srv.AddTool(rawTool("slow", mcp.WithDescription("Reports progress every 50ms until cancelled."), mcp.WithRawInputSchema(anyArgs)),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var token any
			if req.Params.Meta != nil {
				token = req.Params.Meta.ProgressToken
			}
			t := time.NewTicker(50 * time.Millisecond)
			defer t.Stop()
			for i := 1; ; i++ {
				select {
				case <-ctx.Done():
					st.add(0, 1)
					return nil, ctx.Err()
				case <-t.C:
				}
				if token != nil {
					_ = server.ServerFromContext(ctx).SendNotificationToClient(ctx, "notifications/progress", map[string]any{
						"progressToken": token, "progress": i, "total": 1000, "message": fmt.Sprintf("step %d", i),
					})
				}
			}
		})

	srv.AddTool(rawTool("cancel_stats", mcp.WithDescription("Waits until at_least cancellations were seen."),
		mcp.WithNumber("at_least")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			notes, handlers := st.waitAtLeast(ctx, req.GetInt("at_least", 0))
			return text(fmt.Sprintf(`{"notes":%d,"handlers":%d}`, notes, handlers)), nil
		})

	srv.AddTool(rawTool("add_tool", mcp.WithDescription("Registers a tool at runtime."), mcp.WithString("name", mcp.Required())),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			name := req.GetString("name", "")
			srv.AddTool(rawTool(name, mcp.WithRawInputSchema(anyArgs)), echo)
			return text("added " + name), nil
		})

	srv.AddTool(rawTool("churn", mcp.WithDescription("Sends count notifications/tools/list_changed, gap_ms apart, as a hostile upstream would; returns how many tools/list requests it answered meanwhile."),
		mcp.WithNumber("count", mcp.Required()), mcp.WithNumber("gap_ms", mcp.Required())),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			before := st.listed.Load()
			tick := time.NewTicker(time.Duration(req.GetInt("gap_ms", 10)) * time.Millisecond)
			defer tick.Stop()
			for range req.GetInt("count", 1) {
				srv.SendNotificationToAllClients(string(mcp.MethodNotificationToolsListChanged), nil)
				select {
				case <-tick.C:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return text(strconv.FormatInt(st.listed.Load()-before, 10)), nil
		})

	srv.AddTool(rawTool("crash", mcp.WithDescription("Exits: mode exit (mid-call) or after (after replying)."), mcp.WithString("mode")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if req.GetString("mode", "exit") == "after" {
				go func() {
					time.Sleep(100 * time.Millisecond)
					os.Exit(3)
				}()
				return text("bye"), nil
			}
			os.Exit(3)
			return nil, nil
		})

	if stdio {
		srv.AddTool(rawTool("garbage", mcp.WithDescription("Writes a non-JSON line to stdout."), mcp.WithRawInputSchema(anyArgs)),
			func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				_, _ = os.Stdout.WriteString("this is not JSON-RPC\n")
				time.Sleep(100 * time.Millisecond) // let the garbage line go first
				return text("garbage written"), nil
			})
	}

	srv.AddTool(rawTool("big", mcp.WithDescription("Returns a text of size bytes."), mcp.WithNumber("size", mcp.Required())),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text(strings.Repeat("x", req.GetInt("size", 0))), nil
		})

	srv.AddTool(rawTool("pid", mcp.WithDescription("Returns the process ID."), mcp.WithReadOnlyHintAnnotation(true), mcp.WithRawInputSchema(anyArgs)),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text(strconv.Itoa(os.Getpid())), nil
		})

	srv.AddTool(rawTool("getenv", mcp.WithDescription("Returns the value of an environment variable, then each argument after a newline."), mcp.WithString("name", mcp.Required())),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text(strings.Join(append([]string{os.Getenv(req.GetString("name", ""))}, os.Args[1:]...), "\n")), nil
		})

	srv.AddTool(rawTool("log", mcp.WithDescription("Sends a log notification."), mcp.WithString("level")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			_ = server.ServerFromContext(ctx).SendNotificationToClient(ctx, "notifications/message", map[string]any{
				"level": req.GetString("level", "info"), "logger": "fake", "data": "upstream says hi",
			})
			return text("logged"), nil
		})

	srv.AddTool(rawTool("fail", mcp.WithDescription("Returns an isError result."), mcp.WithRawInputSchema(anyArgs)),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultError("it failed"), nil
		})

	srv.AddTool(rawTool(LongName, mcp.WithDescription("Too long once prefixed."), mcp.WithRawInputSchema(anyArgs)), echo)
}

// rawTool is mcp.NewTool for tools given a raw input schema: NewTool fills
// in a default InputSchema, and a tool with both cannot be marshalled.
func rawTool(name string, opts ...mcp.ToolOption) mcp.Tool {
	t := mcp.NewTool(name, opts...)
	if len(t.RawInputSchema) > 0 {
		t.InputSchema = mcp.ToolInputSchema{}
	}
	return t
}
