package agent

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"google.golang.org/genai"

	"github.com/toolgate/toolgate/retry"
)

// GeminiOptions configure [NewGemini].
type GeminiOptions struct {
	// Model names the model, e.g. "gemini-2.5-flash"; required.
	Model string
	// APIKey is the key; empty means the environment's GOOGLE_API_KEY,
	// else GEMINI_API_KEY (the SDK's order).
	APIKey string
	// BaseURL is the API's base URL (without the /v1beta version); empty
	// means Google's (or the SDK's GOOGLE_GEMINI_BASE_URL).
	BaseURL string
	// HTTPClient makes the requests; nil means a plain http.Client.
	HTTPClient *http.Client
	// IdleTimeout abandons a call that receives nothing (no response
	// headers, no chunk) for this long, with an error of class timeout;
	// zero means [DefaultIdleTimeout], negative never.
	IdleTimeout time.Duration
}

// Gemini is a [Provider] for the Gemini API (streamGenerateContent over
// SSE), through Google's official SDK: text, thought summaries and thought
// signatures, parallel function calls, usage with cached and thinking
// tokens. Function calls come whole, one part each; a call without an ID
// gets one made of the response's ID and its place. The SDK's retries and
// its automatic stream continuation are off: model calls retry through
// [Generate]'s policy only. It is safe for concurrent use.
type Gemini struct {
	client *genai.Client
	model  string
	idle   time.Duration
	key    string // redacted from errors
}

var _ Provider = (*Gemini)(nil)

// geminiCallPrefix starts the IDs made for calls Gemini sent without one;
// such IDs are not sent back (the API pairs a response with its call by
// name and place).
const geminiCallPrefix = "gemini_call_"

// NewGemini returns a Gemini provider. It fails with an error wrapping
// [ErrNoAPIKey] when there is no key.
func NewGemini(o GeminiOptions) (*Gemini, error) {
	key := cmp.Or(o.APIKey, os.Getenv("GOOGLE_API_KEY"), os.Getenv("GEMINI_API_KEY"))
	if key == "" {
		return nil, fmt.Errorf("gemini: %w: set GEMINI_API_KEY (or GOOGLE_API_KEY)", ErrNoAPIKey)
	}
	if o.Model == "" {
		return nil, errors.New("gemini: no model: name one, e.g. gemini-2.5-flash")
	}
	hc := &http.Client{}
	if o.HTTPClient != nil {
		c := *o.HTTPClient
		hc = &c
	}
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc.Transport = &geminiTransport{base: base}
	client, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey: key, Backend: genai.BackendGeminiAPI, HTTPClient: hc, HTTPOptions: genai.HTTPOptions{BaseURL: o.BaseURL},
	})
	if err != nil {
		return nil, redactKey(fmt.Errorf("gemini: %w", err), key)
	}
	return &Gemini{client: client, model: o.Model, idle: o.IdleTimeout, key: key}, nil
}

