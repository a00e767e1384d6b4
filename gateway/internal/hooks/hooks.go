// Package hooks is the engine of the configured hooks (the hooks section,
// config.Hook): deny_args and webhooks before a call; webhooks, redact and
// truncate after it. [New] builds one hook from its configuration, [Match]
// selects the hooks that apply to a call, and [Matched.Before] and
// [Matched.After] run them. The gateway's hooks step (gateway/pipeline.go)
// calls them; this package does not know the pipeline, and imports no
// gateway package but mcpwire (results in MCP's terms) and resultedit.
package hooks

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/executors/rest"
	"github.com/toolgate/toolgate/gateway/internal/mcpwire"
	"github.com/toolgate/toolgate/gateway/internal/resultedit"
	"github.com/toolgate/toolgate/internal/textcut"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
	"github.com/toolgate/toolgate/threadctx"
)

// redactedText replaces what a redact hook matches, as REST tools replace
// secrets.
const redactedText = "[redacted]"

// Call is what a hook sees of a call: the fields of the gateway's call it
// reads. A before hook may replace Args and Raw (a webhook's new
// arguments); the caller copies them back.
type Call struct {
	// Tool is the resolved tool.
	Tool *registry.Tool
	// Principal is who makes the call; empty without authentication.
	Principal string
	// Thread is the thread the call runs in; webhooks get its label
	// ([threadctx.Label]), never the ID.
	Thread string
	// ID identifies the call in events and logs ("c-<n>").
	ID string
	// Args are the validated arguments, and Raw their JSON bytes as the
	// caller sent them, or nil.
	Args map[string]any
	Raw  json.RawMessage
}

// Webhooks makes the poster of a webhook hook: the REST executor
// (*rest.Executor), which checks the URL and sends the requests.
type Webhooks interface {
	Webhook(rest.WebhookSpec) (*rest.Webhook, error)
}

// Env is what hooks need of the gateway that builds them.
type Env struct {
	// Logger logs a webhook that failed; nil discards.
	Logger *slog.Logger
	// Webhooks makes webhook hooks' posters; needed only for hooks of
	// type webhook.
	Webhooks Webhooks
	// CheckArgs checks arguments a webhook rewrote against the tool's
	// input schema, as the validate step checks a call's; its error is of
	// class validation. Needed only for hooks of type webhook.
	CheckArgs func(t *registry.Tool, args map[string]any) error
	// ErrorResult turns a failure into the result the model sees (isError,
	// text starting with the error's class). It must be set.
	ErrorResult func(error) *executors.Result
}

// Hook is one configured hook (config.Hook), built once by [New]. Its
// before function runs ahead of the call and its after function on the
// result, for the calls it matches. It is safe for concurrent use.
type Hook struct {
	index      int // in the file's hooks section, for logs and messages
	tools      registry.Filter
	principals []string
	// before, when not nil, runs ahead of the call: a non-nil result
	// answers the call, which does not run.
	before func(ctx context.Context, c *Call) *executors.Result
	// after, when not nil, returns the result the model gets instead of
	// res (res itself is never changed).
	after func(ctx context.Context, c *Call, res *executors.Result) *executors.Result
}

// Matches reports whether h applies to a call of tool by principal: tool
// (its registered name) matches one of h's globs (any name when there are
// none), and principal is one of h's (any, when there are none; a call
// without a principal matches no list).
func (h *Hook) Matches(tool, principal string) bool {
	if !h.tools.Match(tool) {
		return false
	}
	return len(h.principals) == 0 || principal != "" && slices.Contains(h.principals, principal)
}

// Matched are the hooks that apply to one call, in the file's order.
type Matched []*Hook

// Match returns the hooks of hs that apply to a call of tool by
// principal, in hs's order; nil for none.
func Match(hs []*Hook, tool, principal string) Matched {
	var m Matched
	for _, h := range hs {
		if h.Matches(tool, principal) {
			m = append(m, h)
		}
	}
	return m
}

