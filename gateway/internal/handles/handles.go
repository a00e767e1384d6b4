// Package handles implements thread handles (docs/protocol-2026.md): how
// a client without a session — a 2026-07-28 client, which has none —
// keeps a stateful tool's state across calls without toolgate-specific
// _meta. The revision's own advice for stateful tools: the server mints a
// handle, hands it back in a tool result, and the model passes it back as
// an ordinary argument.
//
//   - Every stateful tool (registry.Stateful: scratchpad, an embedder's
//     RegisterStateful) and every tool of an upstream with isolation:
//     thread (a process per thread) gets an optional string argument,
//     [Arg], in its input schema, unless the schema already has a
//     property of that name ([WithArg]; [Marks] records which tools got
//     it).
//   - A sessionless MCP call of such a tool that names no thread (no
//     handle, no _meta thread) runs in a new thread instead of a one-call
//     thread ([Keys.Mint]), and its result ends with a text part giving
//     the handle and saying how to use it (and _meta[MetaKey]):
//     [WithHandle].
//   - A call passing a handle runs in that handle's thread
//     ([Keys.Thread]), whatever session or _meta thread it has: the
//     handle names the thread exactly. The argument is removed before the
//     tool sees its arguments ([Take]).
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
// Nothing is stored per handle: the MAC is the check. The gateway's
// thread step (gateway/pipeline.go) decides when a call takes or mints a
// handle; this package does not know the pipeline.
package handles

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/gateway/internal/replica"
	"github.com/toolgate/toolgate/gateway/internal/resultedit"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

// Arg is the argument by which a call of a stateful tool names the
// thread a thread handle stands for (gateway.HandleArg).
const Arg = "thread"

// HeaderName is the x-mcp-header of the handle argument in a cluster: a
// 2026-07-28 client sends the handle as Mcp-Param-Toolgate-Thread, which
// balancers route on.
const HeaderName = "Toolgate-Thread"

// MetaKey is the _meta key of a result that carries a newly minted
// thread handle (gateway.HandleMetaKey).
const MetaKey = "toolgate/thread_handle"

const (
	prefix   = "th_"
	nonceLen = 16
	macLen   = 16
	// sealedLen is the length of base64url of the nonce and the MAC,
	// unpadded: a handle is the prefix, in a cluster its replica's ID and
	// a dot, and that.
	sealedLen = (8*(nonceLen+macLen) + 5) / 6
)

// Keys mints and checks thread handles. The zero value is not usable:
// build it with [NewKeys]. Safe for concurrent use.
type Keys struct {
	keys    [][replica.KeyLen]byte // the first mints; any checks
	replica string                 // names this replica in its handles; "" alone
}

// NewKeys returns the keys of replica self: a lone toolgate's are drawn
// at start (handles another minted are unknown to it); a cluster's derive
// from its secret, so any replica can check a handle and see whose it is.
func NewKeys(self *replica.Self) *Keys {
	return &Keys{keys: self.Keys("handle"), replica: self.ID}
}

// mac is the MAC binding nonce to principal and to the replica that
// minted it.
func mac(key [replica.KeyLen]byte, owner, principal string, nonce []byte) []byte {
	m := hmac.New(sha256.New, key[:])
	m.Write([]byte(owner))
	m.Write([]byte{0})
	m.Write([]byte(principal))
	m.Write([]byte{0})
	m.Write(nonce)
	return m.Sum(nil)[:macLen]
}

// Mint returns a new handle for principal ("" without authentication)
// and the thread it stands for.
func (k *Keys) Mint(principal string) (handle, thread string) {
	var b [nonceLen + macLen]byte
	_, _ = rand.Read(b[:nonceLen])
	copy(b[nonceLen:], mac(k.keys[0], k.replica, principal, b[:nonceLen]))
	owner := ""
	if k.replica != "" {
		owner = k.replica + "."
	}
	return prefix + owner + base64.RawURLEncoding.EncodeToString(b[:]), handleThread(principal, b[:nonceLen])
}

