package mcpfront

import (
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
)

// traced serves m as handle does, inside the server span of the MCP
// request (docs/tracing.md): its parent is the trace context of the
// request's _meta, else of the HTTP request's headers. Without a tracer
// it is handle (which serveRequest calls itself then).
func (f *Front) traced(x *exchange, m *message) answer {
	if f.o.Tracer == nil {
		return f.handle(x, m)
	}
	name, tool := m.method, ""
	if m.call != nil {
		tool = m.call.Name
		name += " " + tool // {mcp.method.name} {target}: the span name OpenTelemetry's MCP conventions give
	}
	ctx, span := f.o.Tracer.StartRequest(x.ctx, x.header, m.meta.Fields(false), name)
	defer span.End()
	if span.Recording() {
		span.Str("mcp.method.name", m.method)
		if m.id != nil {
			span.Str("jsonrpc.request.id", strings.Trim(string(m.id), `"`))
		}
		transport := "tcp"
		if x.header == nil {
			transport = "pipe" // stdio
		}
		span.Str("network.transport", transport)
		if tool != "" {
			span.Str("gen_ai.tool.name", tool)
			span.Str("gen_ai.operation.name", "execute_tool")
		}
		if x.ident != nil {
			span.Str("toolgate.principal", x.ident.Name)
		}
	}
	tx := *x
	tx.ctx = ctx
	a := f.handle(&tx, m)
	if a.code != 0 {
		span.Fail(jsonRPCErrorType(a.code), "the request got a JSON-RPC error")
	}
	return a
}

// jsonRPCErrorType is the error.type of a JSON-RPC error code.
func jsonRPCErrorType(code int) string {
	switch code {
	case mcp.PARSE_ERROR:
		return "parse_error"
	case mcp.INVALID_REQUEST:
		return "invalid_request"
	case mcp.METHOD_NOT_FOUND:
		return "method_not_found"
	case mcp.INVALID_PARAMS:
		return "invalid_params"
	case mcp.INTERNAL_ERROR:
		return "internal_error"
	}
	return "jsonrpc_error"
}
