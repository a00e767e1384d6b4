package mcpup

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/retry"
)

// ctxError is the error of a call whose ctx ended: class cancelled or
// timeout, wrapping ctx's error.
func ctxError(upstream, tool string, err error) *retry.Error {
	class := retry.Cancelled
	if errors.Is(err, context.DeadlineExceeded) {
		class = retry.Timeout
	}
	return retry.Errorf(class, "calling upstream %q tool %q: %w", upstream, tool, err)
}

// classifyTransport maps a failure to exchange a message with an upstream
// to a class, and reports whether the connection is broken and must be
// replaced. Over stdio every transport failure means the pipe or the
// process is gone. Over HTTP, an ended session and failures to reach the
// server break the connection; HTTP error statuses do not.
func classifyTransport(err error, stdio bool) (retry.Class, bool) {
	if ae, ok := errors.AsType[*transport.AuthorizationRequiredError](err); ok && ae != nil {
		return retry.Permission, false
	}
	switch {
	case errors.Is(err, errStdinBacklog):
		return retry.Unavailable, false // the upstream is busy, not gone: its other calls go on
	case errors.Is(err, transport.ErrTransportClosed), errors.Is(err, transport.ErrSessionTerminated):
		return retry.Unavailable, true
	case stdio:
		return retry.Unavailable, true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return retry.Network, true
	}
	if ne, ok := errors.AsType[net.Error](err); ok {
		if ne.Timeout() {
			return retry.Timeout, true
		}
		return retry.Network, true
	}
	return retry.Unavailable, false
}

// rpcError classifies a JSON-RPC error the upstream answered a tools/call
// for tool orig with: method not found, or invalid params about an
// unknown tool, is not_found; other invalid params are validation;
// everything else is execution. JSON-RPC has no code for unknown tools, so
// they are recognised by the wording mcp-go and the TypeScript SDK use ("tool 'x' not found", "Tool x
// not found", "Unknown tool").
func (u *upstream) rpcError(orig string, code int, msg string) *retry.Error {
	class := retry.Execution
	switch code {
	case mcp.METHOD_NOT_FOUND:
		class = retry.NotFound
	case mcp.INVALID_PARAMS:
		class = retry.Validation
		lower := strings.ToLower(msg)
		if strings.Contains(lower, "unknown tool") ||
			(strings.Contains(lower, "tool") && strings.Contains(lower, "not found")) {
			class = retry.NotFound
		}
	}
	return u.errorf(class, nil, "upstream %q tool %q: %s (JSON-RPC error %d)", u.cfg.Name, orig, msg, code)
}
