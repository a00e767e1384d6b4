package catalogtool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/executors/rest/openapi"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

// maxBuiltSchemaBytes bounds the input schemas a catalog keeps built
// (each at most 128 KiB; compiled, several times that).
const maxBuiltSchemaBytes = 4 << 20

// New starts the catalog of openapi source name, whose document is d,
// served with env (every field of which must be set).
//
// Its hidden tools are registered at start with a stub input schema that
// accepts any object, from the document's outline ([openapi.Document.
// Outline]): building every tool's real schema (every $ref inlined) and
// compiling it is what a large document cannot afford (Microsoft Graph:
// 11,422 tools, 1 GB of JSON Schema, hours of compiling). A tool is built
// on first use, by describe, call or a call by name, and replaces its stub
// in the registry; at most maxBuiltSchemaBytes of built schemas stay, the
// least recently used going back to their stubs.
func New(name string, d *openapi.Document, env Env) *Catalog {
	c := newCatalog(name, registry.Prefixed(name, ""), env)
	c.source, c.doc, c.maxBytes = "openapi:"+name, d, maxBuiltSchemaBytes
	c.stub = json.RawMessage(fmt.Sprintf(`{"type":"object","description":"This tool's arguments are built on first use: read them with %s."}`,
		c.MetaName(Describe)))
	return c
}

// Source is an OpenAPI catalog's hidden tools' registry source,
// "openapi:<name>"; "" for other catalogs.
func (c *Catalog) Source() string { return c.source }

// StubSchema is the input schema an OpenAPI catalog's hidden tool is
// registered with until it is built.
func (c *Catalog) StubSchema() json.RawMessage { return c.stub }

// Add records t, the outline of the i-th operation of an OpenAPI
// catalog's document, made from op, and returns the executor to register
// it with: exec, once t is built. Add is called before the catalog is
// served, never after.
func (c *Catalog) Add(t registry.Tool, op openapi.Operation, i int, exec executors.Executor) executors.Executor {
	part := strings.TrimPrefix(t.Name, registry.Prefixed(c.name, ""))
	e := &entry{name: t.Name, summary: op.Summary, operation: op.Method + " " + op.Path, index: i, stub: t}
	e.setWords([5]string{
		part + " " + splitWords(part),
		op.OperationID + " " + splitWords(op.OperationID) + " " + strings.Join(op.Tags, " "),
		op.Path,
		op.Summary,
		t.Description,
	})
	c.tmu.Lock()
	c.ix.put(e)
	c.tmu.Unlock()
	return hiddenExec{c: c, e: e, rest: exec}
}

// touch reports whether e is built, marking it the most recently used.
func (c *Catalog) touch(e *entry) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.built == nil {
		return false
	}
	c.recent.MoveToFront(e.built)
	return true
}

// build registers e's tool with its real input schema in place of its
// stub, unless it is built, and puts back the stubs of the least recently
// used tools while the built schemas pass maxBuiltSchemaBytes. A tool the
// document no longer makes (its conversion failed) is an error.
func (c *Catalog) build(e *entry) error {
	if c.touch(e) {
		return nil
	}
	c.buildMu.Lock()
	defer c.buildMu.Unlock()
	if c.touch(e) {
		return nil
	}
	spec, ws, ok := c.doc.Spec(e.index)
	if !ok {
		reason := "its operation could not be converted"
		if len(ws) > 0 {
			reason = ws[0].Msg
		}
		return retry.Errorf(retry.Internal, "building tool %q: %s", e.name, reason)
	}
	for _, w := range ws {
		c.env.Logger.Debug("openapi operation", "source", c.name, "operation", w.Operation, "tool", w.Tool, "note", w.Msg)
	}
	t, _, err := c.env.Compile(spec)
	if err != nil {
		return retry.Wrap(retry.Internal, fmt.Sprintf("building tool %q", e.name), err)
	}
	if err := c.env.Replace(t); err != nil {
		return retry.Wrap(retry.Internal, fmt.Sprintf("building tool %q", e.name), err)
	}
	var stubs []registry.Tool
	c.mu.Lock()
	c.builds++
	e.size = len(t.InputSchema)
	e.built = c.recent.PushFront(e)
	c.bytes += e.size
	for c.bytes > c.maxBytes && c.recent.Len() > 1 {
		old := c.recent.Remove(c.recent.Back()).(*entry)
		old.built = nil
		c.bytes -= old.size
		stubs = append(stubs, old.stub)
	}
	c.mu.Unlock()
	if len(stubs) > 0 {
		if err := c.env.Replace(stubs...); err != nil {
			c.env.Logger.Error("catalog: putting back the stubs of tools built least recently", "source", c.name, "error", err.Error())
		}
	}
	return nil
}

// builtTool returns e's tool as registered with its real input schema,
// building it first when needed.
func (c *Catalog) builtTool(e *entry) (*registry.Tool, error) {
	if c.doc == nil {
		t, ok := c.env.Tool(e.name)
		if !ok {
			return nil, retry.Errorf(retry.NotFound, "tool %q was just removed; search again", e.name)
		}
		return t, nil
	}
	// Another build may put e's stub back between build and Get; a few
	// tries outlast any but a flood of builds.
	for range 3 {
		if err := c.build(e); err != nil {
			return nil, err
		}
		t, ok := c.env.Tool(e.name)
		if !ok {
			return nil, retry.Errorf(retry.NotFound, "tool %q was just removed", e.name)
		}
		if !bytes.Equal(t.InputSchema, c.stub) {
			return t, nil
		}
	}
	return nil, retry.Errorf(retry.Unavailable, "tool %q: too many other tools of %s are being built; try again", e.name, c.name)
}

// hiddenExec runs a hidden tool: the REST executor of its outline, after
// building the tool when the call was resolved to its stub (whose schema
// accepts any object), and checking the arguments against the real
// schema.
type hiddenExec struct {
	c    *Catalog
	e    *entry
	rest executors.Executor
}

var _ executors.SelfRetrying = hiddenExec{}

func (x hiddenExec) Execute(ctx context.Context, ec executors.Call) (executors.Result, error) {
	if ec.Tool == nil || bytes.Equal(ec.Tool.InputSchema, x.c.stub) {
		t, err := x.c.builtTool(x.e)
		if err != nil {
			return executors.Result{}, err
		}
		if err := x.c.env.CheckArgs(t, ec.Args); err != nil {
			return executors.Result{}, err
		}
	}
	return x.rest.Execute(ctx, ec)
}

// RetriesItself reports whether the REST executor runs its own retry
// loop, as it does.
func (x hiddenExec) RetriesItself() bool {
	sr, ok := x.rest.(executors.SelfRetrying)
	return ok && sr.RetriesItself()
}