// Before runs each before function (deny_args, webhook before) in turn;
// the first to answer ends the call there, and its answer is returned.
// nil lets the call go on, with c.Args and c.Raw as the hooks left them.
func (m Matched) Before(ctx context.Context, c *Call) *executors.Result {
	for _, h := range m {
		if h.before == nil {
			continue
		}
		if res := h.before(ctx, c); res != nil {
			return res
		}
	}
	return nil
}

// After gives res to each after function (webhook after, redact,
// truncate) in turn and returns what the model gets. res is not changed.
func (m Matched) After(ctx context.Context, c *Call, res *executors.Result) *executors.Result {
	for _, h := range m {
		if h.after != nil {
			res = h.after(ctx, c, res)
		}
	}
	return res
}

// New builds the hook at index in the file's hooks section from hc, with
// env. secrets are the values a webhook's errors must not show. Problems
// are *registry.FieldError values naming the hook's field, joined; the
// caller places them in the file.
func New(index int, hc config.Hook, secrets []string, env *Env) (*Hook, error) {
	h := &Hook{index: index, tools: registry.Filter{Include: hc.Tools}, principals: hc.Principals}
	var errs []error
	if err := h.tools.Validate(); err != nil {
		for _, e := range leafErrors(err) {
			if fe, ok := e.(*registry.FieldError); ok {
				fe.Field = "tools" + strings.TrimPrefix(fe.Field, "include")
			}
			errs = append(errs, e)
		}
	}
	errorResult := env.ErrorResult
	switch hc.Type {
	case config.HookRedact:
		res := make([]*regexp.Regexp, len(hc.Patterns))
		for j, p := range hc.Patterns {
			re, err := compilePattern(fmt.Sprintf("patterns[%d]", j), p)
			if err != nil {
				errs = append(errs, err)
			}
			res[j] = re
		}
		h.after = func(_ context.Context, _ *Call, r *executors.Result) *executors.Result {
			return redactResult(r, res, errorResult)
		}
	case config.HookTruncate:
		limit := hc.MaxBytes
		h.after = func(_ context.Context, _ *Call, r *executors.Result) *executors.Result {
			return truncateResult(r, limit, errorResult)
		}
	case config.HookDenyArgs:
		rules := make([]denyRule, len(hc.Rules))
		for j, rc := range hc.Rules {
			rules[j].reason = rc.Reason
			var err error
			if rules[j].pointer, err = parsePointer(rc.Pointer); err != nil {
				errs = append(errs, &registry.FieldError{Field: fmt.Sprintf("rules[%d].pointer", j), Value: rc.Pointer, Err: err,
					Msg: "is not a JSON pointer (RFC 6901): write it like /path or /files/0, with ~0 for ~ and ~1 for / in a key"})
			}
			if rules[j].re, err = compilePattern(fmt.Sprintf("rules[%d].pattern", j), rc.Pattern); err != nil {
				errs = append(errs, err)
			}
		}
		h.before = func(_ context.Context, c *Call) *executors.Result {
			if err := denyArgs(rules, c.Args); err != nil {
				return errorResult(err)
			}
			return nil
		}
	case config.HookWebhook:
		wh, err := env.Webhooks.Webhook(rest.WebhookSpec{URL: hc.URL, Secrets: secrets})
		if err != nil {
			errs = append(errs, err)
			break
		}
		logger := env.Logger
		if logger == nil {
			logger = slog.New(slog.DiscardHandler)
		}
		w := &webhook{index: index, post: wh, timeout: hc.Timeout.D(), allowOnError: hc.OnError == config.OnErrorAllow,
			logger: logger, checkArgs: env.CheckArgs, errorResult: errorResult}
		if hc.Phase == config.PhaseBefore || hc.Phase == config.PhaseBoth {
			h.before = w.before
		}
		if hc.Phase == config.PhaseAfter || hc.Phase == config.PhaseBoth {
			h.after = w.after
		}
	default:
		errs = append(errs, &registry.FieldError{Field: "type", Value: string(hc.Type), Msg: "is not a hook type"})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return h, nil
}

// leafErrors flattens a tree of errors joined with errors.Join.
func leafErrors(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, leafErrors(e)...)
		}
		return out
	}
	return []error{err}
}

