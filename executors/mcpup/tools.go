package mcpup

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

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
// prefixed, schemas raw), each bound to its executor. No tool is dropped
// for its name: one whose prefixed name is not a valid MCP name (longer
// than registry.MaxNameLen, or with characters MCP does not allow) gets a
// valid one (names), and is called upstream by its own. Repeated names are
// skipped with a warning.
func (u *upstream) convert(raw []rawTool) []executors.Bound {
	raw = u.uniqueWanted(raw)
	named := u.names(raw)
	tools := make([]executors.Bound, 0, len(raw))
	source := "upstream:" + u.cfg.Name
	for _, rt := range raw {
		name := named[rt.Name]
		if name == "" {
			continue // no room beside the prefix; logged by names
		}
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
		if name != u.cfg.NamePrefix()+rt.Name {
			t.UpstreamName = rt.Name
			if t.Title == "" {
				// The readable name, for clients that show titles.
				t.Title = rt.Name
			}
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

// uniqueWanted is raw without the tools the filters leave out and without
// repeats of a name (warned about).
func (u *upstream) uniqueWanted(raw []rawTool) []rawTool {
	seen := make(map[string]bool, len(raw))
	out := make([]rawTool, 0, len(raw))
	for _, rt := range raw {
		if !u.wanted(rt.Name) {
			continue
		}
		if seen[rt.Name] {
			u.m.logger.Warn("skipping repeated upstream tool", "upstream", u.cfg.Name, "tool", logLine([]byte(rt.Name)))
			continue
		}
		seen[rt.Name] = true
		out = append(out, rt)
	}
	return out
}

// names maps each tool's own name to its name in toolgate ("" when the
// prefix leaves it no room). Valid prefixed names are kept; then the
// others, in the order of their own names (so that the same listing gives
// the same names on every run and replica, whatever order the upstream
// lists in), get [registry.UniqueName] of their sanitized prefixed name: a
// readable start and a hash of the whole when too long, numbered on a
// clash. Each rename is logged once per upstream.
func (u *upstream) names(raw []rawTool) map[string]string {
	prefix := u.cfg.NamePrefix()
	named := make(map[string]string, len(raw))
	used := make(map[string]string, len(raw))
	var renames []string
	for _, rt := range raw {
		if registry.ValidateName(prefix+rt.Name) == nil {
			named[rt.Name] = prefix + rt.Name
			used[prefix+rt.Name] = prefix + rt.Name
		} else {
			renames = append(renames, rt.Name)
		}
	}
	slices.Sort(renames)
	for _, orig := range renames {
		own := registry.SanitizeName(orig)
		if own == "" {
			own = "tool"
		}
		name, note := registry.UniqueName(prefix+own, used)
		named[orig] = name
		if name != "" {
			used[name] = prefix + orig
		}
		u.logRename(orig, name, note)
	}
	return named
}

// logRename logs, the first time it is decided, what orig is named in
// toolgate.
func (u *upstream) logRename(orig, name, note string) {
	u.renamesMu.Lock()
	old, seen := u.renames[orig]
	u.renames[orig] = name
	u.renamesMu.Unlock()
	if seen && old == name {
		return
	}
	tool := logLine([]byte(orig))
	switch {
	case name == "":
		u.m.logger.Warn("skipping upstream tool: the prefix leaves no room for its name", "upstream", u.cfg.Name, "tool", tool, "max", registry.MaxNameLen)
	case strings.Contains(note, "taken by"):
		u.m.logger.Warn("upstream tool renamed: its shortened name clashed", "upstream", u.cfg.Name, "tool", tool, "name", name, "note", note)
	default:
		u.m.logger.Info("upstream tool renamed: its name is not a valid MCP tool name", "upstream", u.cfg.Name, "tool", tool, "name", name)
	}
}

func schemaOrNil(s json.RawMessage) json.RawMessage {
	if len(s) == 0 || string(s) == "null" {
		return nil
	}
	return s
}

func isTrue(b *bool) bool { return b != nil && *b }