// Stream implements [Provider]. Fragment indexes number the blocks in the
// order they start: a run of text (or of thought) parts is one block, each
// function call one of its own.
func (p *Gemini) Stream(ctx context.Context, req *Request, emit func(Fragment)) (*StreamEnd, error) {
	contents, cfg, err := p.request(req)
	if err != nil {
		return nil, err
	}
	call := &geminiCall{watch: newIdleWatch(p.idle)}
	st := &geminiStream{emit: emit, cur: -1}
	end := &StreamEnd{}
	var finish genai.FinishReason
	var blocked genai.BlockedReason
	model := cmp.Or(req.Options.Model, p.model)
	for chunk, err := range p.client.Models.GenerateContentStream(context.WithValue(ctx, geminiCallKey{}, call), model, contents, cfg) {
		if err != nil {
			if ie := call.watch.err("gemini"); ie != nil && ctx.Err() == nil {
				return nil, ie
			}
			return nil, redactKey(geminiError(ctx, call, err), p.key)
		}
		end.ID, end.Model = cmp.Or(end.ID, chunk.ResponseID), cmp.Or(end.Model, chunk.ModelVersion)
		st.responseID = end.ID
		if u := chunk.UsageMetadata; u != nil {
			end.Usage = geminiUsage(u)
		}
		if pf := chunk.PromptFeedback; pf != nil && pf.BlockReason != "" {
			blocked = pf.BlockReason
		}
		if len(chunk.Candidates) == 0 || chunk.Candidates[0] == nil {
			continue
		}
		c := chunk.Candidates[0]
		if c.Content != nil {
			for _, part := range c.Content.Parts {
				st.part(part)
			}
		}
		if c.FinishReason != "" && c.FinishReason != genai.FinishReasonUnspecified {
			finish = c.FinishReason
		}
	}
	if ie := call.watch.err("gemini"); ie != nil && ctx.Err() == nil {
		return nil, ie
	}
	switch {
	case blocked != "" && finish == "":
		return nil, retry.Errorf(retry.Validation, "gemini: the prompt was blocked (blockReason %s); rephrase the request", blocked)
	case finish == "":
		return nil, cutError("gemini", "a finishReason")
	case finish == genai.FinishReasonMalformedFunctionCall, finish == genai.FinishReasonUnexpectedToolCall, finish == genai.FinishReasonTooManyToolCalls:
		// The model failed to write a valid call: no call to answer, so
		// the turn is lost; asking again usually works. (The SDK drops
		// the API's finishMessage, which quotes the bad call.)
		return nil, retry.Errorf(retry.Unavailable, "gemini: the model wrote no valid function call (finishReason %s); try again, or simplify the tools' input schemas", finish)
	}
	st.closeBlock()
	end.StopReason = geminiStop(finish, st.calls > 0)
	return end, nil
}

// geminiStream turns the parts of a stream's chunks into fragments.
type geminiStream struct {
	emit       func(Fragment)
	responseID string
	next       int          // the next block index
	cur        int          // the open text or thought block, -1 if none
	curType    FragmentType // FragText or FragThinking
	calls      int
}

func (s *geminiStream) part(p *genai.Part) {
	sig := ""
	if len(p.ThoughtSignature) > 0 {
		sig = encodeSignature(p.ThoughtSignature)
	}
	switch {
	case p.FunctionCall != nil:
		s.closeBlock()
		fc := p.FunctionCall
		i := s.next
		s.next++
		id := fc.ID
		if id == "" {
			id = geminiCallPrefix + s.responseID + "_" + strconv.Itoa(s.calls)
		}
		s.calls++
		args := []byte("{}")
		if fc.Args != nil {
			args, _ = json.Marshal(fc.Args) // decoded from JSON: it encodes
		}
		s.emit(Fragment{Type: FragToolCall, Index: i, ID: id, Name: fc.Name})
		if sig != "" {
			s.emit(Fragment{Type: FragSignature, Index: i, Text: sig})
		}
		s.emit(Fragment{Type: FragToolArgs, Index: i, Text: string(args)})
		s.emit(Fragment{Type: FragBlockStop, Index: i})
	case p.Text != "" || sig != "":
		typ := FragText
		if p.Thought || (p.Text == "" && s.cur < 0) {
			typ = FragThinking // a signature alone, with no block to sign, is kept as a thought
		}
		if p.Text == "" && s.cur >= 0 {
			typ = s.curType // a signature alone signs the open block
		}
		if s.cur < 0 || s.curType != typ {
			s.closeBlock()
			s.cur, s.curType = s.next, typ
			s.next++
		}
		if p.Text != "" {
			s.emit(Fragment{Type: typ, Index: s.cur, Text: p.Text})
		}
		if sig != "" {
			s.emit(Fragment{Type: FragSignature, Index: s.cur, Text: sig})
		}
	}
}

// closeBlock ends the open text or thought block.
func (s *geminiStream) closeBlock() {
	if s.cur >= 0 {
		s.emit(Fragment{Type: FragBlockStop, Index: s.cur})
		s.cur = -1
	}
}

