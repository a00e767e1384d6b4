package gateway

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/gateway/internal/batchtool"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

// BatchToolName is the name of the meta-tool that runs several calls in
// parallel (config batch_tool: true; package gateway/internal/batchtool).
const BatchToolName = batchtool.Name

// addBatchTool registers toolgate_batch: a tool listed and validated like
// any other whose executor runs each of its calls through the pipeline.
func (g *Gateway) addBatchTool() error {
	return g.register(executors.Bound{Tool: batchtool.Tool(), Exec: batchExec{g}})
}

// batchExec runs toolgate_batch. It is re-entrant: the pipeline gives it
// the batch's Call in its context, and each call of the batch goes through
// the whole pipeline in the batch's thread, session and principal.
type batchExec struct{ g *Gateway }

func (batchExec) reentrant() {}

var _ reentrantExecutor = batchExec{}

// Execute runs the calls of one toolgate_batch (batchtool.Run).
func (b batchExec) Execute(ctx context.Context, ec executors.Call) (executors.Result, error) {
	outer, ok := callFrom(ctx)
	if !ok {
		return executors.Result{}, retry.Errorf(retry.Internal, "%s ran outside the pipeline", BatchToolName)
	}
	return batchtool.Run(ctx, ec, batchRun{b.g, outer}, b.g.settings().defaults.MaxParallelPerSession, b.g.logger)
}

// batchRun runs the calls of the batch outer through g's pipeline.
type batchRun struct {
	g     *Gateway
	outer *Call
}

var _ batchtool.Pipeline = batchRun{}

// Call runs one call of the batch through the pipeline.
func (b batchRun) Call(ctx context.Context, name string, args json.RawMessage) (string, *executors.Result) {
	outer := b.outer
	r, err := b.g.lookup(name)
	if err == nil && r.tool.Name != name && !outer.ident.Permits(r.tool.Name) {
		// Repaired to a tool the principal may not use: as unknown to it
		// as any name (issue 31, item 7).
		err = &registry.NotFoundError{Name: name, Available: -1}
	}
	if nf, ok := errors.AsType[*registry.NotFoundError](err); ok && outer.ident != nil && outer.ident.Policy != nil {
		err = nf.Visible(outer.ident.Permits) // suggestions and counts over its own tools only
	}
	if err != nil {
		return name, b.Failed(retry.Wrap(retry.NotFound, "", err))
	}
	if r.reentrant && r.tool.Name == BatchToolName {
		// A catalog's <source>__call re-enters too, and may run here: its
		// inner call takes its own slot.
		return r.tool.Name, b.Failed(retry.Errorf(retry.Validation,
			"%s cannot run inside %s; list its calls in the outer batch", BatchToolName, BatchToolName))
	}
	res, err := b.g.handle(ctx, innerCall(outer, name, r, args))
	if err != nil {
		res = errorResult(err)
	}
	return r.tool.Name, (*executors.Result)(res)
}

// Failed is the pipeline's error result of err.
func (batchRun) Failed(err error) *executors.Result { return (*executors.Result)(errorResult(err)) }

// Class is the error class of res: the one its _meta names, else its own,
// else execution.
func (batchRun) Class(res *executors.Result) string {
	if cl, ok := res.Meta[ErrorClassMetaKey].(string); ok {
		return cl
	}
	if res.Class != "" {
		return string(res.Class)
	}
	return string(retry.Execution)
}

// innerCall is the call of the tool r (called name) that outer, a
// re-entrant tool's call, runs with the raw arguments raw: as outer's
// principal, in its session and thread.
func innerCall(outer *Call, name string, r *route, raw json.RawMessage) *Call {
	return &Call{Name: name, route: r, Raw: raw, Principal: outer.Principal, ident: outer.ident, Session: outer.Session, Thread: outer.Thread}
}
