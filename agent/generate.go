package agent

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/retry"
)

// DefaultRetry is the retry policy of model calls when none is given: up
// to 4 attempts of a call that failed with rate_limited or unavailable
// before any of its stream arrived, waiting what the provider's
// Retry-After asks (up to 60 s) or a jittered backoff from 500 ms.
func DefaultRetry() retry.Policy {
	return retry.Policy{
		Attempts:       4,
		InitialBackoff: 500 * time.Millisecond,
		MaxBackoff:     60 * time.Second,
		On:             []retry.Class{retry.RateLimited, retry.Unavailable},
	}
}

// GenerateOptions are the callbacks and settings of [Generate]. The zero
// value (or nil) has no callbacks and retries with [DefaultRetry].
type GenerateOptions struct {
	// OnPart, when not nil, receives every raw fragment as it arrives.
	OnPart func(Fragment)
	// OnToolCall, when not nil, receives each tool call the moment it is
	// complete: its arguments are whole and parse, or (for arguments that
	// never parse, or none) its block has ended. It runs before the stream
	// ends, on the goroutine reading it. Calls are delivered in the order
	// they complete, which with interleaved streams may differ from the
	// order the model made them in; the message keeps the model's order.
	// A call whose arguments only end with a truncated turn
	// ([StopReason.Truncated]) is never delivered.
	OnToolCall func(ToolCall)
	// Events, when not nil, receives fine-grained stream events for UIs.
	Events *Events
	// Retry is the retry policy of the model call; nil means
	// [DefaultRetry]. Only a call that failed before any fragment arrived
	// is retried: once fragments were delivered, repeating the call would
	// deliver them twice.
	Retry *retry.Policy
}

// GenerateResult is the outcome of one model call.
type GenerateResult struct {
	// ID is the provider's ID of the response.
	ID string
	// Model is the model that answered (the provider's report, else the
	// requested one).
	Model string
	// Message is the assistant message, its parts and tool calls in the
	// order the model produced them.
	Message Message
	// Usage counts the call's tokens.
	Usage Usage
	// StopReason says why the model stopped.
	StopReason StopReason
}

// Generate makes one streamed model call: it sends req to p, merges the
// streamed fragments into the parts of one assistant message as they
// arrive, and returns it. Fragments of different blocks may interleave
// (parallel tool calls, by index).
//
// Errors: an *[EmptyResponseError] when the model sent no content; an
// *[IncompleteError] (class network or unavailable) carrying what was
// received when the stream broke off; the provider's classified error
// otherwise, after the retries [GenerateOptions.Retry] allows; ctx's error
// (class cancelled or timeout) when ctx ends. A turn that stopped for
// length, refusal or a content filter is not an error here: its
// StopReason says so, and [Step] does not run its tool calls.
func Generate(ctx context.Context, p Provider, req *Request, opts *GenerateOptions) (*GenerateResult, error) {
	if opts == nil {
		opts = &GenerateOptions{}
	}
	policy := DefaultRetry()
	if opts.Retry != nil {
		policy = *opts.Retry
	}
	ev := opts.Events
	var a *assembler
	var end *StreamEnd
	_, err := retry.Run(ctx, retry.Plan{Policy: policy, Idempotent: true, Subject: "the model call"}, func(ctx context.Context, _ int) error {
		a = newAssembler(opts.OnToolCall, ev)
		ev.emit(Event{Type: EventConnect})
		var err error
		end, err = p.Stream(ctx, req, func(f Fragment) {
			a.fragments++
			if opts.OnPart != nil {
				opts.OnPart(f)
			}
			a.add(f)
		})
		if err != nil && a.fragments > 0 {
			// Fragments reached the callbacks: a retry would repeat them.
			return retry.Permanent(err)
		}
		return err
	})
	if err != nil {
		if ctx.Err() != nil {
			ev.emit(Event{Type: EventAbort, Err: err})
		} else {
			if a != nil && a.fragments > 0 {
				err = &IncompleteError{Received: a.message(), Err: err}
			}
			ev.emit(Event{Type: EventError, Err: err})
		}
		ev.emit(Event{Type: EventEnd})
		return nil, err
	}
	a.finish(end.StopReason)
	res := &GenerateResult{ID: end.ID, Model: end.Model, Message: a.message(), Usage: end.Usage, StopReason: end.StopReason}
	if res.Model == "" {
		res.Model = req.Options.Model
	}
	if res.Message.Empty() {
		err := &EmptyResponseError{ID: end.ID, StopReason: end.StopReason}
		ev.emit(Event{Type: EventError, Err: err})
		ev.emit(Event{Type: EventEnd})
		return nil, err
	}
	if ev != nil {
		m := res.Message
		ev.emit(Event{Type: EventMessage, Message: &m})
		ev.emit(Event{Type: EventFinalMessage, Message: &m})
		ev.emit(Event{Type: EventEnd})
	}
	return res, nil
}