func geminiStop(r genai.FinishReason, calls bool) StopReason {
	switch r {
	case genai.FinishReasonStop:
		if calls {
			return StopToolUse
		}
		return StopEnd
	case genai.FinishReasonMaxTokens:
		return StopLength
	case genai.FinishReasonSafety, genai.FinishReasonRecitation, genai.FinishReasonBlocklist, genai.FinishReasonProhibitedContent,
		genai.FinishReasonSPII, genai.FinishReasonLanguage, genai.FinishReasonImageSafety, genai.FinishReasonImageProhibitedContent,
		genai.FinishReasonImageRecitation:
		return StopFiltered
	case genai.FinishReasonContinuation:
		return StopPaused // the history goes back, and the model goes on
	}
	return StopReason(r)
}

// geminiUsage maps the usage metadata: the prompt count includes the
// cached tokens, which are counted apart; thinking is output.
func geminiUsage(u *genai.GenerateContentResponseUsageMetadata) Usage {
	cached := int64(u.CachedContentTokenCount)
	return Usage{
		InputTokens:     int64(u.PromptTokenCount) - cached + int64(u.ToolUsePromptTokenCount),
		OutputTokens:    int64(u.CandidatesTokenCount) + int64(u.ThoughtsTokenCount),
		CacheReadTokens: cached,
	}
}

// geminiError classifies an error of the SDK. An error response's HTTP
// status and headers come from the call's transport (the SDK's error
// keeps neither the headers nor, for a body of another shape, the status);
// an error sent inside the stream has its code in its body. The wait is
// Retry-After's, else the google.rpc.RetryInfo detail's.
func geminiError(ctx context.Context, call *geminiCall, err error) error {
	if ae, ok := errors.AsType[genai.APIError](err); ok {
		status, h := call.response()
		typ := ""
		if status == 0 {
			status = ae.Code
			if status == 0 {
				typ = "api_error" // the stream failed mid-answer: unavailable
			}
		}
		e := statusError("gemini", status, h, typ, ae.Message)
		for _, d := range ae.Details {
			switch {
			case d["@type"] == "type.googleapis.com/google.rpc.RetryInfo" && e.RetryAfter == 0:
				s, _ := d["retryDelay"].(string)
				if wait, err := time.ParseDuration(s); err == nil && wait > 0 {
					e.RetryAfter = wait
				}
			case d["reason"] == "API_KEY_INVALID":
				e.Class, e.Msg = retry.Permission, e.Msg+"; check the API key"
			}
		}
		return e
	}
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		return retry.Errorf(retry.Unavailable, "gemini: the stream sent a malformed chunk: its %s is a JSON %s, not what the API defines", te.Field, te.Value)
	}
	if _, ok := errors.AsType[*json.SyntaxError](err); ok {
		return retry.Errorf(retry.Unavailable, "gemini: the stream sent a chunk that is not JSON")
	}
	if _, ok := errors.AsType[base64.CorruptInputError](err); ok {
		return retry.Errorf(retry.Unavailable, "gemini: the stream sent a malformed chunk: a bytes field (a thought signature?) is not base64")
	}
	return transportError(ctx, "gemini", err)
}

// geminiCallKey is the context key of a call's *geminiCall.
type geminiCallKey struct{}

// geminiCall is what the transport keeps of one model call: its idle
// watch, and the status and headers of an error response.
type geminiCall struct {
	watch *idleWatch

	mu     sync.Mutex // guards status and header
	status int
	header http.Header
}

func (c *geminiCall) response() (int, http.Header) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status, c.header
}

// geminiTransport puts each model call's request under the call's idle
// watch and records an error response's status and headers, which the
// SDK drops.
type geminiTransport struct{ base http.RoundTripper }