// ElsewhereError is a handle another replica of the cluster minted: its
// thread lives there.
type ElsewhereError struct{ Owner string }

func (e *ElsewhereError) Error() string {
	return "thread handle of replica " + e.Owner
}

// Thread returns the thread handle stands for, if it was minted for
// principal by this replica. A handle another replica of the cluster
// minted for principal is an *ElsewhereError naming it; anything else is
// an error of class validation that says no more than "unknown".
func (k *Keys) Thread(principal, handle string) (string, error) {
	owner, nonce, ok := k.open(principal, handle)
	switch {
	case !ok:
		return "", retry.Errorf(retry.Validation,
			"unknown thread handle in %q: pass a handle an earlier result of this tool gave you, unchanged, or leave %q out to start a new thread",
			Arg, Arg)
	case owner != k.replica:
		return "", &ElsewhereError{Owner: owner}
	}
	return handleThread(principal, nonce), nil
}

// Owner returns the replica that minted handle for principal, after
// checking its MAC; ok is false for a handle no replica of this cluster
// minted for principal (never forwarded).
func (k *Keys) Owner(principal, handle string) (owner string, ok bool) {
	owner, _, ok = k.open(principal, handle)
	return owner, ok
}

// open checks handle for principal and returns its replica and nonce.
func (k *Keys) open(principal, handle string) (owner string, nonce []byte, ok bool) {
	rest, ok := strings.CutPrefix(handle, prefix)
	if !ok {
		return "", nil, false
	}
	if i := strings.IndexByte(rest, '.'); i >= 0 {
		owner, rest = rest[:i], rest[i+1:]
	}
	if len(rest) != sealedLen {
		return "", nil, false
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || len(b) != nonceLen+macLen {
		return "", nil, false
	}
	for _, key := range k.keys {
		if hmac.Equal(b[nonceLen:], mac(key, owner, principal, b[:nonceLen])) {
			return owner, b[:nonceLen], true
		}
	}
	return "", nil, false
}

func handleThread(principal string, nonce []byte) string {
	return "h:" + principal + "\x00" + base64.RawURLEncoding.EncodeToString(nonce)
}

// argSchema is the input schema property Arg gets.
var argSchema = json.RawMessage(`{"type":"string","maxLength":64,"description":` +
	`"Optional. A thread handle (th_...) that an earlier result of this tool returned: the call continues that thread's state. ` +
	`Leave it out to continue your session's thread or, without a session, to start a new thread; the result then gives its handle."}`)

// WithArg returns t with Arg added to its input schema, and whether it
// was added: not when the schema already has a property of that name
// (the tool keeps its own argument, and gets no handles) or is not an
// object schema toolgate can extend.
//
// With header (a cluster's), the property is marked x-mcp-header: header,
// so that a 2026-07-28 client sends the handle in the Mcp-Param-<header>
// header too, and a balancer can route the call to the replica the handle
// names without reading the body.
func WithArg(t registry.Tool, header string) (registry.Tool, bool) {
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
	if _, taken := props[Arg]; taken {
		return t, false
	}
	props[Arg] = argSchema
	if header != "" {
		props[Arg] = json.RawMessage(`{"x-mcp-header":` + strconv.Quote(header) + `,` + string(argSchema[1:]))
	}
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

// Take removes Arg from args, and from raw, their JSON bytes, and returns
// its value (empty when it is not a string) and raw without it, when the
// call passed one; ok is false, and args untouched, when it did not.
func Take(args map[string]any, raw json.RawMessage) (handle string, rest json.RawMessage, ok bool) {
	v, ok := args[Arg]
	if !ok {
		return "", raw, false
	}
	delete(args, Arg)
	handle, _ = v.(string) // the schema says string; validated before
	return handle, withoutMember(raw, Arg), true
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

// Marks records which tools are registered with Arg, by name: a stateful
// tool's mark ([Marks.SetStateful]) or an upstream's ([Marks.AddUpstream]).
// The zero value has none. Safe for concurrent use.
type Marks struct {
	// Header, when set, is the x-mcp-header the handle argument is
	// marked with (WithArg): in a cluster, HeaderName.
	Header string
	// m maps a tool's name to struct{}{} for a stateful tool, to its
	// source for an upstream's tool.
	m sync.Map
}

// SetStateful marks the stateful tool called name as taking handles, or
// unmarks it.
func (m *Marks) SetStateful(name string, takes bool) {
	if takes {
		m.m.Store(name, struct{}{})
	} else {
		m.m.Delete(name)
	}
}

// Takes reports whether t was registered with Arg: a tool of another
// kind or source under a marked name takes none.
func (m *Marks) Takes(t *registry.Tool) bool {
	v, ok := m.m.Load(t.Name)
	if !ok {
		return false
	}
	if source, upstream := v.(string); upstream {
		return t.Kind == registry.MCP && t.Source == source
	}
	return t.Kind == registry.Stateful
}

// AddUpstream registers the tools of the upstream whose tools' source is
// source, and whose isolation is thread (a process per thread), by
// calling add, each with Arg added to its input schema as a stateful tool
// gets it: a sessionless call of one would otherwise run in a one-call
// thread, a fresh process per call. A tool whose schema has a property of
// that name keeps it, and gets no handles; so does one whose name another
// tool's mark holds (a stateful tool's, which stays: registering this one
// fails on the name anyway). A tool is marked as taking handles before
// add serves it with the argument, and unmarked once it is served
// without; when add fails, the tools served before keep their marks. add
// registers tools, which AddUpstream changes in place; its error is
// returned.
func (m *Marks) AddUpstream(source string, tools []executors.Bound, add func() error) error {
	before := map[string]bool{}
	m.m.Range(func(k, v any) bool {
		if v == source {
			before[k.(string)] = true
		}
		return true
	})
	takes := make(map[string]bool, len(tools))
	for i := range tools {
		t, ok := WithArg(tools[i].Tool, m.Header)
		if !ok {
			continue
		}
		if v, loaded := m.m.LoadOrStore(t.Name, source); loaded && v != source {
			continue // never replace another tool's mark
		}
		tools[i].Tool = t
		takes[t.Name] = true
	}
	err := add()
	keep := takes
	if err != nil {
		keep = before // the tools served before are served still
	}
	for _, marked := range []map[string]bool{before, takes} {
		for name := range marked {
			if !keep[name] {
				m.m.CompareAndDelete(name, source)
			}
		}
	}
	return err
}

// WithHandle returns res with handle given to the model: a text part
// saying how to continue (appended to an upstream's result as it sent
// it), and _meta[MetaKey]. res is copied, not changed: an executor may
// keep what it returned. A nil res is returned as it is.
func WithHandle(res *executors.Result, tool, handle string) *executors.Result {
	if res == nil {
		return res
	}
	notice := fmt.Sprintf("thread handle: %s (pass \"%s\": %q in your later %s calls to keep this thread's state; without it each call starts a new thread)",
		handle, Arg, handle, tool)
	out := *res
	// An upstream's result the front cannot read gets the handle in _meta
	// only.
	if e, err := resultedit.Append(res, notice); err == nil {
		out = *e
	}
	out.Meta = make(map[string]any, len(res.Meta)+1)
	maps.Copy(out.Meta, res.Meta)
	out.Meta[MetaKey] = handle
	return &out
}

// WithLostHandle is [WithHandle] for a call whose handle named a thread
// on replica owner, which could not be reached: the model is told that
// thread's state is lost and the call ran in a new thread, handle's.
func WithLostHandle(res *executors.Result, tool, handle, owner string) *executors.Result {
	out := WithHandle(res, tool, handle)
	if out == nil {
		return out
	}
	notice := fmt.Sprintf("the thread your handle named lived on toolgate replica %s, which cannot be reached: its state is lost, and this call ran in a new thread", owner)
	if e, err := resultedit.Append(out, notice); err == nil {
		meta := out.Meta
		out = e
		out.Meta = meta
	}
	return out
}
