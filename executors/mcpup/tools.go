package mcpup

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

// maxListPages bounds the pages of one tools/list, against an upstream
// whose cursors never end.
const maxListPages = 1000

// rawTool is a tool as an upstream lists it. Schemas stay raw: mcp.Tool
// would drop every keyword it does not model ($schema, oneOf, ...).
type rawTool struct {
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  *rawAnnotations `json:"annotations,omitempty"`
}

type rawAnnotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    *bool  `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool  `json:"destructiveHint,omitempty"`
	IdempotentHint  *bool  `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool  `json:"openWorldHint,omitempty"`
}

type listParams struct {
	Cursor string `json:"cursor,omitempty"`
}

type listResult struct {
	Tools      []rawTool `json:"tools"`
	NextCursor string    `json:"nextCursor,omitempty"`
}

// listTools returns every tool the upstream lists, following nextCursor.
func (c *conn) listTools(ctx context.Context) ([]rawTool, error) {
	var all []rawTool
	seen := make(map[string]bool)
	cursor := ""
	for range maxListPages {
		resp, err := c.request(ctx, string(mcp.MethodToolsList), listParams{Cursor: cursor})
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, err
		case err != nil:
			return nil, c.transportError(fmt.Sprintf("listing tools of upstream %q", c.u.cfg.Name), err)
		case resp.Error != nil:
			return nil, c.u.errorf(retry.Execution, nil, "listing tools of upstream %q: %s (JSON-RPC error %d)", c.u.cfg.Name, resp.Error.Message, resp.Error.Code)
		}
		var page listResult
		if err := json.Unmarshal(resp.Result, &page); err != nil {
			return nil, c.u.errorf(retry.Execution, err, "listing tools of upstream %q: decoding the result: %v", c.u.cfg.Name, err)
		}
		all = append(all, page.Tools...)
		if page.NextCursor == "" {
			return all, nil
		}
		if seen[page.NextCursor] {
			return nil, retry.Errorf(retry.Execution, "listing tools of upstream %q: the upstream repeated a cursor", c.u.cfg.Name)
		}
		seen[page.NextCursor] = true
		cursor = page.NextCursor
	}
	return nil, retry.Errorf(retry.Execution, "listing tools of upstream %q: more than %d pages", c.u.cfg.Name, maxListPages)
}

// importTools lists c's tools and hands them to OnTools, each with its
// executor.
func (u *upstream) importTools(ctx context.Context, c *conn) error {
	ctx, cancel := context.WithTimeout(ctx, u.startupTimeout)
	defer cancel()
	raw, err := c.listTools(ctx)
	if err != nil {
		return err
	}
	tools := u.convert(raw)
	u.m.logger.Info("upstream tools listed", "upstream", u.cfg.Name, "tools", len(tools))
	if u.m.onTools != nil {
		if err := u.m.onTools(u.cfg.Name, tools); err != nil {
			u.m.logger.Warn("registering upstream tools", "upstream", u.cfg.Name, "error", err)
		}
	}
	return nil
}

// convert turns an upstream's listing into registry tools (filtered,
// prefixed, schemas raw), each bound to its executor. Tools whose prefixed
// name is not a valid MCP name, and repeated names, are skipped with a
// warning.
func (u *upstream) convert(raw []rawTool) []executors.Bound {
	names := make(map[string]bool, len(raw))
	tools := make([]executors.Bound, 0, len(raw))
	source := "upstream:" + u.cfg.Name
	for _, rt := range raw {
		if !u.wanted(rt.Name) {
			continue
		}
		name := u.cfg.NamePrefix() + rt.Name
		if err := registry.ValidateName(name); err != nil {
			u.m.logger.Warn("skipping upstream tool with an invalid name", "upstream", u.cfg.Name, "tool", logLine([]byte(rt.Name)), "error", err)
			continue
		}
		if _, dup := names[name]; dup {
			u.m.logger.Warn("skipping repeated upstream tool", "upstream", u.cfg.Name, "tool", rt.Name)
			continue
		}
		names[name] = true
		t := registry.Tool{
			Name:         name,
			Title:        rt.Title,
			Description:  rt.Description,
			Kind:         registry.MCP,
			Source:       source,
			InputSchema:  schemaOrNil(rt.InputSchema),
			OutputSchema: schemaOrNil(rt.OutputSchema),
			Timeout:      u.cfg.Timeout,
		}
		if a := rt.Annotations; a != nil {
			t.Annotations = registry.Annotations{
				Title:           a.Title,
				ReadOnlyHint:    a.ReadOnlyHint,
				DestructiveHint: a.DestructiveHint,
				IdempotentHint:  a.IdempotentHint,
				OpenWorldHint:   a.OpenWorldHint,
			}
		}
		if u.cfg.Idempotent != nil {
			t.Idempotent = *u.cfg.Idempotent
		} else {
			t.Idempotent = isTrue(t.Annotations.IdempotentHint) || isTrue(t.Annotations.ReadOnlyHint)
		}
		tools = append(tools, executors.Bound{Tool: t, Exec: u.bind(rt.Name)})
	}
	return tools
}

func schemaOrNil(s json.RawMessage) json.RawMessage {
	if len(s) == 0 || string(s) == "null" {
		return nil
	}
	return s
}

func isTrue(b *bool) bool { return b != nil && *b }
