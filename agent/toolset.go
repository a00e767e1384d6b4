package agent

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/gateway"
)

// GatewayToolset is a [Toolset] over an in-process gateway: every kind of
// tool it has, each call through its whole pipeline (validation, loop
// guard, hooks, retries, metrics). Calls run in Thread, so stateful tools
// keep their state across the run. It does not own the gateway.
type GatewayToolset struct {
	// Gateway runs the calls; required.
	Gateway *gateway.Gateway
	// Thread is the thread every call runs in; empty means each call runs
	// in a fresh one-call thread (stateful tools then forget between
	// calls).
	Thread string
}

var _ Toolset = (*GatewayToolset)(nil)

// Tools implements [Toolset]: the gateway's tools, sorted by name.
func (t *GatewayToolset) Tools(context.Context) ([]ToolSpec, error) {
	tools := t.Gateway.Tools()
	out := make([]ToolSpec, 0, len(tools))
	for _, tl := range tools {
		out = append(out, ToolSpec{Name: tl.Name, Description: tl.Description, InputSchema: tl.InputSchema})
	}
	return out, nil
}

// Call implements [Toolset]. A failed call's result reads
// "<class>: <message>", as the gateway's MCP clients see it.
func (t *GatewayToolset) Call(ctx context.Context, c ToolCall) (ToolResult, error) {
	var meta map[string]any
	if t.Thread != "" {
		meta = map[string]any{gateway.ThreadMetaKey: t.Thread}
	}
	res, err := t.Gateway.Call(ctx, c.Name, json.RawMessage(c.Arguments), meta)
	if err != nil {
		return ToolResult{}, err
	}
	return gatewayResult(res), nil
}

// gatewayResult converts a gateway result: its content parts, and its
// structured content as a JSON part when it has no text.
func gatewayResult(res *gateway.Result) ToolResult {
	if res.Passthrough != nil && len(res.Content) == 0 {
		return mcpRawResult(res.Passthrough, res.IsError)
	}
	r := ToolResult{IsError: res.IsError}
	hasText := false
	for _, c := range res.Content {
		switch c.Type {
		case executors.TextContent:
			hasText = true
			r.Content = append(r.Content, Text(c.Text))
		case executors.ImageContent:
			r.Content = append(r.Content, Image("data:"+c.MIMEType+";base64,"+base64.StdEncoding.EncodeToString(c.Data)))
		case executors.ResourceContent:
			if c.Text != "" {
				r.Content = append(r.Content, Text(c.Text))
				hasText = true
			}
		default:
			if b, err := json.Marshal(map[string]string{"type": string(c.Type), "uri": c.URI, "name": c.Name}); err == nil {
				r.Content = append(r.Content, JSONPart(b))
			}
		}
	}
	if res.Structured != nil && !hasText {
		if b, err := json.Marshal(res.Structured); err == nil {
			r.Content = append(r.Content, JSONPart(b))
		}
	}
	return r
}

// mcpRawResult converts an MCP CallToolResult as JSON.
func mcpRawResult(raw json.RawMessage, isError bool) ToolResult {
	var res mcp.CallToolResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return ToolResult{Content: []Part{JSONPart(raw)}, IsError: isError}
	}
	return mcpResult(&res)
}

// MCPOptions say which MCP endpoint an [MCPToolset] connects to: URL, or
// Command for a stdio server.
type MCPOptions struct {
	// URL is a streamable HTTP endpoint, e.g. http://127.0.0.1:8080/mcp.
	URL string
	// Command starts a stdio server: the program and its arguments.
	Command []string
	// Env is added to the stdio server's environment ("KEY=value").
	Env []string
	// Headers are sent with every HTTP request (e.g. Authorization).
	Headers map[string]string
	// OnStart, when not nil, is called once a stdio server's process has
	// started, before its session is initialized, with a function that
	// kills the server at once, as [MCPToolset.Kill] does. A program that
	// must be able to stop at once keeps it: while NewMCPToolset is still
	// initializing the session, or closing a server that failed to, there
	// is no toolset to Kill yet.
	OnStart func(kill func())
}

