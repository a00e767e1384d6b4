// Command conformancefixture is the upstream MCP server the conformance
// test puts behind toolgate: an mcp-go server carrying every tool, resource,
// prompt and completion the server scenarios of the official conformance
// suite (@modelcontextprotocol/conformance) expect, with the behaviour each
// scenario checks. It is built by the tests, never shipped.
//
// Usage:
//
//	conformancefixture                 # serves stdio
//	conformancefixture -http 127.0.0.1:0
//
// With -http it serves streamable HTTP at /mcp and prints
// "listening http://ADDR/mcp" on stdout once it accepts connections.
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// pngPixel is a 1×1 red PNG, and wavSilence a WAV file of one silent
// sample: the smallest image and audio the scenarios accept.
var (
	pngPixel   = mustBase64("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")
	wavSilence = mustBase64("UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQIAAAAAAA==")
)

func mustBase64(s string) string {
	if _, err := base64.StdEncoding.DecodeString(s); err != nil {
		panic(err)
	}
	return s
}

// step is the delay between the notifications of the logging and progress
// tools, as the scenarios describe them (about 50 ms).
const step = 50 * time.Millisecond

func main() {
	addr := flag.String("http", "", "serve streamable HTTP on this address (default: stdio)")
	flag.Parse()
	srv := newServer()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *addr == "" {
		out = &lineWriter{w: os.Stdout}
		if err := server.NewStdioServer(srv).Listen(ctx, os.Stdin, out); err != nil && !errors.Is(err, context.Canceled) {
			fmt.Fprintln(os.Stderr, "conformancefixture:", err)
			os.Exit(1)
		}
		return
	}
	if err := serveHTTP(ctx, srv, *addr); err != nil {
		fmt.Fprintln(os.Stderr, "conformancefixture:", err)
		os.Exit(1)
	}
}

// out is stdout when the fixture serves stdio, nil otherwise. mcp-go's
// stdio server queues a handler's notifications for a goroutine of its
// own, which may write the last of them after the handler's result (a
// client then drops it: its call is over). A server must send a
// request's notifications before its response, as the TS SDK's does, so
// over stdio the fixture writes them itself, in the handler; mcp-go
// writes each message in one Write, and lineWriter keeps lines whole.
var out *lineWriter

type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// notify sends a notification of the request ctx serves, before its
// response.
func notify(ctx context.Context, srv *server.MCPServer, method string, params map[string]any) {
	if out == nil {
		_ = srv.SendNotificationToClient(ctx, method, params)
		return
	}
	b, err := json.Marshal(mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{Method: method, Params: mcp.NotificationParams{AdditionalFields: params}}})
	if err == nil {
		_, _ = out.Write(append(b, '\n'))
	}
}

// logMessage sends a log message of the request ctx serves at info, if
// the session's level lets it through, before its response.
func logMessage(ctx context.Context, srv *server.MCPServer, msg string) {
	n := mcp.NewLoggingMessageNotification(mcp.LoggingLevelInfo, "conformance-fixture", msg)
	if out == nil {
		_ = srv.SendLogMessageToClient(ctx, n)
		return
	}
	if s, ok := server.ClientSessionFromContext(ctx).(server.SessionWithLogging); !ok || !n.Params.Level.ShouldSendTo(s.GetLogLevel()) {
		return
	}
	notify(ctx, srv, n.Method, map[string]any{"level": n.Params.Level, "logger": n.Params.Logger, "data": n.Params.Data})
}

func serveHTTP(ctx context.Context, srv *server.MCPServer, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", server.NewStreamableHTTPServer(srv,
		server.WithStateful(true),
		server.WithEventStore(server.NewInMemoryEventStore()),
		server.WithStreamableHTTPProtocolVersions(mcp.ProtocolVersion20251125, mcp.ProtocolVersion20250618, mcp.ProtocolVersion20250326),
	))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("listening http://%s/mcp\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return hs.Shutdown(sctx)
	}
}

func newServer() *server.MCPServer {
	srv := server.NewMCPServer("toolgate-conformance-fixture", "1.0.0",
		server.WithToolCapabilities(true),
		server.WithResourceCapabilities(true, true),
		server.WithPromptCapabilities(true),
		server.WithLogging(),
		server.WithCompletions(),
		server.WithPromptCompletionProvider(completions{}),
		server.WithResourceCompletionProvider(completions{}),
	)
	addTools(srv)
	addResources(srv)
	addPrompts(srv)
	return srv
}

