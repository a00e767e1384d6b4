package mcpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/gateway/internal/continuation"
	"github.com/toolgate/toolgate/gateway/internal/mcpwire"
	"github.com/toolgate/toolgate/internal/canonjson"
	"github.com/toolgate/toolgate/internal/mcppeer"
	"github.com/toolgate/toolgate/internal/principal"
)

// Asking a 2026-07-28 client (docs/protocol-2026.md, "Asking a 2026-07-28
// client"): the revision has no server-to-client requests, so a call whose
// client may be asked something runs as a continuation (package
// continuation), whose requests to the client go out as input_required
// results, and whose retry brings the answers.

// mayAsk reports whether caps declares anything a call could ask of the
// client.
func mayAsk(caps *mcp.ClientCapabilities) bool {
	return caps != nil && (caps.Sampling != nil || caps.Elicitation != nil || caps.Roots != nil)
}

// undeclared returns the -32601 error for a request of method to a client
// that did not declare its capability (caps), or nil when it did; an
// unknown method is refused alike.
func undeclared(caps *mcp.ClientCapabilities, method string) error {
	var capability string
	var declared bool
	switch method {
	case string(mcp.MethodSamplingCreateMessage):
		capability, declared = "sampling", caps != nil && caps.Sampling != nil
	case string(mcp.MethodElicitationCreate):
		capability, declared = "elicitation", caps != nil && caps.Elicitation != nil
	case string(mcp.MethodListRoots):
		capability, declared = "roots", caps != nil && caps.Roots != nil
	default:
		return &mcppeer.RPCError{Code: mcp.METHOD_NOT_FOUND, Message: fmt.Sprintf("%s is not relayed to clients", method)}
	}
	if declared {
		return nil
	}
	return &mcppeer.RPCError{Code: mcp.METHOD_NOT_FOUND, Message: fmt.Sprintf("%s: the client that made this call did not declare the %s capability", method, capability)}
}

// modernPeer is a 2026-07-28 client as a [mcppeer.Peer] during one of its
// requests: its requests go out as input_required results of c, its
// notifications as the embedded peer sends them.
type modernPeer struct {
	peer
	caps *mcp.ClientCapabilities
	c    *continuation.Continuation // nil: the request cannot ask (no capability declared, or neither a tools/call nor a prompts/get)
	call uint64                     // unique among the front's requests
}

// Session is an ID of the request alone: the client has no session, and
// no two of its requests (nor two clients') may pass for one client when
// an upstream's message is attributed (executors/mcpup's soloPeer).
func (p modernPeer) Session() string { return "2026-07-28 request " + strconv.FormatUint(p.call, 10) }

func (p modernPeer) Request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	if err := undeclared(p.caps, method); err != nil {
		return nil, err
	}
	if p.c == nil {
		return nil, &mcppeer.RPCError{Code: mcp.METHOD_NOT_FOUND, Message: method + ": the client speaks protocol 2026-07-28, which toolgate asks only during a tools/call or prompts/get (as an input_required result)"}
	}
	env, err := json.Marshal(struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params,omitempty"`
	}{method, params})
	var req mcp.InputRequest
	if err == nil {
		err = req.UnmarshalJSON(env)
	}
	if err != nil {
		return nil, &mcppeer.RPCError{Code: mcp.INVALID_PARAMS, Message: fmt.Sprintf("%s: reading the params: %v", method, err)}
	}
	return p.c.Ask(ctx, req)
}

// modernCall runs a 2026-07-28 tools/call of x (p its params, r filled
// in but for Peer and Elicit): a retry resumes the continuation it names;
// a call whose client may be asked something runs as a continuation; any
// other runs here. A call run here gives its result as the tool gave it
// (out), for the front to write as a legacy call's; one run as a
// continuation gives it as the continuation does (res): complete, or
// input_required. Exactly one of out, res and err is not nil.
func (f *Front) modernCall(ctx context.Context, x *exchange, p *callParams, r *Request, call func(context.Context, *Request) *executors.Result) (out *executors.Result, res *mcp.CallToolResult, err error) {
	who := principal.NameOf(r.Identity)
	bind := func() continuation.Binding { // only for a call that may wait: the common call hashes nothing
		return continuation.Binding{Method: string(mcp.MethodToolsCall), Name: p.Name, Args: canonjson.RawSum(p.Arguments)}
	}
	var answer json.RawMessage // to toolgate's own question, sealed in the requestState
	if p.RequestState != "" || len(p.InputResponses) > 0 {
		var sealed bool
		if answer, sealed, err = f.mrtr.OpenSealed(who, bind(), p.MultiRoundTripParams); err != nil {
			return nil, nil, err
		}
		if !sealed {
			c, err := f.mrtr.ResumeWith(who, bind(), p.MultiRoundTripParams)
			if err != nil {
				return nil, nil, err
			}
			res, err := toolOutcome(c.Await(ctx))
			return nil, res, err
		}
		// A sealed question answered: the call runs afresh, here.
	}
	caps := x.info.ClientCapabilities
	mp := modernPeer{peer: peer{f: f, ctx: ctx}, caps: caps, call: f.requests.Add(1)}
	r.Peer = mp
	if answer != nil {
		r.Elicit = sealedElicit(nil, answer)
	}
	if !mayAsk(caps) {
		out, err := f.run(ctx, call, r, p.Name)
		return out, nil, err
	}
	c, ok := f.mrtr.Start(ctx, f.root, who, bind(), func(ctx context.Context, c *continuation.Continuation) continuation.Outcome {
		asking := mp // mp stays as it is: the closure copies it
		asking.c = c
		r.Peer = asking
		if caps.Elicitation != nil {
			r.Elicit = sealedElicit(c, answer)
		}
		out, err := f.run(ctx, call, r, p.Name)
		if err != nil {
			return continuation.Outcome{Err: err}
		}
		return continuation.Outcome{Res: mcpwire.Result(out)}
	})
	if !ok {
		out, err := f.run(ctx, call, r, p.Name)
		return out, nil, err
	}
	res, err = toolOutcome(c.Await(ctx))
	return nil, res, err
}