// compilePattern compiles the regular expression at field. Its error
// never quotes the pattern, which may have come from the environment.
func compilePattern(field, p string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(p)
	if err == nil {
		return re, nil
	}
	why := "it does not compile"
	if se, ok := errors.AsType[*syntax.Error](err); ok {
		why = string(se.Code)
	}
	return nil, &registry.FieldError{Field: field, Value: p, Err: err,
		Msg: "is not a valid regular expression (Go RE2 syntax): " + why}
}

// denyRule is one compiled rule of a deny_args hook.
type denyRule struct {
	pointer []string // reference tokens, unescaped; nil for the whole arguments
	re      *regexp.Regexp
	reason  string
}

// denyArgs refuses a call whose arguments match one of rules with the
// first matching rule's reason, as a permission error; nil lets it go on.
// A string argument is matched as it is, any other value as its JSON.
func denyArgs(rules []denyRule, args map[string]any) error {
	for _, r := range rules {
		v, ok := lookupPointer(args, r.pointer)
		if !ok {
			continue
		}
		s, isStr := v.(string)
		if !isStr {
			b, err := json.Marshal(v)
			if err != nil {
				continue
			}
			s = string(b)
		}
		if r.re.MatchString(s) {
			return retry.Errorf(retry.Permission, "%s", r.reason)
		}
	}
	return nil
}