func text(s string) *mcp.CallToolResult { return mcp.NewToolResultText(s) }

func addTools(srv *server.MCPServer) {
	noArgs := func(name, desc string, h server.ToolHandlerFunc) server.ServerTool {
		return server.ServerTool{Tool: mcp.NewTool(name, mcp.WithDescription(desc)), Handler: h}
	}
	srv.AddTools(
		noArgs("test_simple_text", "Returns a simple text response", func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text("This is a simple text response for testing."), nil
		}),
		noArgs("test_image_content", "Returns a 1x1 PNG image", func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewImageContent(pngPixel, "image/png")}}, nil
		}),
		noArgs("test_audio_content", "Returns a short WAV file", func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewAudioContent(wavSilence, "audio/wav")}}, nil
		}),
		noArgs("test_embedded_resource", "Returns an embedded text resource", func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewEmbeddedResource(mcp.TextResourceContents{
				URI: "test://embedded-resource", MIMEType: "text/plain", Text: "This is an embedded resource content.",
			})}}, nil
		}),
		noArgs("test_multiple_content_types", "Returns text, an image and a resource", func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				mcp.NewTextContent("Multiple content types test:"),
				mcp.NewImageContent(pngPixel, "image/png"),
				mcp.NewEmbeddedResource(mcp.TextResourceContents{URI: "test://mixed-content-resource", MIMEType: "application/json", Text: `{"test":"data","value":123}`}),
			}}, nil
		}),
		noArgs("test_tool_with_logging", "Sends three log messages while it runs", func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			for i, msg := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
				if i > 0 && !sleep(ctx, step) {
					return nil, ctx.Err()
				}
				logMessage(ctx, srv, msg)
			}
			return text("Tool with logging executed successfully"), nil
		}),
		noArgs("test_error_handling", "Always fails", func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultError("This tool intentionally returns an error for testing"), nil
		}),
		noArgs("test_tool_with_progress", "Reports progress 0, 50 and 100 of 100", func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var token mcp.ProgressToken
			if req.Params.Meta != nil {
				token = req.Params.Meta.ProgressToken
			}
			for i, p := range []float64{0, 50, 100} {
				if i > 0 && !sleep(ctx, step) {
					return nil, ctx.Err()
				}
				if token != nil {
					notify(ctx, srv, "notifications/progress", map[string]any{"progressToken": token, "progress": p, "total": 100})
				}
			}
			return text("Tool with progress executed successfully"), nil
		}),
		noArgs("test_reconnection", "Answers after a short pause (the SSE polling scenario calls it)", func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if !sleep(ctx, step) {
				return nil, ctx.Err()
			}
			return text("Reconnection test completed"), nil
		}),
		server.ServerTool{
			Tool: mcp.NewTool("test_sampling", mcp.WithDescription("Asks the client's LLM through sampling/createMessage"),
				mcp.WithString("prompt", mcp.Required(), mcp.Description("The prompt to send to the LLM"))),
			Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				res, err := srv.RequestSampling(ctx, mcp.CreateMessageRequest{CreateMessageParams: mcp.CreateMessageParams{
					Messages:  []mcp.SamplingMessage{{Role: mcp.RoleUser, Content: mcp.NewTextContent(req.GetString("prompt", ""))}},
					MaxTokens: 100,
				}})
				if err != nil {
					return mcp.NewToolResultErrorf("sampling failed: %v", err), nil
				}
				reply := ""
				if tc, ok := res.Content.(mcp.TextContent); ok {
					reply = tc.Text
				}
				return text("LLM response: " + reply), nil
			},
		},
		server.ServerTool{
			Tool: mcp.NewTool("test_elicitation", mcp.WithDescription("Asks the client's user through elicitation/create"),
				mcp.WithString("message", mcp.Required(), mcp.Description("The message to show the user"))),
			Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return elicit(ctx, srv, req.GetString("message", ""), map[string]any{
					"type": "object",
					"properties": map[string]any{
						"username": map[string]any{"type": "string", "description": "User's response"},
						"email":    map[string]any{"type": "string", "description": "User's email address"},
					},
					"required": []any{"username", "email"},
				}, "User response: ")
			},
		},
		noArgs("test_elicitation_sep1034_defaults", "Elicits a form whose fields all have defaults", func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return elicit(ctx, srv, "Please review and update the form fields with defaults", map[string]any{
				"type": "object",
				"properties": map[string]any{
					"name":     map[string]any{"type": "string", "description": "User name", "default": "John Doe"},
					"age":      map[string]any{"type": "integer", "description": "User age", "default": 30},
					"score":    map[string]any{"type": "number", "description": "User score", "default": 95.5},
					"status":   map[string]any{"type": "string", "description": "User status", "enum": []any{"active", "inactive", "pending"}, "default": "active"},
					"verified": map[string]any{"type": "boolean", "description": "Verification status", "default": true},
				},
			}, "Elicitation completed: ")
		}),
		noArgs("test_elicitation_sep1330_enums", "Elicits a form with every kind of enum", func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			titled := func(pairs ...string) []any {
				var out []any
				for i := 0; i < len(pairs); i += 2 {
					out = append(out, map[string]any{"const": pairs[i], "title": pairs[i+1]})
				}
				return out
			}
			return elicit(ctx, srv, "Please select options from the enum fields", map[string]any{
				"type": "object",
				"properties": map[string]any{
					"untitledSingle": map[string]any{"type": "string", "description": "Select one option", "enum": []any{"option1", "option2", "option3"}},
					"titledSingle":   map[string]any{"type": "string", "description": "Select one option with titles", "oneOf": titled("value1", "First Option", "value2", "Second Option", "value3", "Third Option")},
					"legacyEnum":     map[string]any{"type": "string", "description": "Select one option (legacy)", "enum": []any{"opt1", "opt2", "opt3"}, "enumNames": []any{"Option One", "Option Two", "Option Three"}},
					"untitledMulti":  map[string]any{"type": "array", "description": "Select multiple options", "items": map[string]any{"type": "string", "enum": []any{"option1", "option2", "option3"}}},
					"titledMulti":    map[string]any{"type": "array", "description": "Select multiple options with titles", "items": map[string]any{"anyOf": titled("value1", "First Choice", "value2", "Second Choice", "value3", "Third Choice")}},
				},
			}, "Elicitation completed: ")
		}),
		server.ServerTool{
			Tool: mcp.NewToolWithRawSchema("json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features", []byte(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "$defs": {"address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
  "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
  "additionalProperties": false
}`)),
			Handler: func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return text(fmt.Sprintf("JSON Schema 2020-12 tool called with: %s", req.Params.RawArguments)), nil
			},
		},
	)
}

// elicit asks the calling client's user with schema and reports the answer
// as text after prefix.
func elicit(ctx context.Context, srv *server.MCPServer, message string, schema map[string]any, prefix string) (*mcp.CallToolResult, error) {
	res, err := srv.RequestElicitation(ctx, mcp.ElicitationRequest{Params: mcp.ElicitationParams{Message: message, RequestedSchema: schema}})
	if err != nil {
		return mcp.NewToolResultErrorf("elicitation failed: %v", err), nil
	}
	return text(fmt.Sprintf("%saction=%s, content=%v", prefix, res.Action, res.Content)), nil
}

func addResources(srv *server.MCPServer) {
	srv.AddResources(
		server.ServerResource{
			Resource: mcp.NewResource("test://static-text", "Static Text Resource", mcp.WithResourceDescription("A static text resource for testing"), mcp.WithMIMEType("text/plain")),
			Handler: func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
				return []mcp.ResourceContents{mcp.TextResourceContents{URI: "test://static-text", MIMEType: "text/plain", Text: "This is the content of the static text resource."}}, nil
			},
		},
		server.ServerResource{
			Resource: mcp.NewResource("test://static-binary", "Static Binary Resource", mcp.WithResourceDescription("A static binary resource (image) for testing"), mcp.WithMIMEType("image/png")),
			Handler: func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
				return []mcp.ResourceContents{mcp.BlobResourceContents{URI: "test://static-binary", MIMEType: "image/png", Blob: pngPixel}}, nil
			},
		},
		server.ServerResource{
			Resource: mcp.NewResource("test://watched-resource", "Watched Resource", mcp.WithResourceDescription("A resource that can be subscribed to"), mcp.WithMIMEType("text/plain")),
			Handler: func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
				return []mcp.ResourceContents{mcp.TextResourceContents{URI: "test://watched-resource", MIMEType: "text/plain", Text: "Watched resource content"}}, nil
			},
		},
	)
	srv.AddResourceTemplate(
		mcp.NewResourceTemplate("test://template/{id}/data", "Resource Template", mcp.WithTemplateDescription("A resource template with parameter substitution"), mcp.WithTemplateMIMEType("application/json")),
		func(_ context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			id := ""
			if v, ok := req.Params.Arguments["id"]; ok {
				switch v := v.(type) {
				case []string:
					if len(v) > 0 {
						id = v[0]
					}
				default:
					id = fmt.Sprint(v)
				}
			}
			return []mcp.ResourceContents{mcp.TextResourceContents{
				URI: req.Params.URI, MIMEType: "application/json",
				Text: fmt.Sprintf(`{"id":%q,"templateTest":true,"data":"Data for ID: %s"}`, id, id),
			}}, nil
		},
	)
}

func addPrompts(srv *server.MCPServer) {
	user := func(c mcp.Content) []mcp.PromptMessage {
		return []mcp.PromptMessage{mcp.NewPromptMessage(mcp.RoleUser, c)}
	}
	srv.AddPrompts(
		server.ServerPrompt{
			Prompt: mcp.NewPrompt("test_simple_prompt", mcp.WithPromptDescription("A simple prompt without arguments")),
			Handler: func(context.Context, mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
				return mcp.NewGetPromptResult("A simple prompt", user(mcp.NewTextContent("This is a simple prompt for testing."))), nil
			},
		},
		server.ServerPrompt{
			Prompt: mcp.NewPrompt("test_prompt_with_arguments", mcp.WithPromptDescription("A prompt with required arguments"),
				mcp.WithArgument("arg1", mcp.ArgumentDescription("First test argument"), mcp.RequiredArgument()),
				mcp.WithArgument("arg2", mcp.ArgumentDescription("Second test argument"), mcp.RequiredArgument())),
			Handler: func(_ context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
				a := req.Params.Arguments
				return mcp.NewGetPromptResult("A prompt with arguments", user(mcp.NewTextContent(fmt.Sprintf("Prompt with arguments: arg1='%s', arg2='%s'", a["arg1"], a["arg2"])))), nil
			},
		},
		server.ServerPrompt{
			Prompt: mcp.NewPrompt("test_prompt_with_embedded_resource", mcp.WithPromptDescription("A prompt that includes an embedded resource"),
				mcp.WithArgument("resourceUri", mcp.ArgumentDescription("URI of the resource to embed"), mcp.RequiredArgument())),
			Handler: func(_ context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
				uri := req.Params.Arguments["resourceUri"]
				return mcp.NewGetPromptResult("A prompt with an embedded resource", []mcp.PromptMessage{
					mcp.NewPromptMessage(mcp.RoleUser, mcp.NewEmbeddedResource(mcp.TextResourceContents{URI: uri, MIMEType: "text/plain", Text: "Embedded resource content for testing."})),
					mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent("Please process the embedded resource above.")),
				}), nil
			},
		},
		server.ServerPrompt{
			Prompt: mcp.NewPrompt("test_prompt_with_image", mcp.WithPromptDescription("A prompt that includes image content")),
			Handler: func(context.Context, mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
				return mcp.NewGetPromptResult("A prompt with an image", []mcp.PromptMessage{
					mcp.NewPromptMessage(mcp.RoleUser, mcp.NewImageContent(pngPixel, "image/png")),
					mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent("Please analyze the image above.")),
				}), nil
			},
		},
	)
}

// completions completes prompt arguments and template variables with the
// fixed suggestions that start with what the client typed.
type completions struct{}

var suggestions = []string{"paris", "park", "party", "test", "testValue"}

func complete(prefix string) *mcp.Completion {
	values := []string{}
	for _, s := range suggestions {
		if len(s) >= len(prefix) && s[:len(prefix)] == prefix {
			values = append(values, s)
		}
	}
	return &mcp.Completion{Values: values, Total: len(values)}
}

func (completions) CompletePromptArgument(_ context.Context, _ string, arg mcp.CompleteArgument, _ mcp.CompleteContext) (*mcp.Completion, error) {
	return complete(arg.Value), nil
}

func (completions) CompleteResourceArgument(_ context.Context, _ string, arg mcp.CompleteArgument, _ mcp.CompleteContext) (*mcp.Completion, error) {
	return complete(arg.Value), nil
}

// sleep waits d and reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