// MCPToolset is a [Toolset] over any MCP endpoint, through mcp-go's
// client. It lists the server's tools afresh at each step (one round trip,
// small beside a model call), so tools the server adds or removes mid-run
// are seen. Against toolgate, the MCP session is the thread, so stateful
// tools keep their state for the toolset's life. Close it when done.
type MCPToolset struct {
	c      *client.Client
	nextID atomic.Uint64 // the IDs of agent's own requests
	// proc is a stdio server's process, on Unix the leader of a process
	// group of its own (so that a kill reaches what it started: npx's
	// node, a shell's children); nil for a URL.
	proc *os.Process
}

var _ Toolset = (*MCPToolset)(nil)

// NewMCPToolset connects to the endpoint o names and initializes the
// session; ctx bounds the connection, not the toolset's life.
func NewMCPToolset(ctx context.Context, o MCPOptions) (*MCPToolset, error) {
	ts := &MCPToolset{}
	var c *client.Client
	var err error
	switch {
	case o.URL != "" && len(o.Command) > 0:
		return nil, errors.New("mcp: both a URL and a command: give one")
	case o.URL != "":
		var opts []transport.StreamableHTTPCOption
		if len(o.Headers) > 0 {
			opts = append(opts, transport.WithHTTPHeaders(o.Headers))
		}
		c, err = client.NewStreamableHttpClient(o.URL, opts...)
	case len(o.Command) > 0:
		// The command as mcp-go makes it, in a process group of its own,
		// kept for Kill. mcp-go starts it before the constructor returns.
		var cmd *exec.Cmd
		spawn := func(ctx context.Context, command string, env, args []string) (*exec.Cmd, error) {
			cmd = exec.CommandContext(ctx, command, args...)
			cmd.Env = append(os.Environ(), env...)
			cmd.SysProcAttr = serverProcAttr()
			return cmd, nil
		}
		c, err = client.NewStdioMCPClientWithOptions(o.Command[0], o.Env, o.Command[1:], transport.WithCommandFunc(spawn))
		if err == nil && cmd != nil && cmd.Process != nil {
			ts.proc = cmd.Process
			if o.OnStart != nil {
				o.OnStart(ts.Kill)
			}
		}
	default:
		return nil, errors.New("mcp: no endpoint: give a URL or a command")
	}
	if err != nil {
		return nil, fmt.Errorf("mcp: connecting: %w", err)
	}
	ts.c = c
	if err := c.Start(ctx); err != nil {
		_ = ts.Close()
		return nil, fmt.Errorf("mcp: starting: %w", err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	init.Params.ClientInfo = mcp.Implementation{Name: "toolgate-agent", Version: gateway.Version}
	if _, err := c.Initialize(ctx, init); err != nil {
		_ = ts.Close()
		return nil, fmt.Errorf("mcp: initializing: %w", err)
	}
	return ts, nil
}

// Close ends the session. A stdio server is asked to exit by closing its
// stdin, then SIGTERM after 2 s, then killed after 3 s more (mcp-go's
// client does this, for the server's own process); then whatever is left
// of its process group is killed.
func (t *MCPToolset) Close() error {
	err := t.c.Close()
	if t.proc != nil {
		killServer(t.proc)
	}
	return err
}

// Kill ends a stdio server at once, with whatever it started (SIGKILL to
// its process group, on Unix), and returns without waiting; it does
// nothing for a server at a URL. A program that must stop at once (a
// second signal during shutdown) calls Kill before exiting, instead of
// waiting for Close, so that a server that ignores its stdin closing and
// SIGTERM does not outlive it. Close still reaps it.
func (t *MCPToolset) Kill() {
	if t.proc != nil {
		killServer(t.proc)
	}
}

// Tools implements [Toolset]: the server's tools/list, every page, each
// tool with its input schema exactly as the server sent it. mcp-go's
// client decodes a schema into a struct that keeps only type, properties,
// required, additionalProperties and $defs (so oneOf, anyOf, $schema,
// descriptions at the top and the like would never reach the model), and
// never fills in [mcp.Tool.RawInputSchema] when listing; so the schemas
// come from a tools/list agent sends itself, and mcp-go's own listing (one
// more round trip) still runs for what the client keeps from it: the tools
// it filters out, and the x-mcp-header parameters it mirrors into the
// headers of a tools/call.
func (t *MCPToolset) Tools(ctx context.Context) ([]ToolSpec, error) {
	raw, err := t.rawSchemas(ctx)
	if err != nil {
		return nil, fmt.Errorf("mcp: listing tools: %w", err)
	}
	res, err := t.c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return nil, fmt.Errorf("mcp: listing tools: %w", err)
	}
	out := make([]ToolSpec, 0, len(res.Tools))
	for _, tl := range res.Tools {
		schema := raw[tl.Name]
		if len(schema) == 0 {
			// Listed by mcp-go but not by the raw listing (the list
			// changed between the two): the decoded schema will do.
			if b, err := json.Marshal(tl.InputSchema); err == nil {
				schema = b
			}
		}
		out = append(out, ToolSpec{Name: tl.Name, Description: tl.Description, InputSchema: schema})
	}
	return out, nil
}

// maxListPages bounds the pages of one raw tools/list, against a server
// whose cursors never end.
const maxListPages = 1000

// rawSchemas sends tools/list itself, every page, and returns each tool's
// inputSchema as the server sent it, by name. Its requests have IDs of
// their own ("toolgate-agent-N"), which cannot collide with mcp-go's
// numeric ones.
func (t *MCPToolset) rawSchemas(ctx context.Context) (map[string]json.RawMessage, error) {
	out := make(map[string]json.RawMessage)
	cursor := ""
	for range maxListPages {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		resp, err := t.c.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{
			JSONRPC: mcp.JSONRPC_VERSION,
			ID:      mcp.NewRequestId("toolgate-agent-" + strconv.FormatUint(t.nextID.Add(1), 10)),
			Method:  string(mcp.MethodToolsList),
			Params:  params,
		})
		if err != nil {
			return nil, err
		}
		if resp.Error != nil {
			return nil, fmt.Errorf("the server answered error %d: %s", resp.Error.Code, resp.Error.Message)
		}
		var page struct {
			Tools []struct {
				Name        string          `json:"name"`
				InputSchema json.RawMessage `json:"inputSchema"`
			} `json:"tools"`
			NextCursor string `json:"nextCursor"`
		}
		if err := json.Unmarshal(resp.Result, &page); err != nil {
			return nil, fmt.Errorf("decoding the tools/list result: %w", err)
		}
		for _, tl := range page.Tools {
			out[tl.Name] = tl.InputSchema
		}
		if page.NextCursor == "" || page.NextCursor == cursor {
			return out, nil
		}
		cursor = page.NextCursor
	}
	return nil, fmt.Errorf("more than %d pages of tools", maxListPages)
}

