package gateway

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/gateway/internal/resultedit"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

// Thread handles (docs/protocol-2026.md): how a client without a session —
// a 2026-07-28 client, which has none — keeps a stateful tool's state
// across calls without toolgate-specific _meta. The revision's own advice
// for stateful tools: the server mints a handle, hands it back in a tool
// result, and the model passes it back as an ordinary argument.
//
//   - Every stateful tool (registry.Stateful: scratchpad, an embedder's
//     RegisterStateful) and every tool of an upstream with isolation:
//     thread (a process per thread) gets an optional string argument,
//     HandleArg, in its input schema, unless the schema already has a
//     property of that name.
//   - A sessionless MCP call of such a tool that names no thread (no
//     handle, no _meta thread) runs in a new thread instead of a one-call
//     thread, and its result ends with a text part giving the handle and
//     saying how to use it (and _meta[HandleMetaKey]).
//   - A call passing a handle runs in that handle's thread, whatever
//     session or _meta thread it has: the handle names the thread exactly.
//     The argument is removed before the tool sees its arguments.
//   - A handle is "th_" and base64url of a 16-byte random nonce and a
//     16-byte HMAC-SHA256, under a key drawn when the gateway starts, of
//     the principal's name and the nonce: unguessable (128 random bits),
//     unforgeable, and valid only for the principal it was minted for.
//     Another principal's handle, a made-up one and one minted before a
//     restart (whose state is gone too) are all "unknown", alike.
//   - Its thread is "h:<principal>\x00<nonce>", a namespace of its own
//     (session threads are "s:", named ones "t:"): no name can reach it.
//     Like a named thread it never ends; its instances are closed when
//     idle past threads.idle_ttl or evicted under threads.max_instances.
//   - Until a call passes the handle, the instances of a minted thread
//     are provisional in the pool (threadctx.WithProvisional): closed
//     after min(threads.idle_ttl, 2 min) idle, at most a tenth of
//     threads.max_instances per principal (past it the principal's own
//     oldest idle one is evicted), and evicted before other instances.
//     A client looping handle-less calls (each one an upstream process,
//     for isolation: thread) so holds a bounded number of instances for
//     minutes, and pushes out no thread in use.
//
// Nothing is stored per handle: the MAC is the check.

// HandleArg is the argument by which a call of a stateful tool names the
// thread a thread handle stands for.
const HandleArg = "thread"

// HandleMetaKey is the _meta key of a result that carries a newly minted
// thread handle.
const HandleMetaKey = "toolgate/thread_handle"

const (
	handlePrefix   = "th_"
	handleNonceLen = 16
	handleMACLen   = 16
	// handleLen is the length of a handle: the prefix and base64url of
	// the nonce and the MAC, unpadded.
	handleLen = len(handlePrefix) + (8*(handleNonceLen+handleMACLen)+5)/6
)

// handleKeys mints and checks thread handles. The zero value is not
// usable: build it with newHandleKeys. Safe for concurrent use.
type handleKeys struct {
	key [32]byte // fixed at creation
}

func newHandleKeys() *handleKeys {
	h := &handleKeys{}
	_, _ = rand.Read(h.key[:]) // crypto/rand.Read never fails (Go 1.24+)
	return h
}

// mac is the MAC binding nonce to principal.
func (h *handleKeys) mac(principal string, nonce []byte) []byte {
	m := hmac.New(sha256.New, h.key[:])
	m.Write([]byte(principal))
	m.Write([]byte{0})
	m.Write(nonce)
	return m.Sum(nil)[:handleMACLen]
}

// mint returns a new handle for principal ("" without authentication)
// and the thread it stands for.
func (h *handleKeys) mint(principal string) (handle, thread string) {
	var b [handleNonceLen + handleMACLen]byte
	_, _ = rand.Read(b[:handleNonceLen])
	copy(b[handleNonceLen:], h.mac(principal, b[:handleNonceLen]))
	return handlePrefix + base64.RawURLEncoding.EncodeToString(b[:]), handleThread(principal, b[:handleNonceLen])
}

// thread returns the thread handle stands for, if it was minted for
// principal; otherwise a validation error that says no more than
// "unknown".
func (h *handleKeys) thread(principal, handle string) (string, error) {
	if len(handle) == handleLen && strings.HasPrefix(handle, handlePrefix) {
		b, err := base64.RawURLEncoding.DecodeString(handle[len(handlePrefix):])
		if err == nil && len(b) == handleNonceLen+handleMACLen &&
			hmac.Equal(b[handleNonceLen:], h.mac(principal, b[:handleNonceLen])) {
			return handleThread(principal, b[:handleNonceLen]), nil
		}
	}
	return "", retry.Errorf(retry.Validation,
		"unknown thread handle in %q: pass a handle an earlier result of this tool gave you, unchanged, or leave %q out to start a new thread",
		HandleArg, HandleArg)
}

func handleThread(principal string, nonce []byte) string {
	return "h:" + principal + "\x00" + base64.RawURLEncoding.EncodeToString(nonce)
}

// handleArgSchema is the input schema property HandleArg gets.
var handleArgSchema = json.RawMessage(`{"type":"string","maxLength":64,"description":` +
	`"Optional. A thread handle (th_...) that an earlier result of this tool returned: the call continues that thread's state. ` +
	`Leave it out to continue your session's thread or, without a session, to start a new thread; the result then gives its handle."}`)