func (t *geminiTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	call, _ := req.Context().Value(geminiCallKey{}).(*geminiCall)
	if call == nil {
		return t.base.RoundTrip(req)
	}
	resp, err := call.watch.middleware(req, t.base.RoundTrip)
	if err == nil && (resp.StatusCode < 200 || resp.StatusCode > 299) {
		call.mu.Lock()
		call.status, call.header = resp.StatusCode, resp.Header
		call.mu.Unlock()
	}
	return resp, err
}

// request converts req to the SDK's contents and config.
func (p *Gemini) request(req *Request) ([]*genai.Content, *genai.GenerateContentConfig, error) {
	o := req.Options
	if o.User != "" {
		return nil, nil, &UnsupportedError{Provider: "gemini", Option: "user"}
	}
	cfg := &genai.GenerateContentConfig{AutomaticContinuation: genai.Ptr(false), StopSequences: o.StopSequences}
	if o.MaxTokens > 0 {
		cfg.MaxOutputTokens = int32(min(o.MaxTokens, math.MaxInt32))
	}
	if o.Temperature != nil {
		cfg.Temperature = genai.Ptr(float32(*o.Temperature))
	}
	if o.TopP != nil {
		cfg.TopP = genai.Ptr(float32(*o.TopP))
	}
	if o.TopK != nil {
		cfg.TopK = genai.Ptr(float32(*o.TopK))
	}
	if o.ThinkingBudget > 0 {
		cfg.ThinkingConfig = &genai.ThinkingConfig{IncludeThoughts: true, ThinkingBudget: genai.Ptr(int32(min(o.ThinkingBudget, math.MaxInt32)))}
	}
	fcc := &genai.FunctionCallingConfig{}
	switch o.ToolChoice.Mode {
	case ToolChoiceAuto:
		fcc.Mode = genai.FunctionCallingConfigModeAuto
	case ToolChoiceNone:
		fcc.Mode = genai.FunctionCallingConfigModeNone
	case ToolChoiceRequired:
		fcc.Mode = genai.FunctionCallingConfigModeAny
	case ToolChoiceTool:
		fcc.Mode, fcc.AllowedFunctionNames = genai.FunctionCallingConfigModeAny, []string{o.ToolChoice.Name}
	}
	if fcc.Mode != "" {
		cfg.ToolConfig = &genai.ToolConfig{FunctionCallingConfig: fcc}
	}
	if req.Output != nil {
		var schema map[string]any
		if err := json.Unmarshal(req.Output.Schema, &schema); err != nil {
			return nil, nil, fmt.Errorf("gemini: the output schema is not a JSON object: %w", err)
		}
		cfg.ResponseMIMEType, cfg.ResponseJsonSchema = "application/json", schema
	}
	if len(req.Tools) > 0 {
		tool, err := geminiTool(req.Tools)
		if err != nil {
			return nil, nil, err
		}
		cfg.Tools = []*genai.Tool{tool}
	}
	contents, system := GeminiContents(req.Messages)
	system = joinText(req.System, system)
	if system != "" {
		cfg.SystemInstruction = &genai.Content{Parts: []*genai.Part{{Text: system}}}
	}
	return contents, cfg, nil
}

// geminiTool declares the tools as functions, each with its JSON Schema.
func geminiTool(specs []ToolSpec) (*genai.Tool, error) {
	tool := &genai.Tool{}
	for _, t := range specs {
		schema := map[string]any{"type": "object"}
		if len(t.InputSchema) > 0 {
			if err := json.Unmarshal(t.InputSchema, &schema); err != nil || schema == nil {
				return nil, fmt.Errorf("tool %q: its input schema is not a JSON object: %v", t.Name, err)
			}
		}
		tool.FunctionDeclarations = append(tool.FunctionDeclarations, &genai.FunctionDeclaration{Name: t.Name, Description: t.Description, ParametersJsonSchema: schema})
	}
	return tool, nil
}

// joinText joins the non-empty texts with a blank line.
func joinText(a, b string) string {
	if a == "" || b == "" {
		return a + b
	}
	return a + "\n\n" + b
}