// Call implements [Toolset].
func (t *MCPToolset) Call(ctx context.Context, c ToolCall) (ToolResult, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = c.Name
	req.Params.RawArguments = json.RawMessage(c.Arguments)
	res, err := t.c.CallTool(ctx, req)
	if err != nil {
		return ToolResult{}, fmt.Errorf("calling %q: %w", c.Name, err)
	}
	return mcpResult(res), nil
}

// mcpResult converts an MCP tool result: text, images (as data URLs),
// embedded text resources; anything else as JSON; structured content as a
// JSON part when there is no text.
func mcpResult(res *mcp.CallToolResult) ToolResult {
	r := ToolResult{IsError: res.IsError}
	hasText := false
	for _, c := range res.Content {
		if tc, ok := mcp.AsTextContent(c); ok {
			r.Content = append(r.Content, Text(tc.Text))
			hasText = true
			continue
		}
		if ic, ok := mcp.AsImageContent(c); ok {
			r.Content = append(r.Content, Image("data:"+ic.MIMEType+";base64,"+ic.Data))
			continue
		}
		if er, ok := mcp.AsEmbeddedResource(c); ok {
			if trc, ok := er.Resource.(mcp.TextResourceContents); ok {
				r.Content = append(r.Content, Text(trc.Text))
				hasText = true
				continue
			}
		}
		if b, err := json.Marshal(c); err == nil {
			r.Content = append(r.Content, JSONPart(b))
		}
	}
	if !hasText {
		switch {
		case len(res.RawStructuredContent) > 0:
			r.Content = append(r.Content, JSONPart(res.RawStructuredContent))
		case res.StructuredContent != nil:
			if b, err := json.Marshal(res.StructuredContent); err == nil {
				r.Content = append(r.Content, JSONPart(b))
			}
		}
	}
	return r
}