// withHandleArg returns t with HandleArg added to its input schema, and
// whether it was added: not when the schema already has a property of
// that name (the tool keeps its own argument, and gets no handles) or is
// not an object schema toolgate can extend.
func withHandleArg(t registry.Tool) (registry.Tool, bool) {
	var schema map[string]json.RawMessage
	if len(t.InputSchema) == 0 {
		schema = map[string]json.RawMessage{"type": json.RawMessage(`"object"`)}
	} else if json.Unmarshal(t.InputSchema, &schema) != nil || schema == nil {
		return t, false
	}
	var props map[string]json.RawMessage
	if p, ok := schema["properties"]; ok {
		if json.Unmarshal(p, &props) != nil || props == nil {
			return t, false
		}
	} else {
		props = map[string]json.RawMessage{}
	}
	if _, taken := props[HandleArg]; taken {
		return t, false
	}
	props[HandleArg] = handleArgSchema
	var err error
	if schema["properties"], err = json.Marshal(props); err != nil {
		return t, false
	}
	out, err := json.Marshal(schema)
	if err != nil {
		return t, false
	}
	t.InputSchema = out
	return t, true
}

// takeHandle removes HandleArg from c's arguments, and from their raw
// bytes, and returns its value, when c's tool takes handles and the call
// passed one.
func (g *Gateway) takeHandle(c *Call) (string, bool) {
	if c.Tool == nil || !g.takesHandles(c.Tool) {
		return "", false
	}
	v, ok := c.Args[HandleArg]
	if !ok {
		return "", false
	}
	delete(c.Args, HandleArg)
	c.Raw = withoutMember(c.Raw, HandleArg)
	h, _ := v.(string) // the schema says string; validated before
	return h, true
}

// withoutMember returns raw, a JSON object, without its members named
// key, the others as they were: in their order, their values byte for
// byte (an upstream gets the arguments as the client sent them, number
// spelling and all), whitespace between members dropped. It returns nil
// when raw is not an object it can read; the executor then encodes the
// decoded arguments.
func withoutMember(raw json.RawMessage, key string) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	out := make([]byte, 0, len(raw))
	out = append(out, '{')
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		k, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil
		}
		if k == key {
			continue
		}
		kb, err := json.Marshal(k)
		if err != nil {
			return nil
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(append(append(out, kb...), ':'), v...)
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil
	}
	return append(out, '}')
}

// takesHandles reports whether t was registered with HandleArg. Entries
// of g.handleTools are struct{}{} for a stateful tool (RegisterStateful)
// and the source for an upstream's tool (addThreadUpstreamTools): a tool
// of another kind or source under the same name takes none.
func (g *Gateway) takesHandles(t *registry.Tool) bool {
	v, ok := g.handleTools.Load(t.Name)
	if !ok {
		return false
	}
	if source, upstream := v.(string); upstream {
		return t.Kind == registry.MCP && t.Source == source
	}
	return t.Kind == registry.Stateful
}

// mintsHandle reports whether c, about to get a one-call thread, gets a
// thread handle instead: a sessionless MCP call of a tool that takes
// handles, which the caller may call (a refused call gets no handle).
func (g *Gateway) mintsHandle(c *Call) bool {
	return c.sessionless && c.Tool != nil && g.takesHandles(c.Tool) && c.ident.Permits(c.Tool.Name)
}

// addThreadUpstreamTools registers the tools of upstream, whose isolation
// is thread (a process per thread), as addUpstreamTools does, each with
// HandleArg added to its input schema as a stateful tool gets it: a
// sessionless call of one would otherwise run in a one-call thread, a
// fresh process per call. A tool whose schema has a property of that name
// keeps it, and gets no handles; so does one whose name another tool's
// mark holds (a stateful tool's, which stays: registering this one fails
// on the name anyway). A tool is marked as taking handles before it is
// served with the argument, and unmarked once it is served without.
func (g *Gateway) addThreadUpstreamTools(upstream string, tools []executors.Bound) error {
	source := "upstream:" + upstream
	before := map[string]bool{}
	g.handleTools.Range(func(k, v any) bool {
		if v == source {
			before[k.(string)] = true
		}
		return true
	})
	takes := make(map[string]bool, len(tools))
	for i := range tools {
		t, ok := withHandleArg(tools[i].Tool)
		if !ok {
			continue
		}
		if v, loaded := g.handleTools.LoadOrStore(t.Name, source); loaded && v != source {
			continue // never replace another tool's mark
		}
		tools[i].Tool = t
		takes[t.Name] = true
	}
	err := g.addUpstreamTools(upstream, tools)
	keep := takes
	if err != nil {
		keep = before // the tools served before are served still
	}
	for _, marked := range []map[string]bool{before, takes} {
		for name := range marked {
			if !keep[name] {
				g.handleTools.CompareAndDelete(name, source)
			}
		}
	}
	return err
}

// withHandle returns res with handle given to the model: a text part
// saying how to continue (appended to an upstream's result as it sent
// it), and _meta[HandleMetaKey]. res is copied, not changed: an executor
// may keep what it returned.
func withHandle(res *Result, tool, handle string) *Result {
	if res == nil {
		return res
	}
	notice := fmt.Sprintf("thread handle: %s (pass \"%s\": %q in your later %s calls to keep this thread's state; without it each call starts a new thread)",
		handle, HandleArg, handle, tool)
	out := *res
	// An upstream's result the front cannot read gets the handle in _meta
	// only.
	if e, err := resultedit.Append((*executors.Result)(res), notice); err == nil {
		out = Result(*e)
	}
	out.Meta = make(map[string]any, len(res.Meta)+1)
	for k, v := range res.Meta {
		out.Meta[k] = v
	}
	out.Meta[HandleMetaKey] = handle
	return &out
}