// parsePointer splits a JSON pointer (RFC 6901) into its reference
// tokens, unescaped. "" is the whole document (no tokens).
func parsePointer(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if p[0] != '/' {
		return nil, errors.New("a JSON pointer starts with /")
	}
	tokens := strings.Split(p[1:], "/")
	for i, t := range tokens {
		for j := 0; j < len(t); j++ {
			if t[j] == '~' && (j+1 == len(t) || t[j+1] != '0' && t[j+1] != '1') {
				return nil, errors.New("~ must be followed by 0 or 1")
			}
		}
		tokens[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return tokens, nil
}

// lookupPointer returns the value tokens lead to in v, a value decoded
// from JSON, and whether it exists.
func lookupPointer(v any, tokens []string) (any, bool) {
	for _, t := range tokens {
		switch x := v.(type) {
		case map[string]any:
			e, ok := x[t]
			if !ok {
				return nil, false
			}
			v = e
		case []any:
			if t == "" || len(t) > 1 && t[0] == '0' {
				return nil, false
			}
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// webhook is a hook of type webhook.
type webhook struct {
	index        int
	post         *rest.Webhook
	timeout      time.Duration
	allowOnError bool
	logger       *slog.Logger
	checkArgs    func(t *registry.Tool, args map[string]any) error
	errorResult  func(error) *executors.Result
}

// webhookPayload is what a webhook receives. Thread is the thread's label
// (a hash, as in logs), since a session's thread ID grants access to it.
type webhookPayload struct {
	Phase     string          `json:"phase"`
	Tool      string          `json:"tool"`
	Kind      string          `json:"kind"`
	Principal string          `json:"principal"`
	Thread    string          `json:"thread"`
	CallID    string          `json:"call_id"`
	Arguments map[string]any  `json:"arguments"`
	Result    json.RawMessage `json:"result,omitempty"`
}

// webhookAnswer is what a webhook answers.
type webhookAnswer struct {
	Decision  string          `json:"decision"`
	Reason    string          `json:"reason"`
	Arguments json.RawMessage `json:"arguments"`
	Result    json.RawMessage `json:"result"`
}

// before asks the webhook about c ahead of the call. A deny answers the
// call with the webhook's reason; new arguments replace c's once they
// pass the tool's input schema.
func (w *webhook) before(ctx context.Context, c *Call) *executors.Result {
	a, err := w.ask(ctx, c, "before", nil)
	if err != nil {
		return w.failed(ctx, c, "before", err)
	}
	switch {
	case a.Decision == "deny":
		return w.denied(a.Reason, "the call was refused")
	case a.Result != nil:
		return w.failed(ctx, c, "before", errors.New(`the answer holds "result", which only an answer after the call may replace`))
	case a.Arguments == nil:
		return nil
	}
	var args map[string]any
	if err := json.Unmarshal(a.Arguments, &args); err != nil || args == nil {
		return w.failed(ctx, c, "before", errors.New(`the answer's "arguments" is not a JSON object`))
	}
	if err := w.checkArgs(c.Tool, args); err != nil {
		return w.errorResult(err)
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return w.failed(ctx, c, "before", fmt.Errorf("encoding the new arguments: %v", err))
	}
	c.Args, c.Raw = args, raw
	return nil
}

// after asks the webhook about c's result res. A deny withholds the
// result; a new result replaces it.
func (w *webhook) after(ctx context.Context, c *Call, res *executors.Result) *executors.Result {
	enc, err := mcpwire.Encode(res)
	if err != nil {
		return cmp.Or(w.failed(ctx, c, "after", fmt.Errorf("encoding the result: %v", err)), res)
	}
	a, err := w.ask(ctx, c, "after", enc)
	if err != nil {
		return cmp.Or(w.failed(ctx, c, "after", err), res)
	}
	switch {
	case a.Decision == "deny":
		return w.denied(a.Reason, "the call ran, but its result was withheld")
	case a.Arguments != nil:
		return cmp.Or(w.failed(ctx, c, "after", errors.New(`the answer holds "arguments", which only an answer before the call may replace`)), res)
	case a.Result == nil:
		return res
	}
	d, err := mcpwire.Decode(a.Result)
	if err != nil || !bytes.HasPrefix(bytes.TrimSpace(a.Result), []byte("{")) {
		return cmp.Or(w.failed(ctx, c, "after", errors.New(`the answer's "result" is not an MCP tool result object`)), res)
	}
	d.Passthrough = nil // the gateway encodes it: the webhook's JSON is not forwarded as it is
	return &d
}

// ask posts the payload of phase to the webhook under its timeout and
// returns its answer: a decision of allow or deny.
func (w *webhook) ask(ctx context.Context, c *Call, phase string, result json.RawMessage) (webhookAnswer, error) {
	payload, err := json.Marshal(webhookPayload{
		Phase: phase, Tool: c.Tool.Name, Kind: string(c.Tool.Kind), Principal: c.Principal,
		Thread: threadctx.Label(c.Thread), CallID: c.ID, Arguments: c.Args, Result: result,
	})
	if err != nil {
		return webhookAnswer{}, fmt.Errorf("encoding the payload: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	body, err := w.post.Post(ctx, payload)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return webhookAnswer{}, fmt.Errorf("no answer from %s within %s", w.post, w.timeout)
		}
		return webhookAnswer{}, err
	}
	var a webhookAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return webhookAnswer{}, fmt.Errorf("the answer of %s is not JSON", w.post)
	}
	if a.Decision != "allow" && a.Decision != "deny" {
		return webhookAnswer{}, fmt.Errorf(`the answer of %s has no "decision" of allow or deny`, w.post)
	}
	if bytes.Equal(a.Arguments, []byte("null")) {
		a.Arguments = nil
	}
	if bytes.Equal(a.Result, []byte("null")) {
		a.Result = nil
	}
	return a, nil
}

// denied is the result of a webhook's deny: its reason, else what
// happened, as a permission error.
func (w *webhook) denied(reason, what string) *executors.Result {
	if reason == "" {
		reason = fmt.Sprintf("%s by a webhook (hooks[%d])", what, w.index)
	}
	return w.errorResult(retry.Errorf(retry.Permission, "%s", reason))
}

// failed handles a failure of the webhook in phase (before or after):
// nil under on_error allow, so that the call goes on as if the webhook
// had allowed it, else a permission error saying the webhook failed. A
// call whose client went away is cancelled either way.
func (w *webhook) failed(ctx context.Context, c *Call, phase string, err error) *executors.Result {
	about, refused := "it", "the call was refused"
	if phase == "after" {
		about, refused = "its result", "the call ran, but its result was withheld"
	}
	if ctx.Err() != nil {
		return w.errorResult(retry.Errorf(retry.Cancelled, "the call to %q was cancelled while a webhook (hooks[%d]) was asked about %s", c.Tool.Name, w.index, about))
	}
	w.logger.Warn("hook webhook failed", "hook", w.index, "webhook", w.post.String(), "tool", c.Tool.Name, "phase", phase, "call_id", c.ID, "error", err.Error(), "allowed", w.allowOnError)
	if w.allowOnError {
		return nil
	}
	return w.errorResult(retry.Errorf(retry.Permission, "%s because its webhook (hooks[%d]) failed: %s (call %s; the log says more)", refused, w.index, w.shownReason(err), c.ID))
}

// shownReason is what the model is told of the webhook's failure err:
// what went wrong, never where the webhook is. Its URL, and the host a
// transport error names, are for the log (issue 31, item 7).
func (w *webhook) shownReason(err error) string {
	if re, ok := errors.AsType[*retry.Error](err); ok && re.Class != retry.Internal {
		return "the webhook could not be reached (" + string(re.Class) + ")"
	}
	return strings.ReplaceAll(err.Error(), w.post.String(), "the webhook")
}

// redactResult returns res with every match of res's patterns replaced by
// [redacted] in its text (text parts, embedded text resources) and in the
// strings of its structured content, an upstream's passed-through JSON
// included. A result it cannot read becomes errorResult's.
func redactResult(res *executors.Result, patterns []*regexp.Regexp, errorResult func(error) *executors.Result) *executors.Result {
	text := func(s string) string {
		for _, re := range patterns {
			s = re.ReplaceAllLiteralString(s, redactedText)
		}
		return s
	}
	out, err := resultedit.Texts(res, text, resultedit.EditStructured, "")
	if err != nil {
		// Fail closed: a result the hook cannot read is not shown.
		return errorResult(retry.Errorf(retry.Internal, "a redact hook could not read the result: %v", err))
	}
	return out
}

// truncateResult returns res with its text (text parts, embedded text
// resources, in order) cut to limit bytes in all, on a character
// boundary, and a text part appended that gives the true size. Structured
// content is left whole: cut, it would no longer be the object the tool's
// output schema promises. A result it cannot read becomes errorResult's.
func truncateResult(res *executors.Result, limit int, errorResult func(error) *executors.Result) *executors.Result {
	total := 0
	if _, err := resultedit.Texts(res, func(s string) string { total += len(s); return s }, resultedit.KeepStructured, ""); err != nil {
		return errorResult(retry.Errorf(retry.Internal, "a truncate hook could not read the result: %v", err))
	}
	if total <= limit {
		return res
	}
	left := limit
	cut := func(s string) string {
		if len(s) <= left {
			left -= len(s)
			return s
		}
		cut := textcut.Prefix(s, left)
		left = 0
		return cut
	}
	notice := fmt.Sprintf("[truncated: the result text is %d bytes; only the first %d are shown]", total, limit)
	out, err := resultedit.Texts(res, cut, resultedit.KeepStructured, notice)
	if err != nil {
		return errorResult(retry.Errorf(retry.Internal, "a truncate hook could not read the result: %v", err))
	}
	return out
}