// block is one content block being assembled.
type block struct {
	typ   FragmentType // FragText, FragThinking, FragRedacted or FragToolCall
	index int
	text  strings.Builder // text, thinking, redacted data or argument JSON
	sig   strings.Builder
	id    string
	name  string
	done  bool // its block-stop arrived
	// citations are a text block's citations, as JSON.
	citations []json.RawMessage
	fired     bool // delivered to OnToolCall
}

// assembler merges fragments into blocks. It is used by one goroutine.
type assembler struct {
	onToolCall func(ToolCall)
	ev         *Events
	blocks     []*block // in the order they started
	byIndex    map[int]*block
	fragments  int
}

func newAssembler(onToolCall func(ToolCall), ev *Events) *assembler {
	return &assembler{onToolCall: onToolCall, ev: ev, byIndex: make(map[int]*block, 4)}
}

// get returns block i, starting one of type typ when there is none.
func (a *assembler) get(i int, typ FragmentType) *block {
	if b, ok := a.byIndex[i]; ok {
		return b
	}
	b := &block{typ: typ, index: i}
	a.byIndex[i] = b
	a.blocks = append(a.blocks, b)
	if a.ev.has(EventBlockStart) {
		a.ev.emit(Event{Type: EventBlockStart, Index: i, Block: string(typ)})
	}
	return b
}

func (a *assembler) add(f Fragment) {
	switch f.Type {
	case FragText, FragThinking, FragRedacted:
		b := a.get(f.Index, f.Type)
		b.text.WriteString(f.Text)
		if f.Type == FragRedacted || f.Text == "" {
			return
		}
		t := EventText
		if f.Type == FragThinking {
			t = EventThinking
		}
		if a.ev.has(t) {
			a.ev.emit(Event{Type: t, Index: f.Index, Delta: f.Text, Snapshot: b.text.String()})
		}
		a.delta(b, f.Text)
	case FragCitation:
		b := a.get(f.Index, FragText)
		b.citations = append(b.citations, json.RawMessage(f.Text))
		if a.ev.has(EventCitation) {
			a.ev.emit(Event{Type: EventCitation, Index: f.Index, Block: string(b.typ), Citation: []byte(f.Text)})
		}
	case FragSignature:
		a.get(f.Index, FragThinking).sig.WriteString(f.Text)
	case FragToolCall, FragToolArgs:
		b := a.get(f.Index, FragToolCall)
		if f.ID != "" {
			b.id = f.ID
		}
		if b.name == "" {
			b.name = f.Name // some servers repeat it in every fragment
		}
		if f.Text == "" {
			return
		}
		b.text.WriteString(f.Text)
		if a.ev.has(EventToolInput) {
			s := b.text.String()
			a.ev.emit(Event{Type: EventToolInput, Index: f.Index, Delta: f.Text, Snapshot: s, Parsed: parsePartial(s)})
		}
		a.delta(b, f.Text)
		if !b.fired && closesJSON(f.Text) && json.Valid([]byte(b.text.String())) {
			a.fire(b)
		}
	case FragBlockStop:
		b, ok := a.byIndex[f.Index]
		if !ok || b.done {
			return
		}
		b.done = true
		a.completed(b)
		if b.typ == FragToolCall && !b.fired && b.text.Len() == 0 {
			a.fire(b) // a call without arguments is complete at its end
		}
	}
}