// Waiting returns how many 2026-07-28 calls wait for their clients'
// retries (continuations); a sealed question is none.
func (f *Front) Waiting() int { return f.mrtr.Len() }

// modernPrompt gets a 2026-07-28 prompts/get as modernCall runs a
// tools/call: get forwards it to the prompt's source with the peer the
// source's requests to the client go to.
func (f *Front) modernPrompt(ctx context.Context, info *server.RequestProtocolInfo, req mcp.GetPromptRequest, get func(context.Context, mcppeer.Peer) (*mcp.GetPromptResult, error)) (*mcp.GetPromptResult, error) {
	who := principal.NameOf(f.identity(ctx))
	bind := continuation.Binding{Method: string(mcp.MethodPromptsGet), Name: req.Params.Name, Args: canonjson.RawSum(mustJSON(req.Params.Arguments))}
	if req.Params.RequestState != "" || len(req.Params.InputResponses) > 0 {
		c, err := f.mrtr.ResumeWith(who, bind, req.Params.MultiRoundTripParams)
		if err != nil {
			return nil, err
		}
		return promptOutcome(c.Await(ctx))
	}
	p := modernPeer{peer: peer{f: f, ctx: ctx}, caps: info.ClientCapabilities, call: f.requests.Add(1)}
	if !mayAsk(info.ClientCapabilities) {
		return get(ctx, p)
	}
	c, ok := f.mrtr.Start(ctx, f.root, who, bind, func(ctx context.Context, c *continuation.Continuation) continuation.Outcome {
		asking := p
		asking.c = c
		res, err := get(ctx, asking)
		return continuation.Outcome{Res: res, Err: err}
	})
	if !ok {
		return get(ctx, p)
	}
	return promptOutcome(c.Await(ctx))
}

// promptOutcome is await's answer as a prompts/get result.
func promptOutcome(res any, in *mcp.MultiRoundTripResult, err error) (*mcp.GetPromptResult, error) {
	switch {
	case err != nil:
		return nil, err
	case in != nil:
		return &mcp.GetPromptResult{Result: mcp.Result{ResultType: mcp.ResultTypeInputRequired}, MultiRoundTripResult: *in}, nil
	}
	out, _ := res.(*mcp.GetPromptResult)
	if out == nil {
		return nil, fmt.Errorf("the prompt gave no result")
	}
	return out, nil
}

// toolOutcome is await's answer as a tools/call result.
func toolOutcome(res any, in *mcp.MultiRoundTripResult, err error) (*mcp.CallToolResult, error) {
	switch {
	case err != nil:
		return nil, err
	case in != nil:
		return &mcp.CallToolResult{Result: mcp.Result{ResultType: mcp.ResultTypeInputRequired}, MultiRoundTripResult: *in}, nil
	}
	out, _ := res.(*mcp.CallToolResult)
	if out == nil {
		return nil, fmt.Errorf("the call gave no result")
	}
	return out, nil
}

// retryRefused checks a 2026-07-28 prompts/get of x that carries
// inputResponses or a requestState before mcp-go's dispatcher serves it,
// and writes the refusal (-32602, 400) when resume would refuse it: its
// prompt handler's error would reach the client as -32603. It reports
// whether it wrote one. (A tools/call's retry is the front's: call.go.)
func (f *Front) retryRefused(w http.ResponseWriter, x *exchange, m *message) bool {
	if !bytes.Contains(m.params, []byte(`"requestState"`)) && !bytes.Contains(m.params, []byte(`"inputResponses"`)) {
		return false
	}
	var p struct {
		Name           string                     `json:"name"`
		Arguments      json.RawMessage            `json:"arguments"`
		InputResponses map[string]json.RawMessage `json:"inputResponses"`
		RequestState   string                     `json:"requestState"`
	}
	if json.Unmarshal(m.params, &p) != nil || (p.RequestState == "" && len(p.InputResponses) == 0) {
		return false // mcp-go answers what it cannot read
	}
	bind := continuation.Binding{Method: string(mcp.MethodPromptsGet), Name: p.Name, Args: canonjson.RawSum(p.Arguments)}
	if _, err := f.mrtr.Resume(principal.NameOf(x.ident), bind, p.RequestState, p.InputResponses, false); err != nil {
		writeJSON(w, http.StatusBadRequest, rpcError(m.id, mcp.INVALID_PARAMS, err.Error(), nil))
		return true
	}
	return false
}

// sealedElicit returns the [Request.Elicit] of a 2026-07-28 call, which
// asks toolgate's own questions (the loop guard's): the first time it is
// given answer (the retry's, when the call's requestState sealed the
// question), it returns that; otherwise it asks c's client the question
// sealed (continuation.AskSealed), which ends the call. Without c the
// client cannot be asked, and the asker gets an error.
func sealedElicit(c *continuation.Continuation, answer json.RawMessage) func(context.Context, string, map[string]any) (string, map[string]any, error) {
	var answered atomic.Bool
	return func(ctx context.Context, message string, schema map[string]any) (string, map[string]any, error) {
		if answer != nil && answered.CompareAndSwap(false, true) {
			return elicitationAnswer(answer)
		}
		if c == nil {
			return "", nil, fmt.Errorf("the client did not declare the elicitation capability: it cannot be asked")
		}
		return "", nil, c.AskSealed(mcp.NewElicitationInputRequest(mcp.ElicitationParams{Message: message, RequestedSchema: schema}))
	}
}
