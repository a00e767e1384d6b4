package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/builtin"
	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/registry"
)

// serveCalcFlag is the flag with which bench/peerbench.sh runs the bench
// as the calc kind's baseline: a bare mcp-go server whose one tool is
// builtin's calc, with the same name, schema and function as toolgate's.
const serveCalcFlag = "serve-calc"

// serveCalc serves calc over streamable HTTP on addr (a loopback address)
// until ctx is done. The handler does what a hand-written mcp-go tool
// does: it calls the function with the decoded arguments and returns its
// text and structured value, or the error as an isError result. mcp-go
// validates nothing beyond the JSON-RPC shape.
func serveCalc(ctx context.Context, addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("-%s %q: %w", serveCalcFlag, addr, err)
	}
	if !config.IsLoopbackHost(host) {
		return fmt.Errorf("-%s %q: loopback addresses only", serveCalcFlag, addr)
	}
	var reg calcRegistrar
	if err := builtin.Register(&reg, []string{"calc"}, nil); err != nil {
		return err
	}
	srv := server.NewMCPServer("bare-calc", "1", server.WithToolCapabilities(false))
	tool := mcp.Tool{Name: reg.tool.Name, Description: reg.tool.Description, RawInputSchema: reg.tool.InputSchema}
	fn := reg.fn
	srv.AddTool(tool, func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := fn(ctx, req.GetArguments())
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		out := &mcp.CallToolResult{StructuredContent: res.Structured}
		for _, c := range res.Content {
			out.Content = append(out.Content, mcp.NewTextContent(c.Text))
		}
		return out, nil
	})
	// As the shared harness's upstream: mcp-go's defaults, both eras.
	h := server.NewStreamableHTTPServer(srv)
	hs := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	if err := hs.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// calcRegistrar keeps the one stateless tool builtin registers.
type calcRegistrar struct {
	tool registry.Tool
	fn   executors.StatelessFunc
}

func (r *calcRegistrar) RegisterStateless(tool registry.Tool, fn executors.StatelessFunc) error {
	r.tool, r.fn = tool, fn
	return nil
}

func (r *calcRegistrar) RegisterStateful(tool registry.Tool, _ executors.Factory) error {
	return fmt.Errorf("bare calc: unexpected stateful tool %q", tool.Name)
}