// delta emits the generic delta event of block b.
func (a *assembler) delta(b *block, d string) {
	if a.ev.has(EventDelta) {
		a.ev.emit(Event{Type: EventDelta, Index: b.index, Block: string(b.typ), Delta: d})
	}
}

// completed emits the content-block events of b.
func (a *assembler) completed(b *block) {
	if a.ev == nil {
		return
	}
	if b.typ == FragToolCall {
		c := b.call()
		a.ev.emit(Event{Type: EventContentBlock, Index: b.index, ToolCall: &c})
	} else {
		p := b.part()
		if b.typ == FragThinking && p.Signature != "" {
			a.ev.emit(Event{Type: EventSignature, Index: b.index, Signature: p.Signature})
		}
		a.ev.emit(Event{Type: EventContentBlock, Index: b.index, Part: &p})
	}
	a.ev.emit(Event{Type: EventBlockStop, Index: b.index, Block: string(b.typ)})
}

func (a *assembler) fire(b *block) {
	b.fired = true
	if a.onToolCall != nil {
		a.onToolCall(b.call())
	}
}

// finish delivers the tool calls not yet delivered (their arguments never
// parsed, or their block never ended) unless the turn was truncated, and
// completes the blocks the provider did not end.
func (a *assembler) finish(stop StopReason) {
	for _, b := range a.blocks {
		if !b.done {
			b.done = true
			a.completed(b)
		}
		if b.typ == FragToolCall && !b.fired && !stop.Truncated() {
			a.fire(b)
		}
	}
}

// message returns the assistant message assembled so far.
func (a *assembler) message() Message {
	m := Message{Role: RoleAssistant}
	for _, b := range a.blocks {
		if b.typ == FragToolCall {
			m.ToolCalls = append(m.ToolCalls, b.call())
			continue
		}
		m.Parts = append(m.Parts, b.part())
	}
	return m
}

func (b *block) call() ToolCall {
	args := b.text.String()
	if strings.TrimSpace(args) == "" {
		args = "{}"
	}
	id := b.id
	if id == "" {
		// A provider that sends no ID still needs one to pair the result.
		id = "call_" + strconv.Itoa(b.index)
	}
	return ToolCall{ID: id, Name: b.name, Arguments: args, Signature: b.sig.String()}
}

func (b *block) part() Part {
	switch b.typ {
	case FragThinking:
		return Part{Type: PartThinking, Text: b.text.String(), Signature: b.sig.String()}
	case FragRedacted:
		return Part{Type: PartThinking, Redacted: b.text.String()}
	}
	return Part{Type: PartText, Text: b.text.String(), Signature: b.sig.String(), Citations: b.citations}
}

// closesJSON reports whether s ends (trailing space aside) with a closing
// brace or bracket: only then can the arguments have become whole.
func closesJSON(s string) bool {
	s = strings.TrimRight(s, " \t\r\n")
	return s != "" && (s[len(s)-1] == '}' || s[len(s)-1] == ']')
}

// parsePartial parses the prefix of a JSON document as far as it goes:
// an open string is closed, open arrays and objects are closed, and a
// dangling key or value is dropped. It returns nil when nothing parses.
func parsePartial(s string) any {
	for range 4 {
		closed, cut := closeJSON(s)
		var v any
		if json.Unmarshal([]byte(closed), &v) == nil {
			return v
		}
		if cut < 0 || cut >= len(s) {
			return nil
		}
		s = s[:cut]
	}
	return nil
}

// closeJSON returns s with what it leaves open closed, and the offset to
// cut s at to drop its last member or element (-1 if none).
func closeJSON(s string) (closed string, cut int) {
	var stack []byte
	inStr, esc := false, false
	cut = -1
	for i := 0; i < len(s); i++ {
		c := s[i]
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{', '[':
			stack = append(stack, c)
			cut = i + 1
		case '}', ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		case ',':
			cut = i
		}
	}
	var b strings.Builder
	b.WriteString(s)
	if inStr {
		if esc {
			b.WriteByte('\\')
		}
		b.WriteByte('"')
	}
	for i := len(stack) - 1; i >= 0; i-- {
		if stack[i] == '{' {
			b.WriteByte('}')
		} else {
			b.WriteByte(']')
		}
	}
	return b.String(), cut
}
